//! The history operations front ends used to do by hand: asking the last message again,
//! taking back a message nothing answered, and exporting a transcript with secrets masked.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::ExportFormat;
use keel_protocol::ops;
use keel_runtime::ContractExt;
use pretty_assertions::assert_eq;

use crate::harness::{Harness, Setup, ended};

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test]
async fn retry_asks_the_last_typed_message_again_in_place_of_its_answer() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::text("one"),
        ScriptedResponse::text("two"),
        ScriptedResponse::text("two, better"),
    ]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    h.submit(&session, "first").await.wait().await.unwrap();
    h.submit(&session, "second").await.wait().await.unwrap();
    let turn = h
        .runtime
        .request(ops::Retry {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    ended(turn).await;
    assert_eq!(
        h.history(&session).await,
        owned(&[
            ("user", "first"),
            ("assistant", "one"),
            ("user", "second"),
            ("assistant", "two, better"),
        ])
    );
    // A fresh session has nothing to ask again, and says so.
    let empty = h.session().await;
    let error = h
        .runtime
        .request(ops::Retry { session_id: empty })
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("no message to ask again"),
        "{error}"
    );
}

#[tokio::test]
async fn take_back_removes_only_a_message_nothing_answered() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::text("one"),
        ScriptedResponse::text("never seen").hang_after(0),
    ]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    h.submit(&session, "first").await.wait().await.unwrap();
    let take_back = || async {
        h.runtime
            .request(ops::TakeBack {
                session_id: session.clone(),
            })
            .await
            .unwrap()
    };
    assert_eq!(take_back().await, None, "an answered message stays");
    // Interrupted before a word came back: the message goes back to its sender.
    let turn = h.submit(&session, "oops, wrong").await;
    h.abort(&session).await;
    ended(turn).await;
    assert_eq!(take_back().await.as_deref(), Some("oops, wrong"));
    assert_eq!(
        h.history(&session).await,
        owned(&[("user", "first"), ("assistant", "one")])
    );
}

#[tokio::test]
async fn an_export_masks_secrets_in_both_formats() {
    let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        format!("the token is {token}"),
    )]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    h.submit(&session, "what is the token?")
        .await
        .wait()
        .await
        .unwrap();
    for format in [ExportFormat::Markdown, ExportFormat::Json] {
        let export = h
            .runtime
            .request(ops::ExportSession {
                session_id: session.clone(),
                format,
            })
            .await
            .unwrap();
        assert!(!export.text.contains(token), "{format:?}: {}", export.text);
        assert!(export.text.contains("the token is"), "{format:?}");
        assert_eq!(export.masked, 1, "{format:?}");
    }
}

#[tokio::test]
async fn a_context_report_measures_the_next_request_by_part() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "an answer of some length to be counted",
    )]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    h.submit(&session, "a question worth some tokens to count")
        .await
        .wait()
        .await
        .unwrap();
    let report = h
        .runtime
        .request(ops::ContextReport {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    let tokens = |label: &str| {
        report
            .parts
            .iter()
            .find(|p| p.label == label)
            .map(|p| p.tokens)
            .unwrap_or_else(|| panic!("no {label} in {report:?}"))
    };
    assert!(tokens("your messages") > 0, "{report:?}");
    assert!(tokens("answers") > 0, "{report:?}");
    assert_eq!(tokens("tool results"), 0);
    assert!(report.window > 0);
    assert_eq!(
        report.total(),
        report.parts.iter().map(|p| p.tokens).sum::<u64>()
    );
    // No measurer is installed here: the report says it is an estimate.
    assert!(!report.measured);
}
