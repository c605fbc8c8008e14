//! The extension SPI and registry (DESIGN §3) and capability leases (§10).
//!
//! An extension contributes, during its `init` only, five kinds of things: tools (static or a
//! factory run every turn), system-prompt text, user-prompt prefixes, reminder providers, and
//! handlers for nine events. Seven events are the runner's hooks (see [`table`]); `turn_start`
//! and `turn_end` are called by the runtime around the turn.
//!
//! The registry owns the extensions of one runtime. Each accepted turn leases one snapshot
//! of them at the current revision ([`Registry::assemble_turn`]): the enabled set is read and
//! the lease registered under one lock with no await, so a change during assembly, or a new
//! revision, only affects later turns.

mod api;
mod bound;
mod factories;
mod registry;
pub mod reminders;
mod scope;
pub mod table;

use std::any::Any;
use std::sync::{Arc, OnceLock, Weak};

use async_trait::async_trait;
use keel_agent::HookError;
use keel_agent::runner::{
    AfterLlmCallHook, AfterToolCallHook, BeforeLlmCallHook, BeforeToolCallHook, HistoryChangedHook,
    LlmCallPreparedHook, StepEndHook,
};
use keel_protocol::{SessionId, TurnId, TurnOutcome};

pub use api::{ExtensionApi, PromptFn, ToolFactory};
pub use factories::{
    ExtensionBuilder, hook_extension, prompt_extension, reminder_extension, tool_extension,
};
pub use keel_agent::ToolAdditions;
pub use registry::{
    ExtensionState, Lease, Lifecycle, Overlay, Profile, ProfileEntry, Registry, TurnCapabilities,
};
pub use reminders::{Criticality, ReminderData, ReminderProvider};
pub use scope::{
    ExtensionEvents, HistoryError, HistoryWriter, ReminderMode, Replaced, Replacement, TurnScope,
};

/// A module that contributes tools, prompt text, reminders and hooks to turns.
pub trait Extension: Send + Sync {
    /// Stable id, unique in a registry; config and overlays name extensions by it.
    fn id(&self) -> &str;
    /// One line for people.
    fn description(&self) -> Option<&str> {
        None
    }
    /// Registers the extension's contributions through `api`. Only calls made before this
    /// returns count; the api refuses anything later.
    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError>;
}

/// Called by the runtime before the turn's first model request; an error fails the turn
/// before anything runs.
#[async_trait]
pub trait TurnStartHook: Send + Sync {
    /// The turn is about to run.
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError>;
}

/// Called by the runtime after the turn's outcome is recorded; errors are logged.
#[async_trait]
pub trait TurnEndHook: Send + Sync {
    /// The turn ended with `outcome`.
    async fn turn_end(&self, scope: &TurnScope, outcome: &TurnOutcome) -> Result<(), HookError>;
}

/// What happened to a session outside its turns, for extensions that keep files of their
/// own beside its history.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionChange {
    /// History went back to `revision`, now `length` messages long.
    Rewound {
        /// The revision history returned to.
        revision: u64,
        /// Messages in history now.
        length: u64,
    },
    /// History was compacted; `before` is the revision that holds it as it was.
    Compacted {
        /// The last revision before the compaction.
        before: u64,
        /// The compaction's revision.
        revision: u64,
    },
    /// The session was deleted.
    Deleted,
    /// The session was opened in this runtime: a new one, or a stored one resumed.
    Opened {
        /// Whether it was stored before.
        resumed: bool,
    },
    /// The session was closed in this runtime (or the runtime is ending).
    Closed,
    /// History is about to be compacted.
    Compacting {
        /// Asked for (`/compact`), not automatic.
        manual: bool,
        /// The user's instructions for the summary.
        instructions: Option<String>,
    },
    /// keel wants the user's attention (a permission question).
    Attention {
        /// What to tell the user.
        message: String,
    },
}

/// Called by the runtime when a session changed outside a turn; errors are logged.
#[async_trait]
pub trait SessionChangeHook: Send + Sync {
    /// `session` changed as `change` says; its folder is `dir`, when it has one.
    async fn session_changed(
        &self,
        session: &SessionId,
        dir: Option<&std::path::Path>,
        change: &SessionChange,
    ) -> Result<(), HookError>;
}

/// A handle on the running runtime for extensions (a goal's next turn, a task's child
/// session). Cheap to clone; calls before the runtime starts or after it is gone fail with
/// `contract_not_bound`. What it can do is implemented by the runtime (`control.rs`): the
/// interface holds it type-erased, so it names nothing above itself.
#[derive(Clone, Default)]
pub struct HostControl {
    cell: Arc<OnceLock<Weak<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for HostControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostControl")
            .field("bound", &self.bound().is_some())
            .finish()
    }
}

impl HostControl {
    /// Binds the runtime's state, once.
    pub(crate) fn bind_erased(&self, state: Weak<dyn Any + Send + Sync>) {
        let _ = self.cell.set(state);
    }

    /// The bound state, while the runtime runs.
    pub(crate) fn bound(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        self.cell.get().and_then(Weak::upgrade)
    }
}

/// Where a runtime works, for extensions that read files of the user or the project.
#[derive(Debug, Clone, Default)]
pub struct HostInfo {
    /// The working folder.
    pub cwd: std::path::PathBuf,
    /// The project it belongs to: its root, where a project's files are looked for, and
    /// which of them count ([`crate::settings::project`]).
    pub project: crate::settings::Project,
    /// `$KEEL_HOME`, else `~/.keel`.
    pub keel_home: Option<std::path::PathBuf>,
    /// The user trusts the project's files for this run (`--trust-project`).
    pub trust_project: bool,
    /// The user trusts the project's MCP servers for this run (`--trust-project-mcp`).
    pub trust_project_mcp: bool,
    /// The runtime, once it runs: extensions start turns and tasks through it.
    pub control: HostControl,
    /// The runtime only keeps sessions ([`crate::ModelChoice::None`]): it runs no turn, so
    /// an extension starts nothing for it (no MCP server).
    pub sessions_only: bool,
    /// A front end asks the user what the runtime needs answered (permissions, a server's
    /// questions); `false` for `keel exec`, where no one can answer.
    pub interactive: bool,
}

/// What running a slash command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expansion {
    /// Text submitted as the user's prompt (a skill, a custom command, an MCP prompt).
    Prompt(String),
    /// An answer for the user; no turn starts (`/mcp`).
    Reply(String),
}

/// Why a slash command, or something handed to an extension, was refused.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The arguments are not what the command takes (`/goal budget=lots`).
    #[error("{0}")]
    Usage(String),
    /// It cannot be done now (no goal to pause, no plan to approve, a server that refused).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl CommandError {
    /// A refusal for a typed reason.
    pub fn failed(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Failed(Box::new(error))
    }

    /// A refusal said in words.
    pub fn refused(reason: impl Into<String>) -> Self {
        Self::Failed(reason.into().into())
    }

    /// The stable code: `command_usage` or `command_failed`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Usage(_) => "command_usage",
            Self::Failed(_) => "command_failed",
        }
    }
}

/// Slash commands an extension offers.
#[async_trait]
pub trait CommandSource: Send + Sync {
    /// The commands offered now.
    fn commands(&self) -> Vec<keel_protocol::CommandInfo>;
    /// Runs `name` with `arguments` for `session`; `None` when the command is not this
    /// source's. An `Err` is a reason for the user.
    async fn run(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>>;
    /// Takes something a front end hands over for one session (`kind` names it: an
    /// editor's `mcp_servers`); `None` when it is not this source's.
    async fn attach(
        &self,
        _session: &SessionId,
        _kind: &str,
        _value: &serde_json::Value,
    ) -> Option<Result<(), CommandError>> {
        None
    }
    /// What besides files `session`'s prompts can name with `@` (for completion).
    async fn mentions(&self, _session: &SessionId) -> Vec<keel_protocol::MentionInfo> {
        Vec::new()
    }
    /// The text that goes with a prompt of `session` naming `@mention`; `None` when the
    /// mention is not this source's. An `Err` is a reason for the user.
    async fn read_mention(
        &self,
        _session: &SessionId,
        _mention: &str,
    ) -> Option<Result<String, CommandError>> {
        None
    }
}

/// The nine events an extension can handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionEvent {
    /// The final request is about to be sent (observe only).
    OnLlmCallPrepared,
    /// Before each model call.
    BeforeLlmCall,
    /// At each response's end.
    AfterLlmCall,
    /// Before a tool call runs.
    BeforeToolCall,
    /// After a tool call ran.
    AfterToolCall,
    /// New messages entered history.
    OnHistoryChanged,
    /// After each step.
    OnStepEnd,
    /// Before the turn.
    TurnStart,
    /// After the turn.
    TurnEnd,
}

impl ExtensionEvent {
    /// Every event, in the order of DESIGN §3.
    pub const ALL: [Self; 9] = [
        Self::OnLlmCallPrepared,
        Self::BeforeLlmCall,
        Self::AfterLlmCall,
        Self::BeforeToolCall,
        Self::AfterToolCall,
        Self::OnHistoryChanged,
        Self::OnStepEnd,
        Self::TurnStart,
        Self::TurnEnd,
    ];

    /// The event's name as DESIGN §3 writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::OnLlmCallPrepared => "on_llm_call_prepared",
            Self::BeforeLlmCall => "before_llm_call",
            Self::AfterLlmCall => "after_llm_call",
            Self::BeforeToolCall => "before_tool_call",
            Self::AfterToolCall => "after_tool_call",
            Self::OnHistoryChanged => "on_history_changed",
            Self::OnStepEnd => "on_step_end",
            Self::TurnStart => "turn_start",
            Self::TurnEnd => "turn_end",
        }
    }
}

/// A handler for one of the nine events.
#[derive(Clone)]
pub enum Hook {
    /// `on_llm_call_prepared`.
    OnLlmCallPrepared(Arc<dyn LlmCallPreparedHook>),
    /// `before_llm_call`.
    BeforeLlmCall(Arc<dyn BeforeLlmCallHook>),
    /// `after_llm_call`.
    AfterLlmCall(Arc<dyn AfterLlmCallHook>),
    /// `before_tool_call`.
    BeforeToolCall(Arc<dyn BeforeToolCallHook>),
    /// `after_tool_call`.
    AfterToolCall(Arc<dyn AfterToolCallHook>),
    /// `on_history_changed`.
    OnHistoryChanged(Arc<dyn HistoryChangedHook>),
    /// `on_step_end`.
    OnStepEnd(Arc<dyn StepEndHook>),
    /// `turn_start`.
    TurnStart(Arc<dyn TurnStartHook>),
    /// `turn_end`.
    TurnEnd(Arc<dyn TurnEndHook>),
}

impl Hook {
    /// The event the handler is for.
    pub fn event(&self) -> ExtensionEvent {
        match self {
            Self::OnLlmCallPrepared(_) => ExtensionEvent::OnLlmCallPrepared,
            Self::BeforeLlmCall(_) => ExtensionEvent::BeforeLlmCall,
            Self::AfterLlmCall(_) => ExtensionEvent::AfterLlmCall,
            Self::BeforeToolCall(_) => ExtensionEvent::BeforeToolCall,
            Self::AfterToolCall(_) => ExtensionEvent::AfterToolCall,
            Self::OnHistoryChanged(_) => ExtensionEvent::OnHistoryChanged,
            Self::OnStepEnd(_) => ExtensionEvent::OnStepEnd,
            Self::TurnStart(_) => ExtensionEvent::TurnStart,
            Self::TurnEnd(_) => ExtensionEvent::TurnEnd,
        }
    }
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hook({})", self.event().name())
    }
}

/// Why the registry or an assembly refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    /// A registration came after the extension's `init` returned.
    #[error("extension `{extension}` tried to {what} outside its init")]
    OutsideInit {
        /// The extension.
        extension: String,
        /// What it tried.
        what: &'static str,
    },
    /// An extension's `init` failed.
    #[error("extension `{extension}` failed to initialise: {reason}")]
    InitFailed {
        /// The extension.
        extension: String,
        /// Why.
        reason: String,
    },
    /// Two extensions have the same id.
    #[error("two extensions have the id `{0}`")]
    DuplicateId(String),
    /// Two extensions contribute a tool of the same name.
    #[error("extensions `{first}` and `{second}` both contribute a tool named `{tool}`")]
    DuplicateTool {
        /// The tool name.
        tool: String,
        /// The extension that contributed it first.
        first: String,
        /// The other one.
        second: String,
    },
    /// An overlay, a config or an enable/disable call names no known extension.
    #[error("unknown extension `{id}` in {place}")]
    UnknownId {
        /// The id.
        id: String,
        /// Where it was named.
        place: String,
    },
    /// A host built-in cannot be replaced or switched off.
    #[error("`{0}` is a host built-in extension: it cannot be replaced or switched off")]
    HostBuiltin(String),
    /// The registry is not ready (never initialised, or its initialisation failed).
    #[error("the extension registry is {0}, not ready")]
    NotReady(&'static str),
    /// A contribution was malformed (a reminder that is not one complete block, a per-turn
    /// hook factory that returned a handler for another event).
    #[error("extension `{extension}`: {reason}")]
    Invalid {
        /// The extension.
        extension: String,
        /// What was wrong.
        reason: String,
    },
}

impl ExtensionError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::OutsideInit { .. } => "extension_outside_init",
            Self::InitFailed { .. } => "extension_init_failed",
            Self::DuplicateId(_) => "extension_duplicate_id",
            Self::DuplicateTool { .. } => "extension_duplicate_tool",
            Self::UnknownId { .. } => "extension_unknown_id",
            Self::HostBuiltin(_) => "extension_host_builtin",
            Self::NotReady(_) => "extension_registry_not_ready",
            Self::Invalid { .. } => "extension_invalid",
        }
    }
}

/// The opening and closing tags every reminder block has exactly once.
pub const REMINDER_OPEN: &str = "<system-reminder>";
/// See [`REMINDER_OPEN`].
pub const REMINDER_CLOSE: &str = "</system-reminder>";

/// Whether `text` is exactly one complete reminder block.
pub fn is_reminder_block(text: &str) -> bool {
    let text = text.trim();
    text.starts_with(REMINDER_OPEN)
        && text.ends_with(REMINDER_CLOSE)
        && text.matches(REMINDER_OPEN).count() == 1
        && text.matches(REMINDER_CLOSE).count() == 1
}

/// A hook error for a handler called outside its turn.
fn foreign_turn(bound: &TurnId, called: &TurnId) -> HookError {
    HookError::new(format!(
        "a hook bound to turn {bound} was called for turn {called}"
    ))
}
