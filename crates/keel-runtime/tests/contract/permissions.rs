//! Permission requests as events, answers through the contract, and answers that come
//! after the turn was cancelled.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::ops;
use keel_protocol::{PermissionAnswer, PermissionRequest, SessionEventBody, TurnOutcome};
use keel_runtime::{ContractExt, RuntimeError};
use keel_tools::permission::Mode;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Gate, Harness, Setup, describe, ended};

async fn asking(provider: &Arc<ScriptedProvider>, gate: &Arc<Gate>) -> Harness {
    let mut setup = Setup::gated(provider, gate);
    setup.interactive = true;
    // Ask mode asks before any tool it does not know to be read-only.
    setup.permission = Some(Mode::Ask);
    Harness::start(setup).await
}

fn request_of(body: &SessionEventBody) -> Option<PermissionRequest> {
    match body {
        SessionEventBody::PermissionRequested { request, .. } => Some(request.clone()),
        _ => None,
    }
}

#[tokio::test]
async fn an_allowed_request_runs_the_call() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("ran it"),
    ]));
    let gate = Gate::new();
    let h = asking(&provider, &gate).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "use the gate").await;
    let asked = events.until(|b| request_of(b).is_some()).await;
    let request = request_of(&asked.body).unwrap();
    assert_eq!(
        (request.tool.as_str(), request.tool_call_id.as_str()),
        ("gate", "c1")
    );
    h.runtime
        .request(ops::AnswerPermission {
            session_id: session.clone(),
            request_id: request.id.clone(),
            answer: PermissionAnswer::AllowOnce,
        })
        .await
        .unwrap();
    gate.wait_started().await;
    gate.release.notify_one();
    let report = ended(turn).await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    let resolved = events
        .until(|b| matches!(b, SessionEventBody::PermissionResolved { .. }))
        .await;
    assert!(matches!(
        resolved.body,
        SessionEventBody::PermissionResolved { allowed: true, .. }
    ));
    // Answered once: a second answer is refused.
    let again = h
        .runtime
        .request(ops::AnswerPermission {
            session_id: session.clone(),
            request_id: request.id.clone(),
            answer: PermissionAnswer::AllowOnce,
        })
        .await
        .unwrap_err();
    assert_eq!(again.code(), "permission_not_pending");
}

#[tokio::test]
async fn a_denial_with_a_reason_reaches_the_model() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("understood"),
    ]));
    let gate = Gate::new();
    let h = asking(&provider, &gate).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "use the gate").await;
    let request = request_of(&events.until(|b| request_of(b).is_some()).await.body).unwrap();
    let bad_scope = h
        .runtime
        .request(ops::AnswerPermission {
            session_id: session.clone(),
            request_id: request.id.clone(),
            answer: PermissionAnswer::AllowAlways { scope: 99 },
        })
        .await
        .unwrap_err();
    assert!(matches!(
        bad_scope,
        RuntimeError::NoSuchScope { scope: 99, .. }
    ));
    h.runtime
        .request(ops::AnswerPermission {
            session_id: session.clone(),
            request_id: request.id.clone(),
            answer: PermissionAnswer::Deny {
                reason: Some("not on a Friday".into()),
            },
        })
        .await
        .unwrap();
    ended(turn).await;
    let second = provider.requests()[1].clone();
    let (role, text) = describe(second.messages.last().unwrap());
    assert_eq!(role, "tool_result");
    assert!(text.contains("not on a Friday"), "{text}");
}

#[tokio::test]
async fn an_answer_after_the_turn_was_cancelled_is_refused() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("never reached"),
    ]));
    let gate = Gate::new();
    let h = asking(&provider, &gate).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "use the gate").await;
    let request = request_of(&events.until(|b| request_of(b).is_some()).await.body).unwrap();
    assert!(h.abort(&session).await);
    // Refused the moment the turn is cancelled, even before it has wound down.
    let refused = h
        .runtime
        .request(ops::AnswerPermission {
            session_id: session.clone(),
            request_id: request.id.clone(),
            answer: PermissionAnswer::AllowOnce,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "permission_not_pending");
    let report = ended(turn).await;
    assert!(
        matches!(report.outcome, TurnOutcome::Aborted { .. }),
        "{:?}",
        report.outcome
    );
    let late = h
        .runtime
        .request(ops::AnswerPermission {
            session_id: session.clone(),
            request_id: request.id.clone(),
            answer: PermissionAnswer::AllowOnce,
        })
        .await
        .unwrap_err();
    assert_eq!(late.code(), "permission_not_pending");
    // The call never ran, and history is valid: the call has its (error) result.
    assert_eq!(provider.call_count(), 1);
    let history = h.history(&session).await;
    assert_eq!(history.len(), 3, "{history:?}");
    assert_eq!(history[2].0, "tool_result");
    let stored = h.store.history(&session).await.unwrap();
    assert!(keel_runtime::sessions::close_interrupted(&stored).is_none());
}
