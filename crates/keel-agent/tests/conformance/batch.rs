//! Tool batches: ordering, concurrency, validation, and every way a call can fail.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{BlockSource, ExecutionMode, HookError, LoopHooks, ToolGate, ToolOutput};
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{AgentEvent, StopReason, StreamEvent, ToolCall};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

fn end_order(recorder: &Recorder) -> Vec<String> {
    recorder
        .all()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => Some(tool_call_id.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn parallel_batch_ends_in_completion_order_and_appends_in_call_order() {
    let tool = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "sleep", json!({"ms": 300}))
        .with_tool_call("c2", "sleep", json!({"ms": 100}))
        .with_tool_call("c3", "sleep", json!({"ms": 200}));
    let (agent, _provider, recorder) =
        agent_with(vec![response, text("ok")], vec![tool.clone()], None);
    let started = tokio::time::Instant::now();
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(end_order(&recorder), ["c2", "c3", "c1"]);
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:tool_use",
            "result:c1",
            "result:c2",
            "result:c3",
            "assistant:stop"
        ]
    );
    assert_eq!(tool.overlap(None), 3);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(300),
        "the three calls overlapped"
    );
}

#[tokio::test(start_paused = true)]
async fn one_sequential_tool_makes_the_whole_batch_sequential() {
    let fast = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let seq = TestTool::new("seq", ExecutionMode::Sequential, Behaviour::Sleep);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "sleep", json!({"ms": 300}))
        .with_tool_call("c2", "seq", json!({"ms": 10}))
        .with_tool_call("c3", "sleep", json!({"ms": 100}));
    let (agent, _provider, recorder) =
        agent_with(vec![response, text("ok")], vec![fast.clone(), seq], None);
    let started = tokio::time::Instant::now();
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(end_order(&recorder), ["c1", "c2", "c3"]);
    assert_eq!(fast.overlap(None), 1);
    assert_eq!(started.elapsed(), Duration::from_millis(410));
}

#[tokio::test(start_paused = true)]
async fn mutating_calls_on_one_file_never_overlap_in_a_parallel_batch() {
    let tool = TestTool::mutating("patch", ExecutionMode::Parallel);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "patch", json!({"path": "/w/a.rs", "ms": 100}))
        .with_tool_call("c2", "patch", json!({"path": "/w/b.rs", "ms": 150}))
        .with_tool_call("c3", "patch", json!({"path": "/w/x/../a.rs", "ms": 100}))
        .with_tool_call("c4", "patch", json!({"path": "/w/./a.rs", "ms": 100}));
    let (agent, _provider, recorder) =
        agent_with(vec![response, text("ok")], vec![tool.clone()], None);
    let started = tokio::time::Instant::now();
    agent.prompt(vec![user("go")]).await.unwrap();
    // a.rs is changed three times, one after another, in call order; b.rs alongside.
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    assert_eq!(end_order(&recorder), ["c1", "c2", "c3", "c4"]);
    assert_eq!(tool.overlap(Some("/w/b.rs")), 1);
    assert_eq!(tool.overlap(Some("/w/a.rs")), 1);
}

#[tokio::test]
async fn invalid_arguments_name_every_problem_and_echo_what_was_sent() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let response = ScriptedResponse::new()
        .with_tool_call(
            "c1",
            "echo",
            json!({"ms": "soon", "path": 3, "bogus": true}),
        )
        .with_raw_tool_call("c2", "echo", "{\"ms\": 1,");
    let (agent, _provider, _recorder) =
        agent_with(vec![response, text("ok")], vec![tool.clone()], None);
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(tool.count(), 0);
    let first = result_text(&agent, "c1");
    assert!(
        first.starts_with("Invalid arguments for tool `echo`:"),
        "{first}"
    );
    assert!(first.contains("/ms"), "{first}");
    assert!(first.contains("/path"), "{first}");
    assert!(first.contains("bogus"), "{first}");
    assert!(
        // Echoed as the model sent them (key order kept or sorted, by serde_json's build).
        first.contains("Arguments received: {\"ms\":\"soon\",\"path\":3,\"bogus\":true}")
            || first.contains("Arguments received: {\"bogus\":true,\"ms\":\"soon\",\"path\":3}"),
        "{first}"
    );
    let second = result_text(&agent, "c2");
    assert!(second.contains("not valid JSON"), "{second}");
    assert!(
        second.contains("Arguments received: {\"ms\": 1,"),
        "{second}"
    );
}

#[tokio::test]
async fn unknown_tool_lists_the_available_ones() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let (agent, _provider, _recorder) = agent_with(
        vec![call("c1", "ehco", json!({})), text("ok")],
        vec![tool],
        None,
    );
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(
        result_text(&agent, "c1"),
        "Tool `ehco` does not exist. Available tools: echo."
    );
}

#[tokio::test]
async fn tool_error_and_panic_become_error_results_and_the_loop_goes_on() {
    let fail = TestTool::new("fail", ExecutionMode::Parallel, Behaviour::Fail);
    let boom = TestTool::new("boom", ExecutionMode::Parallel, Behaviour::Panic);
    let response = ScriptedResponse::new()
        .with_tool_call("c1", "fail", json!({}))
        .with_tool_call("c2", "boom", json!({}));
    let (agent, provider, _recorder) =
        agent_with(vec![response, text("recovered")], vec![fail, boom], None);
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(result_text(&agent, "c1"), "disk on fire");
    assert_eq!(
        result_text(&agent, "c2"),
        "Tool `boom` crashed: tool exploded"
    );
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:tool_use",
            "result:c1!",
            "result:c2!",
            "assistant:stop"
        ]
    );
    assert_eq!(provider.call_count(), 2);
}

#[tokio::test]
async fn length_stop_with_tool_calls_runs_none_and_asks_to_reissue() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let cut = ScriptedResponse::new()
        .with_tool_call("c1", "echo", json!({}))
        .with_tool_call("c2", "echo", json!({}))
        .stop_reason(StopReason::Length);
    let (agent, provider, _recorder) = agent_with(
        vec![cut, call("c3", "echo", json!({})), text("ok")],
        vec![tool.clone()],
        None,
    );
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(tool.count(), 1, "only the re-issued call ran");
    assert!(result_text(&agent, "c1").contains("Re-issue the call"));
    assert!(result_text(&agent, "c2").contains("output token limit"));
    assert_eq!(provider.call_count(), 3);
}

struct Gate;

#[async_trait]
impl LoopHooks for Gate {
    async fn before_tool_call(&self, call: &ToolCall) -> Result<ToolGate, HookError> {
        match call.id.as_str() {
            "c1" => Ok(ToolGate::Block {
                reason: "not today".into(),
                source: BlockSource::Hook,
            }),
            "c2" => Ok(ToolGate::Block {
                reason: "rule deny bash".into(),
                source: BlockSource::Permission,
            }),
            "c3" => Err(HookError::new("gate crashed")),
            "c4" => panic!("gate panicked"),
            _ => Ok(ToolGate::Allow),
        }
    }

    async fn after_tool_call(
        &self,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        if call.id.as_str() == "c5" {
            Ok(ToolOutput::text(format!(
                "rewritten({})",
                output.content[0].as_text().unwrap()
            )))
        } else {
            Ok(output)
        }
    }
}

#[tokio::test]
async fn blocked_calls_fail_closed_and_after_hooks_rewrite() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let mut response = ScriptedResponse::new();
    for id in ["c1", "c2", "c3", "c4", "c5"] {
        response = response.with_tool_call(id, "echo", json!({}));
    }
    let (agent, _provider, _recorder) = agent_with(
        vec![response, text("ok")],
        vec![tool.clone()],
        Some(Arc::new(Gate)),
    );
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(tool.count(), 1);
    assert_eq!(result_text(&agent, "c1"), "Blocked by hook: not today");
    assert_eq!(
        result_text(&agent, "c2"),
        "Blocked by permissions: rule deny bash"
    );
    assert!(result_text(&agent, "c3").contains("gate crashed"));
    assert!(result_text(&agent, "c4").contains("panicked: gate panicked"));
    assert_eq!(result_text(&agent, "c5"), "rewritten(echo: {})");
}

/// The calls of `message` as `(id, arguments)`.
fn calls_of(message: &keel_protocol::Message) -> Vec<(String, serde_json::Value)> {
    message
        .as_assistant()
        .unwrap()
        .tool_calls()
        .map(|c| (c.id.to_string(), c.arguments.clone()))
        .collect()
}

#[tokio::test]
async fn an_id_reused_in_a_later_step_is_renamed_and_not_run() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let (agent, _provider, recorder) = agent_with(
        vec![
            call("dup", "echo", json!({})),
            call("dup", "echo", json!({})),
            text("ok"),
        ],
        vec![tool.clone()],
        None,
    );
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(tool.count(), 1);
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:tool_use",
            "result:dup",
            "assistant:tool_use",
            "result:dup~2!",
            "assistant:stop"
        ]
    );
    assert_eq!(
        result_text(&agent, "dup~2"),
        "Duplicate tool call id `dup` in this turn; this call was not run (it was renamed \
         `dup~2` so that every call keeps its own result). Issue it again with a new id."
    );
    let trace = recorder.trace();
    assert!(
        trace.contains(&"tool_start(dup~2)".to_owned())
            && trace.contains(&"tool_end(dup~2, error)".to_owned()),
        "{trace:?}"
    );
}

/// Regression: two calls with one id in one response ran as one garbled call for front ends
/// keyed by id, and history held two results for one id.
#[tokio::test]
async fn two_calls_with_one_id_in_a_response_each_get_their_own_id_and_result() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let both = ScriptedResponse::new()
        .with_tool_call("dup", "echo", json!({"text": "one"}))
        .with_tool_call("dup", "echo", json!({"text": "two"}));
    let (agent, provider, recorder) = agent_with(vec![both, text("ok")], vec![tool.clone()], None);
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(tool.count(), 1, "the duplicate did not run");
    let messages = agent.messages();
    assert_eq!(
        calls_of(&messages[1]),
        [
            ("dup".to_owned(), json!({"text": "one"})),
            ("dup~2".to_owned(), json!({"text": "two"}))
        ]
    );
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:tool_use",
            "result:dup",
            "result:dup~2!",
            "assistant:stop"
        ]
    );
    assert_eq!(result_text(&agent, "dup"), r#"echo: {"text":"one"}"#);
    assert!(
        result_text(&agent, "dup~2").starts_with("Duplicate tool call id `dup` in this turn"),
        "{}",
        result_text(&agent, "dup~2")
    );
    // The renamed id is what streamed: no event ever names the duplicate twice.
    let streamed: Vec<String> = recorder
        .all()
        .iter()
        .filter_map(|event| match event {
            AgentEvent::MessageUpdate {
                event: StreamEvent::ToolCallStart { id, .. },
                ..
            } => Some(id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, ["dup", "dup~2"]);
    let trace: Vec<String> = recorder
        .trace()
        .into_iter()
        .filter(|t| t.starts_with("tool_"))
        .collect();
    assert_eq!(
        trace,
        [
            "tool_start(dup)",
            "tool_start(dup~2)",
            "tool_end(dup~2, error)",
            "tool_end(dup)"
        ]
    );
    // The next request carries well-formed history: two calls, two results, distinct ids.
    let requests = provider.requests();
    let ids: Vec<String> = requests[1]
        .messages
        .iter()
        .flat_map(|m| match m.as_ref() {
            keel_protocol::Message::Assistant(a) => {
                a.tool_calls().map(|c| c.id.to_string()).collect::<Vec<_>>()
            }
            keel_protocol::Message::ToolResult(r) => vec![format!("result {}", r.tool_call_id)],
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(ids, ["dup", "dup~2", "result dup", "result dup~2"]);
}

#[tokio::test]
async fn progress_updates_are_forwarded() {
    let tool = TestTool::new("prog", ExecutionMode::Parallel, Behaviour::Progress);
    let (agent, _provider, recorder) = agent_with(
        vec![call("c1", "prog", json!({})), text("ok")],
        vec![tool],
        None,
    );
    agent.prompt(vec![user("go")]).await.unwrap();
    let trace = recorder.trace();
    let updates = trace.iter().filter(|t| *t == "tool_update(c1)").count();
    assert_eq!(updates, 2, "{trace:?}");
    let start = trace.iter().position(|t| t == "tool_start(c1)").unwrap();
    let end = trace.iter().position(|t| t == "tool_end(c1)").unwrap();
    assert!(trace[start..end].iter().any(|t| t == "tool_update(c1)"));
}

#[tokio::test]
async fn duplicate_tool_names_and_bad_schemas_are_refused() {
    use keel_agent::{Agent, AgentOptions};
    let a = TestTool::new("same", ExecutionMode::Parallel, Behaviour::Echo);
    let b = TestTool::new("same", ExecutionMode::Parallel, Behaviour::Echo);
    let provider = keel_llm::scripted::ScriptedProvider::new();
    let options = AgentOptions::new(model(), Arc::new(provider)).tools(vec![a, b]);
    let err = Agent::new(options).err().unwrap();
    assert_eq!(err.code(), "duplicate_tool");
}
