//! Abort at every point: before the stream, mid-stream, mid-tool (parallel and sequential,
//! with tools that honour and ignore cancellation), and inside a hook. After each, the run
//! ends promptly and every tool call has exactly one result.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{Agent, ContextPlan, ExecutionMode, HookError, LoopHooks, ToolGate};
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{Message, StopReason, ToolCall};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

/// Starts a run, aborts after `after`, and returns how long the run took to settle after
/// the abort.
async fn abort_after(agent: &Agent, after: Duration) -> Duration {
    let running = agent.start(Some(vec![user("go")])).unwrap();
    tokio::time::sleep(after).await;
    let aborted_at = tokio::time::Instant::now();
    agent.abort();
    running.await.unwrap();
    assert!(!agent.is_running());
    aborted_at.elapsed()
}

fn assert_every_call_answered_once(agent: &Agent) {
    let messages = agent.messages();
    let calls: Vec<String> = messages
        .iter()
        .filter_map(|m| m.as_assistant())
        .flat_map(|a| a.tool_calls().map(|c| c.id.to_string()).collect::<Vec<_>>())
        .collect();
    let results: Vec<String> = messages
        .iter()
        .filter_map(|m| m.as_tool_result())
        .map(|r| r.tool_call_id.to_string())
        .collect();
    assert_eq!(calls, results);
}

#[tokio::test(start_paused = true)]
async fn abort_before_the_stream_starts() {
    let slow = text("late").first_delay(Duration::from_secs(10));
    let (agent, _provider, recorder) = agent_with(vec![slow], vec![], None);
    let settle = abort_after(&agent, Duration::from_millis(100)).await;
    assert_eq!(settle, Duration::ZERO);
    assert_eq!(history(&agent), ["user:go", "assistant:aborted"]);
    assert_eq!(recorder.trace().last().unwrap(), "agent_end(2)");
}

#[tokio::test(start_paused = true)]
async fn abort_mid_stream_keeps_the_partial_text_and_answers_partial_calls() {
    let streaming = ScriptedResponse::text("abcdefghij")
        .with_tool_call("c1", "echo", json!({"text": "long"}))
        .chunk_size(1)
        .delay(Duration::from_millis(100));
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let (agent, _provider, _recorder) = agent_with(vec![streaming], vec![tool.clone()], None);
    // Start + text_start + 10 deltas + text_end + tool_call_start + some deltas.
    let settle = abort_after(&agent, Duration::from_millis(1_550)).await;
    assert_eq!(settle, Duration::ZERO);
    let messages = agent.messages();
    let assistant = messages[1].as_assistant().unwrap();
    assert_eq!(assistant.stop_reason, StopReason::Aborted);
    assert_eq!(assistant.text(), "abcdefghij");
    assert_eq!(tool.count(), 0);
    assert_every_call_answered_once(&agent);
}

#[tokio::test(start_paused = true)]
async fn abort_mid_stream_of_a_stream_that_ignores_cancellation() {
    let stuck = ScriptedResponse::text("abc").hang_ignoring_cancel(2);
    let (agent, _provider, _recorder) = agent_with(vec![stuck], vec![], None);
    let settle = abort_after(&agent, Duration::from_millis(100)).await;
    assert_eq!(settle, Duration::ZERO);
    assert_eq!(history(&agent), ["user:go", "assistant:aborted"]);
}

#[tokio::test(start_paused = true)]
async fn abort_mid_tool_in_a_parallel_batch() {
    let tool = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "sleep", json!({"ms": 10_000}))
        .with_tool_call("c2", "sleep", json!({"ms": 20_000}));
    let (agent, provider, _recorder) = agent_with(vec![response, text("never")], vec![tool], None);
    let settle = abort_after(&agent, Duration::from_millis(100)).await;
    assert_eq!(settle, Duration::ZERO, "both tools honour cancellation");
    assert_eq!(provider.call_count(), 1, "no model call after an abort");
    assert_eq!(
        history(&agent),
        ["user:go", "assistant:tool_use", "result:c1!", "result:c2!"]
    );
    assert_every_call_answered_once(&agent);
}

#[tokio::test(start_paused = true)]
async fn abort_mid_tool_in_a_sequential_batch_skips_the_rest() {
    let tool = TestTool::new("seq", ExecutionMode::Sequential, Behaviour::Sleep);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "seq", json!({"ms": 10_000}))
        .with_tool_call("c2", "seq", json!({"ms": 10}));
    let (agent, _provider, _recorder) =
        agent_with(vec![response, text("never")], vec![tool.clone()], None);
    abort_after(&agent, Duration::from_millis(100)).await;
    assert_eq!(tool.count(), 1);
    assert_eq!(result_text(&agent, "c1"), "cancelled");
    assert_eq!(
        result_text(&agent, "c2"),
        "Tool call `seq` was not executed: the run was aborted."
    );
    assert_every_call_answered_once(&agent);
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_ignores_abort_is_abandoned_after_the_grace_period() {
    let stubborn = TestTool::new("stubborn", ExecutionMode::Parallel, Behaviour::Stubborn);
    let polite = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "stubborn", json!({"ms": 3_600_000}))
        .with_tool_call("c2", "sleep", json!({"ms": 3_600_000}));
    let (agent, _provider, recorder) = agent_with(vec![response], vec![stubborn, polite], None);
    let settle = abort_after(&agent, Duration::from_millis(100)).await;
    // The test agent's grace period is 300 ms.
    assert_eq!(settle, Duration::from_millis(300));
    assert!(result_text(&agent, "c1").contains("was abandoned"));
    assert_eq!(result_text(&agent, "c2"), "cancelled");
    assert_every_call_answered_once(&agent);
    assert!(recorder.trace().last().unwrap().starts_with("agent_end"));
}

struct HangingHooks {
    in_context: bool,
}

#[async_trait]
impl LoopHooks for HangingHooks {
    async fn transform_context(
        &self,
        _history: &[Arc<Message>],
        _frame: keel_agent::RequestFrame<'_>,
    ) -> Result<ContextPlan, HookError> {
        if self.in_context {
            futures::future::pending::<()>().await;
        }
        Ok(ContextPlan::default())
    }

    async fn before_tool_call(&self, _call: &ToolCall) -> Result<ToolGate, HookError> {
        futures::future::pending::<()>().await;
        Ok(ToolGate::Allow)
    }
}

#[tokio::test(start_paused = true)]
async fn abort_inside_a_before_llm_hook() {
    let (agent, provider, _recorder) = agent_with(
        vec![text("never")],
        vec![],
        Some(Arc::new(HangingHooks { in_context: true })),
    );
    let settle = abort_after(&agent, Duration::from_millis(100)).await;
    assert_eq!(settle, Duration::ZERO);
    assert_eq!(provider.call_count(), 0);
    assert_eq!(history(&agent), ["user:go", "assistant:aborted"]);
}

#[tokio::test(start_paused = true)]
async fn abort_inside_a_before_tool_hook() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let (agent, _provider, _recorder) = agent_with(
        vec![call("c1", "echo", json!({})), text("never")],
        vec![tool.clone()],
        Some(Arc::new(HangingHooks { in_context: false })),
    );
    let settle = abort_after(&agent, Duration::from_millis(100)).await;
    assert_eq!(settle, Duration::ZERO);
    assert_eq!(tool.count(), 0);
    assert_every_call_answered_once(&agent);
}

#[tokio::test(start_paused = true)]
async fn abort_with_no_run_is_harmless_and_the_agent_runs_again() {
    let (agent, _provider, _recorder) = agent_with(
        vec![text("a").first_delay(Duration::from_secs(5)), text("b")],
        vec![],
        None,
    );
    agent.abort();
    abort_after(&agent, Duration::from_millis(10)).await;
    agent.prompt(vec![user("again")]).await.unwrap();
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:aborted",
            "user:again",
            "assistant:stop"
        ]
    );
}
