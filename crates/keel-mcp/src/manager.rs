//! The servers of one runtime: started together in the background, restarted with backoff
//! when they die, and published as numbered revisions of what they offer, which each
//! turn leases (DESIGN §10): a list change makes a new revision, and only turns that start
//! after it see it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::{Peer, RoleClient};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::auth::{Login, TokenSource};
use crate::client::{self, Listing, Signal};
use crate::config::{ServerSpec, Transport};
use crate::error::McpError;
use keel_runtime::settings::extend::ElicitationPolicy;

/// The first wait before a dead server is started again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Restarts in a row, without a start that lasted, before keel gives a server up.
const MAX_RESTARTS: u32 = 5;
/// A connection that lived this long resets the restart count.
const STABLE: Duration = Duration::from_secs(60);

/// What a server is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Starting for the first time.
    Starting,
    /// Connected.
    Ready,
    /// Died; starting again (attempt number).
    Restarting(u32),
    /// Gave up: why.
    Failed(String),
    /// Stopped by keel.
    Stopped,
    /// Waiting for the user to log in (or grant more access): what to do.
    NeedsAuth(String),
}

impl Status {
    /// A short phrase for people.
    pub fn describe(&self) -> String {
        match self {
            Self::Starting => "starting".to_owned(),
            Self::Ready => "ready".to_owned(),
            Self::Restarting(n) => format!("restarting (attempt {n})"),
            Self::Failed(reason) => format!("failed: {reason}"),
            Self::Stopped => "stopped".to_owned(),
            Self::NeedsAuth(advice) => advice.clone(),
        }
    }
}

/// What one server offers at one revision.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The server.
    pub server: String,
    /// Its tools as the MCP schema's JSON (`name`, `description`, `inputSchema`, …).
    pub tools: Arc<[Value]>,
    /// Its prompts.
    pub prompts: Arc<[Value]>,
    /// Whether it offers resources.
    pub resources: bool,
    /// The call limit.
    pub call_timeout: Duration,
}

struct Live {
    peer: Peer<RoleClient>,
    offer: Arc<Offer>,
}

struct ServerState {
    status: Status,
    live: Option<Live>,
}

/// One server and its state.
pub struct Server {
    spec: ServerSpec,
    /// The OAuth token its HTTP connections send, when it can have one.
    auth: Option<Arc<TokenSource>>,
    /// Why its `oauth:` settings cannot be used.
    auth_problem: Option<String>,
    /// Its calls under way that show progress.
    progress: client::Progress,
    /// Records its calls so a request for input reaches the call's user.
    asking: crate::ask::Asking,
    state: Mutex<ServerState>,
    /// Tells waiters the server left `Starting`.
    settled: watch::Sender<bool>,
    stop: CancellationToken,
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its definition.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// What it is doing.
    pub fn status(&self) -> Status {
        self.lock().status.clone()
    }

    /// The server's last refusal for want of a login or scope, if it can log in at all.
    pub fn last_denied(&self) -> Option<crate::auth::Denied> {
        self.auth.as_ref().and_then(|a| a.last_denied())
    }

    /// What it offers, while it runs.
    pub fn offer(&self) -> Option<Arc<Offer>> {
        self.lock().live.as_ref().map(|l| l.offer.clone())
    }

    fn peer(&self) -> Result<Peer<RoleClient>, McpError> {
        let state = self.lock();
        match &state.live {
            Some(live) => Ok(live.peer.clone()),
            None => Err(McpError::NotRunning {
                server: self.spec.name.clone(),
                state: state.status.describe(),
            }),
        }
    }

    /// Waits until the server is no longer starting for the first time, or `limit`.
    pub async fn settled(&self, limit: Duration) {
        let mut watch = self.settled.subscribe();
        let _ = tokio::time::timeout(limit, watch.wait_for(|done| *done)).await;
    }

    /// Calls `tool` with `arguments` within the server's call limit; the result is the
    /// MCP schema's JSON. A call cut off by the server dying is an error.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<Value, McpError> {
        let peer = self.peer()?;
        let limit = self.spec.call_timeout;
        self.bounded(
            limit,
            &format!("tools/call {tool}"),
            client::call(&peer, tool, arguments, None),
        )
        .await
    }

    /// [`Server::call`], the server's progress notifications shown as live output on
    /// `updates`, and its requests for input asked of the user of `origin`'s session. The
    /// time limit does not count the time a question waits for the user.
    pub async fn call_reporting(
        &self,
        tool: &str,
        arguments: Value,
        updates: keel_agent::ToolUpdates,
        origin: Option<crate::CallOrigin>,
    ) -> Result<Value, McpError> {
        let peer = self.peer()?;
        // The token is known once the request is sent; the reporter is removed however
        // the call ends (an abort drops this future).
        struct Forget(client::Progress, Mutex<Option<String>>);
        impl Drop for Forget {
            fn drop(&mut self) {
                let token = self.1.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Some(token) = token {
                    self.0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&token);
                }
            }
        }
        let forget = Forget(self.progress.clone(), Mutex::new(None));
        let register = |token: String| {
            forget
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(token.clone(), updates.clone());
            *forget.1.lock().unwrap_or_else(PoisonError::into_inner) = Some(token);
        };
        let site = origin.map(|origin| self.asking.register(&self.spec.name, origin));
        let limit = self.spec.call_timeout;
        let call = client::call(&peer, tool, arguments, Some(&register));
        let Some(site) = site else {
            return self
                .bounded(limit, &format!("tools/call {tool}"), call)
                .await;
        };
        // The limit is checked again when it passes: a question waiting for the user holds
        // it, and the time questions took is added to it.
        let started = tokio::time::Instant::now();
        let mut call = std::pin::pin!(call);
        loop {
            let deadline = started + limit + site.site.waited();
            match tokio::time::timeout_at(deadline, &mut call).await {
                Ok(result) => {
                    return self
                        .bounded(
                            limit,
                            &format!("tools/call {tool}"),
                            std::future::ready(result),
                        )
                        .await;
                }
                Err(_) if site.site.asking() => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(_) if started + limit + site.site.waited() > tokio::time::Instant::now() => {}
                Err(_) => {
                    return Err(McpError::Timeout {
                        server: self.spec.name.clone(),
                        what: format!("tools/call {tool}"),
                        seconds: limit.as_secs().max(1),
                    });
                }
            }
        }
    }

    /// Gets prompt `name` with `arguments`.
    pub async fn prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, McpError> {
        let peer = self.peer()?;
        self.bounded(
            self.spec.call_timeout,
            &format!("prompts/get {name}"),
            client::prompt(&peer, name, arguments),
        )
        .await
    }

    /// Lists its resources.
    pub async fn resources(&self) -> Result<Vec<Value>, McpError> {
        let peer = self.peer()?;
        self.bounded(
            self.spec.call_timeout,
            "resources/list",
            client::resources(&peer),
        )
        .await
    }

    /// Reads resource `uri`.
    pub async fn read(&self, uri: &str) -> Result<Value, McpError> {
        let peer = self.peer()?;
        self.bounded(
            self.spec.call_timeout,
            &format!("resources/read {uri}"),
            client::read(&peer, uri),
        )
        .await
    }

    async fn bounded<T>(
        &self,
        limit: Duration,
        what: &str,
        request: impl Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<T, McpError> {
        match tokio::time::timeout(limit, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(rmcp::ServiceError::TransportClosed)) => Err(McpError::Request {
                server: self.spec.name.clone(),
                reason: format!("the server stopped during {what}; keel is restarting it"),
            }),
            Ok(Err(error)) => Err(match self.auth.as_ref().and_then(|a| a.take_denied()) {
                Some(denied) => McpError::AuthRequired {
                    server: self.spec.name.clone(),
                    advice: denied.advice(&self.spec.name),
                },
                None => McpError::Request {
                    server: self.spec.name.clone(),
                    reason: error.to_string(),
                },
            }),
            Err(_) => Err(McpError::Timeout {
                server: self.spec.name.clone(),
                what: what.to_owned(),
                seconds: limit.as_secs().max(1),
            }),
        }
    }
}

/// Something that happened to a server, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The server.
    pub server: String,
    /// What happened.
    pub text: String,
}

struct Inner {
    servers: Mutex<BTreeMap<String, Arc<Server>>>,
    /// Bumped whenever what any server offers changes.
    revision: watch::Sender<u64>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    /// Where logins are stored (`None`: no logins).
    keel_home: Option<PathBuf>,
    /// Who answers servers' requests for input.
    asking: crate::ask::Asking,
    notices: Mutex<Vec<Notice>>,
    /// Told of every new revision (the extension adds servers that came up to running
    /// turns).
    listener: Mutex<Option<Listener>>,
}

/// Called after every new revision.
pub type Listener = Arc<dyn Fn() + Send + Sync>;

/// The MCP servers of a runtime. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("servers", &self.names())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager that starts servers in `cwd` with the cleaned environment `env`, their
    /// logins kept in `keel_home`.
    pub fn new(cwd: PathBuf, env: Vec<(String, String)>, keel_home: Option<PathBuf>) -> Self {
        Self::with_elicitation(cwd, env, keel_home, ElicitationPolicy::default())
    }

    /// [`Manager::new`], servers' requests for input answered under `elicitation`.
    pub fn with_elicitation(
        cwd: PathBuf,
        env: Vec<(String, String)>,
        keel_home: Option<PathBuf>,
        elicitation: ElicitationPolicy,
    ) -> Self {
        Self::with_asking(cwd, env, keel_home, elicitation, None, false)
    }

    /// [`Manager::with_elicitation`], requests for input asked of the user of the call's
    /// session through `control` where a front end asks (`interactive`).
    pub fn with_asking(
        cwd: PathBuf,
        env: Vec<(String, String)>,
        keel_home: Option<PathBuf>,
        elicitation: ElicitationPolicy,
        control: Option<keel_runtime::HostControl>,
        interactive: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                servers: Mutex::new(BTreeMap::new()),
                revision: watch::Sender::new(0),
                env,
                cwd,
                keel_home,
                asking: crate::ask::Asking::new(elicitation, control, interactive),
                notices: Mutex::new(Vec::new()),
                listener: Mutex::new(None),
            }),
        }
    }

    fn servers(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Server>>> {
        self.inner
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The servers' names.
    pub fn names(&self) -> Vec<String> {
        self.servers().keys().cloned().collect()
    }

    /// Every server, by name.
    pub fn all(&self) -> Vec<Arc<Server>> {
        self.servers().values().cloned().collect()
    }

    /// The servers `session` may use: the shared ones and the ones its editor attached.
    pub fn visible_to(&self, session: &str) -> Vec<Arc<Server>> {
        self.all()
            .into_iter()
            .filter(|s| match &s.spec.origin {
                crate::config::Origin::Client(owner) => owner == session,
                _ => true,
            })
            .collect()
    }

    /// The server of `key` ([`ServerSpec::key`]).
    pub fn get(&self, key: &str) -> Option<Arc<Server>> {
        self.servers().get(key).cloned()
    }

    /// The current revision of what the servers offer.
    pub fn revision(&self) -> u64 {
        *self.inner.revision.borrow()
    }

    /// What every running server offers now.
    pub fn offers(&self) -> Vec<Arc<Offer>> {
        self.all().iter().filter_map(|s| s.offer()).collect()
    }

    /// Takes the notices gathered since the last call.
    pub fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(
            &mut *self
                .inner
                .notices
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Tells the user something about `server` at the next turn.
    pub fn notify(&self, server: &str, text: String) {
        self.notice(server, text);
    }

    fn notice(&self, server: &str, text: String) {
        tracing::info!(%server, "{text}");
        self.inner
            .notices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Notice {
                server: server.to_owned(),
                text,
            });
    }

    fn bump(&self) {
        self.inner.revision.send_modify(|r| *r += 1);
        let listener = self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(listener) = listener {
            listener();
        }
    }

    /// Calls `listener` after every new revision.
    pub fn listen(&self, listener: Listener) {
        *self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(listener);
    }

    /// Starts every server of `specs` in the background, all at once; a name already
    /// running is stopped first. Needs a tokio runtime.
    pub fn start(&self, specs: Vec<ServerSpec>) {
        for spec in specs {
            let (auth, auth_problem) = match self.token_source(&spec) {
                Ok(auth) => (auth, None),
                Err(problem) => (None, Some(problem)),
            };
            let server = Arc::new(Server {
                auth,
                auth_problem,
                progress: client::Progress::default(),
                asking: self.inner.asking.clone(),
                state: Mutex::new(ServerState {
                    status: Status::Starting,
                    live: None,
                }),
                settled: watch::Sender::new(false),
                stop: CancellationToken::new(),
                spec,
            });
            if let Some(old) = self.servers().insert(server.spec.key(), server.clone()) {
                old.stop.cancel();
            }
            let manager = self.clone();
            tokio::spawn(async move { manager.keep(server).await });
        }
    }

    /// The login of server `key`, for an HTTP server that may log in.
    pub fn login_of(&self, key: &str) -> Result<Login, String> {
        let server = self
            .get(key)
            .ok_or_else(|| format!("no MCP server named `{key}`"))?;
        self.login(&server.spec)?.ok_or_else(|| {
            format!(
                "MCP server `{}` does not log in: it is a command keel starts, or its token \
                 comes from bearer_token_env_var",
                server.spec.name
            )
        })
    }

    /// Starts again the servers that wait for a login the store now has (made by
    /// `keel mcp login` in another terminal, say). Reads the store once per such server.
    pub fn pick_up_logins(&self) {
        let ready: Vec<ServerSpec> = self
            .all()
            .into_iter()
            .filter(|s| matches!(s.status(), Status::NeedsAuth(_)))
            .filter(|s| s.auth.as_ref().is_some_and(|a| a.login_arrived()))
            .map(|s| s.spec.clone())
            .collect();
        if !ready.is_empty() {
            self.start(ready);
        }
    }

    /// Starts server `key` again (after a login).
    pub fn restart(&self, key: &str) {
        if let Some(server) = self.get(key) {
            self.start(vec![server.spec.clone()]);
        }
    }

    /// The token source of an HTTP server that does not bring its own bearer token.
    fn token_source(&self, spec: &ServerSpec) -> Result<Option<Arc<TokenSource>>, String> {
        Ok(self
            .login(spec)?
            .map(|login| Arc::new(TokenSource::new(login))))
    }

    /// The login settings of an HTTP server that does not bring its own bearer token
    /// (`None`: it cannot log in).
    fn login(&self, spec: &ServerSpec) -> Result<Option<Login>, String> {
        let (
            Transport::Http {
                url,
                bearer_env: None,
                oauth,
                ..
            },
            Some(home),
        ) = (&spec.transport, &self.inner.keel_home)
        else {
            return Ok(None);
        };
        let env = |name: &str| {
            self.inner
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        Login::new(&spec.name, url, oauth.as_ref(), home, &env)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// Stops and forgets the servers whose spec `which` picks.
    pub fn stop_where(&self, which: impl Fn(&ServerSpec) -> bool) {
        let stopped: Vec<Arc<Server>> = {
            let mut servers = self.servers();
            let keys: Vec<String> = servers
                .iter()
                .filter(|(_, s)| which(&s.spec))
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| servers.remove(k)).collect()
        };
        if stopped.is_empty() {
            return;
        }
        for server in stopped {
            server.stop.cancel();
            server.lock().live = None;
        }
        self.bump();
    }

    /// Stops every server and starts `specs` (a reload).
    pub fn restart_all(&self, specs: Vec<ServerSpec>) {
        let old: Vec<Arc<Server>> = std::mem::take(&mut *self.servers()).into_values().collect();
        for server in old {
            server.stop.cancel();
            server.lock().live = None;
        }
        self.bump();
        self.start(specs);
    }

    /// Waits until no server is starting for the first time, each at most its start-up
    /// limit and all together at most `limit`.
    pub async fn settled(&self, limit: Duration) {
        let servers = self.all();
        let waits = servers
            .iter()
            .map(|s| s.settled(s.spec.startup_timeout.min(limit)));
        futures::future::join_all(waits).await;
    }

    /// Runs one server: connect, serve until it dies, restart with backoff, until stopped
    /// or given up.
    async fn keep(&self, server: Arc<Server>) {
        let name = server.spec.name.clone();
        let mut failures: u32 = 0;
        loop {
            let (signals_tx, mut signals) = mpsc::unbounded_channel();
            let started = tokio::time::Instant::now();
            let connected = tokio::select! {
                () = server.stop.cancelled() => return,
                result = tokio::time::timeout(
                    server.spec.startup_timeout,
                    self.open(&server, signals_tx),
                ) => result,
            };
            let outcome = match connected {
                Ok(Ok((service, offer))) => {
                    {
                        let mut state = server.lock();
                        state.live = Some(Live {
                            peer: service.peer().clone(),
                            offer,
                        });
                        state.status = Status::Ready;
                    }
                    server.settled.send_replace(true);
                    self.bump();
                    if failures > 0 {
                        self.notice(&name, "is running again".to_owned());
                    }
                    self.serve(&server, service, &mut signals).await
                }
                Ok(Err(McpError::AuthRequired { advice, .. })) => {
                    // Only the user can log in: no restarts until they have.
                    server.lock().status = Status::NeedsAuth(advice.clone());
                    server.settled.send_replace(true);
                    self.notice(&name, advice);
                    return;
                }
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!(
                    "MCP server `{name}` did not start within {} s",
                    server.spec.startup_timeout.as_secs_f64()
                )),
            };
            let reason = match outcome {
                Ok(()) => return,
                Err(reason) => reason,
            };
            let had_run = server.lock().live.take().is_some();
            if had_run {
                self.bump();
            }
            if started.elapsed() >= STABLE {
                failures = 0;
            }
            failures += 1;
            let first_start = !had_run && !*server.settled.borrow();
            if first_start || failures > MAX_RESTARTS {
                // A server that never came up is reported and left alone: the session goes
                // on without it (`/mcp reload` tries again).
                server.lock().status = Status::Failed(reason.clone());
                server.settled.send_replace(true);
                self.notice(&name, reason);
                return;
            }
            server.lock().status = Status::Restarting(failures);
            self.notice(&name, format!("{reason}; restarting (attempt {failures})"));
            let wait = FIRST_BACKOFF
                .saturating_mul(1 << (failures - 1).min(8))
                .min(MAX_BACKOFF);
            tokio::select! {
                () = server.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn open(
        &self,
        server: &Server,
        signals: mpsc::UnboundedSender<Signal>,
    ) -> Result<
        (
            rmcp::service::RunningService<RoleClient, client::Handler>,
            Arc<Offer>,
        ),
        McpError,
    > {
        if let Some(problem) = &server.auth_problem {
            return Err(McpError::Start {
                server: server.spec.name.clone(),
                reason: problem.clone(),
            });
        }
        let connection = client::connect(
            &server.spec,
            &self.inner.env,
            &self.inner.cwd,
            signals,
            server.auth.clone(),
            self.inner.asking.clone(),
            server.progress.clone(),
        )
        .await?;
        let listing = client::list(&connection.peer).await.map_err(|e| {
            match server.auth.as_ref().and_then(|a| a.take_denied()) {
                Some(denied) => McpError::AuthRequired {
                    server: server.spec.name.clone(),
                    advice: denied.advice(&server.spec.name),
                },
                None => McpError::Start {
                    server: server.spec.name.clone(),
                    reason: format!("cannot list its tools: {e}"),
                },
            }
        })?;
        Ok((connection.service, self.offer_of(server, listing)))
    }

    fn offer_of(&self, server: &Server, listing: Listing) -> Arc<Offer> {
        Arc::new(Offer {
            server: server.spec.name.clone(),
            tools: listing.tools.into(),
            prompts: listing.prompts.into(),
            resources: listing.resources,
            call_timeout: server.spec.call_timeout,
        })
    }

    /// Serves a live connection until it ends (`Err`: it died) or keel stops it (`Ok`).
    async fn serve(
        &self,
        server: &Arc<Server>,
        service: rmcp::service::RunningService<RoleClient, client::Handler>,
        signals: &mut mpsc::UnboundedReceiver<Signal>,
    ) -> Result<(), String> {
        let token = service.cancellation_token();
        let peer = service.peer().clone();
        let mut ended = std::pin::pin!(service.waiting());
        loop {
            tokio::select! {
                () = server.stop.cancelled() => {
                    token.cancel();
                    let _ = ended.await;
                    server.lock().status = Status::Stopped;
                    return Ok(());
                }
                quit = &mut ended => {
                    return Err(match quit {
                        Ok(reason) => format!("the connection ended ({reason:?})"),
                        Err(error) => format!("the connection failed ({error})"),
                    });
                }
                Some(Signal::ListChanged) = signals.recv() => {
                    match tokio::time::timeout(server.spec.call_timeout, client::list(&peer)).await {
                        Ok(Ok(listing)) => {
                            let offer = self.offer_of(server, listing);
                            if let Some(live) = server.lock().live.as_mut() {
                                live.offer = offer;
                            }
                            self.bump();
                        }
                        Ok(Err(error)) => self.notice(&server.spec.name, format!("cannot list its tools again: {error}")),
                        Err(_) => self.notice(&server.spec.name, "did not list its tools again in time".to_owned()),
                    }
                }
            }
        }
    }
}
