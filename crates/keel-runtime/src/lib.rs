//! keel's one in-process runtime: settings, assembly, sessions, the turn controller, the
//! conversation contract and turn view, the input queue, permissions, the extension SPI with
//! leases, background tasks, and quiescence. Front ends reach the engine only through it.
//! It must not import keel-context, keel-mcp, keel-extensions, keel-tui, keel-acp or keel-cli:
//! those plug into it, not the other way round.
#![forbid(unsafe_code)]

pub mod assembly;
pub mod builtin;
mod commands;
mod compaction;
mod contract;
mod control;
pub mod credentials;
pub mod deferred;
mod error;
mod events;
pub mod extension;
pub mod lean;
mod lifecycle;
pub mod notice;
mod permission;
mod question;
mod queue;
mod quiet;
mod reply;
mod runtime;
pub mod services;
pub mod sessions;
pub mod settings;
pub mod storage;
pub mod structured;
pub mod tags;
pub mod tasks;
mod titles;
mod turn;
mod turns;
pub mod view;

pub use assembly::{ModelChoice, ResolvedModel};
pub use commands::{BUILTIN_COMMANDS, BuiltinCommand, Surface, builtin_command, is_reserved};
pub use compaction::{CompactRequest, Compactor, Sizes, context_report, rough_report};
pub use contract::{ContractExt, ConversationContract, DeferredContract};
pub use error::RuntimeError;
pub use events::{ChannelSink, SessionSink, Subscription, channel};
pub use extension::HostControl;
/// The stored records the contract's replies carry.
pub use keel_store::{SessionRecord, StoredEntry};
/// Bounded line reading, for front ends that read a protocol from a stream.
pub use keel_tools::lines;
pub use question::NoOneToAsk;
pub use reply::{CommandOutcome, Operation, Queued, Reply};
pub use runtime::{Opened, Prepared, Runtime, RuntimeOptions, SessionStart, start};
pub use services::{EditorProvider, SessionServices, plan_file, read_plan};
pub use turn::{TurnHandle, TurnOptions, TurnReport};
