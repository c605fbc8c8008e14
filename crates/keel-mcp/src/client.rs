//! One connection to one server over rmcp: started from a [`ServerSpec`], with the shell
//! environment's cleaning applied to a child's environment, and telling its owner when the
//! server's tool list changed or the connection ended.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::{ServerSpec, Transport};
use crate::error::McpError;

/// What a connection tells its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// `notifications/tools/list_changed` (or prompts, resources).
    ListChanged,
}

/// rmcp's client side: says who keel is, offers the workspace as its root, and forwards
/// list changes.
// Roots belong to 2025-11-25, the version keel asks for; rmcp marks them deprecated because
// a later version (SEP-2577) drops them.
#[allow(deprecated)]
#[derive(Clone)]
pub(crate) struct Handler {
    signals: mpsc::UnboundedSender<Signal>,
    /// The workspace folder, as a `file://` root.
    root: rmcp::model::Root,
    /// The server's name, for the log.
    server: String,
    /// Who answers a request for the user's input.
    asking: crate::ask::Asking,
    /// Calls under way that show the server's progress, by progress token.
    progress: Progress,
}

/// The reporters of calls under way, by the progress token sent with them.
pub(crate) type Progress = Arc<std::sync::Mutex<HashMap<String, keel_agent::ToolUpdates>>>;

/// A progress token as the map's key.
fn token_key(token: &rmcp::model::NumberOrString) -> String {
    match token {
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
        rmcp::model::NumberOrString::String(s) => s.to_string(),
    }
}

/// A progress notification as a line of live output: `[3/10] copying`.
fn progress_line(params: &rmcp::model::ProgressNotificationParam) -> String {
    let count = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{}", n as i64)
        } else {
            format!("{n:.1}")
        }
    };
    let mut line = match params.total {
        Some(total) => format!("[{}/{}]", count(params.progress), count(total)),
        None => format!("[{}]", count(params.progress)),
    };
    if let Some(message) = &params.message {
        line.push(' ');
        line.push_str(message.lines().next().unwrap_or_default());
    }
    line.push('\n');
    line
}

/// `path` as a `file://` URI: every byte but unreserved ones and `/` percent-encoded.
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[allow(deprecated)]
impl ClientHandler for Handler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        // The newest version that still has the `initialize` handshake keel speaks; the
        // server answers with the one it takes.
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.roots = Some(rmcp::model::RootsCapabilities::default());
        capabilities.elicitation = self.asking.capability();
        rmcp::model::InitializeRequestParams::new(
            capabilities,
            rmcp::model::Implementation::new("keel", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ListRootsResult, rmcp::ErrorData>> + Send + '_
    {
        std::future::ready(Ok(rmcp::model::ListRootsResult::new(vec![
            self.root.clone(),
        ])))
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(self.asking.answer(&self.server, request).await)
    }

    fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let key = token_key(&params.progress_token.0);
        let updates = self
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(updates) = updates {
            updates.output(&progress_line(&params));
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.signals.send(Signal::ListChanged);
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let _ = self.signals.send(Signal::ListChanged);
        std::future::ready(())
    }
}

/// A live connection.
pub(crate) struct Connection {
    /// Requests go through it; clones share the connection.
    pub(crate) peer: Peer<RoleClient>,
    /// Ends when the connection does.
    pub(crate) service: RunningService<RoleClient, Handler>,
}

/// A stdio server's input, holding its process: the transport owns it, so the process (and
/// all it started) is killed when the connection goes.
struct ServerInput {
    stdin: tokio::process::ChildStdin,
    _process: keel_sandbox::Child,
}

impl tokio::io::AsyncWrite for ServerInput {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

/// What a server offers, as JSON values of the MCP schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    /// `tools/list`.
    pub(crate) tools: Vec<Value>,
    /// `prompts/list` (empty when not offered).
    pub(crate) prompts: Vec<Value>,
    /// Whether the server offers resources.
    pub(crate) resources: bool,
}

/// Starts the server of `spec` and completes the handshake (the caller bounds the time).
pub(crate) async fn connect(
    spec: &ServerSpec,
    env: &[(String, String)],
    cwd: &Path,
    signals: mpsc::UnboundedSender<Signal>,
    auth: Option<Arc<crate::auth::TokenSource>>,
    asking: crate::ask::Asking,
    progress: Progress,
) -> Result<Connection, McpError> {
    let name = cwd.file_name().map_or_else(
        || cwd.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    #[allow(deprecated)]
    let handler = Handler {
        signals,
        root: rmcp::model::Root::new(file_uri(cwd)).with_name(name),
        server: spec.name.clone(),
        asking,
        progress,
    };
    let service = match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env: extra,
            cwd: dir,
        } => {
            let mut vars = env.to_vec();
            for (key, value) in extra {
                vars.retain(|(k, _)| k != key);
                vars.push((key.clone(), value.clone()));
            }
            let folder = dir.as_deref().map_or(cwd.to_path_buf(), |d| cwd.join(d));
            let program = keel_sandbox::Program::new(command, folder)
                .args(args)
                .env(vars)
                .streams(
                    keel_sandbox::Stream::Piped,
                    keel_sandbox::Stream::Piped,
                    keel_sandbox::Stream::Piped,
                );
            // A server and everything it starts must not outlive keel: it runs contained
            // where this system allows, else it only dies with keel (its own children may
            // not). Its process group is its own, so the terminal's signals go to keel.
            let mut process = keel_sandbox::spawn(program, &keel_sandbox::Confinement::Contained)
                .map_err(|e| McpError::Start {
                server: spec.name.clone(),
                reason: e.to_string(),
            })?;
            if let Some(why) = process.uncontained() {
                tracing::warn!(server = %spec.name, %why, "an MCP server's own children may outlive keel");
            }
            let (Some(stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
                return Err(McpError::Start {
                    server: spec.name.clone(),
                    reason: "its standard input and output are not pipes".into(),
                });
            };
            if let Some(stderr) = process.take_stderr() {
                tokio::spawn(log_stderr(spec.name.clone(), stderr));
            }
            // Its answers reach rmcp through a bound (`oversize`).
            let (bounded, reader) = tokio::io::duplex(64 * 1024);
            tokio::spawn(crate::oversize::forward(spec.name.clone(), stdout, bounded));
            let input = ServerInput {
                stdin,
                _process: process,
            };
            handler
                .serve((reader, input))
                .await
                .map_err(|e| McpError::Start {
                    server: spec.name.clone(),
                    reason: e.to_string(),
                })?
        }
        Transport::Http {
            url,
            headers,
            bearer_env,
            ..
        } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut static_bearer = None;
            if let Some(variable) = bearer_env {
                let token = env_value(env, variable).ok_or_else(|| McpError::Start {
                    server: spec.name.clone(),
                    reason: format!("the bearer token variable {variable} is not set"),
                })?;
                static_bearer = Some(token.clone());
                config = config.auth_header(token);
            }
            let mut custom = HashMap::new();
            for (name, value) in headers {
                let name =
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|e| {
                        McpError::Start {
                            server: spec.name.clone(),
                            reason: format!("header `{name}`: {e}"),
                        }
                    })?;
                let value =
                    reqwest::header::HeaderValue::from_str(value).map_err(|e| McpError::Start {
                        server: spec.name.clone(),
                        reason: format!("header `{name}`: {e}"),
                    })?;
                custom.insert(name, value);
            }
            let custom_headers = custom.clone();
            config = config.custom_headers(custom);
            let client = keel_llm::http_client_for(url).map_err(|e| McpError::Start {
                server: spec.name.clone(),
                reason: e.to_string(),
            })?;
            let mut legacy_headers = reqwest::header::HeaderMap::new();
            for (name, value) in &custom_headers {
                legacy_headers.insert(name.clone(), value.clone());
            }
            if let Some(token) = &static_bearer
                && let Ok(value) =
                    reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            {
                legacy_headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            let bounded = crate::http::Bounded {
                client: client.clone(),
                auth: auth.clone(),
            };
            let transport = StreamableHttpClientTransport::with_client(bounded, config);
            let denied = |auth: &Option<Arc<crate::auth::TokenSource>>| {
                auth.as_ref()
                    .and_then(|a| a.take_denied())
                    .map(|denied| McpError::AuthRequired {
                        server: spec.name.clone(),
                        advice: denied.advice(&spec.name),
                    })
            };
            match handler.clone().serve(transport).await {
                Ok(service) => service,
                Err(error) => {
                    if let Some(refused) = denied(&auth) {
                        return Err(refused);
                    }
                    // A 2024-11-05 server answers the POST with a 4xx and serves its event
                    // stream on GET: tried only after streamable HTTP failed, so current
                    // servers start as fast as before.
                    let ends = crate::legacy::connect(
                        &spec.name,
                        client,
                        url,
                        legacy_headers,
                        auth.clone(),
                    )
                    .await;
                    match ends {
                        Ok(ends) => handler.serve(ends).await.map_err(|e| {
                            denied(&auth).unwrap_or_else(|| McpError::Start {
                                server: spec.name.clone(),
                                reason: format!("as an HTTP+SSE server: {e}"),
                            })
                        })?,
                        Err(why) => {
                            return Err(denied(&auth).unwrap_or_else(|| McpError::Start {
                                server: spec.name.clone(),
                                reason: format!(
                                    "{error} (and as a 2024-11-05 HTTP+SSE server: {why})"
                                ),
                            }));
                        }
                    }
                }
            }
        }
    };
    Ok(Connection {
        peer: service.peer().clone(),
        service,
    })
}

fn env_value(env: &[(String, String)], name: &str) -> Option<String> {
    env.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
}

/// Servers write banners and logs on stderr; they go to keel's log, never the terminal.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(%server, "{line}");
    }
}

/// What the server offers now.
pub(crate) async fn list(peer: &Peer<RoleClient>) -> Result<Listing, rmcp::ServiceError> {
    let capabilities = peer.peer_info().map(|info| {
        let caps = &info.capabilities;
        (caps.prompts.is_some(), caps.resources.is_some())
    });
    let (prompts_offered, resources) = capabilities.unwrap_or((false, false));
    let tools = peer
        .list_all_tools()
        .await?
        .into_iter()
        .filter_map(|tool| serde_json::to_value(tool).ok())
        .collect();
    let prompts = if prompts_offered {
        peer.list_all_prompts()
            .await
            .map(|all| {
                all.into_iter()
                    .filter_map(|p| serde_json::to_value(p).ok())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Ok(Listing {
        tools,
        prompts,
        resources,
    })
}

/// `tools/call`, its result as the MCP schema's JSON. `progress` learns the progress token
/// rmcp sent with it, under which the server may report progress. A call dropped before
/// its answer (an abort, a timeout) is cancelled at the server.
pub(crate) async fn call(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
    progress: Option<&(dyn Fn(String) + Send + Sync)>,
) -> Result<Value, rmcp::ServiceError> {
    use rmcp::model::{CallToolRequest, ClientRequest, ServerResult};
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(map) = arguments {
        params = params.with_arguments(map);
    }
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await?;
    if let Some(progress) = progress {
        progress(token_key(&handle.progress_token.0));
    }
    /// Tells the server a call keel no longer waits for is cancelled.
    struct Abandoned {
        peer: Peer<RoleClient>,
        id: Option<rmcp::model::RequestId>,
    }
    impl Drop for Abandoned {
        fn drop(&mut self) {
            let Some(id) = self.id.take() else { return };
            let peer = self.peer.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = peer
                        .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                            Some(id),
                            Some("the call was abandoned".to_owned()),
                        ))
                        .await;
                });
            }
        }
    }
    let mut abandoned = Abandoned {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let answer = handle.await_response().await;
    abandoned.id = None;
    match answer? {
        ServerResult::CallToolResult(result) => {
            Ok(serde_json::to_value(result).unwrap_or(Value::Null))
        }
        ServerResult::EmptyResult(_) => Ok(serde_json::json!({"content": []})),
        _ => Err(rmcp::ServiceError::UnexpectedResponse),
    }
}

/// `prompts/get`, its result as JSON.
pub(crate) async fn prompt(
    peer: &Peer<RoleClient>,
    name: &str,
    arguments: serde_json::Map<String, Value>,
) -> Result<Value, rmcp::ServiceError> {
    let mut params = GetPromptRequestParams::new(name.to_owned());
    if !arguments.is_empty() {
        params = params.with_arguments(arguments);
    }
    let result = peer.get_prompt(params).await?;
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}

/// `resources/list`, every page, as JSON values.
pub(crate) async fn resources(peer: &Peer<RoleClient>) -> Result<Vec<Value>, rmcp::ServiceError> {
    Ok(peer
        .list_all_resources()
        .await?
        .into_iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect())
}

/// `resources/read`, as JSON.
pub(crate) async fn read(peer: &Peer<RoleClient>, uri: &str) -> Result<Value, rmcp::ServiceError> {
    let result = peer
        .read_resource(ReadResourceRequestParams::new(uri.to_owned()))
        .await?;
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn progress_reads_as_a_line() {
        let params: rmcp::model::ProgressNotificationParam = serde_json::from_value(
            serde_json::json!({"progressToken": "t", "progress": 3, "total": 10, "message": "copying\nmore"}),
        )
        .unwrap();
        assert_eq!(super::progress_line(&params), "[3/10] copying\n");
        let params: rmcp::model::ProgressNotificationParam =
            serde_json::from_value(serde_json::json!({"progressToken": 1, "progress": 0.5}))
                .unwrap();
        assert_eq!(super::progress_line(&params), "[0.5]\n");
    }

    #[test]
    fn a_folder_becomes_a_file_uri() {
        assert_eq!(
            super::file_uri(std::path::Path::new("/work/my project/ü")),
            "file:///work/my%20project/%C3%BC"
        );
    }
}
