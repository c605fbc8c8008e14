//! How an agent is configured.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_llm::{ModelSpec, RequestOptions, StreamFn};
use keel_protocol::{Message, MessageId};

use crate::hooks::{LoopHooks, NoHooks};
use crate::projection::DEFAULT_MIN_IMAGE_BYTES;
use crate::tool::ToolRef;
use crate::turn_context::TurnContext;

/// How long an aborted tool may take to stop before it is abandoned (issue 2).
pub const DEFAULT_ABORT_GRACE: Duration = Duration::from_secs(5);

/// Upper bound on any one hook or subscriber call, so none can wedge a run.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(120);

/// How many queued messages one poll delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// One queued batch per poll, so each gets its own model response (pi's default).
    #[default]
    OneAtATime,
    /// Everything queued, at once.
    All,
}

/// Supplies the API key for every model call, so short-lived tokens refresh between calls.
#[async_trait]
pub trait ApiKeySource: Send + Sync {
    /// The key for `provider`, if any.
    async fn api_key(&self, provider: &str) -> Option<String>;
}

/// Assigns message ids. The host owns ids; the default makes time-ordered UUIDs.
#[async_trait]
pub trait MessageIdSource: Send + Sync {
    /// An id for `message`, which is about to start.
    async fn assign(&self, message: &Message) -> MessageId;
}

/// Generates UUID v7 message ids.
#[derive(Debug, Default, Clone, Copy)]
pub struct GeneratedIds;

#[async_trait]
impl MessageIdSource for GeneratedIds {
    async fn assign(&self, _message: &Message) -> MessageId {
        MessageId::generate()
    }
}

/// Everything an [`crate::Agent`] is built from.
#[derive(Clone)]
pub struct AgentOptions {
    /// Target model.
    pub model: Arc<ModelSpec>,
    /// System prompt.
    pub system_prompt: Arc<str>,
    /// How model calls are made.
    pub stream_fn: Arc<dyn StreamFn>,
    /// Tools the model may call; names must be unique.
    pub tools: Vec<ToolRef>,
    /// Tools that join a run at its next model call.
    pub tool_additions: Option<crate::tools_table::ToolAdditions>,
    /// The loop's seams.
    pub hooks: Arc<dyn LoopHooks>,
    /// Options sent with every model call.
    pub request_options: RequestOptions,
    /// Fetches the API key before every call.
    pub api_keys: Option<Arc<dyn ApiKeySource>>,
    /// Assigns message ids.
    pub message_ids: Arc<dyn MessageIdSource>,
    /// The turn this agent serves, handed to tools.
    pub turn: Option<Arc<TurnContext>>,
    /// Initial history.
    pub messages: Vec<Arc<Message>>,
    /// Steering delivery.
    pub steering_mode: QueueMode,
    /// Follow-up delivery.
    pub follow_up_mode: QueueMode,
    /// Grace period for tools after an abort.
    pub abort_grace: Duration,
    /// Bound on each hook and subscriber call.
    pub hook_timeout: Duration,
    /// Images smaller than this are not sent to the model.
    pub min_image_bytes: usize,
    /// Cancelling this aborts every run at once, in the same instant: each run's own
    /// signal is its child, so no task has to forward the cancellation first.
    pub abort_on: Option<tokio_util::sync::CancellationToken>,
}

impl AgentOptions {
    /// Options with defaults for everything but the model and how to reach it.
    pub fn new(model: ModelSpec, stream_fn: Arc<dyn StreamFn>) -> Self {
        Self {
            model: Arc::new(model),
            system_prompt: Arc::from(""),
            stream_fn,
            tools: Vec::new(),
            tool_additions: None,
            hooks: Arc::new(NoHooks),
            request_options: RequestOptions::default(),
            api_keys: None,
            message_ids: Arc::new(GeneratedIds),
            turn: None,
            messages: Vec::new(),
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            abort_grace: DEFAULT_ABORT_GRACE,
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            min_image_bytes: DEFAULT_MIN_IMAGE_BYTES,
            abort_on: None,
        }
    }

    /// Sets the system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<Arc<str>>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Sets the tools.
    pub fn tools(mut self, tools: Vec<ToolRef>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the hooks.
    pub fn hooks(mut self, hooks: Arc<dyn LoopHooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Sets the initial history.
    pub fn messages(mut self, messages: Vec<Arc<Message>>) -> Self {
        self.messages = messages;
        self
    }
}
