//! The connection: ACP's methods on keel's runtimes. Handlers do their work on tasks of
//! their own and answer from there, so the dispatch loop is always free for the next
//! message (a cancel, a permission answer, another session's prompt).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, ClientCapabilities, CloseSessionRequest,
    CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse, ForkSessionRequest,
    ForkSessionResponse, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities,
    SessionForkCapabilities, SessionInfo, SessionListCapabilities, SessionResumeCapabilities,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error, ErrorCode};

use keel_protocol::ops;
use keel_protocol::{Message, SessionId, SessionTarget, Usage};
use keel_runtime::SessionRecord;
use keel_runtime::storage::Store;
use keel_runtime::{ContractExt, Runtime};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use crate::prompt::{self, Prompt};
use crate::session::{Offer, Session, rpc_error};
use crate::{AcpError, ServeOptions, commands, files, mcp, modes, replay};

/// Sessions listed per page of `session/list`.
const LIST_PAGE: usize = 50;
/// The auth method that has the editor run `keel login` in a terminal.
const LOGIN_METHOD: &str = "keel-login";
/// How long shutting down waits for running turns to stop and commit.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether reopening a session shows its history again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replay {
    /// `session/load`: the editor gets the conversation as updates.
    Shown,
    /// `session/resume`: the editor has it already.
    Skipped,
}

/// One working folder's runtime and what its settings say.
struct Folder {
    runtime: Runtime,
    mode: keel_protocol::PermissionMode,
    sandbox: keel_protocol::SandboxMode,
    models: Vec<String>,
}

/// The state every handler shares.
struct Server {
    options: ServeOptions,
    relays: tokio::sync::OnceCell<Option<Arc<crate::terminal::Relays>>>,
    client: OnceLock<ClientCapabilities>,
    store: tokio::sync::OnceCell<Store>,
    /// A runtime without a model that answers what belongs to no folder (the session list).
    keeper: tokio::sync::OnceCell<Runtime>,
    folders: tokio::sync::Mutex<HashMap<PathBuf, Arc<Folder>>>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message.into())
}

fn unknown_session(id: &str) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("session {id} is not open in this connection: create, load or resume it first"),
    )
}

fn check_cwd(cwd: &Path) -> Result<(), Error> {
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "cwd must be an absolute path, not {}",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(invalid(format!("cwd {} is not a folder", cwd.display())));
    }
    Ok(())
}

impl Server {
    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, Error> {
        self.lock_sessions()
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_session(id))
    }

    fn notices(&self) -> bool {
        self.client
            .get()
            .and_then(|c| c.session.as_ref())
            .is_some_and(|s| s.notices.is_some())
    }

    async fn store(&self) -> Result<Store, Error> {
        self.store
            .get_or_try_init(|| keel_runtime::storage::open(self.options.store))
            .await
            .cloned()
            .map_err(|e| rpc_error(&e))
    }

    /// The runtime that keeps sessions only, started on first use.
    async fn keeper(&self) -> Result<Runtime, Error> {
        self.keeper
            .get_or_try_init(|| async {
                let mut options = self.options.base.clone();
                options.model = keel_runtime::ModelChoice::None;
                let prepared = (self.options.prepare)(options).map_err(|e| rpc_error(&e))?;
                Ok(prepared.start(self.store().await?))
            })
            .await
            .cloned()
    }

    /// The socket for terminal relays, made when the client first needs it.
    async fn relays(&self) -> Option<Arc<crate::terminal::Relays>> {
        let offered = self.client.get().is_some_and(|c| c.terminal);
        let dir = self.options.run_dir.clone();
        self.relays
            .get_or_init(|| async move {
                let dir = dir.filter(|_| offered)?;
                match crate::terminal::Relays::start(&dir) {
                    Ok(relays) => Some(relays),
                    Err(error) => {
                        tracing::warn!(%error, dir = %dir.display(), "no terminal relays: commands are not shown live");
                        None
                    }
                }
            })
            .await
            .clone()
    }

    /// The runtime of `cwd`, started on first use.
    async fn folder(
        self: &Arc<Self>,
        cwd: &Path,
        connection: &ConnectionTo<Client>,
    ) -> Result<Arc<Folder>, Error> {
        let mut folders = self.folders.lock().await;
        if let Some(folder) = folders.get(cwd) {
            return Ok(folder.clone());
        }
        let mut options = self.options.base.clone();
        options.settings.cwd = cwd.to_path_buf();
        let fs = self.client.get().map(|c| &c.fs);
        let files = fs.is_some_and(|fs| fs.read_text_file && fs.write_text_file);
        let relays = self.relays().await;
        if files || relays.is_some() {
            let weak = Arc::downgrade(self);
            options.editor = Some(Arc::new(files::Lender {
                connection: connection.clone(),
                files,
                relays,
                find: Arc::new(move |id: &str| {
                    weak.upgrade()
                        .and_then(|server| server.lock_sessions().get(id).cloned())
                }),
            }));
        }
        let prepared = (self.options.prepare)(options).map_err(|e| rpc_error(&e))?;
        let folder = Folder {
            mode: prepared.mode(),
            sandbox: prepared.sandbox(),
            models: prepared.settings().loaded.model_names(),
            runtime: prepared.start(self.store().await?),
        };
        let folder = Arc::new(folder);
        folders.insert(cwd.to_path_buf(), folder.clone());
        Ok(folder)
    }

    /// Opens `target` in `cwd`'s runtime for this connection; an open session is reused.
    async fn open(
        self: &Arc<Self>,
        cwd: &Path,
        target: SessionTarget,
        connection: &ConnectionTo<Client>,
    ) -> Result<(Arc<Session>, SessionRecord), Error> {
        check_cwd(cwd)?;
        let folder = self.folder(cwd, connection).await?;
        let opened = folder
            .runtime
            .request(ops::OpenSession { target })
            .await
            .map_err(|e| rpc_error(&e))?;
        let record = opened.record;
        let fresh = opened.start == keel_runtime::SessionStart::New;
        let key = record.id.to_string();
        if let Some(open) = self.lock_sessions().get(&key) {
            return Ok((open.clone(), record));
        }
        let session = Session::new(
            record.id.clone(),
            folder.runtime.clone(),
            cwd.to_path_buf(),
            folder.mode,
            folder.sandbox,
            folder.models.clone(),
            self.notices(),
        );
        session.editor_asks(self.client.get().and_then(|c| c.elicitation.clone()));
        if fresh {
            session
                .untitled
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        session.subscribe(connection.clone()).await?;
        let session = self.lock_sessions().entry(key).or_insert(session).clone();
        Ok((session, record))
    }

    /// Opens a stored session for `session/load` (its history replayed first) or
    /// `session/resume`, with the editor's MCP servers.
    async fn reopen(
        self: &Arc<Self>,
        cwd: &Path,
        id: &str,
        mcp_servers: &[McpServer],
        replay: Replay,
        connection: &ConnectionTo<Client>,
    ) -> Result<Arc<Session>, Error> {
        let servers = mcp::attach_value(mcp_servers).map_err(|e| invalid(e.to_string()))?;
        let was_open = self.session(id).is_ok();
        // Exactly this id, and only under `cwd`: an editor never reaches another project's
        // session by a prefix or a folder it names.
        let target = SessionTarget::Exact { id: id.to_owned() };
        let (session, record) = self.open(cwd, target, connection).await?;
        if let Err(error) = attach(&session, servers).await {
            if !was_open {
                self.discard(&session, Discard::Close).await;
            }
            return Err(error);
        }
        let entries = self.history(&session).await?;
        if replay == Replay::Shown {
            for update in replay::updates(&entries, &session.cwd) {
                session.send(connection, update);
            }
        }
        Self::know(&session, &record, &entries);
        commands::offer(&session, connection, Offer::Always).await;
        Ok(session)
    }

    /// Forgets a session this connection opened for a request that then failed.
    async fn discard(&self, session: &Session, discard: Discard) {
        self.lock_sessions().remove(session.id.as_str());
        let _ = session
            .runtime
            .request(ops::CloseSession {
                session_id: session.id.clone(),
            })
            .await;
        if discard == Discard::Delete {
            let _ = session
                .runtime
                .request(ops::DeleteSession {
                    session_id: session.id.clone(),
                })
                .await;
        }
    }

    /// Stored history, for replay and totals.
    async fn history(&self, session: &Session) -> Result<Vec<keel_runtime::StoredEntry>, Error> {
        session
            .runtime
            .request(ops::GetMessages {
                session_id: session.id.clone(),
                revision: None,
            })
            .await
            .map_err(|e| rpc_error(&e))
    }

    /// Tells the session what the editor was shown at open (title, stored usage).
    fn know(session: &Session, record: &SessionRecord, entries: &[keel_runtime::StoredEntry]) {
        let mut usage = Usage::default();
        for entry in entries {
            if let Message::Assistant(answer) = &entry.message {
                usage += answer.usage;
            }
        }
        session.know(&record.title, usage.cost.total, usage);
    }

    /// What the editor can do when the launch folder's model lacks its key, or no model can
    /// be chosen at all (a first run): log in through `keel login` in a terminal the editor
    /// opens, or set the key's variable. The registry and the credential store are read, and
    /// with no key at all a local model server is looked for on loopback (short, blocking
    /// calls: run off the async workers, [`Self::missing_key_off_thread`]).
    fn missing_key(&self) -> Vec<AuthMethod> {
        let keel_runtime::ModelChoice::Configured { model, .. } = &self.options.base.model else {
            return Vec::new();
        };
        let mut input = self.options.base.settings.clone();
        input.cwd = self.options.launch_cwd.clone();
        let Ok(settings) = keel_runtime::settings::Settings::load(&input) else {
            return Vec::new();
        };
        let login = |provider: Option<&str>| {
            let mut args = vec!["login".to_owned()];
            args.extend(provider.map(str::to_owned));
            AuthMethod::Terminal(
                AuthMethodTerminal::new(LOGIN_METHOD, "Log in with keel")
                    .description(
                        "Run `keel login` in a terminal: pick a provider, paste its key (kept \
                         in keel's credential store, readable by you alone), pick a model"
                            .to_owned(),
                    )
                    .args(args),
            )
        };
        let (provider, variable) = match settings.loaded.resolve_model(model.as_deref()) {
            Ok(resolved) => {
                let Some(variable) = resolved.api_key_env else {
                    return Vec::new();
                };
                let provider = resolved.entry.provider;
                if std::env::var(&variable).is_ok_and(|key| !key.trim().is_empty())
                    || keel_runtime::credentials::provider_key(
                        settings.keel_home.as_deref(),
                        &provider,
                    )
                    .is_some()
                {
                    return Vec::new();
                }
                (Some(provider), variable)
            }
            Err(keel_runtime::settings::ConfigError::NoKey { .. }) => {
                (None, "ANTHROPIC_API_KEY".to_owned())
            }
            Err(_) => return Vec::new(),
        };
        let about = provider.as_deref().map_or_else(
            || "keel reads a provider's key from the environment".to_owned(),
            |p| format!("keel's model provider `{p}` reads its API key from {variable}"),
        );
        vec![
            login(provider.as_deref()),
            AuthMethod::Agent(
                AuthMethodAgent::new(format!("env:{variable}"), format!("Set {variable}"))
                    .description(format!(
                        "{about}: set it in the environment the editor starts keel with, then \
                         restart the agent"
                    )),
            ),
        ]
    }

    /// [`Self::missing_key`] without holding up an async worker.
    fn missing_key_off_thread(&self) -> Vec<AuthMethod> {
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| self.missing_key())
            }
            _ => self.missing_key(),
        }
    }

    /// Ends every session: running turns are aborted and committed before keel exits.
    async fn shutdown(&self) {
        if let Some(Some(relays)) = self.relays.get() {
            relays.stop();
        }
        let sessions: Vec<Arc<Session>> = self.lock_sessions().drain().map(|(_, s)| s).collect();
        let closing = sessions.iter().map(|session| async move {
            session.cancel().await;
            let _ = session
                .runtime
                .request(ops::CloseSession {
                    session_id: session.id.clone(),
                })
                .await;
        });
        let _ = tokio::time::timeout(SHUTDOWN_WAIT, futures::future::join_all(closing)).await;
        let folders: Vec<Arc<Folder>> = self.folders.lock().await.values().cloned().collect();
        for folder in folders {
            if let Err(error) = folder.runtime.sync().await {
                tracing::warn!(%error, "cannot flush the session log");
            }
        }
    }
}

/// What becomes of a session a failed request opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Discard {
    /// A stored session the editor asked for: it stays stored, closed.
    Close,
    /// A session the request made (new, forked): nobody knows it, so it goes.
    Delete,
}

/// Hands the editor's MCP servers (`Op::Attach`'s value) to the session; the MCP extension
/// starts them for it alone. A definition it refuses fails the request, naming the server.
async fn attach(session: &Session, servers: serde_json::Value) -> Result<(), Error> {
    if servers.as_object().is_none_or(serde_json::Map::is_empty) {
        return Ok(());
    }
    session
        .runtime
        .request(ops::Attach {
            session_id: session.id.clone(),
            kind: "mcp_servers".to_owned(),
            value: servers,
        })
        .await
        .map(drop)
        .map_err(|e| rpc_error(&e))
}

/// Runs `work` on a task of its own and answers `responder` with its result.
fn answer<T, F>(responder: Responder<T>, work: F)
where
    T: agent_client_protocol::JsonRpcResponse + Send + 'static,
    F: std::future::Future<Output = Result<T, Error>> + Send + 'static,
{
    tokio::spawn(async move {
        let _ = match work.await {
            Ok(response) => responder.respond(response),
            Err(error) => responder.respond_with_error(error),
        };
    });
}

/// Serves ACP on stdin and stdout until the editor closes stdin; then every running turn is
/// aborted and committed.
pub async fn serve(options: ServeOptions) -> Result<(), AcpError> {
    let server = Arc::new(Server {
        options,
        client: OnceLock::new(),
        relays: tokio::sync::OnceCell::new(),
        store: tokio::sync::OnceCell::new(),
        keeper: tokio::sync::OnceCell::new(),
        folders: tokio::sync::Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
    });
    // Lines reach the protocol as text: a byte that is not UTF-8 becomes U+FFFD there (and
    // that line an ordinary bad request), instead of ending the connection.
    let (lines, incoming) = tokio::io::duplex(64 * 1024);
    let max_line = server.options.limits.line_bytes();
    tokio::spawn(crate::input::forward_lines(
        tokio::io::stdin(),
        lines,
        max_line,
    ));
    let transport = ByteStreams::new(tokio::io::stdout().compat_write(), incoming.compat());
    let result = connection(server.clone())
        .connect_with(transport, async |connection: ConnectionTo<Client>| {
            connection.incoming_closed().await;
            Ok(())
        })
        .await;
    server.shutdown().await;
    result.map_err(|e| AcpError::Connection(e.to_string()))
}

macro_rules! handle {
    ($builder:expr, $server:ident, |$req:ident: $ty:ty, $responder:ident, $cx:ident| $body:block) => {{
        let $server = $server.clone();
        $builder.on_receive_request(
            async move |$req: $ty, $responder, $cx: ConnectionTo<Client>| {
                let $server = $server.clone();
                $body
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
    }};
}

fn connection(
    server: Arc<Server>,
) -> agent_client_protocol::v1::Builder<Agent, impl agent_client_protocol::HandleDispatchFrom<Client>>
{
    let builder = Agent.v1().name("keel");
    let builder =
        handle!(builder, server, |request: InitializeRequest,
                                  responder,
                                  _cx| {
            let _ = server.client.set(request.client_capabilities.clone());
            let auth = server.missing_key_off_thread();
            let capabilities = AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
                .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .close(SessionCloseCapabilities::new())
                        .delete(SessionDeleteCapabilities::new())
                        .fork(SessionForkCapabilities::new()),
                );
            responder.respond(
                InitializeResponse::new(ProtocolVersion::V1)
                    .agent_capabilities(capabilities)
                    .agent_info(
                        Implementation::new("keel", env!("CARGO_PKG_VERSION"))
                            .title("keel".to_owned()),
                    )
                    .auth_methods(auth),
            )?;
        });
    let builder = handle!(
        builder,
        server,
        |request: AuthenticateRequest, responder, _cx| {
            let _ = &server;
            let id = request.method_id.0.to_string();
            let result = match id.strip_prefix("env:") {
                Some(variable) if std::env::var(variable).is_ok_and(|v| !v.trim().is_empty()) => {
                    Ok(AuthenticateResponse::new())
                }
                Some(variable) => Err(Error::new(
                    ErrorCode::AUTH_REQUIRED,
                    format!(
                        "{variable} is still not set in keel's environment: set it where the editor starts keel, then restart the agent"
                    ),
                )),
                // The editor ran `keel login` in a terminal: done when a model resolves now.
                None if id == LOGIN_METHOD => {
                    if server.missing_key_off_thread().is_empty() {
                        Ok(AuthenticateResponse::new())
                    } else {
                        Err(Error::new(
                            ErrorCode::AUTH_REQUIRED,
                            "no provider key is stored or set yet: run `keel login` in a terminal",
                        ))
                    }
                }
                None => Err(invalid(format!("unknown auth method {id}"))),
            };
            match result {
                Ok(response) => responder.respond(response)?,
                Err(error) => responder.respond_with_error(error)?,
            }
        }
    );
    let builder =
        handle!(builder, server, |request: NewSessionRequest,
                                  responder,
                                  cx| {
            answer(responder, async move {
                let servers =
                    mcp::attach_value(&request.mcp_servers).map_err(|e| invalid(e.to_string()))?;
                let (session, _) = server
                    .open(&request.cwd, SessionTarget::New { title: None }, &cx)
                    .await?;
                if let Err(error) = attach(&session, servers).await {
                    server.discard(&session, Discard::Delete).await;
                    return Err(error);
                }
                let response = NewSessionResponse::new(session.id.to_string())
                    .modes(modes::state(session.mode()))
                    .config_options(session.config_options());
                let later = cx.clone();
                tokio::spawn(async move {
                    // After the response, so the editor knows the session.
                    commands::offer(&session, &later, Offer::Always).await;
                });
                Ok(response)
            });
        });
    let builder =
        handle!(builder, server, |request: LoadSessionRequest,
                                  responder,
                                  cx| {
            answer(responder, async move {
                let session = server
                    .reopen(
                        &request.cwd,
                        &request.session_id.0,
                        &request.mcp_servers,
                        Replay::Shown,
                        &cx,
                    )
                    .await?;
                Ok(LoadSessionResponse::new()
                    .modes(modes::state(session.mode()))
                    .config_options(session.config_options()))
            });
        });
    let builder =
        handle!(builder, server, |request: ResumeSessionRequest,
                                  responder,
                                  cx| {
            answer(responder, async move {
                let session = server
                    .reopen(
                        &request.cwd,
                        &request.session_id.0,
                        &request.mcp_servers,
                        Replay::Skipped,
                        &cx,
                    )
                    .await?;
                Ok(ResumeSessionResponse::new()
                    .modes(modes::state(session.mode()))
                    .config_options(session.config_options()))
            });
        });
    let builder =
        handle!(builder, server, |request: ForkSessionRequest,
                                  responder,
                                  cx| {
            answer(responder, async move {
                check_cwd(&request.cwd)?;
                let servers =
                    mcp::attach_value(&request.mcp_servers).map_err(|e| invalid(e.to_string()))?;
                let folder = server.folder(&request.cwd, &cx).await?;
                let from = SessionId::from(request.session_id.0.as_ref());
                let record = folder
                    .runtime
                    .request(ops::ForkSession {
                        session_id: from,
                        revision: None,
                    })
                    .await
                    .map_err(|e| rpc_error(&e))?;
                let (session, record) = server
                    .open(
                        &request.cwd,
                        SessionTarget::Exact {
                            id: record.id.to_string(),
                        },
                        &cx,
                    )
                    .await?;
                if let Err(error) = attach(&session, servers).await {
                    server.discard(&session, Discard::Delete).await;
                    return Err(error);
                }
                let entries = server.history(&session).await?;
                Server::know(&session, &record, &entries);
                let later = cx.clone();
                let offered = session.clone();
                tokio::spawn(async move {
                    commands::offer(&offered, &later, Offer::Always).await;
                });
                Ok(ForkSessionResponse::new(session.id.to_string())
                    .modes(modes::state(session.mode()))
                    .config_options(session.config_options()))
            });
        });
    let builder =
        handle!(builder, server, |request: ListSessionsRequest,
                                  responder,
                                  _cx| {
            answer(responder, async move {
                let cwd = request.cwd.as_ref().map(|c| c.display().to_string());
                let start = match request.cursor.as_deref() {
                    Some(cursor) => cursor
                        .parse::<usize>()
                        .map_err(|_| invalid(format!("unknown cursor {cursor}")))?,
                    None => 0,
                };
                let records = server
                    .keeper()
                    .await?
                    .request(ops::ListSessions {
                        cwd,
                        limit: start + LIST_PAGE + 1,
                    })
                    .await
                    .map_err(|e| rpc_error(&e))?;
                let more = records.len() > start + LIST_PAGE;
                let sessions: Vec<SessionInfo> = records
                    .into_iter()
                    .skip(start)
                    .take(LIST_PAGE)
                    .map(|r| {
                        let info = SessionInfo::new(r.id.to_string(), PathBuf::from(&r.cwd))
                            .updated_at(keel_protocol::time::iso_utc(r.updated_ms));
                        if r.title.is_empty() {
                            info
                        } else {
                            info.title(r.title)
                        }
                    })
                    .collect();
                let response = ListSessionsResponse::new(sessions);
                Ok(if more {
                    response.next_cursor((start + LIST_PAGE).to_string())
                } else {
                    response
                })
            });
        });
    let builder =
        handle!(builder, server, |request: CloseSessionRequest,
                                  responder,
                                  _cx| {
            answer(responder, async move {
                let id = request.session_id.0.to_string();
                let session = server.session(&id)?;
                server.lock_sessions().remove(&id);
                session.cancel().await;
                session
                    .runtime
                    .request(ops::CloseSession {
                        session_id: session.id.clone(),
                    })
                    .await
                    .map_err(|e| rpc_error(&e))?;
                Ok(CloseSessionResponse::new())
            });
        });
    let builder =
        handle!(builder, server, |request: DeleteSessionRequest,
                                  responder,
                                  cx| {
            answer(responder, async move {
                let id = request.session_id.0.to_string();
                let open = server.lock_sessions().remove(&id);
                let runtime = match open {
                    Some(session) => {
                        session.cancel().await;
                        let _ = session
                            .runtime
                            .request(ops::CloseSession {
                                session_id: session.id.clone(),
                            })
                            .await;
                        session.runtime.clone()
                    }
                    None => {
                        let launch = server.options.launch_cwd.clone();
                        server.folder(&launch, &cx).await?.runtime.clone()
                    }
                };
                runtime
                    .request(ops::DeleteSession {
                        session_id: SessionId::from(id.as_str()),
                    })
                    .await
                    .map_err(|e| rpc_error(&e))?;
                Ok(DeleteSessionResponse::new())
            });
        });
    let builder =
        handle!(builder, server, |request: SetSessionModeRequest,
                                  responder,
                                  _cx| {
            answer(responder, async move {
                let session = server.session(&request.session_id.0)?;
                let wanted = request.mode_id.0.to_string();
                let Some(mode) = modes::resolve(&wanted, session.configured_mode) else {
                    return Err(invalid(format!(
                        "unknown mode {wanted}: use ask, auto, full, plan or default"
                    )));
                };
                session
                    .runtime
                    .request(ops::UpdateSession {
                        session_id: session.id.clone(),
                        title: None,
                        model: None,
                        mode: Some(mode),
                        thinking: None,
                    })
                    .await
                    .map_err(|e| rpc_error(&e))?;
                Ok(SetSessionModeResponse::new())
            });
        });
    let builder =
        handle!(builder, server, |request: SetSessionConfigOptionRequest,
                                  responder,
                                  _cx| {
            answer(responder, async move {
                let session = server.session(&request.session_id.0)?;
                let Some(value) = request.value.as_value_id().map(|v| String::from(&*v.0)) else {
                    return Err(invalid("keel's config options take a value id"));
                };
                let (mode, model, thinking) = match request.config_id.0.as_ref() {
                    "mode" => match modes::resolve(&value, session.configured_mode) {
                        Some(mode) => (Some(mode), None, None),
                        None => return Err(invalid(format!("unknown mode {value}"))),
                    },
                    "model" => (None, Some(value.clone()), None),
                    "thinking" => match value.parse::<keel_protocol::ThinkingChoice>() {
                        Ok(choice) => (None, None, Some(choice)),
                        Err(error) => return Err(invalid(error.to_string())),
                    },
                    other => return Err(invalid(format!("unknown config option {other}"))),
                };
                session
                    .runtime
                    .request(ops::UpdateSession {
                        session_id: session.id.clone(),
                        title: None,
                        model,
                        mode,
                        thinking,
                    })
                    .await
                    .map_err(|e| rpc_error(&e))?;
                Ok(SetSessionConfigOptionResponse::new(
                    session.config_options(),
                ))
            });
        });
    let builder = handle!(builder, server, |request: PromptRequest, responder, cx| {
        let session = server.session(&request.session_id.0);
        // Counted here, in arrival order, so a cancel sent right after reaches it.
        let number = session.as_ref().map(|s| s.received()).unwrap_or(0);
        answer(responder, async move {
            let session = session?;
            let prompt = prompt::read(&request.prompt, server.options.limits.attachment_bytes())
                .map_err(|e| invalid(e.0))?;
            // Skills, command files and MCP prompts change between prompts.
            commands::offer(&session, &cx, Offer::IfChanged).await;
            let stop = match prompt {
                Prompt::Command { name, args } if commands::is_builtin(&name) => {
                    commands::run(&session, &cx, &name, &args).await?
                }
                other => session.prompt(other, number, &cx).await?,
            };
            Ok(PromptResponse::new(stop))
        });
    });
    let server_for_cancel = server.clone();
    builder.on_receive_notification(
        async move |notification: CancelNotification, _cx: ConnectionTo<Client>| {
            if let Ok(session) = server_for_cancel.session(&notification.session_id.0) {
                tokio::spawn(async move { session.cancel().await });
            }
            Ok(())
        },
        agent_client_protocol::on_receive_notification!(),
    )
}
