//! When a session is at rest (`quiescent`): said once activity ends, never before a turn
//! the runtime itself decided to start, and with the input left waiting counted.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::ops;
use keel_protocol::{InputKind, SessionEventBody, SessionId, TurnSource};
use keel_runtime::{ContractExt, Queued};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Gate, Harness, Setup, Watch, ended};

async fn enqueue(h: &Harness, session: &SessionId, kind: InputKind, source: TurnSource) {
    let reply = h.enqueue_from(session, kind, "then this", source).await;
    assert!(matches!(reply, Queued { turn: None, .. }), "{reply:?}");
}

/// The turn-level story the events tell: starts (with their source), ends, rests.
fn story(events: &Watch) -> Vec<String> {
    events
        .seen
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::TurnStarted { source, .. } => Some(format!("start {source}")),
            SessionEventBody::TurnEnded { .. } => Some("end".into()),
            SessionEventBody::Quiescent { queued, .. } => Some(format!("rest {queued}")),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_follow_up_keeps_the_session_busy_and_starts_as_its_sender() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("first"),
        ScriptedResponse::text("second"),
    ]));
    let gate = Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "start").await;
    gate.wait_started().await;
    // A goal queues its next turn this way, before its turn ends.
    enqueue(&h, &session, InputKind::FollowUp, TurnSource::ThreadGoal).await;
    gate.release.notify_one();
    ended(turn).await;
    events.rest().await;
    events.drain();
    assert_eq!(
        story(&events),
        ["start api", "end", "start thread-goal", "end", "rest 0"]
    );
    let queued: Vec<TurnSource> = events
        .seen
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::QueueChanged { queue } => queue.first().map(|q| q.source.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        queued,
        [TurnSource::ThreadGoal],
        "the queue shows who queued it"
    );
}

#[tokio::test]
async fn an_aborted_turn_rests_with_its_waiting_input_counted() {
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
    enqueue(&h, &session, InputKind::FollowUp, TurnSource::Api).await;
    h.abort(&session).await;
    ended(turn).await;
    events.rest().await;
    assert_eq!(story(&events), ["start api", "end", "rest 1"]);
    // Dispatch starts the waiting input, and the session rests again after it.
    provider.push(ScriptedResponse::text("taken"));
    h.runtime
        .request(ops::Dispatch {
            session_id: session.clone(),
            source: TurnSource::Api,
        })
        .await
        .unwrap();
    events.rest().await;
    assert_eq!(
        story(&events),
        ["start api", "end", "rest 1", "start api", "end", "rest 0"]
    );
}
