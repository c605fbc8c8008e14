//! keel's plain data model: messages, content blocks, stream, loop, runtime and session events,
//! operations, tasks and ids, as serde types with no I/O, async or engine logic.
//! Every crate and front end speaks it, so it must not import any other workspace crate.
#![forbid(unsafe_code)]

pub mod canonical;
mod content;
mod error;
mod event;
mod failure;
mod goal;
mod ids;
mod message;
mod modes;
mod op;
pub mod ops;
mod question;
mod runtime;
mod session_event;
mod source;
pub mod spelling;
mod stream;
mod task;
pub mod time;
mod tool;
mod usage;
mod view;

pub use content::{
    ContentBlock, IMAGE_TYPES, ImageBlock, TextBlock, ThinkingBlock, ToolCall, file_url_path,
    image_type,
};
pub use error::{ErrorCode, ErrorInfo};
pub use event::AgentEvent;
pub use failure::{Failure, FailureCode};
pub use goal::{GOAL_OBJECTIVE_MAX_BYTES, GoalInfo, GoalStatus, PlanInfo};
pub use ids::{MessageId, RunId, SessionId, ToolCallId, TurnId};
pub use message::{
    AssistantMessage, HostMessage, Message, ShellRun, StopReason, ToolResultMessage, UserMessage,
    now_ms,
};
pub use modes::{PermissionMode, SandboxMode, ThinkingChoice, ThinkingLevel, UnknownWord};
pub use op::{
    CommandInfo, ContextPart, ContextReport, ExportFormat, MentionInfo, Op, OpGroup, SessionExport,
    SessionTarget,
};
pub use question::{
    Ask, Choice, FORM_FIELDS_MAX, FORM_TEXT_MAX, Field, FieldKind, Form, Question, QuestionAnswer,
};
pub use runtime::{
    DebugTrace, ResponseChunk, RuntimeEvent, RuntimeEventBody, SessionStatus, ToolPhase,
    TurnOutcome,
};
pub use session_event::{
    ExtensionNotice, InputKind, NoticeLevel, PermissionAnswer, PermissionRequest, QueueEntry,
    SessionEvent, SessionEventBody, ToolPreview,
};
pub use source::TurnSource;
pub use stream::{ResponseMeta, StreamEvent, StreamNotice};
pub use task::{TaskInfo, TaskStatus};
pub use tool::ToolDefinition;
pub use usage::{Cost, Usage, parse_token_count};
pub use view::{Item, ItemBody, ItemEvent, ItemKind, ToolCallStatus};
