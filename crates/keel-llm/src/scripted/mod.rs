//! The scripted provider: a stream function fed by a queue of scripted responses.
//!
//! Every crate's tests drive the loop through it. A response is a list of blocks (text,
//! thinking, tool calls) streamed in chunks of a chosen size, with optional delays, a
//! scripted failure, or a hang that only cancellation ends. Each request is recorded, and
//! a check can be attached to call `n`; failed checks are kept for [`ScriptedProvider::failures`]
//! and also end that call with an error event, so the loop under test sees them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use keel_protocol::{
    ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, ToolCallId, Usage,
};
use tokio_util::sync::CancellationToken;

mod spec;

pub use spec::{ErrorSpec, ResponseSpec, ToolCallSpec};

use crate::request::LlmRequest;
use crate::stream_fn::{EventStream, StreamFn};

/// A check run on the request of one call.
pub type RequestCheck = Arc<dyn Fn(&LlmRequest) -> Result<(), String> + Send + Sync>;

/// One block of a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptedBlock {
    /// Text.
    Text(String),
    /// Reasoning with an optional signature.
    Thinking {
        /// Reasoning text.
        text: String,
        /// Signature.
        signature: Option<String>,
    },
    /// A tool call; `arguments` is streamed as its JSON text.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Raw argument JSON (need not be valid, to test validation).
        arguments: String,
    },
}

/// How a scripted response ends.
#[derive(Debug, Clone, PartialEq)]
enum Ending {
    Done(Option<StopReason>),
    Fail {
        after: usize,
        stop_reason: StopReason,
        error: ErrorInfo,
    },
    Hang {
        after: usize,
        ignore_cancel: bool,
    },
}

/// One scripted model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedResponse {
    blocks: Vec<ScriptedBlock>,
    ending: Ending,
    usage: Usage,
    first_delay: Duration,
    delay: Duration,
    chunk_size: usize,
}

impl Default for ScriptedResponse {
    fn default() -> Self {
        Self {
            blocks: Vec::new(),
            ending: Ending::Done(None),
            usage: Usage::default(),
            first_delay: Duration::ZERO,
            delay: Duration::ZERO,
            chunk_size: usize::MAX,
        }
    }
}

impl ScriptedResponse {
    /// A response with no blocks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A text-only answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_text(text)
    }

    /// A response holding one tool call.
    pub fn tool_call(id: &str, name: &str, arguments: serde_json::Value) -> Self {
        Self::new().with_tool_call(id, name, arguments)
    }

    /// A response that fails at once with `code`.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new().fail_after(0, code, message)
    }

    /// Appends a text block.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(ScriptedBlock::Text(text.into()));
        self
    }

    /// Appends a thinking block.
    pub fn with_thinking(mut self, text: impl Into<String>, signature: Option<&str>) -> Self {
        self.blocks.push(ScriptedBlock::Thinking {
            text: text.into(),
            signature: signature.map(str::to_owned),
        });
        self
    }

    /// Appends a tool call with JSON arguments.
    pub fn with_tool_call(self, id: &str, name: &str, arguments: serde_json::Value) -> Self {
        self.with_raw_tool_call(id, name, &arguments.to_string())
    }

    /// Appends a tool call whose argument text is sent verbatim (it may be invalid JSON).
    pub fn with_raw_tool_call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.blocks.push(ScriptedBlock::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Forces the stop reason (default: `tool_use` with tool calls, else `stop`).
    pub fn stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.ending = Ending::Done(Some(stop_reason));
        self
    }

    /// Reports this usage at the end.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Waits this long before the first event.
    pub fn first_delay(mut self, delay: Duration) -> Self {
        self.first_delay = delay;
        self
    }

    /// Waits this long before every event after the first.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Streams text, thinking and argument JSON in pieces of at most `chars` characters.
    pub fn chunk_size(mut self, chars: usize) -> Self {
        self.chunk_size = chars.max(1);
        self
    }

    /// After `events` events, fails with `code`.
    pub fn fail_after(
        mut self,
        events: usize,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Self {
        self.ending = Ending::Fail {
            after: events,
            stop_reason: StopReason::Error,
            error: ErrorInfo::new(code, message),
        };
        self
    }

    /// Marks a scripted failure with the provider's requested wait.
    pub fn retry_after(mut self, ms: u64) -> Self {
        if let Ending::Fail { error, .. } = &mut self.ending {
            error.retry_after_ms = Some(ms);
        }
        self
    }

    /// After `events` events, stops sending until the call is cancelled.
    pub fn hang_after(mut self, events: usize) -> Self {
        self.ending = Ending::Hang {
            after: events,
            ignore_cancel: false,
        };
        self
    }

    /// After `events` events, stops sending forever, even when cancelled.
    pub fn hang_ignoring_cancel(mut self, events: usize) -> Self {
        self.ending = Ending::Hang {
            after: events,
            ignore_cancel: true,
        };
        self
    }

    /// The full event sequence for a normal ending.
    fn events(&self, meta: ResponseMeta) -> Vec<StreamEvent> {
        let mut events = vec![StreamEvent::Start { meta }];
        let mut has_tool_calls = false;
        for (index, block) in self.blocks.iter().enumerate() {
            match block {
                ScriptedBlock::Text(text) => {
                    events.push(StreamEvent::TextStart { index });
                    for delta in chunks(text, self.chunk_size) {
                        events.push(StreamEvent::TextDelta { index, delta });
                    }
                    events.push(StreamEvent::TextEnd { index });
                }
                ScriptedBlock::Thinking { text, signature } => {
                    events.push(StreamEvent::ThinkingStart { index });
                    for delta in chunks(text, self.chunk_size) {
                        events.push(StreamEvent::ThinkingDelta { index, delta });
                    }
                    events.push(StreamEvent::ThinkingEnd {
                        index,
                        signature: signature.clone(),
                        redacted: false,
                    });
                }
                ScriptedBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    has_tool_calls = true;
                    events.push(StreamEvent::ToolCallStart {
                        index,
                        id: ToolCallId::new(id),
                        name: name.clone(),
                    });
                    for delta in chunks(arguments, self.chunk_size) {
                        events.push(StreamEvent::ToolCallDelta { index, delta });
                    }
                    events.push(StreamEvent::ToolCallEnd { index });
                }
            }
        }
        let default_stop = if has_tool_calls {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        };
        let stop_reason = match &self.ending {
            Ending::Done(reason) => reason.unwrap_or(default_stop),
            _ => default_stop,
        };
        events.push(StreamEvent::Done {
            stop_reason,
            usage: self.usage,
        });
        events
    }
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut current = String::new();
    let mut count = 0;
    for ch in text.chars() {
        current.push(ch);
        count += 1;
        if count == size {
            out.push(std::mem::take(&mut current));
            count = 0;
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[derive(Default)]
struct ScriptState {
    responses: VecDeque<ScriptedResponse>,
    requests: Vec<LlmRequest>,
    calls: usize,
    checks: HashMap<usize, RequestCheck>,
    failures: Vec<String>,
    not_recording: bool,
}

/// A stream function that answers from a queue of [`ScriptedResponse`]s.
#[derive(Clone, Default)]
pub struct ScriptedProvider {
    state: Arc<Mutex<ScriptState>>,
}

impl ScriptedProvider {
    /// An empty provider.
    pub fn new() -> Self {
        Self::default()
    }

    /// A provider with these responses queued.
    pub fn with_responses(responses: impl IntoIterator<Item = ScriptedResponse>) -> Self {
        let provider = Self::new();
        provider.lock().responses.extend(responses);
        provider
    }

    /// Queues one more response.
    pub fn push(&self, response: ScriptedResponse) {
        self.lock().responses.push_back(response);
    }

    /// Runs `check` on the request of call `call` (counted from 0).
    pub fn expect_request(
        &self,
        call: usize,
        check: impl Fn(&LlmRequest) -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.lock().checks.insert(call, Arc::new(check));
    }

    /// Stops keeping requests (benchmarks: a kept request pins the history it points to).
    pub fn stop_recording(&self) {
        self.lock().not_recording = true;
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.lock().requests.clone()
    }

    /// Number of calls made.
    pub fn call_count(&self) -> usize {
        self.lock().calls
    }

    /// Responses still queued.
    pub fn remaining(&self) -> usize {
        self.lock().responses.len()
    }

    /// Failed request checks, as messages naming the call.
    pub fn failures(&self) -> Vec<String> {
        self.lock().failures.clone()
    }

    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        // A test that panicked while holding the lock must not hide later assertions.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What opens the instructions of a request for a session title (keel's front ends ask for
/// one after a session's first turn). The scripted provider answers such a request with
/// [`TITLE_ANSWER`] apart from its script, so a script is the conversation only.
pub const TITLE_REQUEST: &str = "You name conversations between a programmer";
/// The scripted provider's answer to a title request.
pub const TITLE_ANSWER: &str = "Scripted session title";

impl StreamFn for ScriptedProvider {
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream {
        if request.system_prompt.starts_with(TITLE_REQUEST) {
            let meta = ResponseMeta {
                provider: request.model.provider.clone(),
                api: request.model.api.clone(),
                model: request.model.id.clone(),
                response_id: Some("scripted-title".into()),
            };
            return play(ScriptedResponse::text(TITLE_ANSWER), meta, cancel);
        }
        let (call, check) = {
            let mut state = self.lock();
            let call = state.calls;
            state.calls += 1;
            (call, state.checks.get(&call).cloned())
        };
        // Run outside the lock: a check may itself ask the provider questions.
        let check = check.map(|check| check(&request));
        let mut state = self.lock();
        let meta = ResponseMeta {
            provider: request.model.provider.clone(),
            api: request.model.api.clone(),
            model: request.model.id.clone(),
            response_id: Some(format!("scripted-{call}")),
        };
        if !state.not_recording {
            state.requests.push(request);
        }
        if let Some(Err(problem)) = check {
            let message = format!("request check for call {call} failed: {problem}");
            state.failures.push(message.clone());
            return fail_now(ErrorInfo::new(ErrorCode::InvalidRequest, message));
        }
        let Some(response) = state.responses.pop_front() else {
            let message = format!("scripted provider has no response for call {call}");
            state.failures.push(message.clone());
            return fail_now(ErrorInfo::new(ErrorCode::Other, message));
        };
        drop(state);
        play(response, meta, cancel)
    }
}

fn fail_now(error: ErrorInfo) -> EventStream {
    crate::stream_fn::error_stream(StopReason::Error, error)
}

struct Player {
    events: std::vec::IntoIter<StreamEvent>,
    sent: usize,
    ending: Ending,
    first_delay: Duration,
    delay: Duration,
    cancel: CancellationToken,
    done: bool,
}

fn play(response: ScriptedResponse, meta: ResponseMeta, cancel: CancellationToken) -> EventStream {
    let mut events = response.events(meta);
    if !matches!(response.ending, Ending::Done(_)) {
        events.pop();
    }
    let player = Player {
        events: events.into_iter(),
        sent: 0,
        ending: response.ending,
        first_delay: response.first_delay,
        delay: response.delay,
        cancel,
        done: false,
    };
    Box::pin(futures::stream::unfold(player, |mut p| async move {
        if p.done {
            return None;
        }
        let aborted = || StreamEvent::Error {
            stop_reason: StopReason::Aborted,
            error: ErrorInfo::new(ErrorCode::Cancelled, "the request was cancelled"),
            usage: Usage::default(),
        };
        match &p.ending {
            Ending::Fail {
                after,
                stop_reason,
                error,
            } if p.sent >= *after || p.events.len() == 0 => {
                let event = StreamEvent::Error {
                    stop_reason: *stop_reason,
                    error: error.clone(),
                    usage: Usage::default(),
                };
                p.done = true;
                return Some((event, p));
            }
            Ending::Hang {
                after,
                ignore_cancel,
            } if p.sent >= *after || p.events.len() == 0 => {
                if *ignore_cancel {
                    futures::future::pending::<()>().await;
                }
                p.cancel.cancelled().await;
                p.done = true;
                return Some((aborted(), p));
            }
            _ => {}
        }
        let wait = if p.sent == 0 { p.first_delay } else { p.delay };
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = p.cancel.cancelled() => {
                    p.done = true;
                    return Some((aborted(), p));
                }
            }
        } else if p.cancel.is_cancelled() {
            p.done = true;
            return Some((aborted(), p));
        }
        let event = p.events.next()?;
        p.sent += 1;
        p.done = event.is_terminal();
        Some((event, p))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::AssistantBuilder;
    use crate::request::{ModelSpec, RequestOptions};
    use futures::StreamExt;
    use keel_protocol::Message;
    use serde_json::json;

    fn request(messages: Vec<Message>) -> LlmRequest {
        LlmRequest {
            model: Arc::new(ModelSpec::scripted()),
            system_prompt: Arc::from("sys"),
            messages: Arc::new(messages.into_iter().map(Arc::new).collect()),
            tools: Arc::from(Vec::new()),
            options: RequestOptions::default(),
        }
    }

    async fn run(provider: &ScriptedProvider) -> Vec<StreamEvent> {
        provider
            .stream(request(vec![]), CancellationToken::new())
            .collect()
            .await
    }

    #[tokio::test]
    async fn chunks_text_and_arguments() {
        let provider = ScriptedProvider::with_responses([ScriptedResponse::text("abcde")
            .with_tool_call("c1", "t", json!({"k": 1}))
            .chunk_size(2)]);
        let events = run(&provider).await;
        let deltas: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta { delta, .. } | StreamEvent::ToolCallDelta { delta, .. } => {
                    Some(delta.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(deltas, ["ab", "cd", "e", "{\"", "k\"", ":1", "}"]);
        let mut builder = AssistantBuilder::new();
        for event in &events {
            builder.apply(event).unwrap();
        }
        let message = builder.finish();
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        assert_eq!(message.text(), "abcde");
    }

    #[tokio::test]
    async fn failed_checks_and_an_empty_queue_become_error_events() {
        let provider = ScriptedProvider::with_responses([ScriptedResponse::text("x")]);
        provider.expect_request(0, |req| {
            if req.system_prompt.as_ref() == "other" {
                Ok(())
            } else {
                Err("wrong prompt".into())
            }
        });
        let events = run(&provider).await;
        assert!(matches!(&events[..], [StreamEvent::Error { error, .. }]
            if error.message.contains("call 0") && error.message.contains("wrong prompt")));
        // The response was not consumed by the failed call; call 1 gets it.
        assert_eq!(provider.remaining(), 1);
        let _ = run(&provider).await;
        let events = run(&provider).await;
        assert!(matches!(&events[..], [StreamEvent::Error { error, .. }]
            if error.message.contains("no response for call 2")));
        assert_eq!(provider.failures().len(), 2);
        assert_eq!(provider.call_count(), 3);
    }

    #[tokio::test]
    async fn scripted_failure_after_some_events() {
        let provider = ScriptedProvider::with_responses([ScriptedResponse::text("hello")
            .chunk_size(1)
            .fail_after(3, ErrorCode::Overloaded, "busy")]);
        let events = run(&provider).await;
        assert_eq!(events.len(), 4);
        assert!(
            matches!(&events[3], StreamEvent::Error { error, .. } if error.code == ErrorCode::Overloaded)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hang_ends_on_cancel() {
        let provider =
            ScriptedProvider::with_responses([ScriptedResponse::text("x").hang_after(1)]);
        let cancel = CancellationToken::new();
        let mut stream = provider.stream(request(vec![]), cancel.clone());
        assert!(matches!(
            stream.next().await,
            Some(StreamEvent::Start { .. })
        ));
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            canceller.cancel();
        });
        assert!(matches!(
            stream.next().await,
            Some(StreamEvent::Error {
                stop_reason: StopReason::Aborted,
                ..
            })
        ));
        assert!(stream.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn delays_are_honoured() {
        let provider = ScriptedProvider::with_responses([ScriptedResponse::text("ab")
            .chunk_size(1)
            .first_delay(Duration::from_secs(2))
            .delay(Duration::from_millis(100))]);
        let start = tokio::time::Instant::now();
        let events = run(&provider).await;
        assert_eq!(events.len(), 6);
        assert_eq!(start.elapsed(), Duration::from_millis(2000 + 5 * 100));
    }

    #[tokio::test]
    async fn json_specs_build_responses() {
        let specs: Vec<ResponseSpec> = serde_json::from_value(json!([
            {"thinking": "hmm", "text": "hi", "tool_calls": [{"id": "c1", "name": "t", "arguments": {"a": 1}}], "chunk_size": 1},
            {"error": {"code": "rate_limit", "message": "slow down"}}
        ]))
        .unwrap();
        let provider =
            ScriptedProvider::with_responses(specs.into_iter().map(ScriptedResponse::from));
        let mut builder = AssistantBuilder::new();
        for event in run(&provider).await {
            builder.apply(&event).unwrap();
        }
        let message = builder.finish();
        assert_eq!(message.content.len(), 3);
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        let events = run(&provider).await;
        assert!(
            matches!(&events[..], [StreamEvent::Error { error, .. }] if error.code == ErrorCode::RateLimit)
        );
        let bad = serde_json::from_value::<ResponseSpec>(json!({"txt": "typo"})).unwrap_err();
        assert!(bad.to_string().contains("txt"), "{bad}");
    }

    #[tokio::test]
    async fn requests_are_recorded() {
        let provider = ScriptedProvider::with_responses([ScriptedResponse::text("x")]);
        let _: Vec<_> = provider
            .stream(
                request(vec![Message::user_text("q")]),
                CancellationToken::new(),
            )
            .collect()
            .await;
        assert_eq!(provider.requests()[0].messages.len(), 1);
    }
}
