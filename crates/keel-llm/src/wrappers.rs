//! Option wrappers composed around a provider's stream function (DESIGN §2).
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

/// Default whole-request timeout: 20 minutes (DESIGN §2).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Default wait for the first event of a response (issue 3).
pub const DEFAULT_FIRST_EVENT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default longest silence inside a response stream (issue 3).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Environment variables that override the timeouts, in milliseconds; 0 disables.
pub const ENV_REQUEST_TIMEOUT: &str = "KEEL_LLM_REQUEST_TIMEOUT_MS";
/// See [`ENV_REQUEST_TIMEOUT`].
pub const ENV_FIRST_EVENT_TIMEOUT: &str = "KEEL_LLM_FIRST_EVENT_TIMEOUT_MS";
/// See [`ENV_REQUEST_TIMEOUT`].
pub const ENV_IDLE_TIMEOUT: &str = "KEEL_LLM_IDLE_TIMEOUT_MS";

/// A timeout override that is not a whole number of milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be a whole number of milliseconds (0 disables the timeout), not {value:?}")]
pub struct BadTimeout {
    /// The variable.
    pub name: String,
    /// What it held.
    pub value: String,
}

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
    /// Wait for the first event; zero disables it.
    pub first_event_timeout: Duration,
    /// Longest silence between events; zero disables it.
    pub idle_timeout: Duration,
    /// Transport retry, outermost; `None` disables it.
    pub retry: Option<crate::retry::RetryPolicy>,
}

impl StreamSettings {
    /// These settings with timeouts overridden from `vars` (name, value) pairs, normally
    /// the process environment.
    pub fn with_overrides<'a>(
        mut self,
        vars: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, BadTimeout> {
        for (name, value) in vars {
            let slot = match name {
                ENV_REQUEST_TIMEOUT => &mut self.request_timeout,
                ENV_FIRST_EVENT_TIMEOUT => &mut self.first_event_timeout,
                ENV_IDLE_TIMEOUT => &mut self.idle_timeout,
                _ => continue,
            };
            let ms: u64 = value.trim().parse().map_err(|_| BadTimeout {
                name: name.to_owned(),
                value: value.to_owned(),
            })?;
            *slot = Duration::from_millis(ms);
        }
        Ok(self)
    }

    /// These settings with the `KEEL_LLM_*_TIMEOUT_MS` environment variables applied.
    pub fn from_env(self) -> Result<Self, BadTimeout> {
        let vars: Vec<(String, String)> = [
            ENV_REQUEST_TIMEOUT,
            ENV_FIRST_EVENT_TIMEOUT,
            ENV_IDLE_TIMEOUT,
        ]
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v)))
        .collect();
        self.with_overrides(vars.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    }
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            host_max_output: None,
            cache_retention: None,
            max_tokens: None,
            headers: Vec::new(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            first_event_timeout: DEFAULT_FIRST_EVENT_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            retry: Some(crate::retry::RetryPolicy::default()),
        }
    }
}

/// Wraps `base` in the option wrappers, in the order DESIGN §2 fixes.
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
    if !settings.first_event_timeout.is_zero() || !settings.idle_timeout.is_zero() {
        f = Arc::new(StallTimeout {
            inner: f,
            first_event: settings.first_event_timeout,
            idle: settings.idle_timeout,
        });
    }
    if !settings.request_timeout.is_zero() {
        f = Arc::new(RequestTimeout {
            inner: f,
            timeout: settings.request_timeout,
        });
    }
    if let Some(policy) = settings.retry {
        f = crate::retry::with_retry(f, policy);
    }
    f
}

/// Fails a response that is silent too long: before its first event, or between events.
struct StallTimeout {
    inner: Arc<dyn StreamFn>,
    first_event: Duration,
    idle: Duration,
}

impl StreamFn for StallTimeout {
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream {
        let call_cancel = cancel.child_token();
        let inner = self.inner.stream(request, call_cancel.clone());
        let (first, idle) = (self.first_event, self.idle);
        let state = (inner, false, false);
        Box::pin(futures::stream::unfold(
            state,
            move |(mut inner, started, done)| {
                let call_cancel = call_cancel.clone();
                async move {
                    if done {
                        return None;
                    }
                    let limit = if started { idle } else { first };
                    let next = if limit.is_zero() {
                        Some(inner.next().await)
                    } else {
                        tokio::time::timeout(limit, inner.next()).await.ok()
                    };
                    match next {
                        Some(event) => {
                            let event = event?;
                            let terminal = event.is_terminal();
                            Some((event, (inner, true, terminal)))
                        }
                        None => {
                            call_cancel.cancel();
                            let message = if started {
                                format!("the model stream was silent for {} s", limit.as_secs())
                            } else {
                                format!("the model sent nothing for {} s", limit.as_secs())
                            };
                            let event = StreamEvent::Error {
                                stop_reason: StopReason::Error,
                                error: ErrorInfo::new(ErrorCode::Timeout, message),
                                usage: Usage::default(),
                            };
                            Some((event, (inner, started, true)))
                        }
                    }
                }
            },
        ))
    }
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
            ..StreamSettings::default()
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
            retry: None,
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

    #[tokio::test(start_paused = true)]
    async fn silence_before_the_first_event_and_between_events_times_out() {
        use crate::scripted::{ScriptedProvider, ScriptedResponse};
        let settings = StreamSettings {
            first_event_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(5),
            retry: None,
            ..StreamSettings::default()
        };
        let provider = ScriptedProvider::with_responses([
            ScriptedResponse::text("x").first_delay(Duration::from_secs(3)),
            ScriptedResponse::text("abc")
                .chunk_size(1)
                .delay(Duration::from_secs(6)),
            ScriptedResponse::text("abc")
                .chunk_size(1)
                .delay(Duration::from_secs(4)),
        ]);
        let f = compose_stream_fn(Arc::new(provider), &settings);
        let first: Vec<_> = f
            .stream(request(), CancellationToken::new())
            .collect()
            .await;
        assert!(
            matches!(&first[..], [StreamEvent::Error { error, .. }] if error.message.contains("nothing for 2 s"))
        );
        let second: Vec<_> = f
            .stream(request(), CancellationToken::new())
            .collect()
            .await;
        assert!(
            matches!(second.last(), Some(StreamEvent::Error { error, .. }) if error.message.contains("silent for 5 s"))
        );
        let third: Vec<_> = f
            .stream(request(), CancellationToken::new())
            .collect()
            .await;
        assert!(matches!(third.last(), Some(StreamEvent::Done { .. })));
    }

    #[test]
    fn timeouts_can_be_overridden_and_bad_values_are_named() {
        let settings = StreamSettings::default()
            .with_overrides([
                (ENV_IDLE_TIMEOUT, "0"),
                (ENV_REQUEST_TIMEOUT, "1500"),
                ("OTHER", "x"),
            ])
            .unwrap();
        assert_eq!(settings.idle_timeout, Duration::ZERO);
        assert_eq!(settings.request_timeout, Duration::from_millis(1500));
        let err = StreamSettings::default()
            .with_overrides([(ENV_FIRST_EVENT_TIMEOUT, "2m")])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "KEEL_LLM_FIRST_EVENT_TIMEOUT_MS must be a whole number of milliseconds (0 disables the timeout), not \"2m\""
        );
    }
}
