//! The runtime's errors, each with a stable code.

use keel_protocol::{SessionId, TurnId};

use crate::extension::ExtensionError;
use crate::settings::ConfigError;

/// Why the runtime refused or failed an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A configuration problem (file, key, model).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The caller asked for something that cannot be done as asked (a model script that
    /// does not parse, a missing API key, an unknown mode).
    #[error("{0}")]
    Usage(String),
    /// The model's provider needs an API key and its variable is not set.
    #[error("provider `{provider}` needs an API key: set {variable}")]
    MissingKey {
        /// The provider.
        provider: String,
        /// The variable the key is read from.
        variable: String,
    },
    /// The session store failed or refused.
    #[error(transparent)]
    Store(#[from] keel_store::StoreError),
    /// The session database at this path could not be opened.
    #[error("cannot open the session database {}: {source}", path.display())]
    StoreAt {
        /// The database file.
        path: std::path::PathBuf,
        /// Why.
        source: keel_store::StoreError,
    },
    /// The extension registry refused.
    #[error(transparent)]
    Extension(#[from] ExtensionError),
    /// A turn of the session is running; steer or queue instead.
    #[error("session {session} is running turn {turn}: steer it or queue a follow-up instead")]
    TurnRunning {
        /// The session.
        session: SessionId,
        /// Its running turn, when it has an id yet.
        turn: String,
    },
    /// No session to continue in this folder.
    #[error("no session to continue in {0}")]
    NoSessionIn(String),
    /// The session has no waiting input to dispatch.
    #[error("session {0} has no queued input to start a turn with")]
    QueueEmpty(SessionId),
    /// A permission answer for a request that is not pending in a running turn.
    #[error("permission request {request} cannot be answered: {reason}")]
    PermissionRefused {
        /// The request.
        request: String,
        /// Why (the turn ended or was cancelled, or the request was answered).
        reason: String,
    },
    /// An answer to a question that is not waiting, or whose values do not fit its form.
    #[error("question {question} cannot be answered: {reason}")]
    QuestionRefused {
        /// The question.
        question: String,
        /// Why (the turn ended, the call stopped waiting, a value does not fit).
        reason: String,
    },
    /// The scope index of an "always allow" answer does not exist.
    #[error("permission request {request} offers no scope {scope}")]
    NoSuchScope {
        /// The request.
        request: String,
        /// The index given.
        scope: usize,
    },
    /// The operation needs a session this runtime has not opened.
    #[error("session {0} is not open in this runtime: open it first")]
    NotOpen(SessionId),
    /// A turn ended without reporting (its task was lost).
    #[error("turn {0} ended without a report")]
    TurnLost(TurnId),
    /// The contract was used before a runtime was bound to it, and the wait was given up.
    #[error("the conversation contract is not bound to a runtime")]
    NotBound,
    /// The operation is not available with this runtime's settings.
    #[error("{0}")]
    Unsupported(String),
    /// A resumed session's history could not be made valid.
    #[error("{0}")]
    Resume(String),
    /// A compaction could not be made (its code: `POST_ADMISSION_FAILED`,
    /// `compaction_failed`).
    #[error("{message}")]
    Compaction {
        /// Stable code.
        code: keel_protocol::FailureCode,
        /// What went wrong.
        message: String,
    },
    /// No extension offers this slash command.
    #[error("unknown command `/{0}`")]
    UnknownCommand(String),
    /// A slash command failed (its extension's reason).
    #[error("/{name}: {reason}")]
    Command {
        /// The command.
        name: String,
        /// Why.
        reason: crate::extension::CommandError,
    },
    /// The working folder is `/`, the home folder or one above it, and the user did not say
    /// that it may be the workspace.
    #[error(
        "refusing to work in {0} without --allow-home-workspace: the model could change any file \
         there. Run keel in a project's folder, or pass --allow-home-workspace to work here"
    )]
    HomeWorkspace(String),
    /// A session named exactly belongs to another working folder.
    #[error(
        "session {id} belongs to {folder}, not {here}: open it with that folder as the working folder"
    )]
    OtherFolder {
        /// The session.
        id: String,
        /// Its folder.
        folder: String,
        /// This runtime's.
        here: String,
    },
    /// The runtime keeps sessions only (no model): it opens none and runs no turn.
    #[error(
        "this runtime keeps sessions (list, fork, rewind, delete, export) and has no model: it \
         cannot open a session or run a turn"
    )]
    NoModel,
    /// The model's window cannot hold even the lean request.
    #[error(transparent)]
    WindowTooSmall(#[from] crate::lean::TooSmall),
    /// keel's own fault.
    #[error("internal error: {0}")]
    Internal(String),
}

impl RuntimeError {
    /// The protocol's code when this ends a turn or an operation a front end reports.
    pub fn failure_code(&self) -> keel_protocol::FailureCode {
        use keel_protocol::FailureCode;
        match self {
            Self::Config(_) | Self::WindowTooSmall(_) => FailureCode::ConfigInvalid,
            Self::MissingKey { .. } => FailureCode::MissingApiKey,
            Self::Store(error) | Self::StoreAt { source: error, .. } => error.failure_code(),
            Self::Extension(_) | Self::Command { .. } => FailureCode::ExtensionFailed,
            Self::Compaction { code, .. } => *code,
            _ => FailureCode::InternalError,
        }
    }

    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Config(error) => error.code(),
            Self::Usage(_) => "invalid_request",
            Self::MissingKey { .. } => "missing_api_key",
            Self::Store(error) | Self::StoreAt { source: error, .. } => error.code(),
            Self::Extension(error) => error.code(),
            Self::TurnRunning { .. } => "turn_running",
            Self::QueueEmpty(_) => "queue_empty",
            Self::NoSessionIn(_) => "no_session",
            Self::PermissionRefused { .. } => "permission_not_pending",
            Self::QuestionRefused { .. } => "question_refused",
            Self::NoSuchScope { .. } => "permission_no_such_scope",
            Self::NotOpen(_) => "session_not_open",
            Self::TurnLost(_) => "turn_lost",
            Self::NotBound => "contract_not_bound",
            Self::Unsupported(_) => "unsupported",
            Self::Resume(_) => "resume_failed",
            Self::Compaction { code, .. } => code.as_str(),
            Self::UnknownCommand(_) => "unknown_command",
            Self::Command { reason, .. } => reason.code(),
            Self::HomeWorkspace(_) => "home_workspace",
            Self::OtherFolder { .. } => "session_in_other_folder",
            Self::NoModel => "no_model",
            Self::WindowTooSmall(_) => "window_too_small",
            Self::Internal(_) => "internal_error",
        }
    }
}
