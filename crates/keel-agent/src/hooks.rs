//! The seams of the loop: what a host can decide at each point of a step.
//!
//! [`LoopHooks`] is the loop-level contract (pi's callbacks). The turn runner implements
//! it on top of its eight hook kinds; tests and simple embedders implement it directly.
//! Every method has a neutral default so an implementation names only what it changes.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{AssistantMessage, Message, ToolCall};

use crate::tool::ToolOutput;

/// Where the loop stands when it polls for steering (DESIGN §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// More steps follow (tool results to answer or messages queued): steering joins them.
    MidTurn,
    /// The run would end here: a host may withhold user steering so it becomes a new
    /// request instead of extending an answered turn.
    Exit,
}

/// A hook failed; fail-closed points turn this into a failed model call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    /// What went wrong.
    pub message: String,
}

impl HookError {
    /// A hook error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// What to do about the model call of this step.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum CallAction {
    /// Call the model.
    #[default]
    Call,
    /// Do not call the model; end the run here.
    Skip,
    /// Answer with this message instead of calling the model.
    Respond(Box<AssistantMessage>),
    /// Abort the call; the run ends as aborted with this reason.
    Abort(String),
}

/// The outcome of preparing the context for one model call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContextPlan {
    /// Replace the whole history persistently (compaction).
    pub replace_history: Option<Vec<Arc<Message>>>,
    /// Messages appended to history before the call (hidden reminders).
    pub append: Vec<Message>,
    /// Send these messages instead of the history, for this request only.
    pub request_messages: Option<Vec<Arc<Message>>>,
    /// Whether and how to make the call.
    pub action: CallAction,
    /// The most output tokens this request may ask for (context management shrinks it to
    /// what the window leaves); `None` keeps the configured value.
    pub max_tokens: Option<u32>,
}

/// What a request will carry besides its messages, and why it is being prepared again.
#[derive(Debug, Clone, Copy)]
pub struct RequestFrame<'a> {
    /// The system prompt.
    pub system_prompt: &'a str,
    /// The tool definitions.
    pub tools: &'a [keel_protocol::ToolDefinition],
    /// Set when the provider rejected the previous request of this step as too long: the
    /// call is prepared once more, so the context can be made to fit.
    pub overflow: Option<&'a keel_protocol::ErrorInfo>,
}

/// What to do with a finished model response, decided before its `message_end`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ResponseDecision {
    /// Keep it.
    #[default]
    Accept,
    /// Replace its visible text.
    ReplaceText(String),
    /// Discard it: strip its tool calls and ask the model again with this prompt.
    Retry {
        /// Hidden user message asking for a new answer.
        prompt: String,
    },
    /// Fail the run: strip its tool calls and mark it as an error.
    Fail {
        /// Stable code for the failure.
        code: keel_protocol::FailureCode,
        /// What went wrong.
        message: String,
    },
}

/// Who blocked a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockSource {
    /// A hook or extension.
    Hook,
    /// The permission gate.
    Permission,
}

/// The verdict on one tool call before it runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolGate {
    /// Run it.
    #[default]
    Allow,
    /// Do not run it; the model gets an error result with `reason`.
    Block {
        /// Why, for the model.
        reason: String,
        /// Who decided.
        source: BlockSource,
    },
    /// Do not run it, stop the rest of the batch, and make no further model call.
    Terminate {
        /// Why, for the model.
        reason: String,
    },
    /// Run it with these arguments instead of the model's (a user hook changed the
    /// input); later hooks judge the new arguments, which are validated again.
    Rewrite {
        /// The arguments the tool receives.
        arguments: serde_json::Value,
    },
}

/// What the loop knows at the end of a step.
#[derive(Debug, Clone)]
pub struct StepSummary {
    /// The step's assistant message (absent when a hook skipped the call).
    pub message: Option<Arc<Message>>,
    /// Its tool results, in call order.
    pub tool_results: Vec<Arc<Message>>,
}

/// The loop's seams. All methods may be called concurrently with nothing else of the same
/// run: the loop awaits each before going on.
#[async_trait]
pub trait LoopHooks: Send + Sync {
    /// Prepares the context of a model call (where before-LLM hooks run). An error aborts
    /// this call: never send a context that was not prepared.
    async fn transform_context(
        &self,
        _history: &[Arc<Message>],
        _frame: RequestFrame<'_>,
    ) -> Result<ContextPlan, HookError> {
        Ok(ContextPlan::default())
    }

    /// Whether a request the provider rejects as too long (`context_overflow`) should be
    /// prepared and sent once more: true when something in `transform_context` can shrink
    /// the context.
    fn recovers_overflow(&self) -> bool {
        false
    }

    /// Judges a finished response before its `message_end`.
    async fn after_response(
        &self,
        _message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError> {
        Ok(ResponseDecision::Accept)
    }

    /// Admits or blocks one validated tool call. An error blocks the call.
    async fn before_tool_call(&self, _call: &ToolCall) -> Result<ToolGate, HookError> {
        Ok(ToolGate::Allow)
    }

    /// Observes a call that was admitted, right before it runs.
    async fn on_tool_execution_start(&self, _call: &ToolCall) {}

    /// Rewrites a call's output. An error keeps the output as it was and marks it failed.
    async fn after_tool_call(
        &self,
        _call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        Ok(output)
    }

    /// Whether to end after this step without polling steering.
    async fn should_stop_after_step(&self, _step: &StepSummary) -> bool {
        false
    }

    /// Whether to end after steering was polled, without another model call.
    async fn should_stop_after_steering(&self, _step: &StepSummary) -> bool {
        false
    }

    /// Steering from outside the agent (the host), polled after the agent's own queue.
    /// Each inner list was sent together and is injected as one batch.
    async fn poll_steering(&self, _boundary: Boundary) -> Vec<Vec<Message>> {
        Vec::new()
    }
}

/// Hooks that change nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl LoopHooks for NoHooks {}
