//! The turn runner: hook contracts, steering boundaries, closing, outcomes, event bridge.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use keel_agent::ExecutionMode;
use keel_agent::runner::TurnStart;
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{
    AssistantMessage, ErrorCode, Message, ResponseChunk, RuntimeEventBody, ToolPhase, TurnOutcome,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::runner_support::*;
use crate::support::{Behaviour, TestTool, call, short, text};

fn history_of(result: &keel_agent::runner::TurnResult) -> Vec<String> {
    result.messages.iter().map(|m| short(m)).collect()
}

#[tokio::test]
async fn a_completed_turn_has_one_status_envelope_and_host_ids() {
    let h = Harness::echo_then_done();
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:tool_use",
            "result:c1",
            "assistant:stop"
        ]
    );
    let completed: Vec<String> = h
        .host
        .checked()
        .iter()
        .filter_map(|b| match b {
            RuntimeEventBody::MessageCompleted {
                message_id,
                message,
            } => Some(format!("{message_id}={}", short(message))),
            _ => None,
        })
        .collect();
    assert_eq!(
        completed,
        [
            "m1=user:hi",
            "m2=assistant:tool_use",
            "m3=result:c1",
            "m4=assistant:stop"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_assistant_message_with_calls_completes_only_after_all_executions_ended() {
    let mut h = Harness::new(vec![
        ScriptedResponse::new()
            .with_text("working")
            .with_tool_call("c1", "sleep", json!({"ms": 200}))
            .with_tool_call("c2", "sleep", json!({"ms": 100})),
        text("done"),
    ]);
    h.tools = vec![TestTool::new(
        "sleep",
        ExecutionMode::Parallel,
        Behaviour::Sleep,
    )];
    h.run("hi").await;
    let bodies = h.host.checked();
    let position = |pred: &dyn Fn(&RuntimeEventBody) -> bool| bodies.iter().position(pred).unwrap();
    let completed = position(
        &|b| matches!(b, RuntimeEventBody::MessageCompleted { message, .. } if message.as_assistant().is_some_and(|a| a.has_tool_calls())),
    );
    for id in ["c1", "c2"] {
        let ended = position(
            &|b| matches!(b, RuntimeEventBody::ResponseChunk { chunk: ResponseChunk::ToolExecution { tool_call_id, phase: ToolPhase::Succeeded, .. }, .. } if tool_call_id.as_str() == id),
        );
        assert!(
            ended < completed,
            "{id} ended at {ended}, message completed at {completed}"
        );
    }
    let text_chunk = position(
        &|b| matches!(b, RuntimeEventBody::ResponseChunk { chunk: ResponseChunk::Text { .. }, message_id } if message_id.as_str() == "m2"),
    );
    assert!(text_chunk < completed);
}

#[tokio::test]
async fn mid_turn_steering_joins_and_exit_withholds() {
    let h = Harness::echo_then_done();
    h.host
        .mid_turn
        .lock()
        .unwrap()
        .push_back(vec![Message::user_text("also check tests")]);
    let result = h.run("hi").await;
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:tool_use",
            "result:c1",
            "user:also check tests",
            "assistant:stop"
        ]
    );
    assert_eq!(
        *h.host.polls.lock().unwrap(),
        [keel_agent::Boundary::MidTurn, keel_agent::Boundary::Exit]
    );
    assert_eq!(h.host.close_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_close_polls_again_and_continues_with_the_new_work() {
    let h = Harness::new(vec![text("first"), text("after background result")]);
    h.host.refuse_closes.store(1, Ordering::SeqCst);
    *h.host.deliver_after_refusals.lock().unwrap() =
        Some((1, vec![Message::user_text("task 7 finished")]));
    let result = h.run("hi").await;
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:stop",
            "user:task 7 finished",
            "assistant:stop"
        ]
    );
    assert_eq!(h.host.close_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn converge_at_idle_continues_when_work_appears_after_the_run() {
    let h = Harness::new(vec![text("first"), text("second")]);
    // More refusals than one exit boundary retries, then work arrives: only the
    // converge step can pick it up.
    h.host.refuse_closes.store(20, Ordering::SeqCst);
    *h.host.deliver_after_refusals.lock().unwrap() =
        Some((18, vec![Message::user_text("late input")]));
    let result = h.run("hi").await;
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:stop",
            "user:late input",
            "assistant:stop"
        ]
    );
    assert_eq!(result.outcome, TurnOutcome::Completed);
}

#[tokio::test(start_paused = true)]
async fn caller_abort_ends_the_turn_aborted() {
    let mut h = Harness::new(vec![
        call("c1", "sleep", json!({"ms": 60_000})),
        text("never"),
    ]);
    h.tools = vec![TestTool::new(
        "sleep",
        ExecutionMode::Parallel,
        Behaviour::Sleep,
    )];
    let cancel = h.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let result = h.run("hi").await;
    assert_eq!(
        result.outcome,
        TurnOutcome::Aborted {
            reason: Some("aborted by the caller".into())
        }
    );
    assert_eq!(
        history_of(&result),
        ["user:hi", "assistant:tool_use", "result:c1!"]
    );
}

#[tokio::test]
async fn model_errors_map_to_stable_codes() {
    for (code, expected) in [
        (ErrorCode::RateLimit, "model_rate_limit"),
        (ErrorCode::ContextOverflow, "context_overflow"),
        (ErrorCode::Auth, "model_auth"),
    ] {
        let h = Harness::new(vec![ScriptedResponse::error(code, "nope")]);
        let result = h.run("hi").await;
        assert_eq!(failed_code(&result.outcome), expected);
    }
}

#[tokio::test]
async fn continue_resumes_existing_history() {
    let mut h = Harness::new(vec![text("resumed")]);
    h.history = vec![Arc::new(Message::user_text("earlier question"))];
    let result = h.run_with(TurnStart::Continue).await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(history_of(&result), ["assistant:stop"]);
}

#[tokio::test]
async fn continue_on_an_answered_history_fails_with_a_clear_code() {
    let mut h = Harness::new(vec![]);
    h.history = vec![Arc::new(Message::Assistant(AssistantMessage::from_text(
        "done",
    )))];
    let result = h.run_with(TurnStart::Continue).await;
    assert_eq!(failed_code(&result.outcome), "nothing_to_continue");
}

#[tokio::test]
async fn usage_is_summed_over_the_turn() {
    let usage = keel_protocol::Usage {
        input: 10,
        output: 5,
        ..Default::default()
    };
    let mut h = Harness::new(vec![
        call("c1", "echo", json!({})).usage(usage),
        text("done").usage(usage),
    ]);
    h.tools = vec![TestTool::new(
        "echo",
        ExecutionMode::Parallel,
        Behaviour::Echo,
    )];
    let result = h.run("hi").await;
    assert_eq!(result.usage.input, 20);
    assert_eq!(result.usage.output, 10);
}

#[tokio::test]
async fn steering_left_in_the_queue_by_a_failed_turn_is_handed_back() {
    let mut h = Harness::new(vec![
        call("c1", "echo", json!({})),
        ScriptedResponse::error(keel_protocol::ErrorCode::Server, "boom"),
    ]);
    h.tools = vec![TestTool::new(
        "echo",
        ExecutionMode::Parallel,
        Behaviour::Echo,
    )];
    h.host
        .mid_turn
        .lock()
        .unwrap()
        .push_back(vec![Message::user_text("first")]);
    h.host
        .mid_turn
        .lock()
        .unwrap()
        .push_back(vec![Message::user_text("second")]);
    let result = h.run("hi").await;
    assert_eq!(failed_code(&result.outcome), "model_server");
    assert_eq!(result.unconsumed.len(), 1);
    assert_eq!(
        result.unconsumed[0].as_user().unwrap().content[0].as_text(),
        Some("second")
    );
    assert_eq!(h.host.requeued.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn transient_model_failures_are_retried_inside_the_turn() {
    let mut h = Harness::new(vec![
        ScriptedResponse::error(keel_protocol::ErrorCode::Overloaded, "busy"),
        text("made it"),
    ]);
    h.defaults.stream.retry = Some(keel_llm::retry::RetryPolicy::default());
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(history_of(&result), ["user:hi", "assistant:stop"]);
    let notices = h
        .host
        .checked()
        .into_iter()
        .filter(|b| matches!(b, RuntimeEventBody::Notice { .. }))
        .count();
    assert_eq!(
        notices, 2,
        "the scheduled retry and the recovery are reported"
    );
}

#[tokio::test]
async fn the_step_limit_stops_a_turn_that_keeps_calling_tools() {
    let mut h = Harness::new(vec![
        call("c1", "echo", json!({})),
        call("c2", "echo", json!({})),
        call("c3", "echo", json!({})),
        text("never"),
    ]);
    h.tools = vec![TestTool::new(
        "echo",
        ExecutionMode::Parallel,
        Behaviour::Echo,
    )];
    h.defaults.max_steps = Some(2);
    let result = h.run("hi").await;
    assert_eq!(failed_code(&result.outcome), "step_limit_exceeded");
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:tool_use",
            "result:c1",
            "assistant:tool_use",
            "result:c2"
        ]
    );

    // A final answer on the last allowed step is a normal end, not a limit.
    let mut h = Harness::echo_then_done();
    h.defaults.max_steps = Some(2);
    assert_eq!(h.run("hi").await.outcome, TurnOutcome::Completed);
}

/// A host that batches its output is told when no event is waiting, after the last event of
/// the turn too, so nothing stays held when the turn ends.
#[tokio::test]
async fn the_host_hears_when_events_are_drained_and_after_the_last_one() {
    let h = Harness::echo_then_done();
    h.run("hi").await;
    let delivered = h.host.all().len();
    let drained = h.host.drained.lock().unwrap().clone();
    assert!(!drained.is_empty());
    assert!(
        drained.windows(2).all(|pair| pair[0] <= pair[1]),
        "{drained:?}"
    );
    assert_eq!(drained.last(), Some(&delivered), "{drained:?}");
}

fn empty_response(detail: &str) -> TurnOutcome {
    TurnOutcome::Failed {
        code: keel_protocol::FailureCode::EmptyResponse,
        message: format!(
            "the model ended its first response with no text and no tool call{detail}"
        ),
    }
}

/// A turn whose only response shows nothing (no text, no tool call) used to end
/// `completed`, so a front end reported success with an empty answer.
#[tokio::test]
async fn an_empty_first_response_fails_the_turn_instead_of_succeeding() {
    let cases = [
        (ScriptedResponse::new(), "", "assistant:stop"),
        (
            ScriptedResponse::new().with_text(" \n\t"),
            "",
            "assistant:stop",
        ),
        (
            ScriptedResponse::new().with_thinking("Let me think", None),
            " (it only reasoned)",
            "assistant:stop",
        ),
        (
            ScriptedResponse::new()
                .with_thinking("Let me think", None)
                .stop_reason(keel_protocol::StopReason::Length),
            " (it reached its output limit)",
            "assistant:length",
        ),
    ];
    for (response, detail, answer) in cases {
        let h = Harness::new(vec![response]);
        let result = h.run("hi").await;
        assert_eq!(result.outcome, empty_response(detail));
        assert_eq!(
            history_of(&result),
            ["user:hi", answer],
            "the empty answer stays in history"
        );
    }
}

/// Only the first step is judged: an empty final answer after tool steps ends the turn as
/// before, and so does an empty first answer that steering at the exit carried on from.
#[tokio::test]
async fn an_empty_answer_after_other_steps_is_not_judged_empty() {
    let mut h = Harness::new(vec![call("c1", "echo", json!({})), ScriptedResponse::new()]);
    h.tools = vec![TestTool::new(
        "echo",
        ExecutionMode::Parallel,
        Behaviour::Echo,
    )];
    assert_eq!(h.run("hi").await.outcome, TurnOutcome::Completed);

    let h = Harness::new(vec![ScriptedResponse::new(), text("there you go")]);
    h.host
        .exit
        .lock()
        .unwrap()
        .push_back(vec![Message::user_text("well?")]);
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(
        history_of(&result),
        ["user:hi", "assistant:stop", "user:well?", "assistant:stop"]
    );
}
