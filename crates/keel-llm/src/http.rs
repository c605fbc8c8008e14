//! The HTTP transport: one model call as one streamed POST.
//!
//! Cleans the messages ([`crate::prepare`]), encodes them for the model's wire API, sends
//! the request, and decodes the SSE body into unified events. HTTP failures become `error`
//! events with a classified code and the provider's `retry-after` wait; a connection that
//! breaks mid-body ends the stream with a `network` error. Cost is computed from the
//! model's prices when the usage arrives.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_protocol::{ErrorCode, ErrorInfo, StopReason, StreamEvent, Usage};
use tokio_util::sync::CancellationToken;

use crate::api::encode_cache::EncodeCache;
use crate::api::{self, Decoder};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::prepare::prepare_messages;
use crate::request::LlmRequest;
use crate::sse::{SseEvent, SseParser};
use crate::stream_fn::{EventStream, StreamFn};
use crate::usage::cost;

/// The most of an error body read to explain a failure.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Building the HTTP client failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct ClientError(String);

/// A shared HTTP client with rustls on the ring provider.
pub fn http_client() -> Result<reqwest::Client, ClientError> {
    build_client(true)
}

/// A client for `base_url`: plain `http://` servers (local models, the mock on loopback) get
/// one that skips loading the system's certificate roots, which costs milliseconds at every
/// start and is never used without TLS.
pub fn http_client_for(base_url: &str) -> Result<reqwest::Client, ClientError> {
    build_client(
        !base_url
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("http://"),
    )
}

fn build_client(tls_roots: bool) -> Result<reqwest::Client, ClientError> {
    client_builder(tls_roots)
        .build()
        .map_err(|e| ClientError(e.to_string()))
}

/// A client builder with rustls on the ring provider (`tls_roots: false` for plain-HTTP
/// use only), for callers that need more settings (redirects, pinned addresses).
pub fn client_builder(tls_roots: bool) -> reqwest::ClientBuilder {
    // Installing twice is harmless (the second call reports the first provider back).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(30));
    if tls_roots {
        builder
    } else {
        builder.tls_certs_only(std::iter::empty())
    }
}

/// A model reached over HTTP.
#[derive(Clone)]
pub struct HttpProvider {
    client: reqwest::Client,
    model: Arc<ModelEntry>,
    api_key: Option<String>,
    /// Wire JSON of the messages sent so far, reused by the next request.
    encoded: Arc<EncodeCache>,
    /// The buffer request bodies are joined into, reused from one request to the next.
    bodies: Arc<BodyBuffer>,
}

impl HttpProvider {
    /// A provider for `model`, with `api_key` used unless a request brings its own.
    pub fn new(client: reqwest::Client, model: ModelEntry, api_key: Option<String>) -> Self {
        Self {
            client,
            model: Arc::new(model),
            api_key,
            encoded: Arc::default(),
            bodies: Arc::default(),
        }
    }

    /// The model this provider talks to.
    pub fn model(&self) -> &ModelEntry {
        &self.model
    }
}

impl StreamFn for HttpProvider {
    fn stream(&self, mut request: LlmRequest, cancel: CancellationToken) -> EventStream {
        request.messages = Arc::new(prepare_messages(&request.messages, &self.model));
        let key = request
            .options
            .api_key
            .clone()
            .or_else(|| self.api_key.clone());
        let wire = api::build_request_cached(&self.model, &request, key.as_deref(), &self.encoded);
        let body = wire
            .body_chunks()
            .map(|chunks| self.bodies.join(&chunks))
            .map_err(|e| e.to_string());
        let call = Call {
            client: self.client.clone(),
            model: self.model.clone(),
            wire: Some((wire, body)),
            body: None,
            parser: SseParser::new(),
            decoder: api::decoder(&self.model),
            ready: VecDeque::new(),
            sse: Vec::new(),
            cancel,
            finished: false,
        };
        Box::pin(futures::stream::unfold(call, |mut call| async move {
            let event = call.next().await?;
            Some((event, call))
        }))
    }
}

type Body = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

struct Call {
    client: reqwest::Client,
    model: Arc<ModelEntry>,
    wire: Option<(api::WireRequest, Result<bytes::Bytes, String>)>,
    body: Option<Body>,
    parser: SseParser,
    decoder: Box<dyn Decoder>,
    ready: VecDeque<StreamEvent>,
    sse: Vec<SseEvent>,
    cancel: CancellationToken,
    finished: bool,
}

impl Call {
    async fn next(&mut self) -> Option<StreamEvent> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(self.priced(event));
            }
            if self.finished {
                return None;
            }
            if let Some((wire, body)) = self.wire.take() {
                let connecting = connect(
                    self.client.clone(),
                    self.model.clone(),
                    self.cancel.clone(),
                    wire,
                    body,
                );
                match connecting.await {
                    Ok(body) => self.body = Some(body),
                    Err(event) => self.fail(event),
                }
                continue;
            }
            let Some(body) = self.body.as_mut() else {
                self.finished = true;
                continue;
            };
            let cancel = self.cancel.clone();
            let chunk = tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    self.fail(aborted());
                    continue;
                }
                chunk = body.next() => chunk,
            };
            let mut out = Vec::new();
            match chunk {
                Some(Ok(bytes)) => {
                    self.parser.feed(&bytes, &mut self.sse);
                    for sse in self.sse.drain(..) {
                        self.decoder.event(&sse, &mut out);
                    }
                }
                Some(Err(error)) => {
                    let error = ErrorInfo::new(
                        ErrorCode::Network,
                        format!("the connection broke mid-response: {error}"),
                    );
                    out.push(StreamEvent::Error {
                        stop_reason: StopReason::Error,
                        error,
                        usage: Usage::default(),
                    });
                }
                None => self.decoder.finish(&mut out),
            }
            for event in out {
                if self.finished {
                    break;
                }
                self.finished = event.is_terminal();
                self.ready.push_back(event);
            }
        }
    }

    fn fail(&mut self, event: StreamEvent) {
        self.ready.push_back(event);
        self.finished = true;
    }

    fn priced(&self, mut event: StreamEvent) -> StreamEvent {
        if let StreamEvent::Done { usage, .. } | StreamEvent::Error { usage, .. } = &mut event {
            usage.cost = cost(usage, &self.model.prices);
        }
        event
    }
}

async fn connect(
    client: reqwest::Client,
    model: Arc<ModelEntry>,
    cancel: CancellationToken,
    wire: api::WireRequest,
    body: Result<bytes::Bytes, String>,
) -> Result<Body, StreamEvent> {
    let body = body.map_err(|e| {
        failed(ErrorInfo::new(
            ErrorCode::InvalidRequest,
            format!("cannot encode the request: {e}"),
        ))
    })?;
    // No URL or headers: a base URL may carry credentials, and headers carry the key.
    tracing::debug!(
        provider = %model.provider,
        model = %model.id,
        api = model.api.as_str(),
        bytes = body.len(),
        "sending the model request"
    );
    // Start-up's last mark (`KEEL_TRACE`): the first request this process sends.
    static SENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SENT.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(target: "keel_startup", bytes = body.len(), "first model request sent");
    }
    let mut builder = client.post(&wire.url).body(body);
    for (name, value) in &wire.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let response = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(aborted()),
        response = builder.send() => response,
    };
    let response = response.map_err(|e| {
        let code = if e.is_timeout() {
            ErrorCode::Timeout
        } else {
            ErrorCode::Network
        };
        failed(ErrorInfo::new(
            code,
            format!("cannot reach {}: {}", model.base_url, root_cause(&e)),
        ))
    })?;
    let status = response.status();
    tracing::debug!(status = status.as_u16(), "the model answered");
    let json_body = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if status.is_success() && !json_body {
        return Ok(Box::pin(response.bytes_stream()));
    }
    let retry_after = retry_after_ms(response.headers());
    let text = read_limited(response).await;
    let (kind, message) = error_words(&text);
    let code = classify(Some(status.as_u16()), &kind, &message);
    tracing::debug!(?code, %message, "the model request failed");
    let message = if status.is_success() {
        format!("expected an event stream but got a JSON body: {message}")
    } else {
        format!("HTTP {}: {message}", status.as_u16())
    };
    Err(failed(
        ErrorInfo::new(code, message).with_retry_after(retry_after),
    ))
}

fn failed(error: ErrorInfo) -> StreamEvent {
    StreamEvent::Error {
        stop_reason: StopReason::Error,
        error,
        usage: Usage::default(),
    }
}

fn aborted() -> StreamEvent {
    StreamEvent::Error {
        stop_reason: StopReason::Aborted,
        error: ErrorInfo::new(ErrorCode::Cancelled, "the request was cancelled"),
        usage: Usage::default(),
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if std::ptr::eq(cause, error) {
        error.to_string()
    } else {
        format!("{error} ({cause})")
    }
}

async fn read_limited(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_LIMIT {
            body.truncate(ERROR_BODY_LIMIT);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The provider's error type and message from an error body, whatever its shape.
fn error_words(body: &str) -> (String, String) {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(body) else {
        let text = body.trim();
        return (
            String::new(),
            if text.is_empty() {
                "(empty body)".to_owned()
            } else {
                text.to_owned()
            },
        );
    };
    let error = json.get("error").unwrap_or(&json);
    let text = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    // OpenAI puts the class in `type` and the reason in `code`
    // (`invalid_request_error` / `context_length_exceeded`): both are kept.
    let kind: Vec<String> = ["type", "code", "status"]
        .iter()
        .filter_map(|key| text(error.get(*key)))
        .collect();
    let kind = (!kind.is_empty()).then(|| kind.join(" "));
    let message = text(error.get("message"))
        .or_else(|| text(json.get("message")))
        .unwrap_or_else(|| body.to_owned());
    (kind.unwrap_or_default(), message)
}

/// `retry-after-ms`, else `retry-after` in seconds.
fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(ms.max(0.0) as u64);
    }
    get("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| (s.max(0.0) * 1000.0) as u64)
}

/// Joins request bodies into one reusable allocation. One buffer, not a stream of the
/// shared chunks: reqwest can only re-send a body it can clone, which it does to follow a
/// 307/308 redirect and to retry an HTTP/2 refusal. Reusing the allocation once the previous
/// body was sent spares every request the page faults of a fresh multi-hundred-KiB buffer.
#[derive(Default)]
struct BodyBuffer {
    buffer: std::sync::Mutex<bytes::BytesMut>,
}

impl BodyBuffer {
    fn join(&self, chunks: &[bytes::Bytes]) -> bytes::Bytes {
        let total = chunks.iter().map(bytes::Bytes::len).sum();
        let mut buffer = self
            .buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Reclaims the earlier allocation when nothing holds the last body any more.
        buffer.reserve(total);
        for chunk in chunks {
            buffer.extend_from_slice(chunk);
        }
        buffer.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_joined_exactly_and_reuse_the_buffer_once_sent() {
        let buffers = BodyBuffer::default();
        let chunks = |n: usize| -> Vec<bytes::Bytes> {
            vec![
                bytes::Bytes::from(vec![b'a'; n]),
                bytes::Bytes::from_static(b","),
                bytes::Bytes::from(vec![b'b'; n]),
            ]
        };
        let first = buffers.join(&chunks(300_000));
        assert_eq!(first.len(), 600_001);
        assert_eq!(&first[299_999..300_002], b"a,b");
        let address = first.as_ptr();
        // Once sent (dropped), its allocation serves the next body.
        drop(first);
        let again = buffers.join(&chunks(200_000));
        assert_eq!(again.as_ptr(), address);
        assert_eq!(again.len(), 400_001);
        assert_eq!(&again[199_999..200_002], b"a,b");
        // While a body is still held, the next one gets other memory.
        let held = buffers.join(&chunks(10));
        assert_ne!(held.as_ptr(), address);
        assert_eq!(&held[..], b"aaaaaaaaaa,bbbbbbbbbb");
        assert_eq!(again.len(), 400_001, "the held body is untouched");
    }

    #[test]
    fn error_bodies_of_every_shape_are_read() {
        assert_eq!(
            error_words(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            ("overloaded_error".into(), "Overloaded".into())
        );
        assert_eq!(
            error_words(
                r#"{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}"#
            ),
            ("429 RESOURCE_EXHAUSTED".into(), "Resource exhausted".into())
        );
        let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let (kind, message) = error_words(openai);
        assert_eq!(kind, "invalid_request_error context_length_exceeded");
        assert_eq!(
            crate::errors::classify(Some(400), &kind, &message),
            keel_protocol::ErrorCode::ContextOverflow
        );
        assert_eq!(
            error_words("upstream timed out"),
            (String::new(), "upstream timed out".into())
        );
        assert_eq!(error_words(""), (String::new(), "(empty body)".into()));
    }

    #[test]
    fn retry_after_headers_are_parsed() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after_ms(&headers), Some(3000));
        headers.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after_ms(&headers), Some(1500));
        headers.clear();
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_ms(&headers), None);
    }
}
