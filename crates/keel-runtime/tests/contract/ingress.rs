//! Steering, follow-ups, aborts and the queue.

use std::sync::Arc;
use std::time::Duration;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::ops;
use keel_protocol::{InputKind, ItemEvent, SessionEventBody, TurnOutcome, TurnSource};
use keel_runtime::{ContractExt, Queued, RuntimeError};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Gate, Harness, Setup, describe, ended};

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

async fn enqueue(
    h: &Harness,
    session: &keel_protocol::SessionId,
    kind: InputKind,
    text: &str,
) -> Queued {
    h.enqueue_from(session, kind, text, TurnSource::Api).await
}

#[tokio::test]
async fn a_steer_lands_before_the_next_request_and_a_follow_up_after_the_turn() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("done with the steer"),
        ScriptedResponse::text("the follow-up is answered"),
    ]));
    let gate = Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "start").await;
    let first = turn.turn_id.clone();
    gate.wait_started().await;
    let steered = enqueue(&h, &session, InputKind::Steer, "also check the docs").await;
    assert!(
        matches!(steered, Queued { turn: None, .. }),
        "a turn runs: nothing new starts"
    );
    enqueue(&h, &session, InputKind::FollowUp, "then write a summary").await;
    gate.release.notify_one();
    let report = ended(turn).await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    // The steer reached the second request of the same turn, after the tool's result; the
    // follow-up did not.
    let second = provider.requests()[1].clone();
    let tail: Vec<(String, String)> = second
        .messages
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|m| describe(m))
        .collect();
    assert_eq!(
        tail,
        owned(&[("tool_result", "released"), ("user", "also check the docs")])
    );
    // The follow-up starts a turn of its own once this one ended.
    let next = loop {
        let ended = events.any_turn_end().await;
        if ended != first {
            break ended;
        }
    };
    assert_ne!(next, first);
    let third = provider.requests()[2].clone();
    assert_eq!(
        describe(third.messages.last().unwrap()),
        ("user".to_owned(), "then write a summary".to_owned())
    );
    assert_eq!(
        h.history(&session).await,
        owned(&[
            ("user", "start"),
            ("assistant", "calls gate"),
            ("tool_result", "released"),
            ("user", "also check the docs"),
            ("assistant", "done with the steer"),
            ("user", "then write a summary"),
            ("assistant", "the follow-up is answered"),
        ])
    );
    // Both inputs were consumed: nothing waits, and the queue said so as it changed.
    assert!(h.store.queued_inputs(&session).await.unwrap().is_empty());
    events.drain();
    let queues: Vec<usize> = events
        .seen
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::QueueChanged { queue } => Some(queue.len()),
            _ => None,
        })
        .collect();
    assert_eq!(queues, [1, 2, 1, 0]);
    let sources: Vec<TurnSource> = h
        .store
        .turns(&session)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.source)
        .collect();
    assert_eq!(sources, [TurnSource::Api, TurnSource::Api]);
}

/// Each stored tool call has exactly one result right after its batch.
async fn assert_valid(h: &Harness, session: &keel_protocol::SessionId) {
    let stored = h.store.history(session).await.unwrap();
    assert!(
        keel_runtime::sessions::close_interrupted(&stored).is_none(),
        "a tool call without its result: {:?}",
        h.history(session).await
    );
}

#[tokio::test]
async fn an_abort_while_streaming_keeps_history_valid_and_the_queue_whole() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "a long answer that never finishes",
    )
    .chunk_size(4)
    .hang_after(3)]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "talk").await;
    events.streaming().await;
    enqueue(&h, &session, InputKind::FollowUp, "after the abort").await;
    let aborted = h.abort(&session).await;
    assert!(aborted);
    let report = ended(turn).await;
    assert!(
        matches!(report.outcome, TurnOutcome::Aborted { .. }),
        "{:?}",
        report.outcome
    );
    assert_valid(&h, &session).await;
    // An aborted turn starts nothing; the follow-up still waits, once.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let queue: Vec<String> = h
        .runtime
        .request(ops::ListQueue {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(queue, ["after the abort"]);
    // Every item that started also completed.
    events.drain();
    let started = events
        .seen
        .iter()
        .filter(|e| {
            matches!(
                &e.body,
                SessionEventBody::Item {
                    event: ItemEvent::Started { .. },
                    ..
                }
            )
        })
        .count();
    let completed = events
        .seen
        .iter()
        .filter(|e| {
            matches!(
                &e.body,
                SessionEventBody::Item {
                    event: ItemEvent::Completed { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(started, completed);
}

#[tokio::test]
async fn an_abort_during_a_tool_answers_the_call_and_requeues_undelivered_steering() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("never reached"),
    ]));
    let gate = Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    let turn = h.submit(&session, "run the gate").await;
    gate.wait_started().await;
    enqueue(&h, &session, InputKind::Steer, "steer that never lands").await;
    assert!(h.abort(&session).await);
    let report = ended(turn).await;
    assert!(
        matches!(report.outcome, TurnOutcome::Aborted { .. }),
        "{:?}",
        report.outcome
    );
    assert_valid(&h, &session).await;
    let history = h.history(&session).await;
    assert_eq!(
        history[..2],
        owned(&[("user", "run the gate"), ("assistant", "calls gate")])[..]
    );
    assert_eq!(history[2].0, "tool_result");
    // The steer is either in history (delivered and committed before the abort took
    // effect) or back in the queue: never both, never lost.
    let delivered = history
        .iter()
        .filter(|(_, text)| text == "steer that never lands")
        .count();
    let queue: Vec<(InputKind, String)> = h
        .runtime
        .request(ops::ListQueue {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.text))
        .collect();
    let waiting = queue
        .iter()
        .filter(|(kind, text)| *kind == InputKind::Steer && text == "steer that never lands")
        .count();
    assert_eq!(
        delivered + waiting,
        1,
        "history {history:?}, queue {queue:?}"
    );
    assert_eq!(provider.call_count(), 1, "no model request after the abort");
}

#[tokio::test]
async fn a_submit_while_a_turn_runs_is_refused_and_the_queue_can_be_edited() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("first done"),
        ScriptedResponse::text("queue done"),
    ]));
    let gate = Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "go").await;
    let first = turn.turn_id.clone();
    gate.wait_started().await;
    let refused = h
        .runtime
        .request(ops::Submit {
            session_id: session.clone(),
            text: "again".into(),
            images: Vec::new(),
            source: TurnSource::Api,
            output_schema: None,
            time_budget_ms: None,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "turn_running");
    let mut queued = Vec::new();
    for text in ["one", "two", "three"] {
        let Queued { entry, .. } = enqueue(&h, &session, InputKind::FollowUp, text).await;
        queued.push(entry.id);
    }
    h.runtime
        .request(ops::EditQueued {
            session_id: session.clone(),
            input_id: queued[0].clone(),
            text: "one, edited".into(),
        })
        .await
        .unwrap();
    h.runtime
        .request(ops::CancelQueued {
            session_id: session.clone(),
            input_id: queued[1].clone(),
        })
        .await
        .unwrap();
    let reordered = h
        .runtime
        .request(ops::ReorderQueue {
            session_id: session.clone(),
            order: vec![queued[2].clone(), queued[0].clone()],
        })
        .await
        .unwrap();
    let texts: Vec<String> = reordered.into_iter().map(|e| e.text).collect();
    assert_eq!(texts, ["three", "one, edited"]);
    let incomplete = h
        .runtime
        .request(ops::ReorderQueue {
            session_id: session.clone(),
            order: vec![queued[2].clone()],
        })
        .await
        .unwrap_err();
    assert!(matches!(incomplete, RuntimeError::Store(_)), "{incomplete}");
    gate.release.notify_one();
    ended(turn).await;
    // The waiting inputs become the next turn, in the queue's order, as one prompt.
    while events.any_turn_end().await == first {}
    let request = provider.requests()[2].clone();
    let users: Vec<String> = request
        .messages
        .iter()
        .filter(|m| m.role() == "user")
        .map(|m| describe(m).1)
        .collect();
    assert_eq!(users[users.len() - 2..], ["three", "one, edited"]);
    let empty = h
        .runtime
        .request(ops::Dispatch {
            session_id: session.clone(),
            source: TurnSource::Cron,
        })
        .await
        .unwrap_err();
    assert_eq!(empty.code(), "queue_empty");
}

#[tokio::test]
async fn a_follow_up_with_no_turn_running_starts_one_with_its_source() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "on it",
    )]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    let turn = match enqueue(&h, &session, InputKind::FollowUp, "nightly check").await {
        Queued {
            turn: Some(turn), ..
        } => turn,
        other => panic!("{other:?}"),
    };
    let report = ended(turn).await;
    assert_eq!(report.final_text(), "on it");
    assert_eq!(
        h.history(&session).await,
        owned(&[("user", "nightly check"), ("assistant", "on it")])
    );
    assert!(h.store.queued_inputs(&session).await.unwrap().is_empty());
}
