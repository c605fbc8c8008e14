//! Loop events: what the agent loop reports while it runs (DESIGN §1).
//!
//! Messages travel as `Arc<Message>` so an event costs a pointer copy, never a deep clone;
//! `message_update` carries only the stream delta.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, ToolCallId};
use crate::message::Message;
use crate::stream::StreamEvent;

/// One event of an agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A run began.
    AgentStart,
    /// A step began (one model response plus its tool calls).
    TurnStart,
    /// A step ended.
    TurnEnd {
        /// The assistant message of the step (absent when a hook skipped the model call).
        message: Option<Arc<Message>>,
        /// Its tool results, in call order.
        tool_results: Vec<Arc<Message>>,
    },
    /// A message entered the context (for an assistant message: its first stream event).
    MessageStart {
        /// Host-assigned id of the message.
        message_id: MessageId,
        /// The message as it is at its start.
        message: Arc<Message>,
    },
    /// A streamed assistant message changed.
    MessageUpdate {
        /// Id of the message being streamed.
        message_id: MessageId,
        /// The content delta.
        event: StreamEvent,
    },
    /// A message is complete.
    MessageEnd {
        /// Host-assigned id of the message.
        message_id: MessageId,
        /// The final message.
        message: Arc<Message>,
    },
    /// A tool call was admitted and starts running (or is answered without running).
    ToolExecutionStart {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool's name.
        tool_name: String,
        /// Arguments as received.
        arguments: serde_json::Value,
    },
    /// A running tool reported progress.
    ToolExecutionUpdate {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool's name.
        tool_name: String,
        /// Tool-defined progress payload.
        update: serde_json::Value,
    },
    /// A tool call has its result.
    ToolExecutionEnd {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool's name.
        tool_name: String,
        /// The result message that will be appended in call order.
        result: Arc<Message>,
        /// Whether the result is an error.
        is_error: bool,
    },
    /// A run ended.
    AgentEnd {
        /// Every message this run added, in history order.
        messages: Vec<Arc<Message>>,
    },
}

impl AgentEvent {
    /// The event's type tag, as serialized.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::AgentStart => "agent_start",
            Self::TurnStart => "turn_start",
            Self::TurnEnd { .. } => "turn_end",
            Self::MessageStart { .. } => "message_start",
            Self::MessageUpdate { .. } => "message_update",
            Self::MessageEnd { .. } => "message_end",
            Self::ToolExecutionStart { .. } => "tool_execution_start",
            Self::ToolExecutionUpdate { .. } => "tool_execution_update",
            Self::ToolExecutionEnd { .. } => "tool_execution_end",
            Self::AgentEnd { .. } => "agent_end",
        }
    }
}
