//! keel's one in-process runtime, shared by every front end (`keel exec`, the TUI, ACP).
//!
//! It owns what a front end needs and must not reimplement: settings (configuration files,
//! overrides, trust, project instructions), assembly (model, provider, tools, permission
//! gate, sandbox), sessions (create, open, resume, fork, rewind, delete), the turn
//! controller (admission, one running turn per session, finishing and recording a turn),
//! the conversation contract with its typed operations and per-session event stream, the
//! input queue for steering and follow-ups, permission requests, the extension registry
//! with capability leases, and the one turn-view reducer every front end renders from.
//!
//! Front ends submit [`keel_protocol::Op`]s through [`ConversationContract`] and render the
//! [`keel_protocol::SessionEvent`]s they subscribe to; they hold no engine logic.

pub mod assembly;
pub mod builtin;
mod commands;
mod contract;
mod control;
mod error;
mod events;
pub mod extension;
mod lifecycle;
pub mod notice;
mod permission;
mod queue;
mod quiet;
mod runtime;
pub mod sessions;
pub mod settings;
pub mod storage;
pub mod structured;
pub mod tags;
pub mod tasks;
mod turn;
pub mod view;

pub use assembly::{EditorProvider, ModelChoice, ResolvedModel, SessionServices, plan_file};
pub use commands::{RESERVED_COMMANDS, is_reserved};
pub use contract::{ConversationContract, DeferredContract, Reply};
pub use control::HostControl;
pub use error::RuntimeError;
pub use events::{ChannelSink, SessionSink, Subscription, channel};
pub use lifecycle::{CompactRequest, Compactor, SessionUpdate};
pub use runtime::{Opened, Prepared, Runtime, RuntimeOptions, SessionStart, start};
pub use turn::{TurnHandle, TurnOptions, TurnReport};
