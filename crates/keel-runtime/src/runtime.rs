//! The runtime: one per process, shared by whichever front end drives it. It holds the
//! settings, the model, the extension registry and the store, and one slot per open
//! session (its model, tools, event hub, queue and running turn).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use keel_agent::runner::RunnerDefaults;
use keel_llm::StreamSettings;
use keel_protocol::{Message, QueueEntry, SessionEventBody, SessionId};
use keel_store::{OpenOptions, SessionRecord, Store};
use keel_tools::SandboxMode;
use keel_tools::permission::Mode;

use crate::assembly::{self, ModelChoice, ResolvedModel, check_environment};
use crate::builtin;
use crate::error::RuntimeError;
use crate::events::Hub;
use crate::extension::{ProfileEntry, Registry};
use crate::permission::SessionApprover;
use crate::services::{SessionServices, ToolSetup};
use crate::settings::{Settings, SettingsInput};
use crate::turn::RunningTurn;

/// What a front end starts a runtime with.
#[derive(Clone)]
pub struct RuntimeOptions {
    /// Where settings come from.
    pub settings: SettingsInput,
    /// The model.
    pub model: ModelChoice,
    /// Permission mode (default: config, else auto).
    pub permission: Option<Mode>,
    /// Sandbox (default: config, else by mode).
    pub sandbox: Option<SandboxMode>,
    /// Replaces keel's system prompt (and the project instructions in it).
    pub system_prompt: Option<String>,
    /// Most model calls per turn.
    pub max_steps: Option<u32>,
    /// Whether someone can answer permission requests (TUI, editor). Without, what would
    /// ask is denied with the reason.
    pub interactive: bool,
    /// Extensions beyond keel's catalog, mounted before the host's built-ins.
    pub extensions: Vec<ProfileEntry>,
    /// Host-owned extensions mounted after keel's built-ins: they see every other
    /// extension's rewrites and cannot be switched off (the output budget, the session
    /// report).
    pub host_extensions: Vec<Arc<dyn crate::extension::Extension>>,
    /// The strategy of the `compact` operation (keel's: a checkpoint summary).
    pub compactor: Option<Arc<dyn crate::compaction::Compactor>>,
    /// Lends sessions an editor that holds their files (ACP's `fs/*`).
    pub editor: Option<Arc<dyn crate::services::EditorProvider>>,
    /// The thinking level sessions start with; `None`: the model's own.
    pub thinking: Option<keel_llm::ThinkingLevel>,
    /// Start the servers of the project's `.mcp.json` (and run its hooks) without a trust
    /// record (`--trust-project-mcp`).
    pub trust_project_mcp: bool,
    /// The user said that `/`, the home folder or a folder above it may be the workspace
    /// (`--allow-home-workspace`, or a yes in the TUI); otherwise such a folder is refused, but
    /// for a runtime that runs no turn ([`ModelChoice::None`]), which changes no file.
    pub allow_home_workspace: bool,
}

impl RuntimeOptions {
    /// Options for `cwd` with everything else at its default.
    pub fn new(cwd: PathBuf, model: ModelChoice) -> Self {
        Self {
            settings: SettingsInput {
                cwd,
                ..SettingsInput::default()
            },
            model,
            permission: None,
            sandbox: None,
            system_prompt: None,
            max_steps: None,
            interactive: false,
            extensions: Vec::new(),
            host_extensions: Vec::new(),
            compactor: None,
            editor: None,
            thinking: None,
            trust_project_mcp: false,
            allow_home_workspace: false,
        }
    }
}

/// Whether the session was made now or picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStart {
    /// Made by this open.
    New,
    /// An earlier session.
    Resumed,
}

/// An opened session.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The session's record.
    pub record: SessionRecord,
    /// New or resumed.
    pub start: SessionStart,
}

/// Everything checked before a store is opened: settings, model, modes, extensions.
pub struct Prepared {
    pub(crate) settings: Settings,
    pub(crate) options: RuntimeOptions,
    pub(crate) model: Option<ResolvedModel>,
    pub(crate) mode: Mode,
    pub(crate) sandbox: SandboxMode,
    pub(crate) env_mode: keel_tools::EnvMode,
    pub(crate) stream: StreamSettings,
    pub(crate) registry: Registry,
    /// Things the user should hear about, one line each.
    pub warnings: Vec<String>,
}

impl Prepared {
    /// Loads settings, resolves the model and the modes, and initialises the extensions:
    /// everything that can refuse a run, before anything starts.
    pub fn new(options: RuntimeOptions) -> Result<Self, RuntimeError> {
        // A runtime that runs no turn changes no file, whatever its folder.
        let runs_turns = !matches!(options.model, ModelChoice::None);
        if runs_turns
            && !options.allow_home_workspace
            && let Some(what) = crate::settings::project::home_workspace(
                &options.settings.cwd,
                std::env::var_os("HOME").map(PathBuf::from).as_deref(),
            )
        {
            return Err(RuntimeError::HomeWorkspace(what));
        }
        // A folder added to the workspace is held to the same rule as the working folder.
        if runs_turns && !options.allow_home_workspace {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            for root in &options.settings.extra_roots {
                if let Some(what) = crate::settings::project::home_workspace(root, home.as_deref())
                {
                    return Err(RuntimeError::HomeWorkspace(what));
                }
            }
        }
        let settings = Settings::load(&options.settings)?;
        let mut warnings = settings.warnings.clone();
        let model = match options.model {
            ModelChoice::None => None,
            _ => Some(assembly::resolve_model(
                &settings,
                &options.model,
                None,
                &mut warnings,
            )?),
        };
        if let (Some(level), Some(model)) = (options.thinking, &model)
            && !crate::lifecycle::offers(model, level)
        {
            return Err(RuntimeError::Usage(format!(
                "{} does not offer the thinking level `{level}`",
                model.name,
            )));
        }
        // Said before anything is typed; a turn is refused the same way. A window of 80k
        // tokens holds any system prompt keel makes (instructions are cut at 32 KiB), so
        // only a smaller one costs building the prompt here.
        if let Some(model) = model
            .as_ref()
            .filter(|model| model.spec.context_window < 81_920)
        {
            let prompt = options
                .system_prompt
                .clone()
                .unwrap_or_else(|| settings.system_prompt());
            warnings.extend(
                crate::lean::check(
                    &prompt,
                    &settings.cwd,
                    u64::from(model.spec.context_window),
                    crate::lean::Limits::of(&model.spec, &settings.loaded.config.context),
                    &model.spec.provider,
                )
                .map(|too_small| too_small.warning()),
            );
        }
        let mode = assembly::permission_mode(&settings, options.permission);
        let sandbox = assembly::sandbox_mode(&settings, options.sandbox, mode);
        let env_mode = check_environment()?;
        let stream = StreamSettings::default()
            .from_env()
            .map_err(|e| RuntimeError::Usage(e.to_string()))?;
        settings.loaded.check()?;
        let profile = builtin::profile(
            &settings.loaded.config.extensions,
            options.extensions.clone(),
            options.host_extensions.clone(),
        )
        .map_err(|error| match error {
            // A bad id in the configuration is a configuration error, named by its key.
            crate::extension::ExtensionError::UnknownId { .. }
            | crate::extension::ExtensionError::HostBuiltin(_) => {
                RuntimeError::Config(crate::settings::ConfigError::Model {
                    source_name: "extensions".into(),
                    reason: error.to_string(),
                })
            }
            other => RuntimeError::Extension(other),
        })?;
        let host = crate::extension::HostInfo {
            cwd: settings.cwd.clone(),
            project: settings.project.clone(),
            keel_home: settings.keel_home.clone(),
            trust_project: options.settings.trust_project,
            trust_project_mcp: options.trust_project_mcp,
            control: crate::extension::HostControl::default(),
            sessions_only: model.is_none(),
            interactive: options.interactive,
        };
        let registry = Registry::with_host(
            profile,
            Arc::new(settings.loaded.config.clone()),
            Arc::new(host),
        );
        registry.initialize()?;
        Ok(Self {
            settings,
            options,
            model,
            mode,
            sandbox,
            env_mode,
            stream,
            registry,
            warnings,
        })
    }

    /// The model's `provider/model`; empty for a runtime without one.
    pub fn model_name(&self) -> &str {
        self.model.as_ref().map_or("", |model| model.name.as_str())
    }

    /// The sandbox commands will run in.
    pub fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }

    /// The permission mode new sessions start in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The loaded settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The runtime over `store`.
    pub fn start(self, store: Store) -> Runtime {
        let control = self.registry.host().control.clone();
        let system_prompt = match &self.options.system_prompt {
            Some(text) => text.clone(),
            None => self.settings.system_prompt(),
        };
        let max_tasks = self.settings.loaded.config.tasks.max_concurrent;
        let runtime = Runtime {
            inner: Arc::new(Inner {
                runner: RunnerDefaults {
                    stream: self.stream,
                    max_steps: self.options.max_steps,
                    ..RunnerDefaults::default()
                },
                system_prompt,
                settings: self.settings,
                model: self.model,
                mode: self.mode,
                sandbox: self.sandbox,
                env_mode: self.env_mode,
                interactive: self.options.interactive,
                choice: self.options.model,
                registry: self.registry,
                store,
                slots: Mutex::new(HashMap::new()),
                compactor: Mutex::new(self.options.compactor.clone()),
                editor: self.options.editor.clone(),
                thinking: self.options.thinking,
                tasks: crate::tasks::TaskTable::new(max_tasks),
            }),
        };
        control.bind(&runtime.inner);
        runtime
    }
}

/// Opens the session database the usual way ([`crate::storage`]) and starts the runtime.
pub async fn start(prepared: Prepared, store: OpenOptions) -> Result<Runtime, RuntimeError> {
    let store = crate::storage::open(store).await?;
    Ok(prepared.start(store))
}

pub(crate) struct Inner {
    pub(crate) settings: Settings,
    pub(crate) choice: ModelChoice,
    pub(crate) model: Option<ResolvedModel>,
    pub(crate) mode: Mode,
    pub(crate) sandbox: SandboxMode,
    pub(crate) env_mode: keel_tools::EnvMode,
    pub(crate) interactive: bool,
    pub(crate) runner: RunnerDefaults,
    pub(crate) system_prompt: String,
    pub(crate) registry: Registry,
    pub(crate) store: Store,
    pub(crate) slots: Mutex<HashMap<SessionId, Arc<Slot>>>,
    pub(crate) compactor: Mutex<Option<Arc<dyn crate::compaction::Compactor>>>,
    pub(crate) editor: Option<Arc<dyn crate::services::EditorProvider>>,
    pub(crate) thinking: Option<keel_llm::ThinkingLevel>,
    pub(crate) tasks: crate::tasks::TaskTable,
}

/// Whether a session may start a turn.
pub(crate) enum Admission {
    /// No turn.
    Idle,
    /// A turn is being admitted (its record is being written).
    Starting,
    /// A turn runs.
    Running(Arc<RunningTurn>),
}

pub(crate) struct SlotState {
    pub(crate) record: SessionRecord,
    pub(crate) model: ResolvedModel,
    pub(crate) mode: Mode,
    pub(crate) services: Arc<SessionServices>,
    /// Canonical history as committed, when known; read from the store otherwise.
    pub(crate) history: Option<Vec<Arc<Message>>>,
    /// Whether tool calls a stopped process left open were closed in this runtime.
    pub(crate) reconciled: bool,
    pub(crate) admission: Admission,
    /// The queue as last read (refreshed after every change).
    pub(crate) queue: Vec<QueueEntry>,
    /// The thinking level chosen for the session; `None`: the model's own.
    pub(crate) thinking: Option<keel_llm::ThinkingLevel>,
    /// Whether the session has started tasks (its turns then remind it of unread results).
    pub(crate) tasks_seen: bool,
    /// Turns the runtime decided to start that are not admitted yet (a follow-up from the
    /// queue): the session is not at rest while any is on its way.
    pub(crate) starting: u32,
}

/// An open session.
pub(crate) struct Slot {
    pub(crate) id: SessionId,
    pub(crate) hub: Arc<Hub>,
    /// A task's child session: its role's ceiling on tools and sandbox.
    pub(crate) profile: Option<Arc<crate::tasks::TaskProfile>>,
    /// Bumped when a decided start is admitted or given up, and when the session comes to
    /// rest, for waiters inside the runtime (see `quiet`).
    pub(crate) activity: tokio::sync::watch::Sender<u64>,
    state: Mutex<SlotState>,
}

impl Slot {
    /// A slot for `record` with nothing cached and nothing running.
    pub(crate) fn new(
        record: SessionRecord,
        model: ResolvedModel,
        mode: Mode,
        services: Arc<SessionServices>,
        profile: Option<Arc<crate::tasks::TaskProfile>>,
        thinking: Option<keel_llm::ThinkingLevel>,
    ) -> Arc<Self> {
        let id = record.id.clone();
        Arc::new(Self {
            hub: Hub::new(id.clone()),
            id,
            profile,
            activity: tokio::sync::watch::channel(0).0,
            state: Mutex::new(SlotState {
                record,
                model,
                mode,
                services,
                history: None,
                reconciled: false,
                admission: Admission::Idle,
                queue: Vec::new(),
                thinking,
                tasks_seen: false,
                starting: 0,
            }),
        })
    }

    /// The stored history changed outside the session's turns (a rewind, a compaction):
    /// the cached copy is dropped, and the next turn reads and reconciles it again.
    pub(crate) fn history_changed(&self) {
        let mut state = self.lock();
        state.history = None;
        state.reconciled = false;
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn emit(&self, body: SessionEventBody) {
        self.hub.emit(body);
    }

    /// The running turn, when there is one.
    pub(crate) fn running(&self) -> Option<Arc<RunningTurn>> {
        match &self.lock().admission {
            Admission::Running(turn) => Some(turn.clone()),
            _ => None,
        }
    }

    /// Whether no turn runs or is being admitted.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.lock().admission, Admission::Idle)
    }

    /// Whether steering is waiting (read without touching the store).
    pub(crate) fn steering_waiting(&self) -> bool {
        self.lock()
            .queue
            .iter()
            .any(|e| e.kind == keel_protocol::InputKind::Steer)
    }
}

/// The in-process runtime every front end uses. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("cwd", &self.inner.settings.cwd)
            .field("model", &self.model_name())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// A session's own folder, beside the session database.
    pub fn session_dir(&self, session: &SessionId) -> PathBuf {
        crate::storage::session_dir(self.inner.store.path(), session)
    }

    /// The loaded settings.
    pub(crate) fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The thinking levels `model` (provider/model) offers, `off` first; empty when it does
    /// not reason or the registry does not know it.
    pub fn thinking_levels(&self, model: &str) -> Vec<keel_protocol::ThinkingLevel> {
        self.inner.settings.loaded.thinking_levels(model)
    }

    /// The handle extensions drive the runtime with (the same one their init got).
    pub fn control(&self) -> crate::HostControl {
        self.inner.registry.host().control.clone()
    }

    /// The default model's `provider/model`; empty for a runtime without one.
    pub fn model_name(&self) -> &str {
        self.inner
            .model
            .as_ref()
            .map_or("", |model| model.name.as_str())
    }

    /// The default model; a runtime that only keeps sessions has none.
    pub(crate) fn model(&self) -> Result<&ResolvedModel, RuntimeError> {
        self.inner.model.as_ref().ok_or(RuntimeError::NoModel)
    }

    /// The thinking level sessions start with (`None`: the model's own).
    pub fn thinking(&self) -> Option<keel_protocol::ThinkingLevel> {
        self.inner.thinking
    }

    /// Syncs what was committed to disk (one fsync of the write-ahead log).
    pub async fn sync(&self) -> Result<(), RuntimeError> {
        Ok(self.inner.store.sync().await?)
    }

    pub(crate) fn slot(&self, session: &SessionId) -> Result<Arc<Slot>, RuntimeError> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .cloned()
            .ok_or_else(|| RuntimeError::NotOpen(session.clone()))
    }

    /// The slot of a session, opening it (read-only: nothing is reconciled before its
    /// first turn) when this runtime has not yet.
    pub(crate) async fn slot_or_open(
        &self,
        session: &SessionId,
    ) -> Result<Arc<Slot>, RuntimeError> {
        if let Ok(slot) = self.slot(session) {
            return Ok(slot);
        }
        let record = self.inner.store.session(session).await?;
        self.install(record).await
    }

    pub(crate) fn services(
        &self,
        session: &SessionId,
        slot: Option<&Arc<Slot>>,
        model: &ResolvedModel,
        mode: Mode,
        profile: Option<&crate::tasks::TaskProfile>,
    ) -> Result<Arc<SessionServices>, RuntimeError> {
        let inner = &self.inner;
        let db = crate::storage::db_outside_home().and(Some(inner.store.path().to_path_buf()));
        // A read-only role's commands write nothing, whatever the session's sandbox.
        let sandbox = match profile {
            Some(profile) if profile.read_only => SandboxMode::ReadOnly,
            _ => inner.sandbox,
        };
        let mut setup = ToolSetup::new(
            &inner.settings,
            mode,
            sandbox,
            inner.env_mode,
            model.key_env.clone(),
            db.as_deref(),
        );
        setup.session_dir = Some(self.session_dir(session));
        setup.trusted_code = inner.registry.trusted_code();
        let keel_home = inner.settings.keel_home.as_deref();
        setup.plan_file = keel_home.map(|home| crate::services::plan_file(home, session));
        setup.editor = inner.editor.as_ref().and_then(|lend| lend.editor(session));
        setup.terminal = inner
            .editor
            .as_ref()
            .and_then(|lend| lend.terminal(session));
        if db.is_some() {
            // Beside a database moved out of $KEEL_HOME, the session folders are not hidden
            // by $KEEL_HOME's protection: hide them like the database.
            setup
                .extra_credentials
                .push(crate::storage::sessions_dir(inner.store.path()));
        }
        // A task's child has no one to ask: what would ask is denied with the reason.
        let approver = match (inner.interactive && profile.is_none(), slot) {
            (true, Some(slot)) => Some(Arc::new(SessionApprover::new(
                Arc::downgrade(slot),
                inner.registry.clone(),
            )) as Arc<dyn keel_tools::permission::Approver>),
            _ => None,
        };
        Ok(Arc::new(SessionServices::new(
            setup,
            inner.settings.rules.clone(),
            approver,
        )))
    }

    async fn install(&self, record: SessionRecord) -> Result<Arc<Slot>, RuntimeError> {
        let queue = self.inner.store.queued_inputs(&record.id).await?;
        let id = record.id.clone();
        let model = self.model()?.clone();
        let mode = self.inner.mode;
        // The slot is made first so the approver can point at it.
        let services = self.services(&id, None, &model, mode, None)?;
        let slot = Slot::new(
            record,
            model.clone(),
            mode,
            services,
            None,
            self.inner.thinking,
        );
        slot.lock().queue = queue.iter().map(crate::queue::entry_of).collect();
        if self.inner.interactive {
            let services = self.services(&id, Some(&slot), &model, mode, None)?;
            slot.lock().services = services;
        }
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Another open of the same session may have won the race: use its slot.
        Ok(slots.entry(id).or_insert(slot).clone())
    }

    /// Refuses a session stored under another working folder: it would run with this
    /// folder's settings, trust and files.
    pub(crate) fn in_this_folder(&self, record: &SessionRecord) -> Result<(), RuntimeError> {
        let here = &self.inner.settings.cwd;
        let theirs = std::path::Path::new(&record.cwd);
        let same = theirs == here
            || matches!((theirs.canonicalize(), here.canonicalize()), (Ok(a), Ok(b)) if a == b);
        if same {
            return Ok(());
        }
        Err(RuntimeError::OtherFolder {
            id: record.id.to_string(),
            folder: record.cwd.clone(),
            here: here.display().to_string(),
        })
    }
}
