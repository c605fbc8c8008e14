//! The records the store reads and writes. Messages and usage are stored as the JSON of the
//! `keel-protocol` types, so the store never needs to change when a message grows a field.

use keel_protocol::{Message, MessageId, SessionId, TurnId, Usage};
use serde::Serialize;

/// Fields of a new session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewSession {
    /// Title shown in listings (may be empty until the first prompt names it).
    pub title: String,
    /// Working folder the session runs in.
    pub cwd: String,
    /// `provider/model`.
    pub model: String,
    /// The session that spawned this one (a sub-agent's parent).
    pub parent_id: Option<SessionId>,
}

/// Where a fork was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForkPoint {
    /// The source session.
    pub session_id: SessionId,
    /// Its revision whose history was copied.
    pub revision: u64,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionRecord {
    /// `s-` plus 10 base32 characters.
    pub id: SessionId,
    /// Title.
    pub title: String,
    /// Working folder.
    pub cwd: String,
    /// `provider/model`.
    pub model: String,
    /// Parent session, for sub-agents.
    pub parent_id: Option<SessionId>,
    /// Set on sessions made by fork.
    pub forked_from: Option<ForkPoint>,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last change, ms since the epoch.
    pub updated_ms: i64,
    /// Head committed revision (0: nothing committed yet).
    pub revision: u64,
    /// History epoch: grows whenever a commit removes entries (replace, rewind, reconcile).
    pub epoch: u64,
    /// Messages in canonical history at the head revision.
    pub length: u64,
    /// The first message the user typed, its first 200 characters (filled by listings;
    /// `None` elsewhere, or when there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
}

pub use keel_protocol::{InputKind, TurnSource};

/// A reminder left for a session's next turn (DESIGN §4: pending session reminders).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionReminder {
    /// `r-` plus 10 base32 characters.
    pub id: String,
    /// Who left it (`runtime`, an extension's id).
    pub source: String,
    /// What the model is to be told.
    pub text: String,
    /// When it was left, ms since the epoch.
    pub created_ms: i64,
}

/// A task to record (SPEC §14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// Its id (`task-…`).
    pub id: String,
    /// The session that starts it.
    pub session_id: SessionId,
    /// The child session that does the work.
    pub child_session_id: Option<SessionId>,
    /// The task it follows up.
    pub parent_task_id: Option<String>,
    /// What it is for.
    pub description: String,
    /// Its role.
    pub agent: String,
    /// Whether the parent goes on without waiting.
    pub background: bool,
}

/// What a task produced: progress so far and, once ended, its final answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskOutput {
    /// Progress lines (tool calls, interim text).
    pub output: String,
    /// The final answer of its turn.
    pub final_text: String,
}

/// Status of a stored turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// Still running (or its process died; resume decides).
    Running,
    /// Finished its work.
    Completed,
    /// Aborted by the caller.
    Aborted,
    /// Failed; `error_code` says why.
    Failed,
}

impl TurnStatus {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::Failed => "failed",
        }
    }

    /// Parses the stored text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(Self::Running),
            "completed" => Some(Self::Completed),
            "aborted" => Some(Self::Aborted),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRecord {
    /// `t-` plus 10 base32 characters.
    pub id: TurnId,
    /// Its session.
    pub session_id: SessionId,
    /// Who started it.
    pub source: TurnSource,
    /// Where it stands.
    pub status: TurnStatus,
    /// Tokens and cost, once known.
    pub usage: Option<Usage>,
    /// Stable error code of a failed turn.
    pub error_code: Option<String>,
    /// Start, ms since the epoch.
    pub started_ms: i64,
    /// End, ms since the epoch.
    pub ended_ms: Option<i64>,
    /// The process that ran it (`BOOT/PID/START`); `None` for turns stored before owners were.
    pub owner: Option<String>,
}

/// A message to put into history, with its host-assigned id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Host-assigned message id, unique within the live history.
    pub id: MessageId,
    /// The message.
    pub message: Message,
}

impl Entry {
    /// An entry with a fresh message id.
    pub fn new(message: Message) -> Self {
        Self {
            id: MessageId::generate(),
            message,
        }
    }
}

/// A message as read back from canonical history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEntry {
    /// Host-assigned message id.
    pub id: MessageId,
    /// The message.
    pub message: Message,
    /// The revision that wrote this row.
    pub revision: u64,
    /// When it was written, ms since the epoch.
    pub created_ms: i64,
}

/// What kind of commit made a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitKind {
    /// Messages added at the end.
    Append,
    /// The whole history replaced (compaction); always starts a new epoch.
    Replace,
    /// History brought to a given list, keeping the common prefix.
    Reconcile,
    /// History set back to an earlier revision's (the later rows stay readable).
    Rewind,
    /// First revision of a forked session.
    Fork,
}

impl CommitKind {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Replace => "replace",
            Self::Reconcile => "reconcile",
            Self::Rewind => "rewind",
            Self::Fork => "fork",
        }
    }

    /// Parses the stored text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "append" => Some(Self::Append),
            "replace" => Some(Self::Replace),
            "reconcile" => Some(Self::Reconcile),
            "rewind" => Some(Self::Rewind),
            "fork" => Some(Self::Fork),
            _ => None,
        }
    }
}

/// What an acknowledged commit returns; a replayed retry returns the same value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitReceipt {
    /// The session.
    pub session_id: SessionId,
    /// The caller's operation id.
    pub operation_id: String,
    /// What the commit did.
    pub kind: CommitKind,
    /// The committed revision.
    pub revision: u64,
    /// History epoch after the commit.
    pub epoch: u64,
    /// Messages in canonical history after the commit.
    pub length: u64,
    /// Rows this commit wrote.
    pub written: u64,
}

/// The projection event observers wait on before a commit is acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryCommitted {
    /// The commit.
    pub receipt: CommitReceipt,
    /// The turn that committed, if any.
    pub turn_id: Option<TurnId>,
}

/// One operation on canonical history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryOp {
    /// Add messages at the end.
    Append {
        /// The messages.
        entries: Vec<Entry>,
    },
    /// Replace the whole history (compaction checkpoint).
    Replace {
        /// The new history.
        entries: Vec<Entry>,
    },
    /// Make history equal to this list, keeping the longest common prefix.
    Reconcile {
        /// The whole desired history.
        entries: Vec<Entry>,
    },
    /// Make history what it was at an earlier revision.
    Rewind {
        /// The revision to go back to (0: empty).
        to_revision: u64,
    },
}

impl HistoryOp {
    /// The commit kind this operation makes.
    pub fn kind(&self) -> CommitKind {
        match self {
            Self::Append { .. } => CommitKind::Append,
            Self::Replace { .. } => CommitKind::Replace,
            Self::Reconcile { .. } => CommitKind::Reconcile,
            Self::Rewind { .. } => CommitKind::Rewind,
        }
    }
}

/// A request to the committed-history writer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitRequest {
    /// The session.
    pub session_id: SessionId,
    /// The running turn committing, if any; checked against the store.
    pub turn_id: Option<TurnId>,
    /// Caller-chosen id; a retry reuses it.
    pub operation_id: String,
    /// When set, the commit fails with `stale_revision` unless the head is this revision.
    pub expected_revision: Option<u64>,
    /// What to do.
    pub op: HistoryOp,
}

impl CommitRequest {
    /// An append with no turn and no revision check.
    pub fn append(
        session_id: SessionId,
        operation_id: impl Into<String>,
        entries: Vec<Entry>,
    ) -> Self {
        Self {
            session_id,
            turn_id: None,
            operation_id: operation_id.into(),
            expected_revision: None,
            op: HistoryOp::Append { entries },
        }
    }
}

/// An input in a session's queue (steering, a follow-up, machine input).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuedInput {
    /// `i-` plus 10 base32 characters.
    pub id: String,
    /// What it asks of the session's turns.
    pub kind: InputKind,
    /// What the input carries.
    pub payload: serde_json::Value,
    /// When it was queued, ms since the epoch.
    pub created_ms: i64,
}

/// Inputs claimed by a turn; acknowledge after the history commit, or release to re-queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// `c-` plus 10 base32 characters.
    pub id: String,
    /// The claiming turn.
    pub turn_id: TurnId,
    /// The inputs, in queue order.
    pub inputs: Vec<QueuedInput>,
}
