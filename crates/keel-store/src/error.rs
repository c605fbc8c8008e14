//! The store's error type: one enum at the crate boundary, each variant with a stable code.
//!
//! Classification (`code`, `is_retryable`) is an exhaustive `match`, so a new variant forces a
//! decision about how callers should treat it.

use std::path::{Path, PathBuf};

/// Everything the store can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error (I/O, corruption, constraint, lock held past the busy timeout).
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database was written by a newer keel that knows more schema migrations.
    #[error(
        "the session database has schema version {found}, newer than the {known} this keel knows; upgrade keel or point it at another KEEL_HOME"
    )]
    SchemaTooNew {
        /// Version recorded in the database.
        found: u32,
        /// Highest version this code knows.
        known: u32,
    },
    /// A stored message or usage record is not valid JSON for its type.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A value could not be encoded as JSON.
    #[error("could not encode JSON: {0}")]
    Encode(#[from] serde_json::Error),
    /// An id prefix must have at least four characters.
    #[error("id prefix `{0}` is too short: type at least 4 characters")]
    PrefixTooShort(String),
    /// No session (or turn, input, claim) has this id or id prefix.
    #[error("no {kind} matches `{id}`")]
    NotFound {
        /// What was looked up: `session`, `turn`, `claim`, `revision`.
        kind: &'static str,
        /// The id or prefix as given.
        id: String,
    },
    /// An id prefix matches more than one session.
    #[error("`{prefix}` is ambiguous: it matches {}; type more characters", candidates.join(", "))]
    Ambiguous {
        /// The prefix as given.
        prefix: String,
        /// Some of the ids it matches.
        candidates: Vec<String>,
    },
    /// The turn named by a commit belongs to another session or is no longer running.
    #[error("turn {turn} cannot commit to session {session}: {reason}")]
    TurnMismatch {
        /// Session of the commit.
        session: String,
        /// Turn of the commit.
        turn: String,
        /// What did not match.
        reason: String,
    },
    /// The commit was built against another revision than the session's head.
    #[error("session {session} is at revision {actual}, the operation expected {expected}")]
    StaleRevision {
        /// Session of the commit.
        session: String,
        /// Revision the caller expected.
        expected: u64,
        /// The head revision.
        actual: u64,
    },
    /// The same operation id was used earlier with different content.
    #[error(
        "operation {operation} on session {session} was already committed with different content"
    )]
    Conflict {
        /// Session of the commit.
        session: String,
        /// Operation id that was reused.
        operation: String,
    },
    /// The operation itself is malformed (empty operation id, duplicate message ids, …).
    #[error("invalid operation: {0}")]
    InvalidOperation(String),
    /// Re-reading canonical history after the write did not show what was written.
    #[error("history of session {session} did not read back as written: {reason}")]
    ReadBackMismatch {
        /// The session.
        session: String,
        /// What differed.
        reason: String,
    },
    /// A `HistoryCommitted` observer did not finish within its bound; the commit itself is durable.
    #[error("the HistoryCommitted projection for revision {revision} did not finish in time")]
    ProjectionTimeout {
        /// The durable revision.
        revision: u64,
    },
    /// A turn cannot close while inputs it claimed are neither acknowledged nor released.
    #[error("turn {turn} still has {count} claimed input(s) in flight")]
    ClaimsInFlight {
        /// The turn.
        turn: String,
        /// Claimed but unacknowledged inputs.
        count: usize,
    },
    /// Another live keel process is running a turn of this session.
    #[error(
        "session {session} is in use: keel process {pid} is running its turn {turn}; wait for it \
         to end, or fork the session (`keel sessions fork {session}`) to work beside it"
    )]
    SessionBusy {
        /// The session.
        session: String,
        /// Its running turn.
        turn: String,
        /// The process running it.
        pid: u32,
    },
    /// An input can be edited or cancelled only while it waits in the queue.
    #[error("input {input} is {state}: only a queued input can be edited or cancelled")]
    InputNotQueued {
        /// The input.
        input: String,
        /// Where it is instead: `claimed`, `acknowledged`, `cancelled`.
        state: String,
    },
    /// An input named for acknowledgement is not one its claim still holds.
    #[error("input {input} is not held by claim {claim}: {reason}")]
    InputNotInClaim {
        /// The claim.
        claim: String,
        /// The input.
        input: String,
        /// Where the input is instead.
        reason: String,
    },
    /// A new queue order must name every queued input of the session exactly once; re-read
    /// the queue (a turn may have claimed some, or new ones arrived) and send a new order.
    #[error(
        "the new order of session {session}'s queue must name each queued input exactly once: {}",
        order_problems(missing, extra, duplicated)
    )]
    QueueOrderMismatch {
        /// The session.
        session: String,
        /// Queued inputs the order leaves out.
        missing: Vec<String>,
        /// Ids in the order that are not queued inputs of the session.
        extra: Vec<String>,
        /// Ids the order names more than once.
        duplicated: Vec<String>,
    },
    /// The database worker thread panicked or went away.
    #[error("the database worker failed: {0}")]
    Worker(String),
    /// The database file is damaged or is not a SQLite database at all.
    #[error(
        "the session database {} is corrupt ({detail}); move it aside to start a new one, or \
         restore it from a backup",
        path.display()
    )]
    DatabaseCorrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite reported.
        detail: String,
    },
    /// The database file (or its write-ahead log) could not be created or made private.
    #[error("cannot prepare the session database file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The write-ahead log could not be synced to disk: commits since the last sync may not
    /// survive a power cut (they do survive a crash of keel).
    #[error("cannot sync the session log {} to disk: {source}", path.display())]
    Sync {
        /// The `-wal` file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl StoreError {
    /// Stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "store_sqlite",
            Self::SchemaTooNew { .. } => "schema_too_new",
            Self::Corrupt(_) => "store_corrupt",
            Self::Encode(_) => "store_encode",
            Self::PrefixTooShort(_) => "id_prefix_too_short",
            Self::NotFound { .. } => "not_found",
            Self::Ambiguous { .. } => "id_ambiguous",
            Self::TurnMismatch { .. } => "turn_mismatch",
            Self::StaleRevision { .. } => "stale_revision",
            Self::Conflict { .. } => "conflict",
            Self::InvalidOperation(_) => "invalid_operation",
            Self::ReadBackMismatch { .. } => "read_back_mismatch",
            Self::ProjectionTimeout { .. } => "projection_timeout",
            Self::SessionBusy { .. } => "session_busy",
            Self::ClaimsInFlight { .. } => "claims_in_flight",
            Self::InputNotQueued { .. } => "input_not_queued",
            Self::InputNotInClaim { .. } => "input_not_in_claim",
            Self::QueueOrderMismatch { .. } => "queue_order_mismatch",
            Self::Worker(_) => "store_worker",
            Self::DatabaseCorrupt { .. } => "database_corrupt",
            Self::File { .. } => "store_file",
            Self::Sync { .. } => "store_sync",
        }
    }

    /// The protocol's code for this failure when it ends a turn or an operation.
    pub fn failure_code(&self) -> keel_protocol::FailureCode {
        match self {
            Self::SessionBusy { .. } => keel_protocol::FailureCode::SessionBusy,
            _ => keel_protocol::FailureCode::StoreFailed,
        }
    }

    /// Whether retrying the same call may succeed (a busy database, a slow observer).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => matches!(
                error.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            Self::Sqlite(_) => false,
            Self::ProjectionTimeout { .. }
            | Self::StaleRevision { .. }
            | Self::SessionBusy { .. } => true,
            Self::SchemaTooNew { .. }
            | Self::Corrupt(_)
            | Self::Encode(_)
            | Self::PrefixTooShort(_)
            | Self::NotFound { .. }
            | Self::Ambiguous { .. }
            | Self::TurnMismatch { .. }
            | Self::Conflict { .. }
            | Self::InvalidOperation(_)
            | Self::ReadBackMismatch { .. }
            | Self::ClaimsInFlight { .. }
            | Self::InputNotQueued { .. }
            | Self::InputNotInClaim { .. }
            | Self::QueueOrderMismatch { .. }
            | Self::Worker(_)
            | Self::DatabaseCorrupt { .. }
            | Self::File { .. }
            | Self::Sync { .. } => false,
        }
    }

    /// This error as seen from the database at `path`: SQLite's "not a database" and
    /// "malformed" errors become [`StoreError::DatabaseCorrupt`] naming the file, so a user
    /// learns which file is damaged instead of reading a bare SQLite message.
    pub(crate) fn at(self, path: &Path) -> Self {
        match &self {
            Self::Sqlite(error) if is_corruption(error) => Self::DatabaseCorrupt {
                path: path.to_path_buf(),
                detail: error.to_string(),
            },
            _ => self,
        }
    }
}

/// What a queue order got wrong, for [`StoreError::QueueOrderMismatch`].
fn order_problems(missing: &[String], extra: &[String], duplicated: &[String]) -> String {
    [
        ("missing", missing),
        ("not queued", extra),
        ("named twice", duplicated),
    ]
    .iter()
    .filter(|(_, ids)| !ids.is_empty())
    .map(|(what, ids)| format!("{what}: {}", ids.join(", ")))
    .collect::<Vec<_>>()
    .join("; ")
}

/// Whether SQLite says the file is damaged or not a database. A short read (the file ends
/// before pages its header counts) is a truncated file, so it is corruption too.
fn is_corruption(error: &rusqlite::Error) -> bool {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => {
            matches!(
                failure.code,
                rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
            ) || failure.extended_code == rusqlite::ffi::SQLITE_IOERR_SHORT_READ
        }
        _ => false,
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
