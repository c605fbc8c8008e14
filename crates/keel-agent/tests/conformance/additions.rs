//! Tools that join a run at its next model call, and before-tool hooks that rewrite a
//! call's input.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{
    Agent, AgentOptions, ExecutionMode, HookError, LoopHooks, ToolAdditions, ToolGate, ToolOutput,
};
use keel_llm::scripted::ScriptedProvider;
use keel_protocol::{Message, ToolCall};
use serde_json::json;

use crate::support::{Behaviour, TestTool, call, model, result_text, text, user};

/// Adds the tool `late` after the first call ran, and tries to replace `echo`.
struct AddLate {
    additions: ToolAdditions,
}

#[async_trait]
impl LoopHooks for AddLate {
    async fn after_tool_call(
        &self,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        if call.id.as_str() == "c1" {
            self.additions.add([
                TestTool::new("late", ExecutionMode::Parallel, Behaviour::Echo)
                    as keel_agent::ToolRef,
                TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Sleep)
                    as keel_agent::ToolRef,
            ]);
        }
        Ok(output)
    }
}

#[tokio::test]
async fn added_tools_join_at_the_next_call_and_never_replace_one() {
    let echo = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let provider = ScriptedProvider::with_responses(vec![
        call("c1", "echo", json!({})),
        call("c2", "late", json!({"text": "one"})),
        call("c3", "echo", json!({"text": "again"})),
        text("done"),
    ]);
    let additions = ToolAdditions::default();
    let mut options = AgentOptions::new(model(), Arc::new(provider.clone()))
        .tools(vec![echo.clone()])
        .hooks(Arc::new(AddLate {
            additions: additions.clone(),
        }));
    options.tool_additions = Some(additions);
    options.abort_grace = Duration::from_millis(300);
    let agent = Agent::new(options).unwrap();
    agent.prompt(vec![user("go")]).await.unwrap();
    let requests = provider.requests();
    let names =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(names(0), ["echo"]);
    assert_eq!(names(1), ["echo", "late"]);
    assert!(
        result_text(&agent, "c2").starts_with("echo: "),
        "{}",
        result_text(&agent, "c2")
    );
    // The added `echo` did not replace the run's own.
    assert_eq!(echo.count(), 2);
    assert!(result_text(&agent, "c3").contains("again"));
}

/// Rewrites `c1`'s arguments.
struct Rewrite;

#[async_trait]
impl LoopHooks for Rewrite {
    async fn before_tool_call(&self, call: &ToolCall) -> Result<ToolGate, HookError> {
        Ok(match call.id.as_str() {
            "c1" => ToolGate::Rewrite {
                arguments: json!({"text": "changed"}),
            },
            _ => ToolGate::Allow,
        })
    }
}

#[tokio::test]
async fn a_rewritten_call_runs_with_the_new_arguments_and_history_keeps_the_models() {
    let echo = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let provider = ScriptedProvider::with_responses(vec![
        call("c1", "echo", json!({"text": "original"})),
        text("done"),
    ]);
    let options = AgentOptions::new(model(), Arc::new(provider.clone()))
        .tools(vec![echo.clone()])
        .hooks(Arc::new(Rewrite));
    let agent = Agent::new(options).unwrap();
    agent.prompt(vec![user("go")]).await.unwrap();
    let result = result_text(&agent, "c1");
    assert!(
        result.contains("changed") && !result.contains("original"),
        "{result}"
    );
    let sent = agent.messages().iter().find_map(|m| match m.as_ref() {
        Message::Assistant(a) => a.tool_calls().next().map(|c| c.arguments.clone()),
        _ => None,
    });
    assert_eq!(sent, Some(json!({"text": "original"})));
}
