//! keel's plain data model, shared by every crate and every front end.
//!
//! Only serde types live here: no I/O, no async, no logic beyond constructors and
//! conversions. Everything is `snake_case` and internally tagged so the JSON stays stable
//! across releases; enums that cross a process boundary are `#[non_exhaustive]`.

mod content;
mod error;
mod event;
mod ids;
mod message;
mod runtime;
mod stream;
mod tool;
mod usage;

pub use content::{ContentBlock, ImageBlock, TextBlock, ThinkingBlock, ToolCall};
pub use error::{ErrorCode, ErrorInfo};
pub use event::AgentEvent;
pub use ids::{MessageId, RunId, SessionId, ToolCallId, TurnId};
pub use message::{
    AssistantMessage, HostMessage, Message, StopReason, ToolResultMessage, UserMessage, now_ms,
};
pub use runtime::{
    DebugTrace, ResponseChunk, RuntimeEvent, RuntimeEventBody, SessionStatus, ToolPhase,
    TurnOutcome,
};
pub use stream::{ResponseMeta, StreamEvent, StreamNotice};
pub use tool::ToolDefinition;
pub use usage::{Cost, Usage};
