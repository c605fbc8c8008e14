//! Runtime events: what the event bridge hands to front ends and persistence (DESIGN §2).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, SessionId, ToolCallId, TurnId};
use crate::message::Message;

/// One numbered event of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeEvent {
    /// Position in the turn's event sequence, from 0, without gaps.
    pub seq: u64,
    /// Session the turn belongs to.
    pub session_id: SessionId,
    /// The turn.
    pub turn_id: TurnId,
    /// What happened.
    #[serde(flatten)]
    pub body: RuntimeEventBody,
}

/// What a runtime event says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuntimeEventBody {
    /// The turn's status changed: `running` first, exactly one terminal status last.
    SessionStatus {
        /// The status.
        status: SessionStatus,
    },
    /// A streamed piece of a response.
    ResponseChunk {
        /// Host-assigned id of the message the chunk belongs to.
        message_id: MessageId,
        /// The piece.
        chunk: ResponseChunk,
    },
    /// A message is complete and final. An assistant message with tool calls is only
    /// reported once all its tool executions ended.
    MessageCompleted {
        /// Host-assigned id.
        message_id: MessageId,
        /// The message.
        message: Arc<Message>,
    },
    /// A response that holds tool calls finished streaming: its text and reasoning are
    /// final, and its calls are about to be judged and run, in call order.
    /// `MessageCompleted` follows once they all ended.
    ResponseEnded {
        /// Host-assigned id.
        message_id: MessageId,
        /// The message.
        message: Arc<Message>,
    },
    /// A notice about the model request (a retry scheduled, a recovery), as typed data.
    Notice {
        /// Id of the message the request answers.
        message_id: MessageId,
        /// The notice.
        notice: crate::StreamNotice,
    },
    /// Lifecycle and progress details for debugging.
    DebugTrace {
        /// The trace.
        trace: DebugTrace,
    },
}

/// A streamed piece of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseChunk {
    /// Text.
    Text {
        /// Block index.
        index: usize,
        /// New text.
        delta: String,
    },
    /// Reasoning.
    Thinking {
        /// Block index.
        index: usize,
        /// New reasoning.
        delta: String,
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
    /// More argument JSON of a tool call.
    ToolCallDelta {
        /// Block index.
        index: usize,
        /// Fragment.
        delta: String,
    },
    /// A running tool call printed more output (a command's, as it runs).
    ToolOutput {
        /// The call.
        tool_call_id: ToolCallId,
        /// The new output.
        delta: String,
    },
    /// A tool execution changed phase.
    ToolExecution {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool.
        tool_name: String,
        /// New phase.
        phase: ToolPhase,
        /// The result, once ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Arc<Message>>,
    },
}

/// Phase of a tool execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolPhase {
    /// Admitted and running.
    Started,
    /// Finished successfully.
    Succeeded,
    /// Finished with an error result.
    Failed,
}

/// Status of a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionStatus {
    /// The turn is running.
    Running,
    /// The turn finished.
    Completed,
    /// The turn was aborted.
    Aborted {
        /// Why, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The turn failed.
    Failed {
        /// Stable code from the error classifier.
        code: crate::FailureCode,
        /// What went wrong.
        message: String,
    },
}

/// Lifecycle and progress details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebugTrace {
    /// The loop event kind or trace name, for example `turn_start`.
    pub name: String,
    /// Extra fields.
    #[serde(default)]
    pub data: serde_json::Value,
}

/// How a turn ended: exactly one per turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnOutcome {
    /// The work finished.
    Completed,
    /// The caller aborted the turn.
    Aborted {
        /// Why, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The turn failed.
    Failed {
        /// Stable code from the error classifier.
        code: crate::FailureCode,
        /// What went wrong.
        message: String,
    },
}

impl TurnOutcome {
    /// The terminal session status matching this outcome.
    pub fn status(&self) -> SessionStatus {
        match self {
            Self::Completed => SessionStatus::Completed,
            Self::Aborted { reason } => SessionStatus::Aborted {
                reason: reason.clone(),
            },
            Self::Failed { code, message } => SessionStatus::Failed {
                code: *code,
                message: message.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runtime_event_flattens_its_body() {
        let event = RuntimeEvent {
            seq: 0,
            session_id: "s".into(),
            turn_id: "t".into(),
            body: RuntimeEventBody::SessionStatus {
                status: SessionStatus::Running,
            },
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"seq": 0, "session_id": "s", "turn_id": "t", "type": "session_status",
                   "status": {"state": "running"}})
        );
    }
}
