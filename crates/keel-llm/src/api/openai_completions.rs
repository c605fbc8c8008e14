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

use base64::Engine as _;
use keel_protocol::{
    AssistantMessage, ContentBlock, ErrorCode, ErrorInfo, ImageBlock, Message, ResponseMeta,
    StopReason, StreamEvent, ToolResultMessage, Usage, UserMessage,
};
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

    fn start(&mut self, chunk: Option<&Value>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let field = |name: &str| chunk.and_then(|c| c.get(name)).and_then(Value::as_str);
        out.push(StreamEvent::Start {
            meta: ResponseMeta {
                provider: self.provider.clone(),
                api: API.to_owned(),
                model: field("model")
                    .filter(|m| !m.is_empty())
                    .unwrap_or(&self.model_id)
                    .to_owned(),
                response_id: field("id").filter(|id| !id.is_empty()).map(str::to_owned),
            },
        });
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<StreamEvent>) {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
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
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = decode_usage(usage);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        if let Some(delta) = choice.get("delta") {
            if let Some((field, text)) = reasoning_delta(delta, self.details_first) {
                self.push_flow(Flow::Thinking(field), &text, out);
            }
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                self.content(text, out);
            }
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                for fragment in fragments {
                    self.tool_fragment(fragment, out);
                }
            }
            // The legacy single `function_call` streams like one unindexed tool call.
            if let Some(function) = delta.get("function_call").filter(|f| f.is_object()) {
                self.tool_fragment(&json!({ "function": function }), out);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.close_all(out);
            self.outcome = Some(finish_outcome(reason));
        }
    }

    fn content(&mut self, text: &str, out: &mut Vec<StreamEvent>) {
        let Some(tags) = &mut self.tags else {
            self.push_flow(Flow::Text, text, out);
            return;
        };
        let mut segments = Vec::new();
        tags.push(text, &mut segments);
        for (thinking, segment) in segments {
            self.push_tagged(thinking, &segment, out);
        }
    }

    fn push_tagged(&mut self, thinking: bool, text: &str, out: &mut Vec<StreamEvent>) {
        let flow = if thinking {
            Flow::Thinking(ReasoningField::ThinkTags)
        } else {
            Flow::Text
        };
        self.push_flow(flow, text, out);
    }

    /// Appends `text` to the open block of kind `flow`, opening one (and closing another
    /// kind) as needed.
    fn push_flow(&mut self, flow: Flow, text: &str, out: &mut Vec<StreamEvent>) {
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
        let delta = text.to_owned();
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

    fn tool_fragment(&mut self, fragment: &Value, out: &mut Vec<StreamEvent>) {
        let key = fragment.get("index").and_then(Value::as_u64);
        let id = fragment
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let function = fragment.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty());
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(text)) => Some(text.clone()),
            // A server that sends the arguments as an object sends them whole.
            Some(value @ Value::Object(_)) => Some(value.to_string()),
            _ => None,
        };
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
                Some(index) => out.push(StreamEvent::ToolCallDelta { index, delta }),
                None => call.pending.push_str(&delta),
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
            self.push_tagged(thinking, &held, out);
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
        match serde_json::from_str::<Value>(data) {
            Ok(chunk) => {
                self.start(Some(&chunk), out);
                self.chunk(&chunk, out);
            }
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
fn reasoning_delta(delta: &Value, details_first: bool) -> Option<(ReasoningField, String)> {
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
            ReasoningField::Details => details_text(delta.get("reasoning_details")?),
            _ => delta.get(field.as_str())?.as_str()?.to_owned(),
        };
        (!text.is_empty()).then_some((field, text))
    })
}

/// The text items of a `reasoning_details` array (encrypted and other items are skipped).
fn details_text(details: &Value) -> String {
    let mut text = String::new();
    for item in details.as_array().into_iter().flatten() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("reasoning.text");
        if kind == "reasoning.text"
            && let Some(part) = item.get("text").and_then(Value::as_str)
        {
            text.push_str(part);
        }
    }
    text
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
    fn push(&mut self, text: &str, out: &mut Vec<(bool, String)>) {
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
                self.emit(before, out);
                self.inside = !self.inside;
                rest = after;
                continue;
            }
            let keep = partial_tag_len(rest, tag);
            if let Some((ready, held)) = rest.split_at_checked(rest.len() - keep) {
                self.emit(ready, out);
                self.held.push_str(held);
            }
            return;
        }
    }

    /// The held-back tail, once the content is over or interrupted.
    fn flush(&mut self) -> Option<(bool, String)> {
        (!self.held.is_empty()).then(|| (self.inside, std::mem::take(&mut self.held)))
    }

    fn emit(&self, text: &str, out: &mut Vec<(bool, String)>) {
        if !text.is_empty() {
            out.push((self.inside, text.to_owned()));
        }
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
