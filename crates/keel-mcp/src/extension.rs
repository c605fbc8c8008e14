//! MCP on the runtime's extension SPI: each turn leases what the servers offer at that
//! moment (their tools, the resource tools, `tool_search` when disclosure is deferred);
//! servers that come up during a turn join at its next step; prompts and `/mcp` are slash
//! commands; an editor's servers are attached to one session.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::HookError;
use keel_agent::ToolRef;
use keel_protocol::{CommandInfo, SessionId, TurnId};
use keel_runtime::extension::{
    CommandError, CommandSource, Expansion, Extension, ExtensionApi, ExtensionError, Hook,
    TurnEndHook, TurnScope, TurnStartHook,
};
use keel_runtime::settings::extend::{DisclosureConfig, McpServerConfig};
use serde_json::json;

use crate::config::{self, Defaults, Origin, ServerSpec};
use crate::disclosure::{self, Decision};
use crate::manager::{Manager, Server};
use crate::tool::{self, McpTool, definition, read_only};
use keel_runtime::deferred::Deferred;

/// The extension's id.
pub const ID: &str = "mcp";
/// How long a turn waits for servers still starting before its first request; later
/// ones join at a later step.
const FIRST_REQUEST_WAIT: Duration = Duration::from_secs(5);
/// Leases remembered at most (a turn's goes at its end).
const MAX_LEASES: usize = 256;

/// What one turn leased.
struct TurnLease {
    session: SessionId,
    model: String,
    window: u32,
    /// Servers whose tools the turn has (by key), so a server that comes up later joins
    /// once and one already leased is never swapped.
    servers: Mutex<BTreeSet<String>>,
    /// Every MCP tool of the turn, offered or held back (what disclosure weighs).
    tools: Mutex<Vec<ToolRef>>,
    /// The turn's held-back tools (shared with the built-ins a small window holds back).
    deferred: Arc<Deferred>,
    /// The session's services, which remember what the model found for the lean request.
    services: Option<Arc<keel_runtime::services::SessionServices>>,
    additions: keel_agent::ToolAdditions,
    /// The names of the turn's MCP tools and where each comes from.
    mounted: Mutex<BTreeMap<String, tool::Origin>>,
    /// Events not reported yet (the decision on disclosure, servers that joined, names two
    /// tools clash on), by kind.
    pending: Mutex<Vec<(&'static str, serde_json::Value)>>,
    /// Whether the turn has the resource tools.
    resources: Mutex<bool>,
}

/// State shared by the extension's contributions.
pub struct Shared {
    manager: Manager,
    disclosure: DisclosureConfig,
    defaults: Defaults,
    /// Re-reads the servers to run (for `/mcp reload`).
    load: Box<dyn Fn() -> (Vec<ServerSpec>, Vec<String>) + Send + Sync>,
    started: std::sync::Once,
    /// The runtime keeps sessions only: no server is ever started.
    sessions_only: std::sync::atomic::AtomicBool,
    initial: Mutex<Vec<ServerSpec>>,
    warnings: Mutex<Vec<String>>,
    turns: Mutex<std::collections::VecDeque<(TurnId, Arc<TurnLease>)>>,
    /// Deferred tools each session found, offered directly in its later turns.
    found: Arc<Mutex<HashMap<SessionId, BTreeSet<String>>>>,
    /// The disclosure decision last reported per session.
    reported: Mutex<HashMap<SessionId, bool>>,
    /// Tool names told as clashing.
    clashes: Mutex<BTreeSet<String>>,
}

/// The MCP extension.
pub struct Mcp {
    shared: Arc<Shared>,
}

impl Mcp {
    /// The extension over `manager`, starting `specs` when a runtime first needs them;
    /// `load` gives the servers again for `/mcp reload`; `warnings` are reported to the
    /// first turn.
    pub fn new(
        manager: Manager,
        specs: Vec<ServerSpec>,
        warnings: Vec<String>,
        disclosure: DisclosureConfig,
        defaults: Defaults,
        load: Box<dyn Fn() -> (Vec<ServerSpec>, Vec<String>) + Send + Sync>,
    ) -> Self {
        let shared = Arc::new(Shared {
            manager,
            disclosure,
            defaults,
            load,
            started: std::sync::Once::new(),
            sessions_only: std::sync::atomic::AtomicBool::new(false),
            initial: Mutex::new(specs),
            warnings: Mutex::new(warnings),
            turns: Mutex::new(std::collections::VecDeque::new()),
            found: Arc::new(Mutex::new(HashMap::new())),
            reported: Mutex::new(HashMap::new()),
            clashes: Mutex::new(BTreeSet::new()),
        });
        let weak = Arc::downgrade(&shared);
        shared.manager.listen(Arc::new(move || {
            if let Some(shared) = weak.upgrade() {
                shared.join_running();
            }
        }));
        Self { shared }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Starts the configured servers once, from inside a tokio runtime.
    fn ensure_started(&self) {
        // A runtime that runs no turn (`keel sessions …`) never starts one.
        if tokio::runtime::Handle::try_current().is_err()
            || self
                .sessions_only
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        self.started.call_once(|| {
            let specs = std::mem::take(&mut *lock(&self.initial));
            self.manager.start(specs);
        });
    }

    /// The servers `session` may use: the shared ones and its own.
    fn visible(&self, session: &SessionId) -> Vec<Arc<Server>> {
        self.manager.visible_to(session.as_str())
    }

    /// The tools of `server`'s current offer, each checked; problems are reported.
    fn server_tools(&self, server: &Arc<Server>, scope: Option<&TurnScope>) -> Vec<Arc<McpTool>> {
        let Some(offer) = server.offer() else {
            return Vec::new();
        };
        let mut tools = Vec::new();
        for raw in offer.tools.iter() {
            match definition(&offer.server, raw) {
                Ok((name, def)) => tools.push(Arc::new(McpTool::new(
                    server.clone(),
                    name,
                    def,
                    read_only(raw),
                ))),
                Err(reason) => {
                    tracing::warn!(server = %offer.server, %reason, "an MCP tool is left out");
                    if let Some(scope) = scope {
                        scope.emit(
                            ID,
                            "tool_skipped",
                            json!({"server": offer.server, "reason": reason.to_string()}),
                        );
                    }
                }
            }
        }
        tools
    }

    /// The tools a turn starts with (the tool factory).
    fn lease(&self, scope: &TurnScope) -> Vec<ToolRef> {
        self.ensure_started();
        let servers: Vec<Arc<Server>> = self
            .visible(&scope.session_id)
            .into_iter()
            .filter(|s| s.offer().is_some())
            .collect();
        let mut tools = Vec::new();
        for server in &servers {
            tools.extend(self.server_tools(server, Some(scope)));
        }
        let mut mounted = BTreeMap::new();
        let (tools, clashes) = self.mount(tools, &mut mounted);
        let lease = Arc::new(TurnLease {
            session: scope.session_id.clone(),
            model: scope.model.clone(),
            window: scope.spec.context_window,
            servers: Mutex::new(servers.iter().map(|s| s.spec().key()).collect()),
            tools: Mutex::new(Vec::new()),
            deferred: scope.deferred.clone(),
            services: scope.host.clone(),
            additions: scope.tools.clone(),
            mounted: Mutex::new(mounted),
            pending: Mutex::new(clashes),
            resources: Mutex::new(false),
        });
        let (mut offered, search) = self.disclose(&lease, tools);
        offered.extend(search);
        if servers
            .iter()
            .any(|s| s.offer().is_some_and(|o| o.resources))
        {
            *lock(&lease.resources) = true;
            offered.extend(self.resource_tools(&lease.session));
        }
        let mut turns = lock(&self.turns);
        // A turn's entry goes at its end; a compaction's assembly never ends as a turn,
        // so the oldest entries also make room.
        if turns.len() >= MAX_LEASES {
            turns.pop_front();
        }
        turns.push_back((scope.turn_id.clone(), lease));
        offered
    }

    /// Adds `tools` to the turn's MCP tools and decides, over all of them, what is offered
    /// and what is held back; returns the tools to offer and, the first time tools are
    /// held back, the `tool_search` tool.
    fn disclose(&self, lease: &TurnLease, tools: Vec<ToolRef>) -> (Vec<ToolRef>, Option<ToolRef>) {
        let all: Vec<ToolRef> = {
            let mut all = lock(&lease.tools);
            all.extend(tools.iter().cloned());
            all.clone()
        };
        let decision = disclosure::decide(&self.disclosure, &lease.model, lease.window, &all);
        self.report(lease, &decision);
        if !decision.deferred {
            return (tools, None);
        }
        let found = lock(&self.found)
            .get(&lease.session)
            .cloned()
            .unwrap_or_default();
        let (direct, held): (Vec<ToolRef>, Vec<ToolRef>) = tools.into_iter().partition(|t| {
            let name = &t.definition().name;
            found.contains(name) || disclosure::always_exposed(&self.disclosure, name)
        });
        if held.is_empty() {
            return (direct, None);
        }
        let search = lease.deferred.hold(held, self.remember(lease));
        (direct, search)
    }

    /// What records a find of the lease's session: MCP's own set, which disclosure reads,
    /// and the session's, which the lean request reads.
    fn remember(&self, lease: &TurnLease) -> keel_runtime::deferred::Remember {
        let found = self.found.clone();
        let session = lease.session.clone();
        let services = lease.services.clone();
        Arc::new(move |name: &str| {
            lock(&found)
                .entry(session.clone())
                .or_default()
                .insert(name.to_owned());
            if let Some(services) = &services {
                services.remember_found(name);
            }
        })
    }

    /// Reports the disclosure decision when it changed for the session.
    fn report(&self, lease: &TurnLease, decision: &Decision) {
        if decision.tools == 0 {
            // Nothing to decide yet (no server is up).
            return;
        }
        let mut reported = lock(&self.reported);
        if reported.get(&lease.session) == Some(&decision.deferred) {
            return;
        }
        reported.insert(lease.session.clone(), decision.deferred);
        // Told at the turn's start or its next step (the lease is taken while the turn is
        // assembled, before it reports anything).
        lock(&lease.pending).push(("disclosure", decision.details()));
    }

    /// Adds the tools of servers that came up since each running turn leased: they join
    /// at the turn's next step (called at every new revision).
    fn join_running(&self) {
        let leases: Vec<Arc<TurnLease>> =
            lock(&self.turns).iter().map(|(_, l)| l.clone()).collect();
        for lease in leases {
            self.join(&lease, None);
        }
    }

    /// Adds to `lease` the servers that came up since it was taken.
    fn join(&self, lease: &TurnLease, scope: Option<&TurnScope>) {
        let mut joined = Vec::new();
        let mut tools = Vec::new();
        for server in self.visible(&lease.session) {
            if server.offer().is_none() || !lock(&lease.servers).insert(server.spec().key()) {
                continue;
            }
            joined.push(server.spec().name.clone());
            tools.extend(self.server_tools(&server, scope));
        }
        let (tools, clashes) = self.mount(tools, &mut lock(&lease.mounted));
        lock(&lease.pending).extend(clashes);
        if !tools.is_empty() {
            let (direct, search) = self.disclose(lease, tools);
            if lease.deferred.is_lean() {
                // A small window's request has no room for them: they wait with the rest.
                let more = lease.deferred.hold(direct, self.remember(lease));
                lease.additions.add(search.into_iter().chain(more));
            } else {
                lease.additions.add(direct.into_iter().chain(search));
            }
        }
        let resources = self
            .visible(&lease.session)
            .iter()
            .any(|s| s.offer().is_some_and(|o| o.resources));
        if resources && !std::mem::replace(&mut *lock(&lease.resources), true) {
            lease.additions.add(self.resource_tools(&lease.session));
        }
        if !joined.is_empty() {
            lock(&lease.pending).push(("joined", json!({"servers": joined})));
        }
    }

    /// At a turn's start: servers that came up join, and what happened to servers, the
    /// disclosure decision and the servers that joined are reported.
    fn start_turn(&self, scope: &TurnScope) {
        if let Some(lease) = self.leased(&scope.turn_id) {
            self.join(&lease, Some(scope));
            for (kind, details) in std::mem::take(&mut *lock(&lease.pending)) {
                // A clash that stands is found by every lease; it is told once.
                if kind == "tool_clash" {
                    let name = details["name"].as_str().unwrap_or_default().to_owned();
                    if !lock(&self.clashes).insert(name) {
                        continue;
                    }
                    tracing::warn!(%details, "MCP tools clash on a name");
                }
                scope.emit(ID, kind, details);
            }
        }
        for notice in self.manager.take_notices() {
            scope.emit(
                ID,
                "server",
                json!({"server": notice.server, "text": notice.text}),
            );
        }
        for warning in std::mem::take(&mut *lock(&self.warnings)) {
            scope.emit(ID, "warning", json!({"text": warning}));
        }
    }

    /// Which of `tools` are mounted beside `mounted` ([`tool::mount`]), as the turn's
    /// tools, and the clashes to report (each is told once per runtime, when it reaches a
    /// turn: see `start_turn`).
    fn mount(
        &self,
        tools: Vec<Arc<McpTool>>,
        mounted: &mut BTreeMap<String, tool::Origin>,
    ) -> (Vec<ToolRef>, Vec<(&'static str, serde_json::Value)>) {
        let (kept, clashes) = tool::mount(
            tools,
            |t| {
                (
                    keel_agent::AgentTool::definition(t.as_ref()).name.clone(),
                    t.origin(),
                )
            },
            mounted,
        );
        let clashes = clashes
            .into_iter()
            .map(|clash| ("tool_clash", clash.details()))
            .collect();
        (kept.into_iter().map(|t| t as ToolRef).collect(), clashes)
    }

    /// The resource tools of `session`, over the servers it may use when called.
    fn resource_tools(&self, session: &SessionId) -> Vec<ToolRef> {
        let manager = self.manager.clone();
        let session = session.clone();
        crate::resources::tools(Arc::new(move || resource_servers(&manager, &session)))
    }

    /// The servers `session` may use that offer resources now.
    fn resource_servers(&self, session: &SessionId) -> Vec<Arc<Server>> {
        resource_servers(&self.manager, session)
    }

    fn leased(&self, turn: &TurnId) -> Option<Arc<TurnLease>> {
        lock(&self.turns)
            .iter()
            .find(|(id, _)| id == turn)
            .map(|(_, lease)| lease.clone())
    }

    fn release(&self, turn: &TurnId) {
        lock(&self.turns).retain(|(id, _)| id != turn);
    }

    fn status(&self, session: &SessionId) -> String {
        let servers = self.visible(session);
        if servers.is_empty() {
            return "No MCP servers are configured. Add one with `keel mcp add`, under `mcp_servers:` in config.yaml, or in the project's .mcp.json.".to_owned();
        }
        let mut text = format!("MCP servers (revision {}):\n", self.manager.revision());
        for server in servers {
            let spec = server.spec();
            let what = match &spec.transport {
                config::Transport::Stdio { command, .. } => format!("stdio `{command}`"),
                config::Transport::Http { url, .. } => format!("http {url}"),
            };
            let status = server.status();
            let offer = server.offer();
            let counts = offer.map_or(String::new(), |o| {
                format!(
                    ", {} tool(s), {} prompt(s){}",
                    o.tools.len(),
                    o.prompts.len(),
                    if o.resources { ", resources" } else { "" }
                )
            });
            text.push_str(&format!(
                "- {}: {}{counts} — {what}, from {}\n",
                spec.name,
                status.describe(),
                spec.origin.label()
            ));
        }
        text
    }
}

impl Extension for Mcp {
    fn id(&self) -> &str {
        ID
    }

    fn description(&self) -> Option<&str> {
        Some("MCP servers: their tools, resources and prompts")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        self.shared.sessions_only.store(
            api.host().sessions_only,
            std::sync::atomic::Ordering::Relaxed,
        );
        // Started now, so they are ready by the first turn.
        self.shared.ensure_started();
        let shared = self.shared.clone();
        api.register_tool_factory(Arc::new(move |scope: &TurnScope| shared.lease(scope)))?;
        api.on(Hook::TurnStart(Arc::new(WaitForServers {
            shared: self.shared.clone(),
        })))?;
        api.on(Hook::TurnEnd(Arc::new(Release {
            shared: self.shared.clone(),
        })))?;
        api.register_commands(Arc::new(Commands {
            shared: self.shared.clone(),
        }))?;
        api.on_session_change(Arc::new(SessionServers {
            shared: self.shared.clone(),
        }))?;
        Ok(())
    }
}

/// The servers an editor attached to a session live as long as it: stopped when it is
/// closed or deleted.
struct SessionServers {
    shared: Arc<Shared>,
}

#[async_trait]
impl keel_runtime::extension::SessionChangeHook for SessionServers {
    async fn session_changed(
        &self,
        session: &SessionId,
        _dir: Option<&std::path::Path>,
        change: &keel_runtime::extension::SessionChange,
    ) -> Result<(), HookError> {
        use keel_runtime::extension::SessionChange;
        if matches!(change, SessionChange::Closed | SessionChange::Deleted) {
            let owner = session.to_string();
            self.shared
                .manager
                .stop_where(|spec| spec.origin == Origin::Client(owner.clone()));
        }
        Ok(())
    }
}

/// Before the first request: wait briefly for servers still starting.
struct WaitForServers {
    shared: Arc<Shared>,
}

#[async_trait]
impl TurnStartHook for WaitForServers {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        self.shared.ensure_started();
        self.shared.manager.pick_up_logins();
        self.shared.manager.settled(FIRST_REQUEST_WAIT).await;
        self.shared.start_turn(scope);
        Ok(())
    }
}

/// At the turn's end: its lease goes.
struct Release {
    shared: Arc<Shared>,
}

#[async_trait]
impl TurnEndHook for Release {
    async fn turn_end(
        &self,
        scope: &TurnScope,
        _outcome: &keel_protocol::TurnOutcome,
    ) -> Result<(), HookError> {
        self.shared.release(&scope.turn_id);
        Ok(())
    }
}

/// The servers of `manager` that `session` may use and that offer resources now.
fn resource_servers(manager: &Manager, session: &SessionId) -> Vec<Arc<Server>> {
    manager
        .visible_to(session.as_str())
        .into_iter()
        .filter(|s| s.offer().is_some_and(|o| o.resources))
        .collect()
}

/// `/mcp`, `/mcp reload`, and each server prompt as `/<server>:<prompt>`; each server's
/// resources as `@server:uri` mentions.
struct Commands {
    shared: Arc<Shared>,
}

#[async_trait]
impl CommandSource for Commands {
    fn commands(&self) -> Vec<CommandInfo> {
        let mut all = vec![CommandInfo {
            name: "mcp".to_owned(),
            description: "MCP servers and their state; `/mcp reload` restarts them, `/mcp \
                          login NAME` logs in to one that asks"
                .to_owned(),
            argument_hint: Some("[reload | login NAME | logout NAME]".to_owned()),
            source: ID.to_owned(),
        }];
        for offer in self.shared.manager.offers() {
            for prompt in offer.prompts.iter() {
                let Some(name) = prompt.get("name").and_then(serde_json::Value::as_str) else {
                    continue;
                };
                all.push(CommandInfo {
                    name: format!("{}:{name}", offer.server),
                    description: prompt
                        .get("description")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("an MCP prompt")
                        .to_owned(),
                    argument_hint: crate::prompts::hint(prompt),
                    source: ID.to_owned(),
                });
            }
        }
        all
    }

    async fn run(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>> {
        if name == "mcp" {
            return Some(match arguments.trim() {
                "" => {
                    // Servers still starting get a moment, so the answer says how they are.
                    self.shared.ensure_started();
                    self.shared.manager.pick_up_logins();
                    self.shared.manager.settled(FIRST_REQUEST_WAIT).await;
                    Ok(Expansion::Reply(self.shared.status(session)))
                }
                "reload" => {
                    let (specs, warnings) = (self.shared.load)();
                    self.shared.manager.restart_all(specs);
                    lock(&self.shared.warnings).extend(warnings.iter().cloned());
                    self.shared.manager.settled(FIRST_REQUEST_WAIT).await;
                    let mut text = self.shared.status(session);
                    for warning in warnings {
                        text.push_str(&format!("\n{warning}"));
                    }
                    Ok(Expansion::Reply(text))
                }
                other => match other.split_once(' ') {
                    Some(("login", name)) => self.login(session, name.trim()).await,
                    Some(("logout", name)) => self.logout(session, name.trim()),
                    _ => Err(CommandError::Usage(format!(
                        "unknown argument `{other}` (use /mcp, /mcp reload, /mcp login NAME or \
                         /mcp logout NAME)"
                    ))),
                },
            });
        }
        let (server_name, prompt) = name.split_once(':')?;
        // A server still starting (the run began a moment ago) is waited for briefly.
        for server in self.shared.visible(session) {
            if server.spec().name == server_name {
                server.settled(FIRST_REQUEST_WAIT).await;
            }
        }
        let server = self
            .shared
            .visible(session)
            .into_iter()
            .find(|s| s.spec().name == server_name)?;
        let offer = server.offer()?;
        let declared = offer
            .prompts
            .iter()
            .find(|p| p.get("name").and_then(serde_json::Value::as_str) == Some(prompt))?
            .clone();
        Some(crate::prompts::expand(&server, prompt, &declared, arguments).await)
    }

    async fn mentions(&self, session: &SessionId) -> Vec<keel_protocol::MentionInfo> {
        self.shared.ensure_started();
        crate::resources::mentions(self.shared.resource_servers(session)).await
    }

    async fn read_mention(
        &self,
        session: &SessionId,
        mention: &str,
    ) -> Option<Result<String, CommandError>> {
        // A prompt sent as keel starts names a server still starting: it gets the moment
        // a turn's first request gives servers.
        let (name, _) = mention.split_once(':')?;
        if !self
            .shared
            .visible(session)
            .iter()
            .any(|s| s.spec().name == name)
        {
            return None;
        }
        self.shared.ensure_started();
        self.shared.manager.settled(FIRST_REQUEST_WAIT).await;
        crate::resources::read_mention(self.shared.resource_servers(session), mention)
            .await
            .map(|read| read.map_err(CommandError::refused))
    }

    async fn attach(
        &self,
        session: &SessionId,
        kind: &str,
        value: &serde_json::Value,
    ) -> Option<Result<(), CommandError>> {
        if kind != "mcp_servers" {
            return None;
        }
        Some(self.attach_servers(session, value))
    }
}

impl Commands {
    /// The key and login settings of server `name` of `session`.
    fn login_of(
        &self,
        session: &SessionId,
        name: &str,
    ) -> Result<(String, crate::auth::Login), CommandError> {
        let key = self
            .shared
            .visible(session)
            .into_iter()
            .find(|s| s.spec().name == name)
            .map(|s| s.spec().key())
            .ok_or_else(|| {
                CommandError::Usage(format!("no MCP server named `{name}` (see /mcp)"))
            })?;
        let login = self
            .shared
            .manager
            .login_of(&key)
            .map_err(CommandError::Usage)?;
        Ok((key, login))
    }

    /// `/mcp login NAME`: the user asked, so the browser opens; the login finishes in the
    /// background and the server starts again with its token.
    async fn login(&self, session: &SessionId, name: &str) -> Result<Expansion, CommandError> {
        let (key, login) = self.login_of(session, name)?;
        let challenge = self
            .shared
            .manager
            .get(&key)
            .and_then(|s| s.last_denied())
            .map(|d| d.challenge);
        let started = login.begin(challenge).await.map_err(CommandError::failed)?;
        match started {
            crate::auth::Started::Done(granted) => {
                self.shared.manager.restart(&key);
                Ok(Expansion::Reply(format!(
                    "Logged in to `{name}` at {}; it is starting again.",
                    granted.host
                )))
            }
            crate::auth::Started::Browser(pending) => {
                let opened = crate::auth::open_browser(&pending.url);
                let text = format!(
                    "`{name}` logs in at {}. {}\n{}\nkeel waits {} minutes; `{name}` starts \
                     again once you are logged in.",
                    pending.host,
                    match &opened {
                        Ok(()) => "Your browser opened; if it did not, open:".to_owned(),
                        Err(why) => format!("keel cannot open a browser ({why}); open:"),
                    },
                    pending.url,
                    crate::auth::LOGIN_TIME.as_secs() / 60
                );
                let manager = self.shared.manager.clone();
                let server = name.to_owned();
                tokio::spawn(async move {
                    match pending.finish().await {
                        Ok(granted) => {
                            manager.notify(
                                &server,
                                format!("logged in at {}; starting again", granted.host),
                            );
                            manager.restart(&key);
                        }
                        Err(error) => manager.notify(&server, format!("login failed: {error}")),
                    }
                });
                Ok(Expansion::Reply(text))
            }
        }
    }

    /// `/mcp logout NAME`: the tokens are deleted and the server starts again without.
    fn logout(&self, session: &SessionId, name: &str) -> Result<Expansion, CommandError> {
        let (key, login) = self.login_of(session, name)?;
        let had = login.forget().map_err(CommandError::failed)?;
        self.shared.manager.restart(&key);
        Ok(Expansion::Reply(if had {
            format!("Logged out of `{name}`; its tokens are deleted.")
        } else {
            format!("`{name}` had no stored login.")
        }))
    }

    fn attach_servers(
        &self,
        session: &SessionId,
        value: &serde_json::Value,
    ) -> Result<(), CommandError> {
        let servers: std::collections::BTreeMap<String, McpServerConfig> =
            serde_json::from_value(value.clone())
                .map_err(|e| CommandError::Usage(e.to_string()))?;
        let mut specs = Vec::new();
        for (name, server) in &servers {
            specs.push(
                config::spec_of(
                    name,
                    server,
                    self.shared.defaults,
                    Origin::Client(session.to_string()),
                )
                .map_err(|e| CommandError::Usage(e.to_string()))?,
            );
        }
        self.shared.ensure_started();
        // A session loaded again with another list keeps only the servers of the new one.
        let owner = session.to_string();
        self.shared.manager.stop_where(|spec| {
            spec.origin == Origin::Client(owner.clone()) && !servers.contains_key(&spec.name)
        });
        self.shared.manager.start(specs);
        Ok(())
    }
}
