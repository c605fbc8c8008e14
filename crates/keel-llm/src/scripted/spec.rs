//! Scripted responses as JSON, for scripts kept in files (`keel exec --mock-script`).

use std::time::Duration;

use keel_protocol::{ErrorCode, StopReason, Usage};
use serde::Deserialize;

use super::ScriptedResponse;

/// A scripted response as JSON, for scripts kept in files (`keel exec --mock-script`).
/// Blocks stream in the order thinking, text, tool calls.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseSpec {
    /// Reasoning text.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Answer text.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallSpec>,
    /// Forced stop reason.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Characters per delta.
    #[serde(default)]
    pub chunk_size: Option<usize>,
    /// Milliseconds before the first event.
    #[serde(default)]
    pub first_delay_ms: Option<u64>,
    /// Milliseconds between later events.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Fail instead of finishing.
    #[serde(default)]
    pub error: Option<ErrorSpec>,
    /// Usage to report.
    #[serde(default)]
    pub usage: Option<Usage>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallSpec {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    /// Stable error code.
    pub code: ErrorCode,
    /// Message.
    pub message: String,
    /// Events sent before failing.
    #[serde(default)]
    pub after: usize,
    /// The wait the provider asks for before a retry.
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
}

impl From<ResponseSpec> for ScriptedResponse {
    fn from(spec: ResponseSpec) -> Self {
        let mut response = Self::new();
        if let Some(thinking) = spec.thinking {
            response = response.with_thinking(thinking, None);
        }
        if let Some(text) = spec.text {
            response = response.with_text(text);
        }
        for call in spec.tool_calls {
            let arguments = if call.arguments.is_null() {
                serde_json::json!({})
            } else {
                call.arguments
            };
            response = response.with_tool_call(&call.id, &call.name, arguments);
        }
        if let Some(stop_reason) = spec.stop_reason {
            response = response.stop_reason(stop_reason);
        }
        if let Some(size) = spec.chunk_size {
            response = response.chunk_size(size);
        }
        if let Some(ms) = spec.first_delay_ms {
            response = response.first_delay(Duration::from_millis(ms));
        }
        if let Some(ms) = spec.delay_ms {
            response = response.delay(Duration::from_millis(ms));
        }
        if let Some(usage) = spec.usage {
            response = response.usage(usage);
        }
        if let Some(error) = spec.error {
            response = response.fail_after(error.after, error.code, error.message);
            if let Some(ms) = error.retry_after_ms {
                response = response.retry_after(ms);
            }
        }
        response
    }
}
