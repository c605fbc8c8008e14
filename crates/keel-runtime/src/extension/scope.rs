//! The turn a hook, factory or reminder is assembled for, and what the host offers it:
//! the session's services, the model, the turn's deadline, whether optional reminders are
//! on, and a way to report what an extension did to every front end.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use keel_llm::{ModelSpec, StreamFn};
use keel_protocol::{Message, SessionEventBody, SessionId, TurnId, TurnSource};

use crate::events::Hub;

/// Which reminders a turn gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReminderMode {
    /// Every reminder.
    #[default]
    All,
    /// Only critical ones: the model is in `disable_system_reminder_models`.
    CriticalOnly,
}

impl ReminderMode {
    /// Whether a reminder of `criticality` is sent in this mode.
    pub fn allows(self, criticality: super::Criticality) -> bool {
        self == Self::All || criticality == super::Criticality::Critical
    }
}

/// Reports extension actions as typed session events (`SessionEventBody::Extension`), so
/// every front end shows the same ones. Cheap to clone; a scope without a runtime drops
/// them.
#[derive(Clone, Default)]
pub struct ExtensionEvents {
    hub: Option<Arc<Hub>>,
    turn: Option<TurnId>,
}

impl ExtensionEvents {
    pub(crate) fn new(hub: Arc<Hub>, turn: Option<TurnId>) -> Self {
        Self {
            hub: Some(hub),
            turn,
        }
    }

    /// Reports the session's goal as it is now (the goals extension's one typed event).
    pub fn goal(&self, goal: keel_protocol::GoalInfo) {
        if let Some(hub) = &self.hub {
            hub.emit(SessionEventBody::Goal {
                turn_id: self.turn.clone(),
                goal,
            });
        }
    }

    /// Reports a plan submitted for review (the plan extension's typed event).
    pub fn plan_ready(&self, plan: keel_protocol::PlanInfo) {
        if let (Some(hub), Some(turn_id)) = (&self.hub, &self.turn) {
            hub.emit(SessionEventBody::PlanReady {
                turn_id: turn_id.clone(),
                plan,
            });
        }
    }

    /// Reports that `extension` did `kind`, with `details` (an object).
    pub fn emit(&self, extension: &str, kind: &str, details: serde_json::Value) {
        if let Some(hub) = &self.hub {
            let notice = crate::notice::for_event(extension, kind, &details);
            hub.emit(SessionEventBody::Extension {
                turn_id: self.turn.clone(),
                extension: extension.to_owned(),
                kind: kind.to_owned(),
                details,
                notice,
            });
        }
    }
}

impl std::fmt::Debug for ExtensionEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionEvents")
            .field("connected", &self.hub.is_some())
            .finish()
    }
}

/// What a history replacement committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replaced {
    /// The head revision before it, which still holds the old history (a rewind to it
    /// undoes the replacement).
    pub before: u64,
    /// The revision the replacement made.
    pub revision: u64,
}

/// Why a turn's history is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacement {
    /// Older tool outputs became archive receipts.
    Archive,
    /// The history became a checkpoint summary (the session's extensions hear of it as a
    /// compaction).
    Compaction,
}

/// A history commit the store refused.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what}: {source}")]
pub struct HistoryError {
    /// What the commit was for.
    pub what: String,
    /// The store's reason.
    #[source]
    pub source: keel_store::StoreError,
}

/// Replaces the running turn's canonical history (context management, DESIGN §12–13).
#[async_trait]
pub trait HistoryWriter: Send + Sync {
    /// Replaces the session's history with `messages` in one commit by the running turn;
    /// the loop must be handed the same list (`BeforeLlmAction::Prepare`).
    async fn replace(
        &self,
        messages: &[Arc<Message>],
        why: Replacement,
    ) -> Result<Replaced, HistoryError>;
}

/// The turn a hook or factory is bound to, and what the host offers it.
#[derive(Clone)]
pub struct TurnScope {
    /// The session.
    pub session_id: SessionId,
    /// The turn.
    pub turn_id: TurnId,
    /// Who started the turn.
    pub source: TurnSource,
    /// The model as provider/model.
    pub model: String,
    /// The working folder.
    pub cwd: PathBuf,
    /// The host's per-session services (tools environment, permission gate); `None` for a
    /// registry used without a runtime (tests, tools that need nothing of the host).
    pub host: Option<Arc<crate::services::SessionServices>>,
    /// The model's limits and capabilities.
    pub spec: Arc<ModelSpec>,
    /// The model's provider entry (base URL, compatibility switches), when it comes from
    /// the registry; `None` for a fixed model (a script).
    pub entry: Option<Arc<keel_llm::ModelEntry>>,
    /// When the turn must be done (`--timeout`).
    pub deadline: Option<Instant>,
    /// Whether optional reminders are on for this model.
    pub reminders: ReminderMode,
    /// The session's folder (`$KEEL_HOME/sessions/<id>`), where extensions keep files.
    pub session_dir: Option<PathBuf>,
    /// Reports extension actions to front ends.
    pub events: ExtensionEvents,
    /// The model's stream function with the runner's wrappers (timeouts, retries, headers,
    /// output ceiling), for requests of the host's own such as a checkpoint summary; `None`
    /// without a runtime.
    pub stream: Option<Arc<dyn StreamFn>>,
    /// Replaces the running turn's history; `None` without a runtime.
    pub history: Option<Arc<dyn HistoryWriter>>,
    /// The user's text that started the turn (a prompt, or the queued inputs it took),
    /// when known.
    pub prompt: Option<String>,
    /// Tools that join this turn at its next model call (never replacing one it has).
    pub tools: keel_agent::ToolAdditions,
    /// The tools this turn holds back behind its one `tool_search`.
    pub deferred: Arc<crate::deferred::Deferred>,
}

impl TurnScope {
    /// A scope for `session`'s `turn` with no host: the scripted model, nothing else.
    pub fn detached(session: SessionId, turn: TurnId) -> Self {
        let tools = keel_agent::ToolAdditions::default();
        Self {
            session_id: session,
            turn_id: turn,
            source: TurnSource::Api,
            model: "scripted/scripted-model".into(),
            cwd: PathBuf::from("/"),
            host: None,
            spec: Arc::new(ModelSpec::scripted()),
            entry: None,
            deadline: None,
            reminders: ReminderMode::All,
            session_dir: None,
            events: ExtensionEvents::default(),
            stream: None,
            history: None,
            prompt: None,
            deferred: Arc::new(crate::deferred::Deferred::new(
                crate::settings::extend::DisclosureConfig::default().top,
                tools.clone(),
            )),
            tools,
        }
    }

    /// Reports that `extension` did `kind`, with `details`.
    pub fn emit(&self, extension: &str, kind: &str, details: serde_json::Value) {
        self.events.emit(extension, kind, details);
    }
}

impl std::fmt::Debug for TurnScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnScope")
            .field("session_id", &self.session_id)
            .field("turn_id", &self.turn_id)
            .field("source", &self.source)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}
