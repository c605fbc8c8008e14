//! keel's durable sessions on SQLite: history revisions, turns, the input queue, tasks, and
//! the committed-history writer with its replay registry (DESIGN §5, §13).
//! It imports only keel-protocol, and must not import keel-tools, keel-runtime, keel-context,
//! keel-mcp, keel-extensions, keel-tui, keel-acp or keel-cli.
#![forbid(unsafe_code)]

mod error;
mod execution;
mod export;
mod files;
mod history_writer;
mod ids;
mod model;
mod owner;
mod queue;
mod replay;
mod schema;
mod session_state;
mod sql;
mod store;
mod tasks;
mod turns;

pub use error::{Result, StoreError};
pub use execution::{Execution, OpenOptions};
pub use export::{EXPORT_SCHEMA_VERSION, to_markdown};
pub use files::DB_FILE_MODE;
pub use history_writer::{OBSERVER_TIMEOUT, Observer};
pub use ids::{MIN_PREFIX_CHARS, new_id};
pub use model::{
    Claim, CommitKind, CommitReceipt, CommitRequest, Entry, ForkPoint, HistoryCommitted, HistoryOp,
    InputKind, NewSession, NewTask, QueuedInput, SessionRecord, SessionReminder, StoredEntry,
    TaskOutput, TurnRecord, TurnSource, TurnStatus,
};
pub use replay::{REPLAY_MAX_BYTES, REPLAY_MAX_ENTRIES, ReplayRegistry, fingerprint};
pub use schema::{BUSY_TIMEOUT, Durability, known_version as known_schema_version};
pub use sql::Unreadable;
pub use store::Store;
pub use turns::outcome_status;
