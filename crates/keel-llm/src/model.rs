//! Model entries: what keel knows about one model of one provider.

use serde::{Deserialize, Serialize};

use crate::request::{ModelSpec, ThinkingLevel};

/// The four wire APIs keel speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[non_exhaustive]
pub enum Api {
    /// Anthropic Messages (also MiniMax's and others' Anthropic-compatible endpoints).
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    /// OpenAI Chat Completions (and every OpenAI-compatible server).
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    /// OpenAI Responses.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Google Generative AI (Gemini).
    #[serde(rename = "google-generative-ai")]
    GoogleGenerativeAi,
}

impl Api {
    /// The API's stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AnthropicMessages => "anthropic-messages",
            Self::OpenAiCompletions => "openai-completions",
            Self::OpenAiResponses => "openai-responses",
            Self::GoogleGenerativeAi => "google-generative-ai",
        }
    }
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Uncached input.
    #[serde(default)]
    pub input: f64,
    /// Output (reasoning included).
    #[serde(default)]
    pub output: f64,
    /// Cache reads.
    #[serde(default)]
    pub cache_read: f64,
    /// Cache writes.
    #[serde(default)]
    pub cache_write: f64,
}

/// What a model can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Accepts tool definitions.
    #[serde(default = "yes")]
    pub tools: bool,
    /// Accepts images.
    #[serde(default)]
    pub images: bool,
    /// Can reason; `thinking_levels` lists the efforts it accepts.
    #[serde(default)]
    pub reasoning: bool,
    /// Reasoning efforts the model accepts.
    #[serde(default)]
    #[schemars(schema_with = "thinking_levels")]
    pub thinking_levels: Vec<ThinkingLevel>,
}

/// `thinking_levels`: the level names (the protocol's enum carries no schema).
fn thinking_levels(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = ThinkingLevel::ALL.iter().map(|l| l.name()).collect();
    schemars::json_schema!({"type": "array", "items": {"type": "string", "enum": names}})
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            tools: true,
            images: false,
            reasoning: false,
            thinking_levels: Vec::new(),
        }
    }
}

fn yes() -> bool {
    true
}

/// Quirks of OpenAI-compatible servers (ignored by the other APIs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Compat {
    /// Send `max_completion_tokens` instead of `max_tokens`.
    #[serde(default)]
    pub max_completion_tokens: bool,
    /// Ask for reasoning as separate incremental `reasoning_details` (MiniMax
    /// `reasoning_split`).
    #[serde(default)]
    pub reasoning_split: bool,
    /// The server may put reasoning inline as `<think>…</think>` in the content.
    #[serde(default)]
    pub think_tags: bool,
    /// The server does not accept `stream_options.include_usage`.
    #[serde(default)]
    pub no_stream_usage: bool,
}

/// One model of one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Provider name (`anthropic`, `minimax`, `ollama`, …).
    pub provider: String,
    /// Model id sent on the wire.
    pub id: String,
    /// Wire API.
    pub api: Api,
    /// Base URL, without the API's path (for example `https://api.anthropic.com`).
    pub base_url: String,
    /// Context window in tokens.
    pub context_window: u32,
    /// Largest output in tokens.
    pub max_output: u32,
    /// Prices.
    #[serde(default)]
    pub prices: Prices,
    /// Capabilities.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// OpenAI-compatible quirks.
    #[serde(default)]
    pub compat: Compat,
    /// Headers sent with every request to this model.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

impl ModelEntry {
    /// The light spec the loop carries.
    pub fn spec(&self) -> ModelSpec {
        ModelSpec {
            provider: self.provider.clone(),
            api: self.api.as_str().to_owned(),
            id: self.id.clone(),
            context_window: self.context_window,
            max_output: self.max_output,
            reasoning: self.capabilities.reasoning,
        }
    }
}
