//! Messages: what a session's history is made of.

use serde::{Deserialize, Serialize};

use crate::content::{ContentBlock, ToolCall};
use crate::error::ErrorInfo;
use crate::ids::ToolCallId;
use crate::usage::Usage;

/// Milliseconds since the Unix epoch, the timestamp unit of every message.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One entry of a session's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    /// Input from the user (or injected on the user's side: steering, follow-ups, reminders).
    User(UserMessage),
    /// A model response.
    Assistant(AssistantMessage),
    /// The result of one tool call.
    ToolResult(ToolResultMessage),
    /// Host bookkeeping that never reaches a model.
    Host(HostMessage),
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::User(UserMessage::text(text))
    }

    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Self::Assistant(message) => Some(message),
            _ => None,
        }
    }

    /// The tool result, if this is one.
    pub fn as_tool_result(&self) -> Option<&ToolResultMessage> {
        match self {
            Self::ToolResult(message) => Some(message),
            _ => None,
        }
    }

    /// The user message, if this is one.
    pub fn as_user(&self) -> Option<&UserMessage> {
        match self {
            Self::User(message) => Some(message),
            _ => None,
        }
    }

    /// The role tag as it appears in JSON.
    pub fn role(&self) -> &'static str {
        match self {
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "tool_result",
            Self::Host(_) => "host",
        }
    }
}

/// Input on the user's side of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Text and image blocks.
    pub content: Vec<ContentBlock>,
    /// Creation time, ms since the epoch.
    pub timestamp: i64,
    /// Messages sent together share a batch id and reach the model as one message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// Kept in history and sent to the model, but not shown as something the user typed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub hidden: bool,
    /// A command the user ran with `!`: the message's last text block is its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<ShellRun>,
}

/// A command the user ran themselves (`!command`), kept as context for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellRun {
    /// The command as typed, without the `!`.
    pub command: String,
    /// Its exit code; `None` when it was killed, timed out or never ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl UserMessage {
    /// All text blocks joined.
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }

    /// A visible user message with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            timestamp: crate::now_ms(),
            batch_id: None,
            hidden: false,
            shell: None,
        }
    }

    /// The output of a `!` command (its last text block); `None` for other messages.
    pub fn shell_output(&self) -> Option<&str> {
        self.shell.as_ref()?;
        self.content.iter().rev().find_map(ContentBlock::as_text)
    }

    /// A hidden user message (reminders, hook injections) with one text block.
    pub fn hidden_text(text: impl Into<String>) -> Self {
        Self {
            hidden: true,
            ..Self::text(text)
        }
    }
}

/// Why a model response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model finished its answer.
    #[default]
    Stop,
    /// The output limit cut the answer short.
    Length,
    /// The model wants tool results before it goes on.
    ToolUse,
    /// The call failed; `error` on the message says why.
    Error,
    /// The caller aborted the call.
    Aborted,
}

/// A model response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks in the order the model produced them.
    pub content: Vec<ContentBlock>,
    /// Why the response ended.
    pub stop_reason: StopReason,
    /// Tokens and cost.
    #[serde(default)]
    pub usage: Usage,
    /// Provider name, for example `anthropic`.
    #[serde(default)]
    pub provider: String,
    /// Wire API, for example `anthropic-messages`.
    #[serde(default)]
    pub api: String,
    /// Model id.
    #[serde(default)]
    pub model: String,
    /// Provider's response id, when it sends one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Set when `stop_reason` is `error` or `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Creation time, ms since the epoch.
    #[serde(default)]
    pub timestamp: i64,
}

impl AssistantMessage {
    /// The tool calls of this response, in the order the model issued them.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(ContentBlock::as_tool_call)
    }

    /// Whether the response holds at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls().next().is_some()
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }

    /// All reasoning (thinking blocks) joined.
    pub fn thinking(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Thinking(t) => Some(t.thinking.as_str()),
                _ => None,
            })
            .collect()
    }

    /// A finished text-only response, mainly for tests and synthetic answers.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            timestamp: crate::now_ms(),
            ..Self::default()
        }
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    /// The call this answers.
    pub tool_call_id: ToolCallId,
    /// Name of the tool that was called.
    pub tool_name: String,
    /// What the model sees: text and image blocks.
    pub content: Vec<ContentBlock>,
    /// Structured data for front ends; never sent to a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    /// The call failed (unknown tool, bad arguments, blocked, error, panic, abort).
    #[serde(default)]
    pub is_error: bool,
    /// Creation time, ms since the epoch.
    pub timestamp: i64,
}

impl ToolResultMessage {
    /// An error result with one text block.
    pub fn error(id: ToolCallId, tool_name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            tool_call_id: id,
            tool_name: tool_name.into(),
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: true,
            timestamp: crate::now_ms(),
        }
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }
}

/// Host bookkeeping kept in history but never projected to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostMessage {
    /// What kind of record this is, for example `compaction_marker`.
    pub kind: String,
    /// Free-form payload.
    #[serde(default)]
    pub data: serde_json::Value,
    /// Creation time, ms since the epoch.
    pub timestamp: i64,
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn messages_are_tagged_by_role() {
        let message = Message::User(UserMessage {
            content: vec![ContentBlock::text("hi")],
            timestamp: 1,
            batch_id: None,
            hidden: false,
            shell: None,
        });
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1})
        );
    }

    #[test]
    fn assistant_round_trips_with_all_fields() {
        let message = Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: "c".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls"}),
            })],
            stop_reason: StopReason::ToolUse,
            usage: Usage {
                input: 3,
                output: 4,
                ..Usage::default()
            },
            provider: "p".into(),
            api: "a".into(),
            model: "m".into(),
            response_id: Some("r".into()),
            error: None,
            timestamp: 9,
        });
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(json["role"], "assistant");
        assert_eq!(json["stop_reason"], "tool_use");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn unknown_role_is_rejected_with_its_name() {
        let err = serde_json::from_value::<Message>(json!({"role": "robot"})).unwrap_err();
        assert!(err.to_string().contains("robot"), "{err}");
    }

    #[test]
    fn stop_reasons_use_snake_case() {
        let all = [
            StopReason::Stop,
            StopReason::Length,
            StopReason::ToolUse,
            StopReason::Error,
            StopReason::Aborted,
        ];
        assert_eq!(
            serde_json::to_value(all).unwrap(),
            json!(["stop", "length", "tool_use", "error", "aborted"])
        );
    }
}
