//! What one model call asks for.

use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{Message, ToolDefinition};
use serde::{Deserialize, Serialize};

/// The model a request goes to and what it can take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Provider name, for example `anthropic`.
    pub provider: String,
    /// Wire API, for example `anthropic-messages`.
    pub api: String,
    /// Model id.
    pub id: String,
    /// Context window in tokens.
    pub context_window: u32,
    /// Largest output the model may produce, in tokens.
    pub max_output: u32,
    /// Whether the model can reason (thinking blocks).
    #[serde(default)]
    pub reasoning: bool,
}

impl ModelSpec {
    /// A model spec for tests and the scripted provider.
    pub fn scripted() -> Self {
        Self {
            provider: "scripted".into(),
            api: "scripted".into(),
            id: "scripted-model".into(),
            context_window: 200_000,
            max_output: 16_384,
            reasoning: true,
        }
    }
}

/// How hard the model should think (the protocol's one type).
pub use keel_protocol::ThinkingLevel;

/// How long the provider should keep the prompt cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CacheRetention {
    /// Do not ask for caching.
    None,
    /// The provider's short default.
    Short,
    /// The longest retention the provider offers.
    Long,
}

/// Per-call options. Each stream wrapper fills only the option it owns and leaves options
/// already set by an outer wrapper alone.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestOptions {
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Reasoning effort.
    pub thinking: Option<ThinkingLevel>,
    /// Prompt cache retention.
    pub cache_retention: Option<CacheRetention>,
    /// Extra HTTP headers.
    pub headers: Vec<(String, String)>,
    /// Session id, used as a prompt-cache key by some providers.
    pub session_id: Option<String>,
    /// API key, fetched again for every call so short-lived tokens refresh.
    pub api_key: Option<String>,
    /// Whole-request timeout.
    pub timeout: Option<Duration>,
}

/// One model call: system prompt, tools and messages, already projected for the model
/// (no host-only messages). Shared parts are `Arc`s so building a request does not copy
/// the history.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    /// Target model.
    pub model: Arc<ModelSpec>,
    /// System prompt.
    pub system_prompt: Arc<str>,
    /// Conversation, oldest first.
    pub messages: Arc<Vec<Arc<Message>>>,
    /// Tools the model may call.
    pub tools: Arc<[ToolDefinition]>,
    /// Call options.
    pub options: RequestOptions,
}
