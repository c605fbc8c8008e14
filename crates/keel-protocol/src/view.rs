//! What a front end shows of a turn: items (an answer, reasoning, a tool call) that start,
//! grow and complete. The runtime's one turn-view reducer produces them; every front end
//! renders them, so no two front ends can disagree about what happened.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ToolCallId;

/// One thing a turn produced, as a front end shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// `item_N`, numbered per turn in the order items start.
    pub id: Arc<str>,
    /// What the item is.
    #[serde(flatten)]
    pub body: ItemBody,
}

/// The kinds of item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemBody {
    /// Answer text.
    AgentMessage {
        /// The text so far (all of it once completed).
        text: String,
    },
    /// The model's reasoning.
    Reasoning {
        /// The text so far (all of it once completed).
        text: String,
    },
    /// A tool call and, once it ended, its result.
    ToolCall {
        /// The model's id for the call.
        call_id: ToolCallId,
        /// The tool.
        tool_name: String,
        /// The arguments as JSON (the raw text when they do not parse).
        arguments: serde_json::Value,
        /// The result's text, once the call ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        /// Where the call stands.
        status: ToolCallStatus,
        /// The tool's structured details once the call ended (an edit's diff, a command's
        /// exit code), for front ends that show more than the text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
    },
}

impl ItemBody {
    /// The item kind as its JSON tag.
    pub fn kind(&self) -> ItemKind {
        match self {
            Self::AgentMessage { .. } => ItemKind::AgentMessage,
            Self::Reasoning { .. } => ItemKind::Reasoning,
            Self::ToolCall { .. } => ItemKind::ToolCall,
        }
    }
}

/// An item's kind without its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemKind {
    /// Answer text.
    AgentMessage,
    /// Reasoning.
    Reasoning,
    /// A tool call.
    ToolCall,
}

impl ItemKind {
    /// The JSON tag of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentMessage => "agent_message",
            Self::Reasoning => "reasoning",
            Self::ToolCall => "tool_call",
        }
    }
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// Proposed by the model, waiting to be admitted (the gate, the user's answer, or a
    /// call before it in a sequential batch).
    Pending,
    /// Admitted and running.
    InProgress,
    /// Ended with a result.
    Completed,
    /// Ended with an error result, was blocked, or never ran.
    Failed,
}

/// A change to the items of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemEvent {
    /// A new item (text items start empty).
    Started {
        /// The item.
        item: Item,
    },
    /// Streamed text was added to a text item, or output to a running tool call's.
    Updated {
        /// The item's id.
        item_id: Arc<str>,
        /// Its kind.
        kind: ItemKind,
        /// The new text.
        delta: String,
    },
    /// A tool call's status moved forward (it was admitted and runs). Statuses only move
    /// forward: pending, in progress, then completed or failed (the `Completed` event).
    Status {
        /// The item's id.
        item_id: Arc<str>,
        /// The new status.
        status: ToolCallStatus,
    },
    /// The item is final.
    Completed {
        /// The item in full.
        item: Item,
    },
}
