//! One test per exit of the loop, in the order they are checked (DESIGN §1).

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::{ExecutionMode, LoopHooks, StepSummary, ToolGate};
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{ErrorCode, StopReason, ToolCall};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn exit_1_error_response_ends_the_run_at_once() {
    let (agent, provider, recorder) = agent_with(
        vec![
            ScriptedResponse::error(ErrorCode::Server, "boom"),
            text("never"),
        ],
        vec![],
        None,
    );
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(
        recorder.trace(),
        [
            "agent_start",
            "turn_start",
            "message_start(user)",
            "message_end(user:hi)",
            "message_start(assistant)",
            "message_end(assistant:error)",
            "turn_end(assistant:error)",
            "agent_end(2)",
        ]
    );
    assert_eq!(provider.call_count(), 1);
}

#[tokio::test]
async fn exit_1_error_after_a_tool_call_answers_the_call_without_running_it() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let failing = ScriptedResponse::tool_call("c1", "echo", json!({})).fail_after(
        5,
        ErrorCode::Network,
        "cut",
    );
    let (agent, _provider, recorder) = agent_with(vec![failing], vec![tool.clone()], None);
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(tool.count(), 0);
    assert_eq!(
        history(&agent),
        ["user:hi", "assistant:error", "result:c1!"]
    );
    assert!(result_text(&agent, "c1").contains("network: cut"));
    assert_eq!(recorder.trace().last().unwrap(), "agent_end(3)");
}

struct StopAfterStep;

#[async_trait]
impl LoopHooks for StopAfterStep {
    async fn should_stop_after_step(&self, _step: &StepSummary) -> bool {
        true
    }
}

#[tokio::test(start_paused = true)]
async fn exit_2_stop_after_step_finishes_the_step_without_polling_steering() {
    let tool = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let (agent, provider, recorder) = agent_with(
        vec![call("c1", "sleep", json!({"ms": 100})), text("never")],
        vec![tool.clone()],
        Some(Arc::new(StopAfterStep)),
    );
    let running = agent.start(Some(vec![user("hi")])).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    agent.steer(user("later"));
    running.await.unwrap();
    assert_eq!(tool.count(), 1);
    assert_eq!(provider.call_count(), 1);
    assert_eq!(
        history(&agent),
        ["user:hi", "assistant:tool_use", "result:c1"]
    );
    // The steering message was not taken: it waits for the next run.
    assert!(agent.has_queued_messages());
    assert_eq!(recorder.trace().last().unwrap(), "agent_end(3)");
}

struct StopAfterSteering;

#[async_trait]
impl LoopHooks for StopAfterSteering {
    async fn should_stop_after_steering(&self, _step: &StepSummary) -> bool {
        true
    }
}

#[tokio::test(start_paused = true)]
async fn exit_3_stop_after_steering_makes_no_further_model_call_and_keeps_the_steering() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let (agent, provider, _recorder) = agent_with(
        vec![call("c1", "echo", json!({})), text("never")],
        vec![tool.clone()],
        Some(Arc::new(StopAfterSteering)),
    );
    agent.steer(user("steer"));
    let second = agent.start(Some(vec![user("hi")])).unwrap();
    second.await.unwrap();
    assert_eq!(provider.call_count(), 1);
    // The steering queued before the run joined the first step; nothing was lost.
    assert_eq!(
        history(&agent),
        ["user:hi", "user:steer", "assistant:tool_use", "result:c1"]
    );

    let sleeper = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let (agent, provider, _recorder) = agent_with(
        vec![call("c1", "sleep", json!({"ms": 100})), text("never")],
        vec![tool, sleeper],
        Some(Arc::new(StopAfterSteering)),
    );
    let running = agent.start(Some(vec![user("hi")])).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    agent.steer(user("steer"));
    running.await.unwrap();
    assert_eq!(provider.call_count(), 1);
    assert!(
        agent.has_queued_messages(),
        "polled steering is handed back, not dropped"
    );
}

#[tokio::test]
async fn exit_4_all_results_terminate_so_no_model_call_follows() {
    let tool = TestTool::new("finish", ExecutionMode::Parallel, Behaviour::Terminate);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "finish", json!({}))
        .with_tool_call("c2", "finish", json!({}));
    let (agent, provider, recorder) =
        agent_with(vec![response, text("never")], vec![tool.clone()], None);
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(tool.count(), 2);
    assert_eq!(provider.call_count(), 1);
    assert_eq!(recorder.trace().last().unwrap(), "agent_end(4)");
}

#[tokio::test]
async fn exit_4_a_result_without_terminate_keeps_the_loop_going() {
    let finish = TestTool::new("finish", ExecutionMode::Parallel, Behaviour::Terminate);
    let echo = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "finish", json!({}))
        .with_tool_call("c2", "echo", json!({}));
    let (agent, provider, _recorder) =
        agent_with(vec![response, text("done")], vec![finish, echo], None);
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(provider.call_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn exit_4_terminate_with_pending_steering_continues() {
    let tool = TestTool::new("finish", ExecutionMode::Parallel, Behaviour::Terminate);
    let response = ScriptedResponse::tool_call("c1", "finish", json!({"ms": 0}))
        .first_delay(std::time::Duration::from_millis(50));
    let (agent, provider, _recorder) =
        agent_with(vec![response, text("answered steering")], vec![tool], None);
    let running = agent.start(Some(vec![user("hi")])).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    agent.steer(user("one more thing"));
    running.await.unwrap();
    assert_eq!(provider.call_count(), 2);
    assert_eq!(
        history(&agent),
        [
            "user:hi",
            "assistant:tool_use",
            "result:c1",
            "user:one more thing",
            "assistant:stop"
        ]
    );
}

struct TerminateFirst;

#[async_trait]
impl LoopHooks for TerminateFirst {
    async fn before_tool_call(&self, call: &ToolCall) -> Result<ToolGate, keel_agent::HookError> {
        Ok(if call.id.as_str() == "c1" {
            ToolGate::Terminate {
                reason: "enough".into(),
            }
        } else {
            ToolGate::Allow
        })
    }
}

#[tokio::test]
async fn exit_4_hook_terminate_in_a_sequential_batch_stops_the_rest() {
    let tool = TestTool::new("seq", ExecutionMode::Sequential, Behaviour::Echo);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "seq", json!({}))
        .with_tool_call("c2", "seq", json!({}));
    let (agent, provider, _recorder) = agent_with(
        vec![response, text("never")],
        vec![tool.clone()],
        Some(Arc::new(TerminateFirst)),
    );
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(tool.count(), 0);
    assert_eq!(provider.call_count(), 1);
    assert!(result_text(&agent, "c1").starts_with("Stopped by hook: enough"));
    assert!(result_text(&agent, "c2").starts_with("Stopped by hook"));
}

#[tokio::test]
async fn exit_5_natural_end_after_text() {
    let (agent, provider, recorder) = agent_with(vec![text("hello")], vec![], None);
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(provider.call_count(), 1);
    assert_eq!(history(&agent), ["user:hi", "assistant:stop"]);
    assert_eq!(recorder.trace().last().unwrap(), "agent_end(2)");
    assert!(!agent.is_running());
}

#[tokio::test]
async fn exit_5_tool_round_trip_then_natural_end() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let (agent, provider, recorder) = agent_with(
        vec![call("c1", "echo", json!({"text": "x"})), text("done")],
        vec![tool],
        None,
    );
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(
        recorder.trace(),
        [
            "agent_start",
            "turn_start",
            "message_start(user)",
            "message_end(user:hi)",
            "message_start(assistant)",
            "message_end(assistant:tool_use)",
            "tool_start(c1)",
            "tool_end(c1)",
            "message_start(tool_result)",
            "message_end(result:c1)",
            "turn_end(assistant:tool_use, 1 results)",
            "turn_start",
            "message_start(assistant)",
            "message_end(assistant:stop)",
            "turn_end(assistant:stop)",
            "agent_end(4)",
        ]
    );
    // The second request carries the tool result, paired with its call.
    let second = &provider.requests()[1];
    assert_eq!(second.messages.len(), 3);
    assert_eq!(
        second.messages[2].as_tool_result().unwrap().text(),
        "echo: {\"text\":\"x\"}"
    );
}

#[tokio::test]
async fn follow_up_after_a_natural_end_starts_another_step() {
    let (agent, provider, _recorder) = agent_with(
        vec![
            text("first").first_delay(std::time::Duration::from_millis(20)),
            text("second"),
        ],
        vec![],
        None,
    );
    let running = agent.start(Some(vec![user("hi")])).unwrap();
    agent.follow_up(user("and then?"));
    running.await.unwrap();
    assert_eq!(provider.call_count(), 2);
    assert_eq!(
        history(&agent),
        [
            "user:hi",
            "assistant:stop",
            "user:and then?",
            "assistant:stop"
        ]
    );
}

#[tokio::test]
async fn follow_ups_queued_before_continue_are_delivered() {
    let (agent, provider, _recorder) = agent_with(vec![text("a"), text("b")], vec![], None);
    agent.prompt(vec![user("hi")]).await.unwrap();
    agent.follow_up(user("more"));
    agent.continue_run().await.unwrap();
    assert_eq!(provider.call_count(), 2);
    assert_eq!(
        history(&agent),
        ["user:hi", "assistant:stop", "user:more", "assistant:stop"]
    );
}

#[tokio::test]
async fn continue_without_anything_to_answer_is_refused() {
    let (agent, _provider, _recorder) = agent_with(vec![text("a")], vec![], None);
    let err = agent.continue_run().await.unwrap_err();
    assert_eq!(err.code(), "nothing_to_continue");
    agent.prompt(vec![user("hi")]).await.unwrap();
    let err = agent.continue_run().await.unwrap_err();
    assert!(err.to_string().contains("assistant"), "{err}");
}

#[tokio::test]
async fn a_second_prompt_while_running_is_refused() {
    let (agent, _provider, _recorder) = agent_with(
        vec![text("a").first_delay(std::time::Duration::from_millis(50))],
        vec![],
        None,
    );
    let running = agent.start(Some(vec![user("hi")])).unwrap();
    assert_eq!(
        agent.prompt(vec![user("again")]).await.unwrap_err().code(),
        "agent_busy"
    );
    running.await.unwrap();
}

#[tokio::test]
async fn stop_reason_is_kept_on_the_message() {
    let (agent, _provider, _recorder) = agent_with(
        vec![text("cut").stop_reason(StopReason::Length)],
        vec![],
        None,
    );
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(history(&agent), ["user:hi", "assistant:length"]);
}
