//! The loopback HTTP server: one scripted response per request, faults on demand.
//!
//! HTTP/1.1 by hand, because faults such as a reset or a truncated body need control no
//! framework gives. A normal stream is sent chunked and its connection kept open for the next
//! request, as real providers do; an error status or a streamed fault ends its connection
//! (`Connection: close`, the body delimited by the close).

use std::collections::{BTreeMap, VecDeque};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::encode::{Block, Plan, Stop, WireApi, declared_tools, frames, shape_shell};
use crate::script::{Fault, Response, Script, Usage};

/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
const MAX_BODY: usize = 256 * 1024 * 1024;
/// How long a stalled response holds its connection at most.
const STALL_LIMIT: Duration = Duration::from_secs(3600);

/// One request as received.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// Position, from 0.
    pub index: usize,
    /// HTTP method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// JSON body (`null` when it was not JSON).
    pub body: Value,
    /// The body's bytes exactly as received (not written to the record file).
    #[serde(skip)]
    pub raw_body: Vec<u8>,
}

/// Where the server listens and what it records.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Append every request as a JSON line to this file.
    pub record: Option<PathBuf>,
    /// Append one timing line per request to this file, after its response ended.
    pub timings: Option<PathBuf>,
    /// End every connection after its response (`Connection: close`), as a server without
    /// keep-alive does, so each request pays for a new connection.
    pub close_connections: bool,
}

/// When one request arrived and when its response ended (Unix milliseconds, microsecond
/// precision), so a benchmark can tell time spent in the client from time spent here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestTiming {
    /// Position, from 0.
    pub index: usize,
    /// The request's first bytes were read (the connection was accepted before).
    pub first_byte_ms: f64,
    /// The request's head and body were read whole.
    pub received_ms: f64,
    /// The last byte of the response was written (and the stream shut down, unless it is kept
    /// for the next request).
    pub done_ms: f64,
}

/// What marks a request for a session title (the opening of keel's title instructions).
pub const TITLE_REQUEST: &str = "You name conversations between a programmer";
/// What the mock answers a title request with, unless the script has a response `when`
/// the request (such as one `when` [`TITLE_REQUEST`]).
pub const TITLE_ANSWER: &str = "Mock session title";

/// The model the mock lists as a local server would (Ollama's `/api/tags`).
pub const LOCAL_MODEL: &str = "mock-local:8b";

/// The window the mock says its local model gets (`num_ctx` in Ollama's `/api/show`).
pub const LOCAL_WINDOW: u32 = 65_536;

struct State {
    responses: Mutex<VecDeque<Response>>,
    requests: Mutex<Vec<RecordedRequest>>,
    titles: Mutex<Vec<RecordedRequest>>,
    record: Option<Mutex<std::fs::File>>,
    timings: Option<Mutex<std::fs::File>>,
    next: AtomicUsize,
    close_connections: bool,
}

/// A running mock model server.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: watch::Sender<bool>,
}

impl MockServer {
    /// Starts serving `script` on 127.0.0.1.
    pub async fn start(script: Script, options: ServerOptions) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", options.port)).await?;
        let addr = listener.local_addr()?;
        let record = options.record.as_deref().map(append_to).transpose()?;
        let timings = options.timings.as_deref().map(append_to).transpose()?;
        let state = Arc::new(State {
            responses: Mutex::new(script.responses.into()),
            requests: Mutex::new(Vec::new()),
            titles: Mutex::new(Vec::new()),
            record,
            timings,
            next: AtomicUsize::new(0),
            close_connections: options.close_connections,
        });
        let (stop, mut stopped) = watch::channel(false);
        let serving = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        // Without it the last small write of a response waits for the
                        // client's delayed acknowledgement (40 ms) on a kept connection.
                        if let Err(error) = stream.set_nodelay(true) {
                            tracing::debug!(%error, "mock could not set TCP_NODELAY");
                        }
                        let state = serving.clone();
                        let stopped = stopped.clone();
                        tokio::spawn(async move {
                            if let Err(error) = handle(stream, &state, stopped).await {
                                tracing::debug!(%error, "mock connection ended with an error");
                            }
                        });
                    }
                }
            }
        });
        Ok(Self { addr, state, stop })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The session-title requests received so far.
    pub fn title_requests(&self) -> Vec<RecordedRequest> {
        self.state
            .titles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every request received so far, in order (title requests apart).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Queues another response.
    pub fn push(&self, response: Response) {
        self.state
            .responses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(response);
    }

    /// Stops accepting connections and ends the kept ones waiting for their next request.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn append_to(path: &std::path::Path) -> std::io::Result<Mutex<std::fs::File>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    Ok(Mutex::new(file))
}

/// Now as Unix milliseconds with microsecond precision.
fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// What happens to a connection after its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// The response was delimited; the next request may follow on this connection.
    KeepOpen,
    /// The response ended the connection.
    Closed,
}

/// Serves one connection's requests in turn, until a response ends it, the client closes
/// it, or the server stops (a kept connection must not outlive its server's script).
async fn handle(
    mut stream: TcpStream,
    state: &State,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    // Bytes read past one request: the start of the next one.
    let mut carry = Vec::new();
    loop {
        let mut first_byte_ms = 0.0;
        let request = tokio::select! {
            _ = stopped.changed() => return Ok(()),
            request = read_request(&mut stream, &mut carry, &mut first_byte_ms) => request?,
        };
        let Some(request) = request else {
            return Ok(());
        };
        let received_ms = unix_ms();
        let index = state.next.fetch_add(1, Ordering::SeqCst);
        let result = respond(&mut stream, state, index, request).await;
        if let Some(file) = &state.timings {
            let timing = RequestTiming {
                index,
                first_byte_ms,
                received_ms,
                done_ms: unix_ms(),
            };
            if let Ok(line) = serde_json::to_string(&timing) {
                let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = writeln!(file, "{line}");
            }
        }
        if result? == After::Closed {
            return Ok(());
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    state: &State,
    index: usize,
    Request {
        method,
        path,
        headers,
        body,
        keep_alive,
    }: Request,
) -> std::io::Result<After> {
    let keep_open = keep_alive && !state.close_connections;
    // Ollama's model listing, for clients that look for a local server: not part of the
    // scripted conversation, so not recorded.
    let local = match path.as_str() {
        "/api/tags" => Some(json!({"models": [{"name": LOCAL_MODEL}]})),
        // Nothing loaded yet: the window comes from the model's `num_ctx`.
        "/api/ps" => Some(json!({"models": []})),
        "/api/show" => {
            Some(json!({"parameters": format!("temperature 0.7\nnum_ctx {LOCAL_WINDOW}")}))
        }
        _ => None,
    };
    if let Some(answer) = local {
        let body = answer.to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await?;
        return Ok(After::Closed);
    }
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // A client's request for a session title is a side call: answered at once, kept apart
    // from the scripted conversation.
    let title = String::from_utf8_lossy(&body).contains(TITLE_REQUEST);
    let recorded = RecordedRequest {
        index,
        method,
        path: path.clone(),
        headers,
        body: json.clone(),
        raw_body: body.clone(),
    };
    if let Some(file) = &state.record
        && let Ok(line) = serde_json::to_string(&recorded)
    {
        let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(file, "{line}");
    }
    let list = if title {
        &state.titles
    } else {
        &state.requests
    };
    list.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(recorded);
    let Some(api) = WireApi::from_path(&path) else {
        return status(
            stream,
            404,
            "not_found_error",
            &format!("no wire API is served at {path}"),
            &[],
        )
        .await;
    };
    if json.is_null() {
        return status(
            stream,
            400,
            "invalid_request_error",
            "the request body is not JSON",
            &[],
        )
        .await;
    }
    let response = if title {
        // A script may answer it itself, with a response `when` the title request.
        let mut responses = state
            .responses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&body);
        let scripted = responses
            .iter()
            .position(|r| r.when.as_deref().is_some_and(|w| text.contains(w)))
            .and_then(|at| responses.remove(at));
        Some(scripted.unwrap_or_else(|| Response {
            text: Some(TITLE_ANSWER.to_owned()),
            ..Response::default()
        }))
    } else {
        let mut responses = state
            .responses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if responses.front().is_some_and(Response::is_conditional) {
            let text = String::from_utf8_lossy(&body);
            responses
                .iter()
                .position(|r| r.admits(&text))
                .and_then(|at| responses.remove(at))
        } else {
            responses.pop_front()
        }
    };
    let Some(response) = response else {
        let message = format!("the mock script has no response for request {index}");
        return status(stream, 500, "mock_exhausted", &message, &[]).await;
    };
    if let Some(file) = &response.wait_for {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while !std::path::Path::new(file).exists() && tokio::time::Instant::now() < deadline {
            sleep_ms(5).await;
        }
    }
    sleep_ms(response.first_delay_ms).await;
    match &response.fault {
        Some(Fault::RateLimit { retry_after_s }) => {
            let wait = retry_after_s.unwrap_or(1.0);
            let headers = [
                ("retry-after".to_owned(), format!("{}", wait.ceil() as u64)),
                (
                    "retry-after-ms".to_owned(),
                    format!("{}", (wait * 1000.0) as u64),
                ),
            ];
            return status(
                stream,
                429,
                "rate_limit_error",
                "rate limited by the mock",
                &headers,
            )
            .await;
        }
        Some(Fault::ServerError) => {
            return status(stream, 500, "api_error", "internal error in the mock", &[]).await;
        }
        Some(Fault::Overloaded) => {
            return status(
                stream,
                529,
                "overloaded_error",
                "the mock is overloaded",
                &[],
            )
            .await;
        }
        Some(Fault::ContextOverflow) => {
            let body = match api {
                WireApi::Anthropic => json!({"type": "error", "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
                WireApi::Google => json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                    "message": "The input token count (1200000) exceeds the maximum number of \
                                tokens allowed (1048576)."}}),
                WireApi::Completions | WireApi::Responses => json!({"error": {
                    "message": "This model's maximum context length is 65536 tokens. However, \
                                your messages resulted in 70000 tokens.",
                    "type": "invalid_request_error", "param": "messages",
                    "code": "context_length_exceeded"}}),
            };
            return raw_status(stream, 400, &body.to_string()).await;
        }
        Some(Fault::BadRequest) => {
            return status(
                stream,
                400,
                "invalid_request_error",
                "the mock rejects this request",
                &[],
            )
            .await;
        }
        Some(Fault::Unauthorized) => {
            return status(
                stream,
                401,
                "authentication_error",
                "invalid x-api-key",
                &[],
            )
            .await;
        }
        _ => {}
    }
    let model = json
        .get("model")
        .and_then(Value::as_str)
        .map_or_else(|| model_from_path(&path), str::to_owned);
    let plan = plan(api, &json, &response, model, index);
    let frames = frames(api, &plan);
    if keep_open && response.fault.is_none() {
        return stream_chunked(stream, &frames, response.delay_ms).await;
    }
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    for (sent, frame) in frames.iter().enumerate() {
        match &response.fault {
            Some(Fault::Reset { after_events }) if sent == *after_events => {
                // Linger 0 makes the close a TCP reset instead of an orderly end.
                stream.set_zero_linger()?;
                return Ok(After::Closed);
            }
            Some(Fault::Truncate { after_events }) if sent == *after_events => {
                stream.shutdown().await?;
                return Ok(After::Closed);
            }
            Some(Fault::Malformed { after_events }) if sent == *after_events => {
                stream
                    .write_all(b"data: {\"this is\": not json\n\n")
                    .await?;
                stream.flush().await?;
                stream.shutdown().await?;
                return Ok(After::Closed);
            }
            Some(Fault::Stall { after_events }) if sent == *after_events => {
                stream.flush().await?;
                let mut buf = [0u8; 256];
                let _ = tokio::time::timeout(STALL_LIMIT, async {
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                })
                .await;
                return Ok(After::Closed);
            }
            _ => {}
        }
        if sent > 0 {
            sleep_ms(response.delay_ms).await;
        }
        stream.write_all(frame.as_bytes()).await?;
        stream.flush().await?;
    }
    stream.shutdown().await?;
    Ok(After::Closed)
}

/// Sends `frames` as one chunked event stream, each frame in its own chunk and write.
async fn stream_chunked(
    stream: &mut TcpStream,
    frames: &[String],
    delay_ms: u64,
) -> std::io::Result<After> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    let mut chunk = Vec::new();
    for (sent, frame) in frames.iter().enumerate() {
        if sent > 0 {
            sleep_ms(delay_ms).await;
        }
        // An empty chunk would end the body.
        if frame.is_empty() {
            continue;
        }
        chunk.clear();
        write!(chunk, "{:x}\r\n{frame}\r\n", frame.len())?;
        stream.write_all(&chunk).await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    Ok(After::KeepOpen)
}

fn plan(api: WireApi, body: &Value, response: &Response, model: String, index: usize) -> Plan {
    let mut blocks = Vec::new();
    if let Some(thinking) = &response.thinking {
        blocks.push(Block::Thinking(thinking.clone()));
    }
    if let Some(text) = &response.text {
        blocks.push(Block::Text(text.clone()));
    }
    for (i, call) in response.tool_calls.iter().enumerate() {
        let arguments = if call.arguments.is_null() {
            json!({})
        } else {
            call.arguments.clone()
        };
        blocks.push(Block::Call {
            id: call
                .id
                .clone()
                .unwrap_or_else(|| format!("call_{index}_{i}")),
            name: call.name.clone(),
            arguments: arguments.to_string(),
        });
    }
    if let Some(command) = &response.shell {
        match shape_shell(&declared_tools(api, body), command) {
            Some((name, arguments)) => blocks.push(Block::Call {
                id: format!("call_{index}_shell"),
                name,
                arguments: arguments.to_string(),
            }),
            None => blocks.push(Block::Text(format!(
                "(the client declared no shell tool; wanted to run `{command}`)"
            ))),
        }
    }
    let has_calls = blocks.iter().any(|b| matches!(b, Block::Call { .. }));
    let stop = if response.max_tokens {
        Stop::Length
    } else if has_calls {
        Stop::ToolUse
    } else {
        Stop::End
    };
    let produced: usize = blocks
        .iter()
        .map(|b| match b {
            Block::Thinking(t) | Block::Text(t) => t.len(),
            Block::Call { arguments, .. } => arguments.len(),
        })
        .sum();
    let usage = response.usage.unwrap_or(Usage {
        input: (body.to_string().len() / 4) as u64,
        output: (produced / 4).max(1) as u64,
        ..Usage::default()
    });
    Plan {
        model,
        blocks,
        chunk: response.chunk_size.unwrap_or(usize::MAX),
        content_parts: response.content_parts,
        stop,
        usage,
    }
}

fn model_from_path(path: &str) -> String {
    path.split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("mock-model")
        .to_owned()
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

async fn status(
    stream: &mut TcpStream,
    code: u16,
    kind: &str,
    message: &str,
    extra: &[(String, String)],
) -> std::io::Result<After> {
    let reason = match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        529 => "Overloaded",
        _ => "Internal Server Error",
    };
    let body = json!({"type": "error", "error": {"type": kind, "code": code, "message": message}})
        .to_string();
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(After::Closed)
}

/// An error status with `body` as it is; the connection closes.
async fn raw_status(stream: &mut TcpStream, code: u16, body: &str) -> std::io::Result<After> {
    let head = format!(
        "HTTP/1.1 {code} Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(After::Closed)
}

/// One request as read from the connection.
struct Request {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
    /// HTTP/1.1 without `Connection: close`: the client may send another request after this
    /// one's response on the same connection.
    keep_alive: bool,
}

/// Reads one request (`None` when the client closed without sending one), starting with the
/// bytes `carry` holds and leaving there any read past its end; `first_byte_ms` gets the time
/// its first bytes arrived.
async fn read_request(
    stream: &mut TcpStream,
    carry: &mut Vec<u8>,
    first_byte_ms: &mut f64,
) -> std::io::Result<Option<Request>> {
    let mut buf = std::mem::take(carry);
    if !buf.is_empty() {
        *first_byte_ms = unix_ms();
    }
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        if buf.is_empty() {
            *first_byte_ms = unix_ms();
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let version = request_line.next().unwrap_or_default().to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return Err(std::io::Error::other("request body too large"));
    }
    let mut body = Vec::with_capacity(length);
    body.extend_from_slice(&buf[head_end + 4..]);
    while body.len() < length {
        // Straight into the body's spare capacity: no buffer per read.
        let n = stream.read_buf(&mut body).await?;
        if n == 0 {
            break;
        }
    }
    if body.len() > length {
        *carry = body.split_off(length);
    }
    let close = headers.get("connection").is_some_and(|value| {
        value
            .split(',')
            .any(|token| token.trim().eq_ignore_ascii_case("close"))
    });
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
        keep_alive: version == "HTTP/1.1" && !close,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A kept connection must not outlive its server: after `stop`, a client's pooled
    /// connection ends instead of being answered from the old script.
    #[tokio::test]
    async fn stopping_ends_kept_connections() {
        let script = Script::parse(r#"[{"text": "one"}, {"text": "two"}]"#).unwrap();
        let server = MockServer::start(script, ServerOptions::default())
            .await
            .unwrap();
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        let body = r#"{"model":"m","stream":true,"messages":[]}"#;
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: mock\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut seen = Vec::new();
        while !seen.ends_with(b"0\r\n\r\n") {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection ended before the response did");
            seen.extend_from_slice(&chunk[..n]);
        }
        server.stop();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
            .await
            .expect("the kept connection stayed open after stop");
        assert_eq!((read.unwrap(), rest), (0, Vec::new()));
    }
}
