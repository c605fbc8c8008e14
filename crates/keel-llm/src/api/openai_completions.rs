//! OpenAI Chat Completions: request encoding and stream decoding.
//!
//! One wire format serves OpenAI and every OpenAI-compatible server (OpenRouter, DeepSeek,
//! Mistral, MiniMax, Ollama, llama.cpp, vLLM, LM Studio); what differs between them lives in
//! [`crate::Compat`]. Servers report reasoning in one of several delta fields
//! (`reasoning_content`, `reasoning`, `reasoning_details`) or inline as `<think>` tags. A
//! thinking block's signature records which one, so the encoder can hand the reasoning back
//! the same way (DeepSeek and MiniMax need it back inside a tool-calling turn). The trade-off:
//! the signature here is a field name, not a provider token, and is meaningless to any other
//! provider, which is fine because thinking only ever returns to the provider that made it.
//!
//! The decoder waits for `[DONE]` (or the end of the body) before its terminal event, because
//! the usage chunk comes after the chunk that carries `finish_reason`.
//!
//! Chunks are read into typed views whose strings borrow from the event (a delta's text is
//! copied once, into its stream event), not into a [`Value`] tree. That reading is strict: a
//! field of an unexpected type fails it, and the chunk is then parsed again as a [`Value`]
//! and viewed leniently, a mistyped field counting as absent, which is how the decoder always
//! treated such fields. Both readings decode alike every chunk the strict one accepts (a
//! property test holds them to it), so there is one handling path; the price is a second
//! parse of the odd chunk with a mistyped field. Rare parts (errors, usage) stay JSON values.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use base64::Engine as _;
use keel_protocol::{
    AssistantMessage, ContentBlock, ErrorCode, ErrorInfo, ImageBlock, Message, ResponseMeta,
    StopReason, StreamEvent, ToolResultMessage, Usage, UserMessage,
};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::{Decoder, WireRequest, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::request::{CacheRetention, LlmRequest, ThinkingLevel};
use crate::sse::SseEvent;

/// The API's stable name.
const API: &str = "openai-completions";

/// The inline reasoning tags some servers put in the content.
const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Builds the request for `model`.
pub fn build(model: &ModelEntry, request: &LlmRequest, api_key: Option<&str>) -> WireRequest {
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("stream".into(), json!(true));
    if !model.compat.no_stream_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    body.insert("messages".into(), Value::Array(encode_messages(request)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let max_tokens = options.max_tokens.unwrap_or(model.max_output);
    let max_key = if model.compat.max_completion_tokens {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(max_key.into(), json!(max_tokens));
    if let Some(temperature) = options.temperature.and_then(temperature_value) {
        body.insert("temperature".into(), temperature);
    }
    if model.capabilities.reasoning
        && let Some(effort) = options.thinking.and_then(reasoning_effort)
    {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if model.compat.reasoning_split {
        body.insert("reasoning_split".into(), json!(true));
    }
    if model.provider == "openai" {
        insert_cache_options(&mut body, request);
    }
    WireRequest {
        url: format!("{}/chat/completions", model.base_url.trim_end_matches('/')),
        headers: bearer_headers(model, request, api_key),
        body: Value::Object(body),
    }
}

/// Adds OpenAI's prompt-cache routing key and retention, unless caching is off.
pub(super) fn insert_cache_options(body: &mut Map<String, Value>, request: &LlmRequest) {
    let retention = request.options.cache_retention;
    if retention == Some(CacheRetention::None) {
        return;
    }
    if let Some(session) = &request.options.session_id {
        body.insert("prompt_cache_key".into(), json!(session));
    }
    if retention == Some(CacheRetention::Long) {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
}

/// Headers for an API that takes `authorization: Bearer`: content type, the key when there
/// is one (local servers need none), then the model's and the call's headers, later ones
/// replacing earlier ones of the same name.
pub(super) fn bearer_headers(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
) -> Vec<(String, String)> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(key) = api_key {
        headers.push(("authorization".to_owned(), format!("Bearer {key}")));
    }
    for (name, value) in model.headers.iter().chain(&request.options.headers) {
        headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        headers.push((name.clone(), value.clone()));
    }
    headers
}

/// The effort name both OpenAI APIs use, or `None` when reasoning is off.
pub(super) fn reasoning_effort(level: ThinkingLevel) -> Option<&'static str> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some("minimal"),
        ThinkingLevel::Low => Some("low"),
        ThinkingLevel::Medium => Some("medium"),
        ThinkingLevel::High => Some("high"),
    }
}

/// A temperature as JSON, going through its shortest decimal form so `0.7f32` is sent as
/// `0.7` rather than `0.699999988079071`.
pub(super) fn temperature_value(temperature: f32) -> Option<Value> {
    let value: f64 = temperature.to_string().parse().ok()?;
    serde_json::Number::from_f64(value).map(Value::Number)
}

/// An image as a `data:` URL.
pub(super) fn data_url(image: &ImageBlock) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
    format!("data:{};base64,{data}", image.mime_type)
}

/// Tool-call arguments as the JSON string both OpenAI APIs expect. Arguments kept verbatim
/// as a string (they did not parse) are sent as that string, not re-encoded.
pub(super) fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The text blocks of `content` joined by newlines.
pub(super) fn joined_text(content: &[ContentBlock]) -> String {
    let mut text = String::new();
    for block in content.iter().filter_map(ContentBlock::as_text) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(block);
    }
    text
}

/// The images of `content`.
pub(super) fn images(content: &[ContentBlock]) -> impl Iterator<Item = &ImageBlock> {
    content.iter().filter_map(|block| match block {
        ContentBlock::Image(image) => Some(image),
        _ => None,
    })
}

/// The caption put before the images of a tool result, which travel in a user message
/// because tool outputs take text only.
pub(super) fn tool_images_caption(result: &ToolResultMessage) -> String {
    format!(
        "Images returned by tool call {} ({}):",
        result.tool_call_id, result.tool_name
    )
}

fn encode_messages(request: &LlmRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system_prompt.is_empty() {
        out.push(json!({"role": "system", "content": &*request.system_prompt}));
    }
    // Images from a run of tool results, sent as one user message after the run: a user
    // message between tool messages would split the answers to one assistant message.
    let mut tool_images: Vec<Value> = Vec::new();
    for message in request.messages.iter() {
        if !matches!(**message, Message::ToolResult(_)) {
            flush_tool_images(&mut out, &mut tool_images);
        }
        match &**message {
            Message::User(user) => out.push(encode_user(user)),
            Message::Assistant(assistant) => out.extend(encode_assistant(assistant)),
            Message::ToolResult(result) => {
                let mut text = joined_text(&result.content);
                let mut pictures = images(&result.content).peekable();
                if pictures.peek().is_some() {
                    tool_images.push(json!({"type": "text", "text": tool_images_caption(result)}));
                    tool_images.extend(pictures.map(image_part));
                    if text.is_empty() {
                        text.push_str("(image output follows)");
                    }
                }
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": result.tool_call_id.as_str(),
                    "content": text,
                }));
            }
            // Host messages never reach a model.
            _ => {}
        }
    }
    flush_tool_images(&mut out, &mut tool_images);
    out
}

fn flush_tool_images(out: &mut Vec<Value>, parts: &mut Vec<Value>) {
    if !parts.is_empty() {
        out.push(json!({"role": "user", "content": std::mem::take(parts)}));
    }
}

fn image_part(image: &ImageBlock) -> Value {
    json!({"type": "image_url", "image_url": {"url": data_url(image)}})
}

fn encode_user(user: &UserMessage) -> Value {
    if images(&user.content).next().is_none() {
        return json!({"role": "user", "content": joined_text(&user.content)});
    }
    let parts: Vec<Value> = user
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
            ContentBlock::Image(image) => Some(image_part(image)),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": parts})
}

/// An assistant message, or `None` when nothing of it can be sent (no text, no calls).
fn encode_assistant(assistant: &AssistantMessage) -> Option<Value> {
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    let mut reasoning_fields: Vec<(ReasoningField, String)> = Vec::new();
    for block in &assistant.content {
        match block {
            ContentBlock::Text(text) => content.push_str(&text.text),
            ContentBlock::ToolCall(call) => tool_calls.push(json!({
                "id": call.id.as_str(),
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_string(&call.arguments)},
            })),
            ContentBlock::Thinking(thinking) => {
                let Some(field) = thinking
                    .signature
                    .as_deref()
                    .and_then(ReasoningField::parse)
                else {
                    continue;
                };
                if field == ReasoningField::ThinkTags {
                    content.push_str(THINK_OPEN);
                    content.push_str(&thinking.thinking);
                    content.push_str(THINK_CLOSE);
                } else if let Some((_, text)) =
                    reasoning_fields.iter_mut().find(|(f, _)| *f == field)
                {
                    text.push_str(&thinking.thinking);
                } else {
                    reasoning_fields.push((field, thinking.thinking.clone()));
                }
            }
            _ => {}
        }
    }
    if content.is_empty() && tool_calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if content.is_empty() {
            Value::Null
        } else {
            Value::String(content)
        },
    );
    if !tool_calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    for (field, text) in reasoning_fields {
        let value = match field {
            ReasoningField::Details => json!([{"type": "reasoning.text", "text": text}]),
            _ => Value::String(text),
        };
        message.insert(field.as_str().into(), value);
    }
    Some(Value::Object(message))
}

/// Where a server put its reasoning. The name is the thinking block's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReasoningField {
    /// `reasoning_content` (DeepSeek, vLLM, llama.cpp).
    Content,
    /// `reasoning` (OpenRouter, Ollama).
    Reasoning,
    /// `reasoning_details` text items (MiniMax `reasoning_split`).
    Details,
    /// Inline `<think>` tags in the content (MiniMax, local reasoning models).
    ThinkTags,
}

impl ReasoningField {
    fn as_str(self) -> &'static str {
        match self {
            Self::Content => "reasoning_content",
            Self::Reasoning => "reasoning",
            Self::Details => "reasoning_details",
            Self::ThinkTags => "think_tags",
        }
    }

    fn parse(signature: &str) -> Option<Self> {
        [
            Self::Content,
            Self::Reasoning,
            Self::Details,
            Self::ThinkTags,
        ]
        .into_iter()
        .find(|field| field.as_str() == signature)
    }
}

/// The kind of the open text or thinking block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Text,
    Thinking(ReasoningField),
}

/// One tool call being streamed, keyed by the provider's `index`.
#[derive(Debug)]
struct CallSlot {
    /// The provider's `index` (some servers omit it).
    key: Option<u64>,
    id: String,
    /// Message block index, once the call has been started (it needs a name first).
    block: Option<usize>,
    /// Arguments that arrived before the name; only ever non-empty before the start.
    pending: String,
    open: bool,
}

/// How the response ended, once the provider said so.
#[derive(Debug)]
enum Outcome {
    Finished(StopReason),
    Failed(ErrorInfo),
}

/// Decodes a Chat Completions stream.
#[derive(Debug)]
pub struct CompletionsDecoder {
    provider: String,
    model_id: String,
    /// Splits `<think>` tags out of the content when the model may use them.
    tags: Option<ThinkTagSplitter>,
    /// MiniMax with `reasoning_split`: `reasoning_details` is the reasoning channel.
    details_first: bool,
    started: bool,
    finished: bool,
    /// Blocks opened so far (the next block's index).
    blocks: usize,
    /// The open text or thinking block.
    flow: Option<(usize, Flow)>,
    calls: Vec<CallSlot>,
    outcome: Option<Outcome>,
    usage: Usage,
}

impl CompletionsDecoder {
    /// A decoder for one response from `model`.
    pub fn new(model: &ModelEntry) -> Self {
        Self {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
            tags: model.compat.think_tags.then(ThinkTagSplitter::default),
            details_first: model.compat.reasoning_split,
            started: false,
            finished: false,
            blocks: 0,
            flow: None,
            calls: Vec::new(),
            outcome: None,
            usage: Usage::default(),
        }
    }

    fn start(&mut self, chunk: Option<&Chunk<'_>>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let model = chunk.and_then(|c| c.model.as_deref());
        let id = chunk.and_then(|c| c.id.as_deref());
        out.push(StreamEvent::Start {
            meta: ResponseMeta {
                provider: self.provider.clone(),
                api: API.to_owned(),
                model: model
                    .filter(|m| !m.is_empty())
                    .unwrap_or(&self.model_id)
                    .to_owned(),
                response_id: id.filter(|id| !id.is_empty()).map(str::to_owned),
            },
        });
    }

    fn chunk(&mut self, chunk: Chunk<'_>, out: &mut Vec<StreamEvent>) {
        self.start(Some(&chunk), out);
        if let Some(error) = &chunk.error {
            let error = provider_error(error);
            let usage = self.usage;
            self.end(
                StreamEvent::Error {
                    stop_reason: StopReason::Error,
                    error,
                    usage,
                },
                out,
            );
            return;
        }
        if let Some(usage) = chunk.usage.as_deref().filter(|u| u.is_object()) {
            self.usage = decode_usage(usage);
        }
        let Some(choice) = chunk.choice else {
            return;
        };
        if let Some(mut delta) = choice.delta {
            if let Some((field, text)) = reasoning_delta(&mut delta, self.details_first) {
                self.push_flow(Flow::Thinking(field), text, out);
            }
            if let Some(Str(text)) = delta.content {
                self.content(text, out);
            }
            for fragment in delta.tool_calls.iter().flatten() {
                let function = fragment.function.as_ref();
                self.tool_fragment(fragment.index, fragment.id.as_deref(), function, out);
            }
            // The legacy single `function_call` streams like one unindexed tool call.
            if let Some(function) = &delta.function_call {
                self.tool_fragment(None, None, Some(function), out);
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.close_all(out);
            self.outcome = Some(finish_outcome(&reason));
        }
    }

    fn content(&mut self, text: Cow<'_, str>, out: &mut Vec<StreamEvent>) {
        // The splitter is taken out while its segments are pushed, which needs the whole
        // decoder; pushing a segment never reaches the splitter.
        let Some(mut tags) = self.tags.take() else {
            self.push_flow(Flow::Text, text, out);
            return;
        };
        tags.split(&text, |thinking, segment| {
            self.push_tagged(thinking, Cow::Borrowed(segment), out);
        });
        self.tags = Some(tags);
    }

    fn push_tagged(&mut self, thinking: bool, text: Cow<'_, str>, out: &mut Vec<StreamEvent>) {
        let flow = if thinking {
            Flow::Thinking(ReasoningField::ThinkTags)
        } else {
            Flow::Text
        };
        self.push_flow(flow, text, out);
    }

    /// Appends `text` to the open block of kind `flow`, opening one (and closing another
    /// kind) as needed.
    fn push_flow(&mut self, flow: Flow, text: Cow<'_, str>, out: &mut Vec<StreamEvent>) {
        if text.is_empty() {
            return;
        }
        let index = match self.flow {
            Some((index, open)) if open == flow => index,
            _ => {
                self.close_flow(out);
                let index = self.next_block();
                out.push(match flow {
                    Flow::Text => StreamEvent::TextStart { index },
                    Flow::Thinking(_) => StreamEvent::ThinkingStart { index },
                });
                self.flow = Some((index, flow));
                index
            }
        };
        let delta = text.into_owned();
        out.push(match flow {
            Flow::Text => StreamEvent::TextDelta { index, delta },
            Flow::Thinking(_) => StreamEvent::ThinkingDelta { index, delta },
        });
    }

    fn close_flow(&mut self, out: &mut Vec<StreamEvent>) {
        match self.flow.take() {
            Some((index, Flow::Text)) => out.push(StreamEvent::TextEnd { index }),
            Some((index, Flow::Thinking(field))) => out.push(StreamEvent::ThinkingEnd {
                index,
                signature: Some(field.as_str().to_owned()),
                redacted: false,
            }),
            None => {}
        }
    }

    fn next_block(&mut self) -> usize {
        let index = self.blocks;
        self.blocks += 1;
        index
    }

    /// Applies one tool-call fragment: the provider's `index`, the call's `id`, and its
    /// `function` (name and arguments so far).
    fn tool_fragment(
        &mut self,
        key: Option<u64>,
        id: Option<&str>,
        function: Option<&Function<'_>>,
        out: &mut Vec<StreamEvent>,
    ) {
        let id = id.filter(|id| !id.is_empty());
        let name = function
            .and_then(|f| f.name.as_deref())
            .filter(|name| !name.is_empty());
        let arguments = function
            .and_then(|f| f.arguments.as_ref())
            .map(Arguments::as_str);
        let slot = match self.find_call(key, id, name.is_some()) {
            Some(slot) => slot,
            None => {
                self.flush_tags(out);
                self.close_flow(out);
                self.calls.push(CallSlot {
                    key,
                    id: id.unwrap_or_default().to_owned(),
                    block: None,
                    pending: String::new(),
                    open: true,
                });
                self.calls.len() - 1
            }
        };
        let next_block = self.blocks;
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        if call.block.is_none()
            && let Some(name) = name
        {
            call.block = Some(next_block);
            self.blocks += 1;
            if call.id.is_empty() {
                call.id = format!("call_{next_block}");
            }
            out.push(StreamEvent::ToolCallStart {
                index: next_block,
                id: call.id.as_str().into(),
                name: name.to_owned(),
            });
            if !call.pending.is_empty() {
                let delta = std::mem::take(&mut call.pending);
                out.push(StreamEvent::ToolCallDelta {
                    index: next_block,
                    delta,
                });
            }
        }
        if let Some(delta) = arguments.filter(|a| !a.is_empty()) {
            match call.block {
                Some(index) => out.push(StreamEvent::ToolCallDelta {
                    index,
                    delta: delta.to_owned(),
                }),
                None => call.pending.push_str(delta),
            }
        }
    }

    /// The call a fragment belongs to: by `index`, else by `id`, else the latest one. A new
    /// id and name under an index already used start a new call (servers that number every
    /// call 0).
    fn find_call(&self, key: Option<u64>, id: Option<&str>, has_name: bool) -> Option<usize> {
        let slot = match (key, id) {
            (Some(key), _) => self.calls.iter().rposition(|c| c.key == Some(key)),
            (None, Some(id)) => self.calls.iter().rposition(|c| c.id == id),
            (None, None) => self.calls.len().checked_sub(1),
        }?;
        let call = self.calls.get(slot)?;
        if !call.open {
            return None;
        }
        match id {
            Some(id) if has_name && !call.id.is_empty() && call.id != id => None,
            _ => Some(slot),
        }
    }

    fn flush_tags(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((thinking, held)) = self.tags.as_mut().and_then(ThinkTagSplitter::flush) {
            self.push_tagged(thinking, Cow::Owned(held), out);
        }
    }

    /// Closes every open block, starting calls that never got a name so their arguments
    /// are not lost.
    fn close_all(&mut self, out: &mut Vec<StreamEvent>) {
        self.flush_tags(out);
        self.close_flow(out);
        for slot in 0..self.calls.len() {
            let next_block = self.blocks;
            let Some(call) = self.calls.get_mut(slot) else {
                continue;
            };
            if !call.open {
                continue;
            }
            call.open = false;
            let index = match call.block {
                Some(index) => index,
                None => {
                    self.blocks += 1;
                    if call.id.is_empty() {
                        call.id = format!("call_{next_block}");
                    }
                    out.push(StreamEvent::ToolCallStart {
                        index: next_block,
                        id: call.id.as_str().into(),
                        name: String::new(),
                    });
                    if !call.pending.is_empty() {
                        let delta = std::mem::take(&mut call.pending);
                        out.push(StreamEvent::ToolCallDelta {
                            index: next_block,
                            delta,
                        });
                    }
                    call.block = Some(next_block);
                    next_block
                }
            };
            out.push(StreamEvent::ToolCallEnd { index });
        }
    }

    /// The terminal event for the outcome the provider gave, or a cut stream.
    fn conclude(&mut self, out: &mut Vec<StreamEvent>) {
        let usage = self.usage;
        let event = match self.outcome.take() {
            Some(Outcome::Finished(reason)) => {
                let stop_reason = if reason == StopReason::Stop && !self.calls.is_empty() {
                    StopReason::ToolUse
                } else {
                    reason
                };
                StreamEvent::Done { stop_reason, usage }
            }
            Some(Outcome::Failed(error)) => StreamEvent::Error {
                stop_reason: StopReason::Error,
                error,
                usage,
            },
            None => cut_stream(usage),
        };
        self.end(event, out);
    }

    fn end(&mut self, event: StreamEvent, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        self.start(None, out);
        self.close_all(out);
        out.push(event);
        self.finished = true;
    }
}

impl Decoder for CompletionsDecoder {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let data = sse.data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.conclude(out);
            return;
        }
        if let Some(chunk) = read_object::<Chunk<'_>>(data) {
            self.chunk(chunk, out);
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(chunk) => self.chunk(Chunk::lenient(&chunk), out),
            Err(error) => self.end(malformed(API, error), out),
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.finished {
            self.conclude(out);
        }
    }
}

/// The reasoning text of a delta and the field it came from; only one field is used per
/// delta because OpenRouter repeats the same text in `reasoning` and `reasoning_details`.
fn reasoning_delta<'a>(
    delta: &mut Delta<'a>,
    details_first: bool,
) -> Option<(ReasoningField, Cow<'a, str>)> {
    let order = if details_first {
        [
            ReasoningField::Details,
            ReasoningField::Content,
            ReasoningField::Reasoning,
        ]
    } else {
        [
            ReasoningField::Content,
            ReasoningField::Reasoning,
            ReasoningField::Details,
        ]
    };
    order.into_iter().find_map(|field| {
        let text = match field {
            ReasoningField::Details => {
                Cow::Owned(details_text(delta.reasoning_details.as_deref()?))
            }
            ReasoningField::Content => delta.reasoning_content.take()?.0,
            ReasoningField::Reasoning => delta.reasoning.take()?.0,
            ReasoningField::ThinkTags => return None,
        };
        (!text.is_empty()).then_some((field, text))
    })
}

/// The text items of a `reasoning_details` array (encrypted and other items are skipped).
fn details_text(details: &[DetailItem<'_>]) -> String {
    let mut text = String::new();
    for item in details {
        let kind = item.kind.as_deref().unwrap_or("reasoning.text");
        if kind == "reasoning.text"
            && let Some(part) = item.text.as_deref()
        {
            text.push_str(part);
        }
    }
    text
}

/// A chunk as the decoder reads it.
#[derive(Debug, Default)]
struct Chunk<'a> {
    id: Option<Str<'a>>,
    model: Option<Str<'a>>,
    /// A mid-stream error (never `null`).
    error: Option<Cow<'a, Value>>,
    usage: Option<Cow<'a, Value>>,
    /// The first choice; the others are ignored.
    choice: Option<Choice<'a>>,
}

#[derive(Debug, Default)]
struct Choice<'a> {
    delta: Option<Delta<'a>>,
    finish_reason: Option<Str<'a>>,
}

#[derive(Debug, Default)]
struct Delta<'a> {
    content: Option<Str<'a>>,
    reasoning_content: Option<Str<'a>>,
    reasoning: Option<Str<'a>>,
    reasoning_details: Option<Vec<DetailItem<'a>>>,
    tool_calls: Option<Vec<Fragment<'a>>>,
    /// The legacy single call.
    function_call: Option<Function<'a>>,
}

/// One item of `reasoning_details`.
#[derive(Debug, Default)]
struct DetailItem<'a> {
    kind: Option<Str<'a>>,
    text: Option<Str<'a>>,
}

/// One entry of `tool_calls`.
#[derive(Debug, Default)]
struct Fragment<'a> {
    index: Option<u64>,
    id: Option<Str<'a>>,
    function: Option<Function<'a>>,
}

#[derive(Debug, Default)]
struct Function<'a> {
    name: Option<Str<'a>>,
    arguments: Option<Arguments<'a>>,
}

/// Tool-call arguments as they arrived.
#[derive(Debug)]
enum Arguments<'a> {
    /// A piece of the JSON text.
    Text(Cow<'a, str>),
    /// A server that sends the arguments as an object sends them whole: the object as JSON
    /// text.
    Object(String),
}

impl Arguments<'_> {
    fn as_str(&self) -> &str {
        match self {
            Self::Text(text) => text,
            Self::Object(text) => text,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Arguments<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an object")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(text)))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let object = Value::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Arguments::Object(object.to_string()))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl<'de: 'a, 'a> Fields<'de> for Chunk<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = map.next_value()?,
            "model" => self.model = map.next_value()?,
            "error" => self.error = map.next_value()?,
            "usage" => self.usage = map.next_value()?,
            "choices" => map.next_value_seed(FirstObject(&mut self.choice))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Choice<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "delta" => map.next_value_seed(Object(&mut self.delta))?,
            "finish_reason" => self.finish_reason = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Delta<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "content" => self.content = map.next_value()?,
            "reasoning_content" => self.reasoning_content = map.next_value()?,
            "reasoning" => self.reasoning = map.next_value()?,
            "reasoning_details" => map.next_value_seed(Objects(&mut self.reasoning_details))?,
            "tool_calls" => map.next_value_seed(Objects(&mut self.tool_calls))?,
            "function_call" => map.next_value_seed(Object(&mut self.function_call))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for DetailItem<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "text" => self.text = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Fragment<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "index" => self.index = map.next_value()?,
            "id" => self.id = map.next_value()?,
            "function" => map.next_value_seed(Object(&mut self.function))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Function<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "name" => self.name = map.next_value()?,
            "arguments" => self.arguments = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

// The lenient views of a chunk read as a JSON value: a field of an unexpected type counts as
// absent, as does a `null` one.

impl<'a> Chunk<'a> {
    fn lenient(chunk: &'a Value) -> Self {
        Self {
            id: Str::lenient(chunk.get("id")),
            model: Str::lenient(chunk.get("model")),
            error: non_null(chunk.get("error")),
            usage: non_null(chunk.get("usage")),
            choice: chunk
                .get("choices")
                .and_then(Value::as_array)
                .and_then(|choices| choices.first())
                .map(Choice::lenient),
        }
    }
}

impl<'a> Choice<'a> {
    fn lenient(choice: &'a Value) -> Self {
        Self {
            delta: choice.get("delta").map(Delta::lenient),
            finish_reason: Str::lenient(choice.get("finish_reason")),
        }
    }
}

impl<'a> Delta<'a> {
    fn lenient(delta: &'a Value) -> Self {
        let list = |name: &str| delta.get(name).and_then(Value::as_array);
        Self {
            content: Str::lenient(delta.get("content")),
            reasoning_content: Str::lenient(delta.get("reasoning_content")),
            reasoning: Str::lenient(delta.get("reasoning")),
            reasoning_details: list("reasoning_details")
                .map(|items| items.iter().map(DetailItem::lenient).collect()),
            tool_calls: list("tool_calls")
                .map(|fragments| fragments.iter().map(Fragment::lenient).collect()),
            function_call: delta
                .get("function_call")
                .filter(|f| f.is_object())
                .map(Function::lenient),
        }
    }
}

impl<'a> DetailItem<'a> {
    fn lenient(item: &'a Value) -> Self {
        Self {
            kind: Str::lenient(item.get("type")),
            text: Str::lenient(item.get("text")),
        }
    }
}

impl<'a> Fragment<'a> {
    fn lenient(fragment: &'a Value) -> Self {
        Self {
            index: fragment.get("index").and_then(Value::as_u64),
            id: Str::lenient(fragment.get("id")),
            function: fragment.get("function").map(Function::lenient),
        }
    }
}

impl<'a> Function<'a> {
    fn lenient(function: &'a Value) -> Self {
        Self {
            name: Str::lenient(function.get("name")),
            arguments: match function.get("arguments") {
                Some(Value::String(text)) => Some(Arguments::Text(Cow::Borrowed(text))),
                Some(value @ Value::Object(_)) => Some(Arguments::Object(value.to_string())),
                _ => None,
            },
        }
    }
}

// Strict reading, shared with the Responses decoder. Views are filled in place, field by
// field: a derived reader returns each nested struct by value, and copying those up through
// its layers cost more than the parse. A repeated field replaces the earlier one, as in a
// `Value`; a nested object must be an object, never an array of its fields.

/// A JSON string, borrowed from the event unless it had escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Str<'a>(pub(super) Cow<'a, str>);

impl<'a> Str<'a> {
    /// The string `value` holds, if it is one.
    pub(super) fn lenient(value: Option<&'a Value>) -> Option<Self> {
        value
            .and_then(Value::as_str)
            .map(|text| Self(Cow::Borrowed(text)))
    }
}

impl Deref for Str<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Str<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// A view read from a JSON object in place, one field at a time.
pub(super) trait Fields<'de>: Default {
    /// Reads the value of field `key` from `map`, or skips it if the view has no such field.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// `data` read strictly as a `T`, or `None` when it is anything else (not JSON, not an
/// object, a field of an unexpected type).
pub(super) fn read_object<'a, T: Fields<'a>>(data: &'a str) -> Option<T> {
    let mut view = T::default();
    let mut deserializer = serde_json::Deserializer::from_str(data);
    Place(&mut view).deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(view)
}

/// The value of a field a view does not read.
pub(super) fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(drop)
}

/// A `JSON` value that is present and not `null`, borrowed.
pub(super) fn non_null(value: Option<&Value>) -> Option<Cow<'_, Value>> {
    value.filter(|v| !v.is_null()).map(Cow::Borrowed)
}

/// Reads an object into the view it holds.
struct Place<'s, T>(&'s mut T);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Place<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Place<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Str<'de>>()? {
            self.0.field(&key, &mut map)?;
        }
        Ok(())
    }
}

/// An optional object field: `null` reads as `None`.
pub(super) struct Object<'s, T>(pub(super) &'s mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Object<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Object<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = None;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        Place(self.0.insert(T::default())).deserialize(deserializer)
    }
}

/// An optional array of objects: `null` reads as `None`.
struct Objects<'s, T>(&'s mut Option<Vec<T>>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Objects<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Objects<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = None;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let list = self.0.insert(Vec::new());
        loop {
            let mut item = T::default();
            if seq.next_element_seed(Place(&mut item))?.is_none() {
                return Ok(());
            }
            list.push(item);
        }
    }
}

/// The first object of an optional array (the other elements are checked to be JSON and
/// dropped): `null` and `[]` read as `None`.
struct FirstObject<'s, T>(&'s mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for FirstObject<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for FirstObject<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = None;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let first = self.0.insert(T::default());
        if seq.next_element_seed(Place(first))?.is_none() {
            *self.0 = None;
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

fn finish_outcome(reason: &str) -> Outcome {
    match reason {
        "length" => Outcome::Finished(StopReason::Length),
        "tool_calls" | "function_call" => Outcome::Finished(StopReason::ToolUse),
        "content_filter" => Outcome::Failed(ErrorInfo::new(
            ErrorCode::Other,
            "the provider's content filter stopped the response",
        )),
        "insufficient_system_resource" => Outcome::Failed(ErrorInfo::new(
            ErrorCode::Overloaded,
            "the provider ran out of capacity and stopped the response",
        )),
        "error" => Outcome::Failed(ErrorInfo::new(
            ErrorCode::Server,
            "the provider ended the response with an error",
        )),
        _ => Outcome::Finished(StopReason::Stop),
    }
}

/// An `{"error": {message, type, code}}` payload as an error.
fn provider_error(error: &Value) -> ErrorInfo {
    let message = match error {
        Value::String(text) => text.as_str(),
        other => other.get("message").and_then(Value::as_str).unwrap_or(""),
    };
    let kind = match error.get("type").and_then(Value::as_str) {
        Some(kind) => kind.to_owned(),
        None => match error.get("code") {
            Some(Value::String(code)) => code.clone(),
            Some(Value::Number(code)) => code.to_string(),
            _ => String::new(),
        },
    };
    let code = classify(None, &kind, message);
    let message = if message.is_empty() {
        "the provider reported an error"
    } else {
        message
    };
    ErrorInfo::new(code, message)
}

/// A JSON number at `pointer`, or zero.
pub(super) fn count(value: &Value, pointer: &str) -> u64 {
    value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

fn decode_usage(usage: &Value) -> Usage {
    let prompt = count(usage, "/prompt_tokens");
    let cache_read = match usage.pointer("/prompt_tokens_details/cached_tokens") {
        Some(cached) => cached.as_u64().unwrap_or(0),
        // DeepSeek reports its cache hits at the top level.
        None => count(usage, "/prompt_cache_hit_tokens"),
    };
    let cache_write = count(usage, "/prompt_tokens_details/cache_write_tokens");
    let completion = count(usage, "/completion_tokens");
    let reasoning = count(usage, "/completion_tokens_details/reasoning_tokens");
    Usage {
        input: prompt
            .saturating_sub(cache_read)
            .saturating_sub(cache_write),
        // A server whose completion count leaves reasoning out still reports it in output.
        output: if reasoning > completion {
            completion + reasoning
        } else {
            completion
        },
        cache_read,
        cache_write,
        reasoning,
        ..Usage::default()
    }
}

/// Splits streamed content at `<think>` and `</think>`. Only a tail that may be the start of
/// the next tag is held back (fewer bytes than the tag), so each delta is handled in time
/// proportional to its own length.
#[derive(Debug, Default)]
struct ThinkTagSplitter {
    inside: bool,
    held: String,
}

impl ThinkTagSplitter {
    /// Splits `text`, appending `(is_thinking, text)` segments to `out`.
    #[cfg(test)]
    fn push(&mut self, text: &str, out: &mut Vec<(bool, String)>) {
        self.split(text, |thinking, segment| {
            out.push((thinking, segment.to_owned()));
        });
    }

    /// Splits `text`, handing each non-empty `(is_thinking, text)` segment to `emit`.
    fn split(&mut self, text: &str, mut emit: impl FnMut(bool, &str)) {
        let joined;
        let mut rest = if self.held.is_empty() {
            text
        } else {
            self.held.push_str(text);
            joined = std::mem::take(&mut self.held);
            joined.as_str()
        };
        loop {
            let tag = if self.inside { THINK_CLOSE } else { THINK_OPEN };
            if let Some((before, after)) = rest.split_once(tag) {
                if !before.is_empty() {
                    emit(self.inside, before);
                }
                self.inside = !self.inside;
                rest = after;
                continue;
            }
            let keep = partial_tag_len(rest, tag);
            if let Some((ready, held)) = rest.split_at_checked(rest.len() - keep) {
                if !ready.is_empty() {
                    emit(self.inside, ready);
                }
                self.held.push_str(held);
            }
            return;
        }
    }

    /// The held-back tail, once the content is over or interrupted.
    fn flush(&mut self) -> Option<(bool, String)> {
        (!self.held.is_empty()).then(|| (self.inside, std::mem::take(&mut self.held)))
    }
}

/// The length of the longest end of `text` that is a proper prefix of `tag`.
fn partial_tag_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&len| tag.get(..len).is_some_and(|prefix| text.ends_with(prefix)))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "openai_completions_tests.rs"]
mod tests;
