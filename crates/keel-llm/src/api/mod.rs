//! The four wire APIs: request encoding and stream decoding.
//!
//! Each API has an encoder (`build`: an [`LlmRequest`] already cleaned by
//! [`crate::prepare`] becomes URL, headers and JSON body) and a [`Decoder`] (SSE events in,
//! unified [`StreamEvent`]s out). A decoder owns the mapping from the provider's block
//! indexes to the message's block indexes, emits `start` first, and ends with exactly one
//! terminal event; if the body ends early, [`Decoder::finish`] reports a cut stream.

pub mod anthropic;
pub mod encode_cache;
#[cfg(test)]
mod fixtures;
pub mod google;
#[cfg(test)]
mod json_strategies;
pub mod openai_completions;
pub mod openai_responses;

use keel_protocol::{ErrorCode, ErrorInfo, StopReason, StreamEvent, Usage};

use crate::model::{Api, ModelEntry};
use crate::request::LlmRequest;
use crate::sse::SseEvent;

/// An HTTP request ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct WireRequest {
    /// Full URL.
    pub url: String,
    /// Headers (the API key included).
    pub headers: Vec<(String, String)>,
    /// JSON body (without the spliced member, when there is one).
    pub body: serde_json::Value,
    /// A member of the body given as pre-serialized items (the conversation, from the
    /// [`encode_cache::EncodeCache`]); it is written first when the body is serialized.
    pub spliced: Option<Spliced>,
}

/// An array member of a request body whose items are already JSON, and further members
/// whose values are.
#[derive(Debug, Clone, PartialEq)]
pub struct Spliced {
    /// The member's key.
    pub key: &'static str,
    /// Its items, in order; one message may give several.
    pub items: Vec<bytes::Bytes>,
    /// Members given whole as serialized values (tool definitions, system prompt), written
    /// before it.
    pub members: Vec<(&'static str, bytes::Bytes)>,
    /// Whether `items` are fragments the encoder already separated (an item that groups
    /// several messages, as a run of tool results): written back to back, no commas added.
    pub joined: bool,
}

impl WireRequest {
    /// The body as sent, in one buffer.
    pub fn body_bytes(&self) -> serde_json::Result<Vec<u8>> {
        match &self.spliced {
            Some(spliced) => encode_cache::splice(spliced, &self.body),
            None => serde_json::to_vec(&self.body),
        }
    }

    /// The body as chunks that share the cached message JSON (joined once to send).
    pub fn body_chunks(&self) -> serde_json::Result<Vec<bytes::Bytes>> {
        match &self.spliced {
            Some(spliced) => encode_cache::splice_chunks(spliced, &self.body),
            None => Ok(vec![bytes::Bytes::from(serde_json::to_vec(&self.body)?)]),
        }
    }
}

/// Turns one response's SSE events into unified stream events.
pub trait Decoder: Send {
    /// Decodes one SSE event, appending what it produced to `out`.
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>);

    /// The body ended. Emits the terminal event if none was emitted yet (a stream that
    /// ends before its terminal event was cut short: a `network` error).
    fn finish(&mut self, out: &mut Vec<StreamEvent>);
}

/// Builds the wire request for `request` to `model`.
pub fn build_request(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
) -> WireRequest {
    match model.api {
        Api::AnthropicMessages => anthropic::build(model, request, api_key),
        Api::OpenAiCompletions => openai_completions::build(model, request, api_key),
        Api::OpenAiResponses => openai_responses::build(model, request, api_key),
        Api::GoogleGenerativeAi => google::build(model, request, api_key),
    }
}

/// The exact body [`crate::HttpProvider`] sends for `request` to `model`: the messages
/// cleaned as before every send, then encoded as the provider encodes them (through an
/// encode cache, whose layout puts the tools and system prompt first and the conversation
/// after them; a fresh cache encodes every message to the bytes a warm one keeps). The API key never goes in a body, so none is
/// needed to rebuild one.
pub fn request_body(model: &ModelEntry, request: &LlmRequest) -> serde_json::Result<Vec<u8>> {
    let mut request = request.clone();
    request.messages =
        std::sync::Arc::new(crate::prepare::prepare_messages(&request.messages, model));
    build_request_cached(model, &request, None, &encode_cache::EncodeCache::default()).body_bytes()
}

/// Builds the wire request reusing `cache` for messages sent before, in every API, so no
/// request encodes the whole history again.
pub fn build_request_cached(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
    cache: &encode_cache::EncodeCache,
) -> WireRequest {
    match model.api {
        Api::AnthropicMessages => anthropic::build_cached(model, request, api_key, cache),
        Api::OpenAiCompletions => openai_completions::build_cached(model, request, api_key, cache),
        Api::OpenAiResponses => openai_responses::build_cached(model, request, api_key, cache),
        Api::GoogleGenerativeAi => google::build_cached(model, request, api_key, cache),
    }
}

/// What `build` makes of `request` without its messages, tools and system prompt, with the
/// (empty) conversation member `key` taken out: the body the spliced members go into.
fn bare_wire(
    build: fn(&ModelEntry, &LlmRequest, Option<&str>) -> WireRequest,
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
    key: &str,
) -> WireRequest {
    let bare = LlmRequest {
        messages: std::sync::Arc::new(Vec::new()),
        tools: std::sync::Arc::from(Vec::new()),
        system_prompt: std::sync::Arc::from(""),
        ..request.clone()
    };
    let mut wire = build(model, &bare, api_key);
    if let serde_json::Value::Object(body) = &mut wire.body {
        body.remove(key);
    }
    wire
}

/// Pre-serialized pieces of a spliced conversation where one wire item may group several
/// messages (a run of tool results): commas between items, the group's opening and closing.
#[derive(Default)]
struct Fragments {
    out: Vec<bytes::Bytes>,
    open: bool,
}

impl Fragments {
    const COMMA: bytes::Bytes = bytes::Bytes::from_static(b",");

    /// Adds a message's own `items` (none, one, or more), after ending the open group: any
    /// message but a tool result ends one, even one with nothing to send.
    fn message(&mut self, items: &[bytes::Bytes]) {
        self.close();
        for item in items {
            if !self.out.is_empty() {
                self.out.push(Self::COMMA);
            }
            self.out.push(item.clone());
        }
    }

    /// Adds `parts` to the open group, opening it with `head` first.
    fn group(&mut self, head: &'static [u8], parts: &[bytes::Bytes]) {
        if self.open {
            self.out.push(Self::COMMA);
        } else {
            if !self.out.is_empty() {
                self.out.push(Self::COMMA);
            }
            self.out.push(bytes::Bytes::from_static(head));
            self.open = true;
        }
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                self.out.push(Self::COMMA);
            }
            self.out.push(part.clone());
        }
    }

    fn close(&mut self) {
        if std::mem::take(&mut self.open) {
            self.out.push(bytes::Bytes::from_static(GROUP_TAIL));
        }
    }

    fn finish(mut self) -> Vec<bytes::Bytes> {
        self.close();
        self.out
    }
}

/// How a group of tool results ends: serde_json writes keys in order, `role` after the
/// parts' key in both grouping APIs.
const GROUP_TAIL: &[u8] = br#"],"role":"user"}"#;

/// A fresh decoder for one response from `model`.
pub fn decoder(model: &ModelEntry) -> Box<dyn Decoder> {
    match model.api {
        Api::AnthropicMessages => Box::new(anthropic::AnthropicDecoder::new(model)),
        Api::OpenAiCompletions => Box::new(openai_completions::CompletionsDecoder::new(model)),
        Api::OpenAiResponses => Box::new(openai_responses::ResponsesDecoder::new(model)),
        Api::GoogleGenerativeAi => Box::new(google::GoogleDecoder::new(model)),
    }
}

/// Request headers shared by every API: JSON content type, then the API's `own` headers
/// (version, key), then the model's and the call's; a later header replaces an earlier one
/// of the same name (names compared case-insensitively).
pub(crate) fn request_headers(
    model: &ModelEntry,
    request: &LlmRequest,
    own: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = Vec::new();
    let content_type = ("content-type".to_owned(), "application/json".to_owned());
    let extra = model
        .headers
        .iter()
        .chain(&request.options.headers)
        .cloned();
    for (name, value) in std::iter::once(content_type).chain(own).chain(extra) {
        headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(&name));
        headers.push((name, value));
    }
    headers
}

/// A temperature as JSON through its shortest decimal form, so `0.7f32` is sent as `0.7`
/// rather than `0.699999988079071`.
pub(crate) fn temperature_value(temperature: f32) -> Option<serde_json::Value> {
    let value: f64 = temperature.to_string().parse().ok()?;
    serde_json::Number::from_f64(value).map(serde_json::Value::Number)
}

/// The terminal event for a stream that ended before its terminal event.
pub(crate) fn cut_stream(usage: Usage) -> StreamEvent {
    StreamEvent::Error {
        stop_reason: StopReason::Error,
        error: ErrorInfo::new(
            ErrorCode::Network,
            "the response stream ended before the response finished",
        ),
        usage,
    }
}

/// The terminal event for an event the decoder could not parse.
pub(crate) fn malformed(api: &str, detail: impl std::fmt::Display) -> StreamEvent {
    StreamEvent::Error {
        stop_reason: StopReason::Error,
        error: ErrorInfo::new(
            ErrorCode::Server,
            format!("{api} sent a malformed stream event: {detail}"),
        ),
        usage: Usage::default(),
    }
}

#[cfg(test)]
#[path = "cached_tests.rs"]
mod cached_tests;
