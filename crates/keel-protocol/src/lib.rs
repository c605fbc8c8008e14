//! keel's plain data model, shared by every crate and every front end.
//!
//! Only serde types live here: no I/O, no async, no logic beyond constructors and
//! conversions. Everything is `snake_case` and internally tagged so the JSON stays stable
//! across releases; enums that cross a process boundary are `#[non_exhaustive]`.

pub mod canonical;
mod content;
mod error;
mod event;
mod failure;
mod ids;
mod message;
mod op;
mod runtime;
mod session_event;
mod source;
mod stream;
mod task;
pub mod time;
mod tool;
mod usage;
mod view;

pub use content::{
    ContentBlock, IMAGE_TYPES, ImageBlock, TextBlock, ThinkingBlock, ToolCall, image_type,
};
pub use error::{ErrorCode, ErrorInfo};
pub use event::AgentEvent;
pub use failure::{Failure, is_retryable};
pub use ids::{MessageId, RunId, SessionId, ToolCallId, TurnId};
pub use message::{
    AssistantMessage, HostMessage, Message, StopReason, ToolResultMessage, UserMessage, now_ms,
};
pub use op::{CommandInfo, Op, OpGroup, SessionTarget};
pub use runtime::{
    DebugTrace, ResponseChunk, RuntimeEvent, RuntimeEventBody, SessionStatus, ToolPhase,
    TurnOutcome,
};
pub use session_event::{
    InputKind, PermissionAnswer, PermissionRequest, QueueEntry, SessionEvent, SessionEventBody,
};
pub use source::TurnSource;
pub use stream::{ResponseMeta, StreamEvent, StreamNotice};
pub use task::{TaskInfo, TaskStatus};
pub use tool::ToolDefinition;
pub use usage::{Cost, Usage};
pub use view::{Item, ItemBody, ItemEvent, ItemKind, ToolCallStatus};
