//! The registry: profile and overlays, the init lifecycle, per-session switches, and leases
//! of one revision's capabilities for each accepted turn.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use keel_agent::ToolRef;
use keel_agent::runner::TurnHooks;
use keel_protocol::SessionId;

use super::api::{Contributions, ExtensionApi, HookSource, ToolSource};
use super::bound::bind;
use super::reminders::RegisteredReminder;
use super::table::{HostHooks, mount};
use super::{Extension, ExtensionError, Hook, SessionChangeHook, TurnScope};
use crate::settings::Config;

/// An extension of a profile and whether it is on by default.
#[derive(Clone)]
pub struct ProfileEntry {
    /// The extension.
    pub extension: Arc<dyn Extension>,
    /// On unless a session or the config switches it off.
    pub enabled: bool,
}

impl ProfileEntry {
    /// An extension that is on by default.
    pub fn on(extension: Arc<dyn Extension>) -> Self {
        Self {
            extension,
            enabled: true,
        }
    }

    /// An extension that is off until switched on.
    pub fn off(extension: Arc<dyn Extension>) -> Self {
        Self {
            extension,
            enabled: false,
        }
    }
}

/// A change a profile overlay makes to its base list.
#[derive(Clone)]
pub enum Overlay {
    /// Switch this extension off by default.
    Disable(String),
    /// Switch this extension on by default.
    Enable(String),
    /// Put this extension in the place of the one with the same id.
    Replace(Arc<dyn Extension>),
}

/// The extensions of a registry: configurable ones in order, then the host's built-ins.
#[derive(Clone, Default)]
pub struct Profile {
    entries: Vec<ProfileEntry>,
    host: Vec<Arc<dyn Extension>>,
}

impl Profile {
    /// A profile of `entries` followed by the host's `builtins`; ids must be unique.
    pub fn new(
        entries: Vec<ProfileEntry>,
        builtins: Vec<Arc<dyn Extension>>,
    ) -> Result<Self, ExtensionError> {
        let mut seen = HashSet::new();
        for id in entries
            .iter()
            .map(|e| e.extension.id())
            .chain(builtins.iter().map(|b| b.id()))
        {
            if !seen.insert(id.to_owned()) {
                return Err(ExtensionError::DuplicateId(id.to_owned()));
            }
        }
        Ok(Self {
            entries,
            host: builtins,
        })
    }

    /// The profile with `overlays` applied in order. Any id that is not in the profile is an
    /// error, and so is any attempt to replace or switch off a host built-in.
    pub fn overlay(mut self, overlays: &[Overlay], place: &str) -> Result<Self, ExtensionError> {
        for overlay in overlays {
            let id = match overlay {
                Overlay::Disable(id) | Overlay::Enable(id) => id.as_str(),
                Overlay::Replace(extension) => extension.id(),
            };
            if self.host.iter().any(|h| h.id() == id) {
                if matches!(overlay, Overlay::Enable(_)) {
                    continue;
                }
                return Err(ExtensionError::HostBuiltin(id.to_owned()));
            }
            let Some(entry) = self.entries.iter_mut().find(|e| e.extension.id() == id) else {
                return Err(ExtensionError::UnknownId {
                    id: id.to_owned(),
                    place: place.to_owned(),
                });
            };
            match overlay {
                Overlay::Disable(_) => entry.enabled = false,
                Overlay::Enable(_) => entry.enabled = true,
                Overlay::Replace(extension) => entry.extension = extension.clone(),
            }
        }
        Ok(self)
    }

    /// `(id, on by default, host built-in)` of every extension, in mounting order.
    pub fn ids(&self) -> Vec<(String, bool, bool)> {
        self.entries
            .iter()
            .map(|e| (e.extension.id().to_owned(), e.enabled, false))
            .chain(self.host.iter().map(|h| (h.id().to_owned(), true, true)))
            .collect()
    }

    fn all(&self) -> impl Iterator<Item = (Arc<dyn Extension>, bool, bool)> + '_ {
        self.entries
            .iter()
            .map(|e| (e.extension.clone(), e.enabled, false))
            .chain(self.host.iter().map(|h| (h.clone(), true, true)))
    }
}

/// Where the registry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Built, not initialised.
    New,
    /// Extensions are running their `init`.
    Initializing,
    /// Every extension initialised: usable.
    Ready,
    /// An extension failed to initialise: never usable.
    Failed,
}

impl Lifecycle {
    fn name(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Initializing => "initializing",
            Self::Ready => "ready",
            Self::Failed => "failed",
        }
    }
}

/// Where one extension stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtensionState {
    /// Not initialised yet.
    New,
    /// In its `init`.
    Initializing,
    /// Initialised.
    Ready,
    /// Its `init` failed, with the reason.
    Failed(String),
}

struct Entry {
    id: String,
    host: bool,
    enabled: bool,
    contributions: Contributions,
}

struct Generation {
    revision: u64,
    entries: Vec<Arc<Entry>>,
}

struct State {
    lifecycle: Lifecycle,
    states: Vec<(String, ExtensionState)>,
    pending: Option<Profile>,
    current: Option<Arc<Generation>>,
    sessions: HashMap<SessionId, HashMap<String, bool>>,
    leases: BTreeMap<u64, usize>,
}

struct Shared {
    state: Mutex<State>,
    config: Arc<Config>,
    host: Arc<super::HostInfo>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The extensions of one runtime. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("Registry")
            .field("lifecycle", &state.lifecycle)
            .field("states", &state.states)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry of `profile`, not initialised yet, whose extensions see the default
    /// configuration.
    pub fn new(profile: Profile) -> Self {
        Self::with_config(profile, Arc::new(Config::default()))
    }

    /// A registry of `profile` whose extensions read `config` during their `init`.
    pub fn with_config(profile: Profile, config: Arc<Config>) -> Self {
        Self::with_host(profile, config, Arc::new(super::HostInfo::default()))
    }

    /// A registry of `profile` whose extensions read `config` and `host` during `init`.
    pub fn with_host(profile: Profile, config: Arc<Config>, host: Arc<super::HostInfo>) -> Self {
        let states = profile
            .ids()
            .into_iter()
            .map(|(id, _, _)| (id, ExtensionState::New))
            .collect();
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    lifecycle: Lifecycle::New,
                    states,
                    pending: Some(profile),
                    current: None,
                    sessions: HashMap::new(),
                    leases: BTreeMap::new(),
                }),
                config,
                host,
            }),
        }
    }

    /// Where the runtime works, as extensions see it.
    pub fn host(&self) -> &super::HostInfo {
        &self.shared.host
    }

    /// Runs every extension's `init`, in order. The first failure fails the registry, which
    /// then refuses every assembly: a partly initialised registry is never used.
    pub fn initialize(&self) -> Result<(), ExtensionError> {
        let profile = {
            let mut state = self.shared.lock();
            if state.lifecycle != Lifecycle::New {
                return Err(ExtensionError::NotReady(state.lifecycle.name()));
            }
            state.lifecycle = Lifecycle::Initializing;
            state.pending.take().unwrap_or_default()
        };
        match self.init_all(&profile, true) {
            Ok(entries) => {
                let mut state = self.shared.lock();
                state.current = Some(Arc::new(Generation {
                    revision: 1,
                    entries,
                }));
                state.lifecycle = Lifecycle::Ready;
                Ok(())
            }
            Err(error) => {
                self.shared.lock().lifecycle = Lifecycle::Failed;
                Err(error)
            }
        }
    }

    /// Initialises a new revision from `profile` and makes it current; running turns keep
    /// the revision they leased. On failure the current revision stays.
    pub fn reload(&self, profile: Profile) -> Result<u64, ExtensionError> {
        {
            let state = self.shared.lock();
            if state.lifecycle != Lifecycle::Ready {
                return Err(ExtensionError::NotReady(state.lifecycle.name()));
            }
        }
        let entries = self.init_all(&profile, false)?;
        let mut state = self.shared.lock();
        let revision = state.current.as_ref().map_or(0, |g| g.revision) + 1;
        state.states = entries
            .iter()
            .map(|e| (e.id.clone(), ExtensionState::Ready))
            .collect();
        state.current = Some(Arc::new(Generation { revision, entries }));
        Ok(revision)
    }

    fn set_state(&self, track: bool, id: &str, to: ExtensionState) {
        if !track {
            return;
        }
        let mut state = self.shared.lock();
        if let Some(slot) = state.states.iter_mut().find(|(i, _)| i == id) {
            slot.1 = to;
        }
    }

    fn init_all(&self, profile: &Profile, track: bool) -> Result<Vec<Arc<Entry>>, ExtensionError> {
        let mut entries = Vec::new();
        for (extension, enabled, host) in profile.all() {
            let id = extension.id().to_owned();
            self.set_state(track, &id, ExtensionState::Initializing);
            let api = ExtensionApi::open(&id, self.shared.config.clone(), self.shared.host.clone());
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| extension.init(&api)));
            let contributions = api.close();
            let failure = match result {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some(error.to_string()),
                Err(_) => Some("its init panicked".to_owned()),
            };
            if let Some(reason) = failure {
                self.set_state(track, &id, ExtensionState::Failed(reason.clone()));
                return Err(ExtensionError::InitFailed {
                    extension: id,
                    reason,
                });
            }
            self.set_state(track, &id, ExtensionState::Ready);
            entries.push(Arc::new(Entry {
                id,
                host,
                enabled,
                contributions,
            }));
        }
        Ok(entries)
    }

    /// The registry's lifecycle.
    pub fn lifecycle(&self) -> Lifecycle {
        self.shared.lock().lifecycle
    }

    /// Every extension's state, in mounting order.
    pub fn states(&self) -> Vec<(String, ExtensionState)> {
        self.shared.lock().states.clone()
    }

    /// The current revision (0 before initialisation).
    pub fn revision(&self) -> u64 {
        self.shared
            .lock()
            .current
            .as_ref()
            .map_or(0, |g| g.revision)
    }

    /// Executions in flight per revision.
    pub fn in_flight(&self) -> BTreeMap<u64, usize> {
        self.shared.lock().leases.clone()
    }

    /// Switches an extension on or off for one session, from its next assembly on.
    pub fn set_enabled(
        &self,
        session: &SessionId,
        id: &str,
        enabled: bool,
    ) -> Result<(), ExtensionError> {
        let mut state = self.shared.lock();
        let known = state
            .current
            .as_ref()
            .and_then(|g| g.entries.iter().find(|e| e.id == id).cloned());
        let Some(entry) = known else {
            return Err(ExtensionError::UnknownId {
                id: id.to_owned(),
                place: format!("the switches of session {session}"),
            });
        };
        if entry.host {
            if enabled {
                return Ok(());
            }
            return Err(ExtensionError::HostBuiltin(id.to_owned()));
        }
        state
            .sessions
            .entry(session.clone())
            .or_default()
            .insert(id.to_owned(), enabled);
        Ok(())
    }

    /// Whether an extension is on for a session now.
    pub fn is_enabled(&self, session: &SessionId, id: &str) -> bool {
        let state = self.shared.lock();
        let Some(entry) = state
            .current
            .as_ref()
            .and_then(|g| g.entries.iter().find(|e| e.id == id).cloned())
        else {
            return false;
        };
        entry.host
            || state
                .sessions
                .get(session)
                .and_then(|s| s.get(id))
                .copied()
                .unwrap_or(entry.enabled)
    }

    /// Every session change handler of the current revision, in mounting order.
    pub fn session_hooks(&self) -> Vec<Arc<dyn SessionChangeHook>> {
        let state = self.shared.lock();
        state
            .current
            .as_ref()
            .map(|g| {
                g.entries
                    .iter()
                    .flat_map(|e| e.contributions.session_hooks.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Tells the session change handlers (a user's Notification hook) that `session` waits
    /// for the user, without holding the caller up.
    pub(crate) fn attention(&self, session: &keel_protocol::SessionId, message: String) {
        let hooks = self.session_hooks();
        if hooks.is_empty() {
            return;
        }
        let session = session.clone();
        let change = super::SessionChange::Attention { message };
        tokio::spawn(async move {
            for hook in hooks {
                if let Err(error) = hook.session_changed(&session, None, &change).await {
                    tracing::warn!(%session, error = %error.message, "a session change handler failed");
                }
            }
        });
    }

    /// Every command source of the current revision, in mounting order.
    pub fn command_sources(&self) -> Vec<Arc<dyn super::CommandSource>> {
        let state = self.shared.lock();
        state
            .current
            .as_ref()
            .map(|g| {
                g.entries
                    .iter()
                    .flat_map(|e| e.contributions.commands.iter().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What every extension declared as trusted code ([`super::ExtensionApi::protect_trusted_code`]),
    /// whether or not a session switched it off: protecting more is never wrong.
    pub fn trusted_code(&self) -> Vec<keel_tools::protect::TrustedPath> {
        let state = self.shared.lock();
        let mut out: Vec<keel_tools::protect::TrustedPath> = Vec::new();
        for entry in state.current.iter().flat_map(|g| g.entries.iter()) {
            for path in &entry.contributions.trusted_code {
                if !out.contains(path) {
                    out.push(path.clone());
                }
            }
        }
        out
    }

    /// Forgets a session's switches (the session was deleted).
    pub fn forget_session(&self, session: &SessionId) {
        self.shared.lock().sessions.remove(session);
    }

    /// Leases the current revision for one execution: the enabled set is read and the
    /// execution registered in one critical section, with no await in between.
    pub fn lease(&self, session: &SessionId) -> Result<Lease, ExtensionError> {
        let mut state = self.shared.lock();
        if state.lifecycle != Lifecycle::Ready {
            return Err(ExtensionError::NotReady(state.lifecycle.name()));
        }
        let Some(generation) = state.current.clone() else {
            return Err(ExtensionError::NotReady("empty"));
        };
        let switches = state.sessions.get(session);
        let entries = generation
            .entries
            .iter()
            .filter(|e| {
                e.host
                    || switches
                        .and_then(|s| s.get(&e.id))
                        .copied()
                        .unwrap_or(e.enabled)
            })
            .cloned()
            .collect();
        *state.leases.entry(generation.revision).or_default() += 1;
        Ok(Lease {
            shared: self.shared.clone(),
            revision: generation.revision,
            entries,
        })
    }

    /// Leases the current revision and assembles a turn's capabilities from it.
    pub fn assemble_turn(&self, scope: &TurnScope) -> Result<TurnCapabilities, ExtensionError> {
        self.lease(&scope.session_id)?.assemble(scope)
    }
}

/// One execution's hold on a revision of the registry; released when dropped.
pub struct Lease {
    shared: Arc<Shared>,
    revision: u64,
    entries: Vec<Arc<Entry>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("revision", &self.revision)
            .field(
                "extensions",
                &self
                    .entries
                    .iter()
                    .map(|e| e.id.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        if let Some(count) = state.leases.get_mut(&self.revision) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.leases.remove(&self.revision);
            }
        }
    }
}

impl Lease {
    /// The leased revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Ids of the extensions this lease holds, in mounting order.
    pub fn extension_ids(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.id.clone()).collect()
    }

    /// Builds the turn's tools, hooks and prompt parts from the leased extensions.
    pub fn assemble(self, scope: &TurnScope) -> Result<TurnCapabilities, ExtensionError> {
        let mut tools: Vec<ToolRef> = Vec::new();
        let mut owners: HashMap<String, String> = HashMap::new();
        let mut runner = TurnHooks::default();
        let mut host = HostHooks::default();
        let mut system_prompt = Vec::new();
        let mut user_prefixes = Vec::new();
        let mut reminders: Vec<RegisteredReminder> = Vec::new();
        let mut system_reminders: Vec<RegisteredReminder> = Vec::new();
        // Host-owned before-LLM handlers (context management) run before all others: the
        // request must be sized before anything adds to it.
        let mut host_before_llm = Vec::new();
        for entry in &self.entries {
            let c = &entry.contributions;
            for source in &c.tools {
                let made = match source {
                    ToolSource::Static(tool) => vec![tool.clone()],
                    ToolSource::Factory(factory) => factory(scope),
                };
                for tool in made {
                    let name = tool.definition().name.clone();
                    if let Some(first) = owners.insert(name.clone(), entry.id.clone()) {
                        return Err(ExtensionError::DuplicateTool {
                            tool: name,
                            first,
                            second: entry.id.clone(),
                        });
                    }
                    tools.push(tool);
                }
            }
            system_prompt.extend(c.system_prompt.iter().filter_map(|p| p.render(scope)));
            user_prefixes.extend(c.user_prefix.iter().filter_map(|p| p.render(scope)));
            for (priority, provider) in &c.reminders {
                reminders.push(RegisteredReminder {
                    extension: entry.id.clone(),
                    priority: *priority,
                    provider: provider.clone(),
                });
            }
            for provider in &c.system_reminders {
                system_reminders.push(RegisteredReminder {
                    extension: entry.id.clone(),
                    priority: 0,
                    provider: provider.clone(),
                });
            }
            for source in &c.hooks {
                let hook = match source {
                    HookSource::Shared(hook) => hook.clone(),
                    HookSource::PerTurn(event, factory) => {
                        let hook = factory(scope);
                        if hook.event() != *event {
                            return Err(ExtensionError::Invalid {
                                extension: entry.id.clone(),
                                reason: format!(
                                    "a handler registered for {} was built for {}",
                                    event.name(),
                                    hook.event().name()
                                ),
                            });
                        }
                        hook
                    }
                };
                match bind(hook, &scope.turn_id) {
                    Hook::BeforeLlmCall(h) if entry.host => host_before_llm.push(h),
                    hook => mount(hook, &mut runner, &mut host),
                }
            }
        }
        host_before_llm.append(&mut runner.before_llm_call);
        runner.before_llm_call = host_before_llm;
        // Highest priority first; equal priorities keep registration order (a stable sort).
        reminders.sort_by_key(|r| std::cmp::Reverse(r.priority));
        // The gate judges each call by what its tool declares it does.
        if let Some(host) = &scope.host {
            host.gate.declare_tools(&tools);
        }
        Ok(TurnCapabilities {
            revision: self.revision,
            tools,
            hooks: runner,
            host,
            system_prompt,
            user_prefixes,
            reminders,
            system_reminders,
            lease: self,
        })
    }
}

/// What one turn got from the registry, holding its lease until dropped.
pub struct TurnCapabilities {
    /// The leased revision.
    pub revision: u64,
    /// Tools, in mounting order.
    pub tools: Vec<ToolRef>,
    /// The runner's hooks, bound to the turn.
    pub hooks: TurnHooks,
    /// The runtime's turn start and end handlers.
    pub host: HostHooks,
    /// System prompt parts, in mounting order.
    pub system_prompt: Vec<String>,
    /// User prompt prefixes, in mounting order.
    pub user_prefixes: Vec<String>,
    /// Extension reminder providers, highest priority first.
    pub reminders: Vec<RegisteredReminder>,
    /// Providers of the host's reminder block, in registration order.
    pub system_reminders: Vec<RegisteredReminder>,
    /// The lease.
    pub lease: Lease,
}

impl TurnCapabilities {
    /// Runs one round of the turn's reminders on `data` (DESIGN §4).
    pub fn render_reminders(
        &self,
        data: &super::ReminderData<'_>,
        mode: super::ReminderMode,
    ) -> Result<super::reminders::Rendered, ExtensionError> {
        super::reminders::render(&self.reminders, &self.system_reminders, data, mode)
    }
}
