//! The turn runner's eight hook kinds, one test per contract.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_agent::runner::{
    AfterLlmCallHook, AfterToolCallHook, BeforeLlmAction, BeforeLlmCallHook, BeforeToolCallHook,
    HistoryChangedHook, LlmCallPreparedHook, LlmCallView, StepEndHook, StepQueue,
    ToolExecutionStartHook,
};
use keel_agent::{
    BlockSource, ExecutionMode, HookError, ResponseDecision, StepSummary, ToolGate, ToolOutput,
    TurnContext,
};
use keel_llm::LlmRequest;
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{AssistantMessage, Message, ToolCall, TurnOutcome, UserMessage};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::runner_support::*;
use crate::support::{Behaviour, TestTool, short, text};

type Hook<T> = Arc<T>;

struct BeforeLlm<F>(F);
#[async_trait]
impl<F> BeforeLlmCallHook for BeforeLlm<F>
where
    F: Fn(&LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> + Send + Sync,
{
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        (self.0)(view)
    }
}

fn before_llm(
    f: impl Fn(&LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> + Send + Sync + 'static,
) -> Hook<dyn BeforeLlmCallHook> {
    Arc::new(BeforeLlm(f))
}

struct AfterLlm<F>(F);
#[async_trait]
impl<F> AfterLlmCallHook for AfterLlm<F>
where
    F: Fn(&AssistantMessage) -> Result<ResponseDecision, HookError> + Send + Sync,
{
    async fn after_llm_call(
        &self,
        _turn: &TurnContext,
        message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError> {
        (self.0)(message)
    }
}

fn after_llm(
    f: impl Fn(&AssistantMessage) -> Result<ResponseDecision, HookError> + Send + Sync + 'static,
) -> Hook<dyn AfterLlmCallHook> {
    Arc::new(AfterLlm(f))
}

fn history_of(result: &keel_agent::runner::TurnResult) -> Vec<String> {
    result.messages.iter().map(|m| short(m)).collect()
}

#[tokio::test]
async fn before_llm_error_fails_closed_without_calling_the_model() {
    let mut h = Harness::new(vec![text("never")]);
    h.hooks.before_llm_call = vec![before_llm(|_| {
        Err(HookError::new("reminder store offline"))
    })];
    let result = h.run("hi").await;
    assert_eq!(failed_code(&result.outcome), "before_llm_hook_failed");
    assert_eq!(h.provider.call_count(), 0);
}

#[tokio::test]
async fn before_llm_panic_fails_closed_too() {
    let mut h = Harness::new(vec![text("never")]);
    h.hooks.before_llm_call = vec![before_llm(|_| panic!("hook bug"))];
    let result = h.run("hi").await;
    assert_eq!(failed_code(&result.outcome), "before_llm_hook_failed");
    assert_eq!(h.provider.call_count(), 0);
}

#[tokio::test]
async fn append_message_stops_later_before_llm_hooks() {
    let mut h = Harness::new(vec![text("ok")]);
    let later_ran = Arc::new(AtomicUsize::new(0));
    let counter = later_ran.clone();
    h.hooks.before_llm_call = vec![
        before_llm(|_| Ok(BeforeLlmAction::Continue)),
        before_llm(|_| {
            let reminder = UserMessage::hidden_text("<system-reminder>x</system-reminder>");
            Ok(BeforeLlmAction::AppendMessage(Box::new(Message::User(
                reminder,
            ))))
        }),
        before_llm(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(BeforeLlmAction::Continue)
        }),
    ];
    let result = h.run("hi").await;
    assert_eq!(later_ran.load(Ordering::SeqCst), 0);
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "user:<system-reminder>x</system-reminder>",
            "assistant:stop"
        ]
    );
    assert_eq!(h.provider.requests()[0].messages.len(), 2);
}

#[tokio::test]
async fn replace_request_changes_only_the_request() {
    let mut h = Harness::new(vec![text("ok")]);
    h.hooks.before_llm_call = vec![before_llm(|view| {
        let mut messages = view.messages.to_vec();
        messages.push(Arc::new(Message::user_text("(remaining budget: 30 s)")));
        Ok(BeforeLlmAction::ReplaceRequest(messages))
    })];
    let result = h.run("hi").await;
    let request = &h.provider.requests()[0];
    assert_eq!(request.messages.len(), 2);
    assert_eq!(
        history_of(&result),
        ["user:hi", "assistant:stop"],
        "history unchanged"
    );
}

#[tokio::test]
async fn replace_history_is_persistent_and_not_handed_over_again() {
    let mut h = Harness::new(vec![text("ok")]);
    h.history = vec![
        Arc::new(Message::user_text("old 1")),
        Arc::new(Message::user_text("old 2")),
    ];
    h.hooks.before_llm_call = vec![before_llm(|view| {
        if view.messages.len() > 1 {
            Ok(BeforeLlmAction::ReplaceHistory(vec![Arc::new(
                Message::user_text("summary"),
            )]))
        } else {
            Ok(BeforeLlmAction::Continue)
        }
    })];
    let handed = Arc::new(Mutex::new(Vec::new()));
    h.hooks.on_history_changed = vec![Arc::new(Persist(handed.clone()))];
    h.run("hi").await;
    assert_eq!(h.provider.requests()[0].messages.len(), 1);
    assert_eq!(*handed.lock().unwrap(), ["user:hi", "assistant:stop"]);
}

#[tokio::test]
async fn respond_answers_without_a_model_call() {
    let mut h = Harness::new(vec![text("never")]);
    h.hooks.before_llm_call = vec![before_llm(|_| {
        Ok(BeforeLlmAction::Respond(Box::new(
            AssistantMessage::from_text("cached answer"),
        )))
    })];
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(h.provider.call_count(), 0);
    assert_eq!(
        result.messages[1].as_assistant().unwrap().text(),
        "cached answer"
    );
}

#[tokio::test]
async fn skip_ends_the_turn_without_a_model_call() {
    let mut h = Harness::new(vec![text("never")]);
    h.hooks.before_llm_call = vec![before_llm(|_| Ok(BeforeLlmAction::Skip))];
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(h.provider.call_count(), 0);
    assert_eq!(history_of(&result), ["user:hi"]);
}

#[tokio::test]
async fn abort_decision_ends_the_turn_aborted() {
    let mut h = Harness::new(vec![text("never")]);
    h.hooks.before_llm_call = vec![before_llm(|_| {
        Ok(BeforeLlmAction::Abort("budget exhausted".into()))
    })];
    let result = h.run("hi").await;
    assert_eq!(
        result.outcome,
        TurnOutcome::Aborted {
            reason: Some("budget exhausted".into())
        }
    );
}

struct Prepared(Arc<Mutex<Vec<Option<u32>>>>, bool);
#[async_trait]
impl LlmCallPreparedHook for Prepared {
    async fn on_llm_call_prepared(
        &self,
        _turn: &TurnContext,
        request: &LlmRequest,
        _origin: &keel_agent::runner::RequestOrigin,
    ) -> Result<(), HookError> {
        self.0.lock().unwrap().push(request.options.max_tokens);
        if self.1 {
            Err(HookError::new("report disk full"))
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn prepared_hooks_see_the_final_request_and_cannot_break_it() {
    let mut h = Harness::new(vec![text("ok")]);
    h.defaults.stream.host_max_output = Some(4096);
    let seen = Arc::new(Mutex::new(Vec::new()));
    h.hooks.on_llm_call_prepared = vec![
        Arc::new(Prepared(seen.clone(), true)),
        Arc::new(Prepared(seen.clone(), false)),
    ];
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(*seen.lock().unwrap(), [Some(4096), Some(4096)]);
    assert_eq!(result.degradations, 1);
}

#[tokio::test]
async fn after_llm_retry_strips_tool_calls_and_asks_again() {
    let mut h = Harness::new(vec![
        ScriptedResponse::text("I'll delete it").with_tool_call("c1", "echo", json!({})),
        text("better answer"),
    ]);
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    h.tools = vec![tool.clone()];
    let rejected = AtomicUsize::new(0);
    h.hooks.after_llm_call = vec![after_llm(move |m| {
        if m.text().contains("delete") && rejected.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(ResponseDecision::Retry {
                prompt: "Do not delete; answer again.".into(),
            })
        } else {
            Ok(ResponseDecision::Accept)
        }
    })];
    let result = h.run("hi").await;
    assert_eq!(tool.count(), 0, "the rejected answer had no side effects");
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:stop",
            "user:Do not delete; answer again.",
            "assistant:stop"
        ]
    );
    assert!(!result.messages[1].as_assistant().unwrap().has_tool_calls());
}

#[tokio::test]
async fn after_llm_fail_strips_tool_calls_and_fails_the_turn() {
    let mut h = Harness::new(vec![
        ScriptedResponse::text("").with_tool_call("c1", "echo", json!({})),
        text("never"),
    ]);
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    h.tools = vec![tool.clone()];
    h.hooks.after_llm_call = vec![after_llm(|_| {
        Ok(ResponseDecision::Fail {
            code: keel_protocol::FailureCode::TerminalEmpty,
            message: "empty again".into(),
        })
    })];
    let result = h.run("hi").await;
    assert_eq!(tool.count(), 0);
    assert_eq!(failed_code(&result.outcome), "terminal_empty");
}

#[tokio::test]
async fn after_llm_replace_text_chains_and_errors_only_degrade() {
    let mut h = Harness::new(vec![text("see [1]")]);
    h.hooks.after_llm_call = vec![
        after_llm(|m| {
            Ok(ResponseDecision::ReplaceText(
                m.text().replace("[1]", "[source: a.rs]"),
            ))
        }),
        after_llm(|_| Err(HookError::new("flaky"))),
        after_llm(|m| Ok(ResponseDecision::ReplaceText(format!("{}.", m.text())))),
    ];
    let result = h.run("hi").await;
    assert_eq!(
        result.messages[1].as_assistant().unwrap().text(),
        "see [source: a.rs]."
    );
    assert_eq!(result.degradations, 1);
}

struct Gate;
#[async_trait]
impl BeforeToolCallHook for Gate {
    async fn before_tool_call(
        &self,
        _turn: &TurnContext,
        call: &ToolCall,
    ) -> Result<ToolGate, HookError> {
        if call.id.as_str() == "c2" {
            Ok(ToolGate::Block {
                reason: "denied by rule `bash: rm *`".into(),
                source: BlockSource::Permission,
            })
        } else {
            Ok(ToolGate::Allow)
        }
    }
}

struct Suffix(&'static str);
#[async_trait]
impl AfterToolCallHook for Suffix {
    async fn after_tool_call(
        &self,
        _turn: &TurnContext,
        _call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        if self.0 == "!" {
            return Err(HookError::new("rewrite failed"));
        }
        let text = output.content[0].as_text().unwrap_or_default().to_owned();
        Ok(ToolOutput::text(format!("{text}{}", self.0)))
    }
}

struct Starts(Arc<Mutex<Vec<String>>>);
#[async_trait]
impl ToolExecutionStartHook for Starts {
    async fn on_tool_execution_start(&self, _turn: &TurnContext, call: &ToolCall) {
        self.0.lock().unwrap().push(call.id.to_string());
    }
}

#[tokio::test]
async fn tool_hooks_gate_observe_and_merge_rewrites_in_order() {
    let mut h = Harness::new(vec![
        ScriptedResponse::new()
            .with_tool_call("c1", "echo", json!({}))
            .with_tool_call("c2", "echo", json!({})),
        text("ok"),
    ]);
    h.tools = vec![TestTool::new(
        "echo",
        ExecutionMode::Parallel,
        Behaviour::Echo,
    )];
    let starts = Arc::new(Mutex::new(Vec::new()));
    h.hooks.before_tool_call = vec![Arc::new(Gate)];
    h.hooks.on_tool_execution_start = vec![Arc::new(Starts(starts.clone()))];
    h.hooks.after_tool_call = vec![
        Arc::new(Suffix(" +a")),
        Arc::new(Suffix("!")),
        Arc::new(Suffix(" +b")),
    ];
    let result = h.run("hi").await;
    let texts: Vec<String> = result
        .messages
        .iter()
        .filter_map(|m| m.as_tool_result())
        .map(|r| r.text())
        .collect();
    assert_eq!(
        texts,
        [
            "echo: {} +a +b",
            "Blocked by permissions: denied by rule `bash: rm *`"
        ]
    );
    assert_eq!(*starts.lock().unwrap(), ["c1"], "only admitted calls start");
    assert_eq!(result.degradations, 1);
}

struct Persist(Arc<Mutex<Vec<String>>>);
#[async_trait]
impl HistoryChangedHook for Persist {
    async fn on_history_changed(
        &self,
        _turn: &TurnContext,
        messages: &[Arc<Message>],
    ) -> Result<(), HookError> {
        self.0
            .lock()
            .unwrap()
            .extend(messages.iter().map(|m| short(m)));
        Ok(())
    }
}

#[tokio::test]
async fn history_is_handed_over_once_in_order() {
    let mut h = Harness::echo_then_done();
    let handed = Arc::new(Mutex::new(Vec::new()));
    h.hooks.on_history_changed = vec![Arc::new(Persist(handed.clone()))];
    let result = h.run("hi").await;
    assert_eq!(*handed.lock().unwrap(), history_of(&result));
}

struct StepEnd {
    fail: bool,
    queued: AtomicUsize,
}
#[async_trait]
impl StepEndHook for StepEnd {
    async fn on_step_end(
        &self,
        _turn: &TurnContext,
        step: &StepSummary,
        queue: &StepQueue,
    ) -> Result<(), HookError> {
        if self.fail {
            return Err(HookError::new("metrics backend down"));
        }
        if step.tool_results.is_empty() && self.queued.fetch_add(1, Ordering::SeqCst) == 0 {
            queue.follow_up(Message::User(UserMessage::hidden_text(
                "todo list is unfinished",
            )));
        }
        Ok(())
    }
}

#[tokio::test]
async fn step_end_errors_only_degrade_and_step_end_may_enqueue() {
    let mut h = Harness::new(vec![text("first"), text("second")]);
    h.hooks.on_step_end = vec![
        Arc::new(StepEnd {
            fail: true,
            queued: AtomicUsize::new(0),
        }),
        Arc::new(StepEnd {
            fail: false,
            queued: AtomicUsize::new(0),
        }),
    ];
    let result = h.run("hi").await;
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(
        history_of(&result),
        [
            "user:hi",
            "assistant:stop",
            "user:todo list is unfinished",
            "assistant:stop"
        ]
    );
    assert_eq!(result.degradations, 2);
}

#[tokio::test]
async fn a_discarded_compaction_does_not_move_the_history_cursor() {
    let mut h = Harness::new(vec![text("never")]);
    h.history = vec![
        Arc::new(Message::user_text("old 1")),
        Arc::new(Message::user_text("old 2")),
    ];
    h.hooks.before_llm_call = vec![
        before_llm(|_| {
            Ok(BeforeLlmAction::ReplaceHistory(vec![Arc::new(
                Message::user_text("summary"),
            )]))
        }),
        before_llm(|_| Err(HookError::new("reminder store offline"))),
    ];
    let handed = Arc::new(Mutex::new(Vec::new()));
    h.hooks.on_history_changed = vec![Arc::new(Persist(handed.clone()))];
    let result = h.run("hi").await;
    assert_eq!(failed_code(&result.outcome), "before_llm_hook_failed");
    assert_eq!(
        *handed.lock().unwrap(),
        ["user:hi", "assistant:error"],
        "nothing handed over twice"
    );
}
