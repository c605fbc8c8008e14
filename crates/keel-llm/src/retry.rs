//! Transport retry (DESIGN §2, issue 3): at most 5 retries, 1 s doubling to a 30 s cap with
//! jitter, at most 120 s since the first failure, honouring the provider's `retry-after`.
//!
//! A request is retried only before the model produced any visible output: once text,
//! thinking or a tool call reached the user, a retry would show it twice (or run a tool
//! twice), so the failure goes through as it is. Events that precede visible output (the
//! response's start) are held back until the attempt either shows output or fails. Only
//! transient failures retry; a rejected request (400, 401, 403, 404, 413, context overflow,
//! exhausted quota) never does. Every wait, recovery and exhaustion is reported as a
//! `notice` event in the stream.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_protocol::{ErrorInfo, StreamEvent, StreamNotice};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::errors::is_retryable;
use crate::request::LlmRequest;
use crate::stream_fn::{EventStream, StreamFn};

/// Retries allowed after the first attempt.
pub const MAX_RETRIES: u32 = 5;
/// First backoff.
pub const BASE_DELAY: Duration = Duration::from_secs(1);
/// Largest single backoff.
pub const MAX_DELAY: Duration = Duration::from_secs(30);
/// Longest time spent retrying, from the first failure.
pub const MAX_TOTAL: Duration = Duration::from_secs(120);

/// Retry limits; defaults are the design's numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff.
    pub base_delay: Duration,
    /// Cap on one backoff.
    pub max_delay: Duration,
    /// Cap on the time from the first failure to the last retry.
    pub max_total: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: MAX_RETRIES,
            base_delay: BASE_DELAY,
            max_delay: MAX_DELAY,
            max_total: MAX_TOTAL,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry `attempt` (from 1), given the provider's request and a jitter
    /// value in `[0, 1)`. Backoff is scaled into `[75 %, 100 %]` of its value so that
    /// clients that failed together do not retry together.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(wait) = retry_after {
            return wait;
        }
        let exponent = attempt.saturating_sub(1).min(16);
        let backoff = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        backoff.mul_f64(0.75 + 0.25 * jitter.clamp(0.0, 1.0))
    }
}

/// A source of jitter in `[0, 1)`; injectable so the schedule can be tested exactly.
pub type Jitter = Arc<dyn Fn() -> f64 + Send + Sync>;

/// Default jitter: the sub-second clock, good enough to spread retries apart.
fn clock_jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

/// Wraps `inner` in the retry policy.
pub fn with_retry(inner: Arc<dyn StreamFn>, policy: RetryPolicy) -> Arc<dyn StreamFn> {
    Arc::new(Retrying {
        inner,
        policy,
        jitter: Arc::new(clock_jitter),
    })
}

/// Wraps `inner` in the retry policy with a chosen jitter source.
pub fn with_retry_jitter(
    inner: Arc<dyn StreamFn>,
    policy: RetryPolicy,
    jitter: Jitter,
) -> Arc<dyn StreamFn> {
    Arc::new(Retrying {
        inner,
        policy,
        jitter,
    })
}

struct Retrying {
    inner: Arc<dyn StreamFn>,
    policy: RetryPolicy,
    jitter: Jitter,
}

struct State {
    inner: Arc<dyn StreamFn>,
    policy: RetryPolicy,
    jitter: Jitter,
    request: LlmRequest,
    cancel: CancellationToken,
    current: Option<EventStream>,
    /// Events of the current attempt held back until it shows output or fails.
    held: Vec<StreamEvent>,
    /// Events ready to hand out, in order.
    ready: std::collections::VecDeque<StreamEvent>,
    visible: bool,
    retries: u32,
    first_failure: Option<Instant>,
    done: bool,
}

impl StreamFn for Retrying {
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream {
        let state = State {
            inner: self.inner.clone(),
            policy: self.policy,
            jitter: self.jitter.clone(),
            request,
            cancel,
            current: None,
            held: Vec::new(),
            ready: std::collections::VecDeque::new(),
            visible: false,
            retries: 0,
            first_failure: None,
            done: false,
        };
        Box::pin(futures::stream::unfold(state, |mut state| async move {
            let event = state.next().await?;
            Some((event, state))
        }))
    }
}

impl State {
    async fn next(&mut self) -> Option<StreamEvent> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            let stream = match self.current.as_mut() {
                Some(stream) => stream,
                None => self
                    .current
                    .insert(self.inner.stream(self.request.clone(), self.cancel.clone())),
            };
            let Some(event) = stream.next().await else {
                // The inner stream broke its contract (no terminal event); pass on what
                // was held and let the consumer report the cut.
                self.ready.extend(self.held.drain(..));
                self.done = true;
                continue;
            };
            if self.visible {
                self.done = event.is_terminal();
                return Some(event);
            }
            match event {
                StreamEvent::Error { ref error, .. } if self.should_retry(error) => {
                    let attempt = self.retries + 1;
                    let retry_after = error.retry_after_ms.map(Duration::from_millis);
                    let delay = self.policy.delay(attempt, retry_after, (self.jitter)());
                    let since_first = self
                        .first_failure
                        .get_or_insert_with(Instant::now)
                        .elapsed();
                    if attempt > self.policy.max_retries
                        || since_first + delay > self.policy.max_total
                    {
                        if self.retries > 0 {
                            self.ready.push_back(StreamEvent::Notice {
                                notice: StreamNotice::RetriesExhausted {
                                    attempts: self.retries,
                                },
                            });
                        }
                        self.ready.extend(self.held.drain(..));
                        self.ready.push_back(event);
                        self.done = true;
                        continue;
                    }
                    self.retries = attempt;
                    self.held.clear();
                    self.current = None;
                    let notice = StreamNotice::RetryScheduled {
                        attempt,
                        max_retries: self.policy.max_retries,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error: error.clone(),
                    };
                    let cancel = self.cancel.clone();
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = cancel.cancelled() => {
                            self.ready.push_back(StreamEvent::Notice { notice });
                            self.ready.push_back(StreamEvent::Error {
                                stop_reason: keel_protocol::StopReason::Aborted,
                                error: ErrorInfo::new(keel_protocol::ErrorCode::Cancelled, "the request was cancelled while waiting to retry"),
                                usage: keel_protocol::Usage::default(),
                            });
                            self.done = true;
                            continue;
                        }
                    }
                    return Some(StreamEvent::Notice { notice });
                }
                event if event.is_visible_output() || event.is_terminal() => {
                    self.visible = true;
                    if self.retries > 0 {
                        self.ready.push_back(StreamEvent::Notice {
                            notice: StreamNotice::Recovered {
                                attempts: self.retries,
                            },
                        });
                    }
                    self.ready.extend(self.held.drain(..));
                    self.done = event.is_terminal();
                    self.ready.push_back(event);
                }
                event => self.held.push(event),
            }
        }
    }

    fn should_retry(&self, error: &ErrorInfo) -> bool {
        is_retryable(error.code) && !self.cancel.is_cancelled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ModelSpec;
    use crate::scripted::{ScriptedProvider, ScriptedResponse};
    use keel_protocol::{ErrorCode, StopReason};
    use pretty_assertions::assert_eq;

    fn request() -> LlmRequest {
        LlmRequest {
            model: Arc::new(ModelSpec::scripted()),
            system_prompt: Arc::from(""),
            messages: Arc::new(Vec::new()),
            tools: Arc::from(Vec::new()),
            options: Default::default(),
        }
    }

    fn retried(provider: &ScriptedProvider) -> Arc<dyn StreamFn> {
        with_retry_jitter(
            Arc::new(provider.clone()),
            RetryPolicy::default(),
            Arc::new(|| 0.0),
        )
    }

    async fn collect(f: &Arc<dyn StreamFn>) -> (Vec<StreamEvent>, Duration) {
        let started = Instant::now();
        let events = f
            .stream(request(), CancellationToken::new())
            .collect()
            .await;
        (events, started.elapsed())
    }

    fn delays(events: &[StreamEvent]) -> Vec<u64> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Notice {
                    notice: StreamNotice::RetryScheduled { delay_ms, .. },
                } => Some(*delay_ms),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_schedule_doubles_to_the_cap_with_jitter() {
        let policy = RetryPolicy::default();
        let plain: Vec<u128> = (1..=7)
            .map(|a| policy.delay(a, None, 1.0).as_millis())
            .collect();
        assert_eq!(plain, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(policy.delay(3, None, 0.0).as_millis(), 3000);
        assert_eq!(
            policy
                .delay(1, Some(Duration::from_millis(2500)), 0.0)
                .as_millis(),
            2500
        );
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_retry_then_recover() {
        let provider = ScriptedProvider::with_responses([
            ScriptedResponse::error(ErrorCode::Overloaded, "busy"),
            ScriptedResponse::error(ErrorCode::Server, "oops"),
            ScriptedResponse::text("ok"),
        ]);
        let (events, elapsed) = collect(&retried(&provider)).await;
        assert_eq!(delays(&events), [750, 1500]);
        assert_eq!(elapsed, Duration::from_millis(2250));
        assert!(events.contains(&StreamEvent::Notice {
            notice: StreamNotice::Recovered { attempts: 2 }
        }));
        assert!(matches!(
            events.last(),
            Some(StreamEvent::Done {
                stop_reason: StopReason::Stop,
                ..
            })
        ));
        assert_eq!(provider.call_count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_five_retries() {
        let provider = ScriptedProvider::with_responses(
            (0..7).map(|_| ScriptedResponse::error(ErrorCode::RateLimit, "slow")),
        );
        let (events, _) = collect(&retried(&provider)).await;
        assert_eq!(delays(&events), [750, 1500, 3000, 6000, 12000]);
        assert_eq!(provider.call_count(), 6);
        assert!(events.contains(&StreamEvent::Notice {
            notice: StreamNotice::RetriesExhausted { attempts: 5 }
        }));
        assert!(
            matches!(events.last(), Some(StreamEvent::Error { error, .. }) if error.code == ErrorCode::RateLimit)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured_within_the_total_budget() {
        let limited = |ms| {
            let mut r = ScriptedResponse::error(ErrorCode::RateLimit, "slow");
            r = r.retry_after(ms);
            r
        };
        let provider = ScriptedProvider::with_responses([
            limited(30_000),
            limited(60_000),
            limited(40_000),
            ScriptedResponse::text("ok"),
        ]);
        let (events, elapsed) = collect(&retried(&provider)).await;
        // 30 s + 60 s fit in 120 s; a further 40 s would pass it, so the third failure stands.
        assert_eq!(delays(&events), [30_000, 60_000]);
        assert_eq!(elapsed, Duration::from_secs(90));
        assert_eq!(provider.call_count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn rejected_requests_never_retry() {
        for code in [
            ErrorCode::Auth,
            ErrorCode::InvalidRequest,
            ErrorCode::ContextOverflow,
            ErrorCode::Quota,
        ] {
            let provider = ScriptedProvider::with_responses([
                ScriptedResponse::error(code, "no"),
                ScriptedResponse::text("never"),
            ]);
            let (events, _) = collect(&retried(&provider)).await;
            assert_eq!(provider.call_count(), 1, "{code:?}");
            assert_eq!(events.len(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_retry_after_visible_output() {
        let provider = ScriptedProvider::with_responses([
            ScriptedResponse::text("partial answer")
                .chunk_size(4)
                .fail_after(3, ErrorCode::Network, "reset"),
            ScriptedResponse::text("never"),
        ]);
        let (events, _) = collect(&retried(&provider)).await;
        assert_eq!(provider.call_count(), 1);
        assert!(
            matches!(events.last(), Some(StreamEvent::Error { error, .. }) if error.code == ErrorCode::Network)
        );
        assert!(delays(&events).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_before_output_after_the_start_event_still_retries() {
        let provider = ScriptedProvider::with_responses([
            ScriptedResponse::text("x").fail_after(1, ErrorCode::Network, "reset"),
            ScriptedResponse::text("ok"),
        ]);
        let (events, _) = collect(&retried(&provider)).await;
        assert_eq!(provider.call_count(), 2);
        let starts = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Start { .. }))
            .count();
        assert_eq!(
            starts, 1,
            "the failed attempt's start was held back and dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancelling_during_a_wait_ends_at_once() {
        let provider = ScriptedProvider::with_responses([
            ScriptedResponse::error(ErrorCode::Overloaded, "busy"),
            ScriptedResponse::text("never"),
        ]);
        let f = retried(&provider);
        let cancel = CancellationToken::new();
        let mut stream = f.stream(request(), cancel.clone());
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            canceller.cancel();
        });
        let events: Vec<_> = (&mut stream).collect().await;
        assert!(matches!(
            events.last(),
            Some(StreamEvent::Error {
                stop_reason: StopReason::Aborted,
                ..
            })
        ));
        assert_eq!(provider.call_count(), 1);
    }
}

#[cfg(test)]
mod composed {
    use super::*;
    use crate::request::ModelSpec;
    use crate::scripted::{ScriptedProvider, ScriptedResponse};
    use crate::wrappers::{StreamSettings, compose_stream_fn};
    use keel_protocol::ErrorCode;

    #[tokio::test(start_paused = true)]
    async fn the_default_composition_retries() {
        let provider = ScriptedProvider::with_responses([
            ScriptedResponse::error(ErrorCode::Overloaded, "busy"),
            ScriptedResponse::text("ok"),
        ]);
        let f = compose_stream_fn(Arc::new(provider.clone()), &StreamSettings::default());
        let request = LlmRequest {
            model: Arc::new(ModelSpec::scripted()),
            system_prompt: Arc::from(""),
            messages: Arc::new(Vec::new()),
            tools: Arc::from(Vec::new()),
            options: Default::default(),
        };
        let events: Vec<_> = f.stream(request, CancellationToken::new()).collect().await;
        assert!(
            matches!(events.last(), Some(StreamEvent::Done { .. })),
            "{events:#?}"
        );
        assert_eq!(provider.call_count(), 2);
    }
}
