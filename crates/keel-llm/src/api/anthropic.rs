//! Anthropic Messages (`anthropic-messages`): request encoding and stream decoding.
//!
//! The same code serves Anthropic-compatible endpoints (MiniMax). The encoder marks three
//! prompt-cache breakpoints on the stable prefix (system prompt, last tool definition, last
//! block of the last user message), so each step of a turn reads what the previous step
//! wrote. The decoder keeps only the blocks that are still open, keyed by Anthropic's block
//! index, so a delta costs a short lookup and never touches the text accumulated so far.
//!
//! Nearly every event of a stream is a `content_block_delta`, so those are first read into
//! small types that borrow from the event data (`FastDelta`): the delta's own text is the
//! only allocation (with serde_json's unescaping buffer when it has escapes). Anything
//! that reading does not take (every other event, and any delta of an odd shape) goes
//! through `WireEvent`, which defines the behaviour; the fast read accepts only what
//! `WireEvent` would read the same way.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use base64::Engine as _;
use keel_protocol::{
    ContentBlock, ErrorCode, ErrorInfo, Message, ResponseMeta, StopReason, StreamEvent,
    ToolResultMessage, Usage,
};
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::{Decoder, WireRequest, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::request::{CacheRetention, LlmRequest, ThinkingLevel};
use crate::sse::SseEvent;

/// The API's stable name.
const API: &str = "anthropic-messages";

/// The API version every request pins.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// Output tokens kept for the answer after the thinking budget.
const ANSWER_RESERVE: u32 = 1024;

/// Builds the request for `POST {base_url}/v1/messages`.
pub fn build(model: &ModelEntry, request: &LlmRequest, api_key: Option<&str>) -> WireRequest {
    let options = &request.options;
    let cache = cache_control(options.cache_retention);
    let mut max_tokens = options.max_tokens.unwrap_or(model.max_output);
    let mut thinking_budget = None;
    if model.capabilities.reasoning
        && let Some(budget) = options.thinking.and_then(budget_for)
    {
        (max_tokens, thinking_budget) = fit_thinking(max_tokens, budget, model.max_output);
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system_prompt.is_empty() {
        let mut block = json!({"type": "text", "text": &*request.system_prompt});
        mark_cache(&mut block, cache.as_ref());
        body.insert("system".into(), json!([block]));
    }
    body.insert(
        "messages".into(),
        Value::Array(encode_messages(&request.messages, cache.as_ref())),
    );
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            mark_cache(last, cache.as_ref());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    match thinking_budget {
        Some(budget) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        // The API rejects a temperature other than 1 while thinking is enabled.
        None => {
            if let Some(temperature) = options.temperature {
                body.insert("temperature".into(), json!(f32_to_f64(temperature)));
            }
        }
    }

    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
    ];
    if let Some(key) = api_key {
        set_header(&mut headers, "x-api-key", key);
    }
    for (name, value) in model.headers.iter().chain(&options.headers) {
        set_header(&mut headers, name, value);
    }

    WireRequest {
        url: format!("{}/v1/messages", model.base_url.trim_end_matches('/')),
        headers,
        body: Value::Object(body),
    }
}

/// The thinking budget for a level (`None`: no thinking).
fn budget_for(level: ThinkingLevel) -> Option<u32> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some(1024),
        ThinkingLevel::Low => Some(2048),
        ThinkingLevel::Medium => Some(8192),
        ThinkingLevel::High => Some(16_384),
    }
}

/// Makes `max_tokens` exceed the thinking budget, as the API requires: raises `max_tokens`
/// to leave [`ANSWER_RESERVE`] tokens after the budget (never above the model's limit), and
/// if that cannot fit, shrinks the budget instead. Returns no budget when not even the
/// smallest budget fits below `max_tokens`.
fn fit_thinking(max_tokens: u32, budget: u32, model_max: u32) -> (u32, Option<u32>) {
    let wanted = budget.saturating_add(ANSWER_RESERVE);
    let max_tokens = if max_tokens < wanted {
        wanted.min(model_max).max(max_tokens)
    } else {
        max_tokens
    };
    let budget = if wanted <= max_tokens {
        budget
    } else {
        max_tokens
            .saturating_sub(ANSWER_RESERVE)
            .max(MIN_THINKING_BUDGET)
    };
    (max_tokens, (budget < max_tokens).then_some(budget))
}

/// The `cache_control` marker for a retention (`None`: do not cache).
fn cache_control(retention: Option<CacheRetention>) -> Option<Value> {
    match retention {
        None | Some(CacheRetention::Short) => Some(json!({"type": "ephemeral"})),
        Some(CacheRetention::Long) => Some(json!({"type": "ephemeral", "ttl": "1h"})),
        Some(CacheRetention::None) => None,
    }
}

fn mark_cache(block: &mut Value, cache: Option<&Value>) {
    if let (Some(cache), Some(block)) = (cache, block.as_object_mut()) {
        block.insert("cache_control".into(), cache.clone());
    }
}

/// Encodes the history. Consecutive tool results become one user message; the last block
/// of the last user message carries the cache breakpoint.
fn encode_messages(messages: &[Arc<Message>], cache: Option<&Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut results = Vec::new();
    for message in messages {
        if let Message::ToolResult(result) = &**message {
            results.push(tool_result(result));
            continue;
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        match &**message {
            Message::User(user) => {
                let content: Vec<Value> = user.content.iter().filter_map(user_block).collect();
                if !content.is_empty() {
                    out.push(json!({"role": "user", "content": content}));
                }
            }
            Message::Assistant(assistant) => {
                let content: Vec<Value> = assistant
                    .content
                    .iter()
                    .filter_map(assistant_block)
                    .collect();
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
            }
            _ => {}
        }
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "content": results}));
    }
    if let Some(last_block) = out
        .iter_mut()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|message| message.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|content| content.last_mut())
    {
        mark_cache(last_block, cache);
    }
    out
}

fn user_block(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
        ContentBlock::Image(image) => Some(image_block(&image.data, &image.mime_type)),
        _ => None,
    }
}

fn image_block(data: &[u8], mime_type: &str) -> Value {
    json!({
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": mime_type,
            "data": base64::engine::general_purpose::STANDARD.encode(data),
        },
    })
}

fn assistant_block(block: &ContentBlock) -> Option<Value> {
    match block {
        // The API rejects empty text blocks.
        ContentBlock::Text(text) if text.text.is_empty() => None,
        ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
        ContentBlock::Thinking(thinking) => {
            // Unsigned thinking cannot be verified by the API: leave it out.
            let signature = thinking.signature.as_deref()?;
            Some(if thinking.redacted {
                json!({"type": "redacted_thinking", "data": signature})
            } else {
                json!({"type": "thinking", "thinking": thinking.thinking, "signature": signature})
            })
        }
        ContentBlock::ToolCall(call) => Some(json!({
            "type": "tool_use",
            "id": call.id.as_str(),
            "name": call.name,
            "input": call.arguments,
        })),
        _ => None,
    }
}

fn tool_result(result: &ToolResultMessage) -> Value {
    let content: Vec<Value> = result.content.iter().filter_map(user_block).collect();
    json!({
        "type": "tool_result",
        "tool_use_id": result.tool_call_id.as_str(),
        "content": content,
        "is_error": result.is_error,
    })
}

/// Sets a header, replacing any earlier one of the same name (names are case-insensitive).
fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
}

/// `f32` to JSON without the binary noise of a plain widening (`0.7` stays `0.7`).
fn f32_to_f64(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

/// One event of the Anthropic stream (the `type` field of the data).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A `content_block_delta` read with its strings borrowed from the event data.
///
/// Unknown keys are refused rather than skipped: `WireEvent` buffers every value it reads
/// under serde_json's nesting limit, while skipping has no limit, so skipping could accept
/// a deeply nested value `WireEvent` rejects. Anthropic's deltas carry no other keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FastDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    index: u64,
    #[serde(borrow)]
    delta: Object<FastDeltaBody<'a>>,
}

/// The `delta` of a [`FastDelta`]: which field is required depends on `kind`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FastDeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    partial_json: Option<Cow<'a, str>>,
}

impl FastDelta<'_> {
    /// Reads `data` as a `content_block_delta` of a known kind, or `None` to leave it to
    /// [`WireEvent`] (another event, or one this reading might take differently).
    fn read(data: &str) -> Option<(u64, WireDelta)> {
        let Object(event) = serde_json::from_str::<Object<FastDelta<'_>>>(data).ok()?;
        if event.kind != "content_block_delta" {
            return None;
        }
        let Object(body) = event.delta;
        // `WireEvent` requires the kind's own field (a missing one is an error there).
        let delta = match &*body.kind {
            "text_delta" => WireDelta::TextDelta {
                text: body.text?.into_owned(),
            },
            "thinking_delta" => WireDelta::ThinkingDelta {
                thinking: body.thinking?.into_owned(),
            },
            "signature_delta" => WireDelta::SignatureDelta {
                signature: body.signature?.into_owned(),
            },
            "input_json_delta" => WireDelta::InputJsonDelta {
                partial_json: body.partial_json?.into_owned(),
            },
            _ => return None,
        };
        Some((event.index, delta))
    }
}

/// An optional string, borrowed from the data when it has no escapes. (A plain
/// `Option<Cow<str>>` field always copies: serde borrows only a bare `Cow` field.)
fn borrowed<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

    Ok(Option::<Borrowed<'a>>::deserialize(deserializer)?.map(|text| text.0))
}

/// A struct read from a JSON object only. A derived struct also reads an array of its
/// fields in order, which `WireEvent` reads differently (the tag first, then the variant's
/// own fields), so the fast read refuses arrays and leaves them to it.
#[derive(Debug)]
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = Object<T>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Object)
            }
        }

        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// A block still open, keyed by Anthropic's index.
#[derive(Debug)]
struct OpenBlock {
    wire: u64,
    index: usize,
    kind: OpenKind,
}

#[derive(Debug)]
enum OpenKind {
    Text,
    /// Signature deltas accumulate until the block stops.
    Thinking {
        signature: String,
    },
    /// Redacted reasoning: the opaque payload goes on the end event.
    Redacted {
        data: String,
    },
    /// `initial` holds arguments a compatible server sent whole in the start event; they are
    /// emitted at the end only if no argument deltas arrived.
    ToolCall {
        initial: Option<String>,
        streamed: bool,
    },
}

/// Decodes one Anthropic Messages response.
#[derive(Debug)]
pub struct AnthropicDecoder {
    provider: String,
    model_id: String,
    started: bool,
    finished: bool,
    usage: Usage,
    stop_reason: Option<String>,
    open: Vec<OpenBlock>,
    blocks: usize,
    tool_calls: bool,
}

impl AnthropicDecoder {
    /// A decoder for one response from `model`.
    pub fn new(model: &ModelEntry) -> Self {
        Self {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
            started: false,
            finished: false,
            usage: Usage::default(),
            stop_reason: None,
            open: Vec::new(),
            blocks: 0,
            tool_calls: false,
        }
    }

    fn start(&mut self, model: Option<String>, id: Option<String>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(StreamEvent::Start {
            meta: ResponseMeta {
                provider: self.provider.clone(),
                api: API.to_owned(),
                model: model.unwrap_or_else(|| self.model_id.clone()),
                response_id: id,
            },
        });
    }

    fn apply_usage(&mut self, usage: &WireUsage) {
        // `message_delta` usage is cumulative: the latest value of each field wins.
        if let Some(input) = usage.input_tokens {
            self.usage.input = input;
        }
        if let Some(output) = usage.output_tokens {
            self.usage.output = output;
        }
        if let Some(read) = usage.cache_read_input_tokens {
            self.usage.cache_read = read;
        }
        if let Some(write) = usage.cache_creation_input_tokens {
            self.usage.cache_write = write;
        }
    }

    fn open_block(&mut self, wire: u64, block: WireBlock, out: &mut Vec<StreamEvent>) {
        // A repeated index closes the block it replaces, so every opened block is ended.
        if let Some(pos) = self.open.iter().position(|open| open.wire == wire) {
            let old = self.open.remove(pos);
            close(old, out);
        }
        let index = self.blocks;
        let kind = match block {
            WireBlock::Text { text } => {
                out.push(StreamEvent::TextStart { index });
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta { index, delta: text });
                }
                OpenKind::Text
            }
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                out.push(StreamEvent::ThinkingStart { index });
                if !thinking.is_empty() {
                    out.push(StreamEvent::ThinkingDelta {
                        index,
                        delta: thinking,
                    });
                }
                OpenKind::Thinking { signature }
            }
            WireBlock::RedactedThinking { data } => {
                out.push(StreamEvent::ThinkingStart { index });
                OpenKind::Redacted { data }
            }
            WireBlock::ToolUse { id, name, input } => {
                self.tool_calls = true;
                out.push(StreamEvent::ToolCallStart {
                    index,
                    id: id.into(),
                    name,
                });
                let initial = match &input {
                    Value::Object(fields) if !fields.is_empty() => Some(input.to_string()),
                    _ => None,
                };
                OpenKind::ToolCall {
                    initial,
                    streamed: false,
                }
            }
            // Server tools, citations and future block kinds are not part of the message.
            WireBlock::Unknown => return,
        };
        self.blocks += 1;
        self.open.push(OpenBlock { wire, index, kind });
    }

    fn delta(&mut self, wire: u64, delta: WireDelta, out: &mut Vec<StreamEvent>) {
        let Some(block) = self.open.iter_mut().find(|open| open.wire == wire) else {
            return;
        };
        let index = block.index;
        match (&mut block.kind, delta) {
            (OpenKind::Text, WireDelta::TextDelta { text }) if !text.is_empty() => {
                out.push(StreamEvent::TextDelta { index, delta: text });
            }
            (OpenKind::Thinking { .. }, WireDelta::ThinkingDelta { thinking })
                if !thinking.is_empty() =>
            {
                out.push(StreamEvent::ThinkingDelta {
                    index,
                    delta: thinking,
                });
            }
            (OpenKind::Thinking { signature }, WireDelta::SignatureDelta { signature: more }) => {
                signature.push_str(&more);
            }
            (OpenKind::ToolCall { streamed, .. }, WireDelta::InputJsonDelta { partial_json })
                if !partial_json.is_empty() =>
            {
                *streamed = true;
                out.push(StreamEvent::ToolCallDelta {
                    index,
                    delta: partial_json,
                });
            }
            _ => {}
        }
    }

    /// Closes every open block, then emits the terminal event.
    fn terminate(&mut self, terminal: StreamEvent, out: &mut Vec<StreamEvent>) {
        for block in self.open.drain(..) {
            close(block, out);
        }
        out.push(terminal);
        self.finished = true;
    }

    fn done(&self) -> StreamEvent {
        let usage = self.usage;
        let stop_reason = match self.stop_reason.as_deref() {
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
            // A refusal is the model declining on policy grounds: not a transport or server
            // failure, and sending the same request again would most likely be refused
            // again, so it gets the non-retryable `other` code.
            Some("refusal") => {
                return StreamEvent::Error {
                    stop_reason: StopReason::Error,
                    error: ErrorInfo::new(
                        ErrorCode::Other,
                        "the model refused to continue this response (stop reason `refusal`)",
                    ),
                    usage,
                };
            }
            Some("tool_use") => StopReason::ToolUse,
            // end_turn, stop_sequence, pause_turn and reasons added later.
            _ if self.tool_calls => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        StreamEvent::Done { stop_reason, usage }
    }
}

fn close(block: OpenBlock, out: &mut Vec<StreamEvent>) {
    let index = block.index;
    let end = match block.kind {
        OpenKind::Text => StreamEvent::TextEnd { index },
        OpenKind::Thinking { signature } => StreamEvent::ThinkingEnd {
            index,
            signature: (!signature.is_empty()).then_some(signature),
            redacted: false,
        },
        OpenKind::Redacted { data } => StreamEvent::ThinkingEnd {
            index,
            signature: (!data.is_empty()).then_some(data),
            redacted: true,
        },
        OpenKind::ToolCall { initial, streamed } => {
            if !streamed && let Some(arguments) = initial {
                out.push(StreamEvent::ToolCallDelta {
                    index,
                    delta: arguments,
                });
            }
            StreamEvent::ToolCallEnd { index }
        }
    };
    out.push(end);
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        if let Some((index, delta)) = FastDelta::read(&sse.data) {
            self.start(None, None, out);
            self.delta(index, delta, out);
            return;
        }
        let event = match serde_json::from_str::<WireEvent>(&sse.data) {
            Ok(event) => event,
            Err(err) => {
                self.start(None, None, out);
                let mut terminal = malformed(API, err);
                if let StreamEvent::Error { usage, .. } = &mut terminal {
                    *usage = self.usage;
                }
                self.terminate(terminal, out);
                return;
            }
        };
        match event {
            WireEvent::MessageStart { message } => {
                self.start(message.model, message.id, out);
                if let Some(usage) = &message.usage {
                    self.apply_usage(usage);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                self.start(None, None, out);
                self.open_block(index, content_block, out);
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                self.start(None, None, out);
                self.delta(index, delta, out);
            }
            WireEvent::ContentBlockStop { index } => {
                self.start(None, None, out);
                if let Some(pos) = self.open.iter().position(|open| open.wire == index) {
                    let block = self.open.remove(pos);
                    close(block, out);
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                self.start(None, None, out);
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = &usage {
                    self.apply_usage(usage);
                }
            }
            WireEvent::MessageStop => {
                self.start(None, None, out);
                let terminal = self.done();
                self.terminate(terminal, out);
            }
            WireEvent::Error { error } => {
                self.start(None, None, out);
                let message = if error.message.is_empty() {
                    format!("Anthropic stream error `{}`", error.kind)
                } else {
                    error.message
                };
                let terminal = StreamEvent::Error {
                    stop_reason: StopReason::Error,
                    error: ErrorInfo::new(classify(None, &error.kind, &message), message),
                    usage: self.usage,
                };
                self.terminate(terminal, out);
            }
            WireEvent::Ping | WireEvent::Unknown => self.start(None, None, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        self.start(None, None, out);
        self.terminate(cut_stream(self.usage), out);
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
