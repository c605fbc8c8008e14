//! The query operations and the queue's editing, through the contract only, and what the
//! contract answers when asked for something it cannot do.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::ops;
use keel_protocol::{InputKind, TurnSource};
use keel_runtime::{ContractExt, Operation, Queued};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Gate, Harness, Setup, ended};

async fn call<O: Operation + 'static>(h: &Harness, op: O) -> O::Reply {
    h.runtime.request(op).await.unwrap()
}

#[tokio::test]
async fn sessions_and_their_history_are_listed_and_read_at_any_revision() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::text("one"),
        ScriptedResponse::text("two"),
    ]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let first = h.session().await;
    let second = h.session().await;
    h.submit(&first, "a").await.wait().await.unwrap();
    h.submit(&first, "b").await.wait().await.unwrap();
    let sessions = call(
        &h,
        ops::ListSessions {
            cwd: None,
            limit: 10,
        },
    )
    .await;
    let ids: Vec<_> = sessions.iter().map(|s| s.id.clone()).collect();
    // Only sessions with a conversation: the second was opened and never written in.
    assert!(ids.contains(&first) && !ids.contains(&second), "{ids:?}");
    let elsewhere = call(
        &h,
        ops::ListSessions {
            cwd: Some("/no/such/folder".into()),
            limit: 10,
        },
    )
    .await;
    assert!(elsewhere.is_empty(), "only sessions of that folder");
    let revisions = call(
        &h,
        ops::ListRevisions {
            session_id: first.clone(),
        },
    )
    .await;
    assert!(revisions.len() >= 2, "{revisions:?}");
    let messages = |revision| {
        let op = ops::GetMessages {
            session_id: first.clone(),
            revision,
        };
        async { call(&h, op).await.len() }
    };
    assert_eq!(messages(None).await, 4);
    // The first turn's commit holds its two messages only.
    let after_first = revisions
        .iter()
        .copied()
        .find(|r| *r > 0)
        .expect("a committed revision");
    assert!(messages(Some(after_first)).await < 4);
}

#[tokio::test]
async fn the_queue_is_listed_edited_reordered_and_cancelled_through_operations() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("done"),
    ]));
    let gate = Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    let turn = h.submit(&session, "start").await;
    gate.wait_started().await;
    let mut ids = Vec::new();
    for text in ["first", "second", "third"] {
        let Queued { entry, turn: None } = call(
            &h,
            ops::Enqueue {
                session_id: session.clone(),
                kind: InputKind::FollowUp,
                text: text.into(),
                source: TurnSource::Api,
            },
        )
        .await
        else {
            panic!("queued behind the running turn");
        };
        ids.push(entry.id);
    }
    let texts = |queue: Vec<keel_protocol::QueueEntry>| {
        queue.into_iter().map(|e| e.text).collect::<Vec<_>>()
    };
    let edited = call(
        &h,
        ops::EditQueued {
            session_id: session.clone(),
            input_id: ids[1].clone(),
            text: "second, edited".into(),
        },
    )
    .await;
    assert_eq!(texts(edited), ["first", "second, edited", "third"]);
    let reordered = call(
        &h,
        ops::ReorderQueue {
            session_id: session.clone(),
            order: vec![ids[2].clone(), ids[0].clone(), ids[1].clone()],
        },
    )
    .await;
    assert_eq!(texts(reordered), ["third", "first", "second, edited"]);
    call(
        &h,
        ops::CancelQueued {
            session_id: session.clone(),
            input_id: ids[0].clone(),
        },
    )
    .await;
    let listed = call(
        &h,
        ops::ListQueue {
            session_id: session.clone(),
        },
    )
    .await;
    assert_eq!(texts(listed), ["third", "second, edited"]);
    // An order that leaves an input out is refused, and nothing changes.
    let refused = h
        .runtime
        .request(ops::ReorderQueue {
            session_id: session.clone(),
            order: vec![ids[2].clone()],
        })
        .await;
    assert!(refused.is_err(), "{refused:?}");
    gate.release.notify_one();
    ended(turn).await;
}

#[tokio::test]
async fn what_the_contract_cannot_do_is_refused_with_a_reason() {
    let provider = Arc::new(ScriptedProvider::with_responses([]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    // No extension offers commands here, and none runs.
    assert!(call(&h, ops::ListCommands {}).await.is_empty());
    let unknown = h
        .runtime
        .request(ops::RunCommand {
            session_id: session.clone(),
            name: "no-such-command".into(),
            arguments: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), "unknown_command", "{unknown}");
    // No tasks were started, and stopping one that does not exist is an error.
    assert!(
        call(
            &h,
            ops::ListTasks {
                session_id: session.clone()
            }
        )
        .await
        .is_empty()
    );
    assert!(
        h.runtime
            .request(ops::StopTask {
                task_id: "task-none".into()
            })
            .await
            .is_err()
    );
    // No compaction strategy is installed in this runtime.
    let compact = h
        .runtime
        .request(ops::Compact {
            session_id: session.clone(),
            instructions: None,
        })
        .await
        .unwrap_err();
    assert_eq!(compact.code(), "unsupported", "{compact}");
    // Nothing takes an attachment of an unknown kind.
    let attach = h
        .runtime
        .request(ops::Attach {
            session_id: session.clone(),
            kind: "no_such_kind".into(),
            value: json!({}),
        })
        .await;
    assert!(attach.is_err(), "{attach:?}");
}
