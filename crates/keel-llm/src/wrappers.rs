//! Option wrappers composed around a provider's stream function (SPEC §2).
//!
//! Order, inner to outer: host max-output ceiling, cache retention, max tokens, caller
//! headers, request timeout. Each wrapper fills only the option it owns and leaves a value
//! an outer wrapper (or the caller) already set. The ceiling is the exception and sits
//! innermost: it must see every accumulated option to shrink `max_tokens` below it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_protocol::{ErrorCode, ErrorInfo, StopReason, StreamEvent, Usage};
use tokio_util::sync::CancellationToken;

use crate::request::{CacheRetention, LlmRequest};
use crate::stream_fn::{EventStream, StreamFn};

/// Default whole-request timeout: 20 minutes (SPEC §2).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// What the composed stream function enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSettings {
    /// Host-wide ceiling on output tokens; always applied last.
    pub host_max_output: Option<u32>,
    /// Default cache retention.
    pub cache_retention: Option<CacheRetention>,
    /// Default output token limit.
    pub max_tokens: Option<u32>,
    /// Headers added to every call (a caller's own header of the same name wins).
    pub headers: Vec<(String, String)>,
    /// Whole-request timeout; zero disables it.
    pub request_timeout: Duration,
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            host_max_output: None,
            cache_retention: None,
            max_tokens: None,
            headers: Vec::new(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Wraps `base` in the option wrappers, in the order SPEC §2 fixes.
pub fn compose_stream_fn(base: Arc<dyn StreamFn>, settings: &StreamSettings) -> Arc<dyn StreamFn> {
    let mut f = base;
    if let Some(ceiling) = settings.host_max_output {
        f = Arc::new(HostMaxOutput { inner: f, ceiling });
    }
    if let Some(retention) = settings.cache_retention {
        f = Arc::new(CacheRetentionDefault {
            inner: f,
            retention,
        });
    }
    if let Some(max_tokens) = settings.max_tokens.filter(|n| *n > 0) {
        f = Arc::new(MaxTokensDefault {
            inner: f,
            max_tokens,
        });
    }
    if !settings.headers.is_empty() {
        f = Arc::new(Headers {
            inner: f,
            headers: settings.headers.clone(),
        });
    }
    if !settings.request_timeout.is_zero() {
        f = Arc::new(RequestTimeout {
            inner: f,
            timeout: settings.request_timeout,
        });
    }
    f
}

struct HostMaxOutput {
    inner: Arc<dyn StreamFn>,
    ceiling: u32,
}

impl StreamFn for HostMaxOutput {
    fn stream(&self, mut request: LlmRequest, cancel: CancellationToken) -> EventStream {
        let wanted = request
            .options
            .max_tokens
            .unwrap_or(request.model.max_output);
        request.options.max_tokens = Some(wanted.min(self.ceiling));
        self.inner.stream(request, cancel)
    }
}

struct CacheRetentionDefault {
    inner: Arc<dyn StreamFn>,
    retention: CacheRetention,
}

impl StreamFn for CacheRetentionDefault {
    fn stream(&self, mut request: LlmRequest, cancel: CancellationToken) -> EventStream {
        request
            .options
            .cache_retention
            .get_or_insert(self.retention);
        self.inner.stream(request, cancel)
    }
}

struct MaxTokensDefault {
    inner: Arc<dyn StreamFn>,
    max_tokens: u32,
}

impl StreamFn for MaxTokensDefault {
    fn stream(&self, mut request: LlmRequest, cancel: CancellationToken) -> EventStream {
        request.options.max_tokens.get_or_insert(self.max_tokens);
        self.inner.stream(request, cancel)
    }
}

struct Headers {
    inner: Arc<dyn StreamFn>,
    headers: Vec<(String, String)>,
}

impl StreamFn for Headers {
    fn stream(&self, mut request: LlmRequest, cancel: CancellationToken) -> EventStream {
        for (name, value) in &self.headers {
            let taken = request
                .options
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name));
            if !taken {
                request.options.headers.push((name.clone(), value.clone()));
            }
        }
        self.inner.stream(request, cancel)
    }
}

struct RequestTimeout {
    inner: Arc<dyn StreamFn>,
    timeout: Duration,
}

impl StreamFn for RequestTimeout {
    fn stream(&self, mut request: LlmRequest, cancel: CancellationToken) -> EventStream {
        let timeout = *request.options.timeout.get_or_insert(self.timeout);
        let call_cancel = cancel.child_token();
        let inner = self.inner.stream(request, call_cancel.clone());
        with_deadline(inner, timeout, call_cancel)
    }
}

/// Ends `inner` with a `timeout` error once `timeout` has passed since the call began, and
/// cancels the inner call so its connection is released.
fn with_deadline(inner: EventStream, timeout: Duration, cancel: CancellationToken) -> EventStream {
    let deadline = tokio::time::Instant::now() + timeout;
    let state = (inner, false);
    Box::pin(futures::stream::unfold(state, move |(mut inner, done)| {
        let cancel = cancel.clone();
        async move {
            if done {
                return None;
            }
            tokio::select! {
                biased;
                event = inner.next() => {
                    let event = event?;
                    let terminal = event.is_terminal();
                    Some((event, (inner, terminal)))
                }
                () = tokio::time::sleep_until(deadline) => {
                    cancel.cancel();
                    let error = ErrorInfo::new(
                        ErrorCode::Timeout,
                        format!("the model request took longer than {} s", timeout.as_secs()),
                    );
                    let event = StreamEvent::Error {
                        stop_reason: StopReason::Error,
                        error,
                        usage: Usage::default(),
                    };
                    Some((event, (inner, true)))
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{ModelSpec, RequestOptions};
    use std::sync::Mutex;

    fn request() -> LlmRequest {
        LlmRequest {
            model: Arc::new(ModelSpec::scripted()),
            system_prompt: Arc::from(""),
            messages: Arc::new(Vec::new()),
            tools: Arc::from(Vec::new()),
            options: RequestOptions::default(),
        }
    }

    fn recorder() -> (Arc<dyn StreamFn>, Arc<Mutex<Vec<RequestOptions>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let f = move |req: LlmRequest, _cancel: CancellationToken| -> EventStream {
            sink.lock().unwrap().push(req.options.clone());
            Box::pin(futures::stream::iter([StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default(),
            }]))
        };
        (Arc::new(f), seen)
    }

    #[tokio::test]
    async fn wrappers_fill_only_missing_options_and_the_ceiling_wins() {
        let (base, seen) = recorder();
        let settings = StreamSettings {
            host_max_output: Some(1000),
            cache_retention: Some(CacheRetention::Long),
            max_tokens: Some(4000),
            headers: vec![("x-a".into(), "1".into()), ("x-b".into(), "2".into())],
            request_timeout: Duration::from_secs(5),
        };
        let f = compose_stream_fn(base, &settings);
        let mut req = request();
        req.options.headers.push(("X-A".into(), "caller".into()));
        req.options.cache_retention = Some(CacheRetention::None);
        let _ = f
            .stream(req, CancellationToken::new())
            .collect::<Vec<_>>()
            .await;
        let options = seen.lock().unwrap()[0].clone();
        assert_eq!(options.max_tokens, Some(1000));
        assert_eq!(options.cache_retention, Some(CacheRetention::None));
        assert_eq!(
            options.headers,
            vec![
                ("X-A".to_string(), "caller".to_string()),
                ("x-b".into(), "2".into())
            ]
        );
        assert_eq!(options.timeout, Some(Duration::from_secs(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_request_times_out() {
        let stall = |_req: LlmRequest, _cancel: CancellationToken| -> EventStream {
            Box::pin(futures::stream::pending())
        };
        let settings = StreamSettings {
            request_timeout: Duration::from_secs(3),
            ..StreamSettings::default()
        };
        let f = compose_stream_fn(Arc::new(stall), &settings);
        let events: Vec<_> = f
            .stream(request(), CancellationToken::new())
            .collect()
            .await;
        assert!(matches!(
            &events[..],
            [StreamEvent::Error { error, .. }] if error.code == ErrorCode::Timeout
        ));
    }
}
