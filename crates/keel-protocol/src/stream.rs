//! The one stream-event vocabulary every provider is decoded into.
//!
//! Events carry only what changed (a delta and the index of the content block it belongs
//! to), never the accumulated message: consumers that want the partial message fold the
//! events themselves, so the cost of one delta never grows with the length of the answer.

use serde::{Deserialize, Serialize};

use crate::error::ErrorInfo;
use crate::ids::ToolCallId;
use crate::message::StopReason;
use crate::usage::Usage;

/// Who answered: filled in once at the start of a response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResponseMeta {
    /// Provider name.
    pub provider: String,
    /// Wire API.
    pub api: String,
    /// Model id as the provider reported it.
    pub model: String,
    /// Provider's response id, when it sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
}

/// One event of a streamed model response. `index` is the content block's position in the
/// assistant message being built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// The response began.
    Start {
        /// Who is answering.
        meta: ResponseMeta,
    },
    /// A text block opened.
    TextStart {
        /// Block index.
        index: usize,
    },
    /// More text.
    TextDelta {
        /// Block index.
        index: usize,
        /// The new text.
        delta: String,
    },
    /// A text block closed.
    TextEnd {
        /// Block index.
        index: usize,
    },
    /// A thinking block opened.
    ThinkingStart {
        /// Block index.
        index: usize,
    },
    /// More reasoning.
    ThinkingDelta {
        /// Block index.
        index: usize,
        /// The new reasoning text.
        delta: String,
    },
    /// A thinking block closed.
    ThinkingEnd {
        /// Block index.
        index: usize,
        /// Provider signature of the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// The reasoning was redacted; `signature` holds the opaque payload.
        #[serde(default)]
        redacted: bool,
    },
    /// A tool call opened.
    ToolCallStart {
        /// Block index.
        index: usize,
        /// Call id.
        id: ToolCallId,
        /// Tool name.
        name: String,
    },
    /// More of the tool call's JSON arguments (partial JSON).
    ToolCallDelta {
        /// Block index.
        index: usize,
        /// The next fragment of argument JSON.
        delta: String,
    },
    /// A tool call closed; its arguments are complete.
    ToolCallEnd {
        /// Block index.
        index: usize,
    },
    /// The response finished.
    Done {
        /// Why it stopped.
        stop_reason: StopReason,
        /// Tokens and cost.
        usage: Usage,
    },
    /// Something about the request itself happened (a retry was scheduled, …); carries no
    /// content and is not visible output.
    Notice {
        /// What happened.
        notice: StreamNotice,
    },
    /// The response failed or was aborted.
    Error {
        /// `error` or `aborted`.
        stop_reason: StopReason,
        /// What went wrong.
        error: ErrorInfo,
        /// Tokens used before the failure, when known.
        #[serde(default)]
        usage: Usage,
    },
}

/// Transport events reported inside a response stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamNotice {
    /// A failed attempt will be retried after `delay_ms`.
    RetryScheduled {
        /// Retry number, from 1.
        attempt: u32,
        /// Retries allowed in all.
        max_retries: u32,
        /// Wait before the retry.
        delay_ms: u64,
        /// Why the attempt failed.
        error: ErrorInfo,
    },
    /// A retried request went through.
    Recovered {
        /// Retries it took.
        attempts: u32,
    },
    /// Retries were used up; the last error follows as the terminal event.
    RetriesExhausted {
        /// Retries made.
        attempts: u32,
    },
}

impl StreamEvent {
    /// Whether this event ends the stream.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Done { .. } | Self::Error { .. })
    }

    /// Whether this event makes output visible to the user (text, thinking or a tool call).
    pub fn is_visible_output(&self) -> bool {
        matches!(
            self,
            Self::TextStart { .. }
                | Self::TextDelta { .. }
                | Self::ThinkingStart { .. }
                | Self::ThinkingDelta { .. }
                | Self::ToolCallStart { .. }
                | Self::ToolCallDelta { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_tagged_by_type() {
        let event = StreamEvent::ToolCallDelta {
            index: 2,
            delta: "{\"a\"".into(),
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"type": "tool_call_delta", "index": 2, "delta": "{\"a\""})
        );
    }
}
