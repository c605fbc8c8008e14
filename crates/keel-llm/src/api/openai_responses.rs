//! OpenAI Responses: request encoding and stream decoding.
//!
//! Requests are stateless (`store: false`): the whole history is sent each time, and
//! reasoning survives between calls only as the encrypted reasoning items the API returns.
//! The decoder keeps each finished reasoning item, serialized whole, as its thinking block's
//! signature, and the encoder sends it back verbatim. That costs a copy of the item per
//! thinking block but keeps keel ignorant of the item's fields, so new ones pass through.
//!
//! The stream is a sequence of typed events about output items, addressed by
//! `output_index`; several items may be open at once, so blocks are looked up by that index.
//!
//! Events are read as the Chat Completions decoder reads its chunks: strictly into a typed
//! view whose strings borrow from the event, with a lenient view of a [`Value`] for the odd
//! event the strict reading refuses. Output items stay JSON values: they come once per block,
//! and a reasoning item is kept whole as its signature.

use std::borrow::Cow;

use keel_protocol::{
    AssistantMessage, ContentBlock, ErrorCode, ErrorInfo, ImageBlock, Message, ResponseMeta,
    StopReason, StreamEvent, Usage, UserMessage,
};
use serde::de::MapAccess;
use serde_json::{Map, Value, json};

use super::openai_completions::{
    Fields, Object, Str, arguments_string, bearer_headers, count, data_url, images,
    insert_cache_options, joined_text, non_null, read_object, reasoning_effort, skip,
    temperature_value, tool_images_caption,
};
use super::{Decoder, WireRequest, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::request::{CacheRetention, LlmRequest};
use crate::sse::SseEvent;

/// The API's stable name.
const API: &str = "openai-responses";

/// Builds the request for `model`.
pub fn build(model: &ModelEntry, request: &LlmRequest, api_key: Option<&str>) -> WireRequest {
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    if !request.system_prompt.is_empty() {
        body.insert("instructions".into(), json!(&*request.system_prompt));
    }
    body.insert("input".into(), Value::Array(encode_input(request)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                // `strict` defaults to true here, which would reject ordinary JSON Schemas.
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert(
        "max_output_tokens".into(),
        json!(options.max_tokens.unwrap_or(model.max_output)),
    );
    if let Some(temperature) = options.temperature.and_then(temperature_value) {
        body.insert("temperature".into(), temperature);
    }
    if model.capabilities.reasoning
        && let Some(effort) = options.thinking.and_then(reasoning_effort)
    {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if model.provider == "openai" {
        insert_cache_options(&mut body, request);
    } else if options.cache_retention != Some(CacheRetention::None)
        && let Some(session) = &options.session_id
    {
        body.insert("prompt_cache_key".into(), json!(session));
    }
    WireRequest {
        url: format!("{}/responses", model.base_url.trim_end_matches('/')),
        headers: bearer_headers(model, request, api_key),
        body: Value::Object(body),
    }
}

fn encode_input(request: &LlmRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len());
    // Images from a run of tool results, sent as one user message after the run.
    let mut tool_images: Vec<Value> = Vec::new();
    for message in request.messages.iter() {
        if !matches!(**message, Message::ToolResult(_)) {
            flush_tool_images(&mut out, &mut tool_images);
        }
        match &**message {
            Message::User(user) => out.push(encode_user(user)),
            Message::Assistant(assistant) => encode_assistant(assistant, &mut out),
            Message::ToolResult(result) => {
                let mut text = joined_text(&result.content);
                let mut pictures = images(&result.content).peekable();
                if pictures.peek().is_some() {
                    tool_images.push(input_text(tool_images_caption(result)));
                    tool_images.extend(pictures.map(input_image));
                    if text.is_empty() {
                        text.push_str("(image output follows)");
                    }
                }
                out.push(json!({
                    "type": "function_call_output",
                    "call_id": result.tool_call_id.as_str(),
                    "output": text,
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

fn input_text(text: impl Into<String>) -> Value {
    json!({"type": "input_text", "text": text.into()})
}

fn input_image(image: &ImageBlock) -> Value {
    json!({"type": "input_image", "image_url": data_url(image)})
}

fn encode_user(user: &UserMessage) -> Value {
    let content: Vec<Value> = user
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(input_text(text.text.as_str())),
            ContentBlock::Image(image) => Some(input_image(image)),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": content})
}

/// An assistant message as input items, in block order: replayed reasoning items, text
/// messages and function calls.
fn encode_assistant(assistant: &AssistantMessage, out: &mut Vec<Value>) {
    for block in &assistant.content {
        match block {
            ContentBlock::Thinking(thinking) => {
                // The signature is the reasoning item as the API sent it; anything else
                // (no signature, or one that is not an item) cannot be replayed.
                if let Some(item) = thinking
                    .signature
                    .as_deref()
                    .and_then(|signature| serde_json::from_str::<Value>(signature).ok())
                    .filter(Value::is_object)
                {
                    out.push(item);
                }
            }
            ContentBlock::Text(text) if !text.text.is_empty() => out.push(json!({
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text.text}],
            })),
            ContentBlock::ToolCall(call) => out.push(json!({
                "type": "function_call",
                "call_id": call.id.as_str(),
                "name": call.name,
                "arguments": arguments_string(&call.arguments),
            })),
            _ => {}
        }
    }
}

/// The kind of block an output item became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    ToolCall,
}

/// One output item and the block it became (the block's index is the item's position).
#[derive(Debug)]
struct Item {
    output_index: u64,
    kind: Kind,
    open: bool,
    /// Some content arrived as deltas (so the item's final copy must not be sent again).
    streamed: bool,
    /// The reasoning summary part the last delta belonged to.
    summary_index: Option<u64>,
}

/// Decodes a Responses stream.
#[derive(Debug)]
pub struct ResponsesDecoder {
    provider: String,
    model_id: String,
    started: bool,
    finished: bool,
    /// One item per block, in block order.
    items: Vec<Item>,
    saw_tool_call: bool,
    usage: Usage,
}

impl ResponsesDecoder {
    /// A decoder for one response from `model`.
    pub fn new(model: &ModelEntry) -> Self {
        Self {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
            started: false,
            finished: false,
            items: Vec::new(),
            saw_tool_call: false,
            usage: Usage::default(),
        }
    }

    fn start(&mut self, response: Option<&Response<'_>>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let model = response.and_then(|r| r.model.as_deref());
        let id = response.and_then(|r| r.id.as_deref());
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

    fn handle(&mut self, kind: &str, event: Event<'_>, out: &mut Vec<StreamEvent>) {
        let output_index = event.output_index.unwrap_or(0);
        let delta = event.delta.map(|Str(delta)| delta).unwrap_or_default();
        match kind {
            "response.output_item.added" => {
                if let Some(item) = &event.item {
                    self.item_added(output_index, item, out);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.text_delta(output_index, delta, out);
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.thinking_delta(output_index, event.summary_index, delta, out);
            }
            "response.function_call_arguments.delta" => {
                if let Some(index) = self.find(output_index, Kind::ToolCall)
                    && let Some(call) = self.items.get_mut(index)
                    && !delta.is_empty()
                {
                    call.streamed = true;
                    out.push(StreamEvent::ToolCallDelta {
                        index,
                        delta: delta.into_owned(),
                    });
                }
            }
            "response.function_call_arguments.done" => {
                let arguments = event.arguments.as_deref().unwrap_or("");
                self.unstreamed_arguments(output_index, arguments, out);
            }
            "response.output_item.done" => {
                if let Some(item) = &event.item {
                    self.item_done(output_index, item, out);
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let response = event.response.unwrap_or_default();
                if let Some(usage) = response.usage.as_deref().filter(|u| u.is_object()) {
                    self.usage = decode_usage(usage);
                }
                let terminal = self.terminal(kind, &response);
                self.end(terminal, out);
            }
            "error" => {
                let error = event.error.as_deref().unwrap_or(&Value::Null);
                let usage = self.usage;
                let error = provider_error(error, "the provider reported an error");
                self.end(
                    StreamEvent::Error {
                        stop_reason: StopReason::Error,
                        error,
                        usage,
                    },
                    out,
                );
            }
            _ => {}
        }
    }

    fn item_added(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) {
        if self
            .items
            .iter()
            .any(|i| i.open && i.output_index == output_index)
        {
            return;
        }
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                self.open(output_index, Kind::Text, out);
            }
            Some("reasoning") => {
                self.open(output_index, Kind::Thinking, out);
            }
            Some("function_call") => {
                self.open_call(output_index, item, out);
                let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                self.unstreamed_arguments(output_index, arguments, out);
            }
            _ => {}
        }
    }

    fn item_done(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                if !self.streamed(output_index, Kind::Text) {
                    let text = item_text(item.get("content"), &["output_text", "refusal"]);
                    self.text_delta(output_index, Cow::Owned(text), out);
                }
                if let Some(index) = self.close(output_index, Kind::Text) {
                    out.push(StreamEvent::TextEnd { index });
                }
            }
            Some("reasoning") => {
                if !self.streamed(output_index, Kind::Thinking) {
                    let mut text = item_text(item.get("summary"), &["summary_text"]);
                    if text.is_empty() {
                        text = item_text(item.get("content"), &["reasoning_text"]);
                    }
                    self.thinking_delta(output_index, None, Cow::Owned(text), out);
                }
                // No reasoning text at all: the provider withheld it, and the signature
                // carries the only (encrypted) copy.
                let redacted = !self.streamed(output_index, Kind::Thinking);
                if self.find(output_index, Kind::Thinking).is_none() {
                    self.open(output_index, Kind::Thinking, out);
                }
                if let Some(index) = self.close(output_index, Kind::Thinking) {
                    out.push(StreamEvent::ThinkingEnd {
                        index,
                        signature: serde_json::to_string(item).ok(),
                        redacted,
                    });
                }
            }
            Some("function_call") => {
                if self.find(output_index, Kind::ToolCall).is_none() {
                    self.open_call(output_index, item, out);
                }
                let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                self.unstreamed_arguments(output_index, arguments, out);
                if let Some(index) = self.close(output_index, Kind::ToolCall) {
                    out.push(StreamEvent::ToolCallEnd { index });
                }
            }
            _ => {}
        }
    }

    /// The block of the open item of `kind` at `output_index`.
    fn find(&self, output_index: u64, kind: Kind) -> Option<usize> {
        self.items
            .iter()
            .rposition(|i| i.open && i.output_index == output_index && i.kind == kind)
    }

    /// Whether the open item of `kind` at `output_index` received deltas.
    fn streamed(&self, output_index: u64, kind: Kind) -> bool {
        self.find(output_index, kind)
            .and_then(|index| self.items.get(index))
            .is_some_and(|item| item.streamed)
    }

    /// Marks the open item of `kind` at `output_index` closed and returns its block.
    fn close(&mut self, output_index: u64, kind: Kind) -> Option<usize> {
        let index = self.find(output_index, kind)?;
        let item = self.items.get_mut(index)?;
        item.open = false;
        Some(index)
    }

    /// Opens a text or thinking block for `output_index` and returns its index.
    fn open(&mut self, output_index: u64, kind: Kind, out: &mut Vec<StreamEvent>) -> usize {
        let index = self.items.len();
        out.push(match kind {
            Kind::Thinking => StreamEvent::ThinkingStart { index },
            _ => StreamEvent::TextStart { index },
        });
        self.push_item(output_index, kind)
    }

    fn push_item(&mut self, output_index: u64, kind: Kind) -> usize {
        self.items.push(Item {
            output_index,
            kind,
            open: true,
            streamed: false,
            summary_index: None,
        });
        self.items.len() - 1
    }

    /// The open item of `kind` at `output_index`, opened now if a delta came first.
    fn find_or_open(&mut self, output_index: u64, kind: Kind, out: &mut Vec<StreamEvent>) -> usize {
        match self.find(output_index, kind) {
            Some(index) => index,
            None => self.open(output_index, kind, out),
        }
    }

    fn open_call(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) {
        let field = |name: &str| {
            item.get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let index = self.items.len();
        let id = field("call_id")
            .or_else(|| field("id"))
            .map_or_else(|| format!("call_{index}"), str::to_owned);
        out.push(StreamEvent::ToolCallStart {
            index,
            id: id.into(),
            name: field("name").unwrap_or_default().to_owned(),
        });
        self.saw_tool_call = true;
        self.push_item(output_index, Kind::ToolCall);
    }

    /// Sends arguments a provider gave whole (in `added`, `arguments.done` or `done`)
    /// unless they already arrived as deltas.
    fn unstreamed_arguments(
        &mut self,
        output_index: u64,
        arguments: &str,
        out: &mut Vec<StreamEvent>,
    ) {
        if arguments.is_empty() {
            return;
        }
        if let Some(index) = self.find(output_index, Kind::ToolCall)
            && let Some(call) = self.items.get_mut(index)
            && !call.streamed
        {
            call.streamed = true;
            out.push(StreamEvent::ToolCallDelta {
                index,
                delta: arguments.to_owned(),
            });
        }
    }

    fn text_delta(&mut self, output_index: u64, delta: Cow<'_, str>, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        let index = self.find_or_open(output_index, Kind::Text, out);
        if let Some(item) = self.items.get_mut(index) {
            item.streamed = true;
            out.push(StreamEvent::TextDelta {
                index,
                delta: delta.into_owned(),
            });
        }
    }

    fn thinking_delta(
        &mut self,
        output_index: u64,
        summary_index: Option<u64>,
        delta: Cow<'_, str>,
        out: &mut Vec<StreamEvent>,
    ) {
        if delta.is_empty() {
            return;
        }
        let index = self.find_or_open(output_index, Kind::Thinking, out);
        let Some(item) = self.items.get_mut(index) else {
            return;
        };
        // Summary parts are separate paragraphs.
        if item.streamed && summary_index.is_some() && item.summary_index != summary_index {
            out.push(StreamEvent::ThinkingDelta {
                index,
                delta: "\n\n".to_owned(),
            });
        }
        if summary_index.is_some() {
            item.summary_index = summary_index;
        }
        item.streamed = true;
        out.push(StreamEvent::ThinkingDelta {
            index,
            delta: delta.into_owned(),
        });
    }

    fn terminal(&self, kind: &str, response: &Response<'_>) -> StreamEvent {
        let usage = self.usage;
        let failed = |error: ErrorInfo| StreamEvent::Error {
            stop_reason: StopReason::Error,
            error,
            usage,
        };
        match kind {
            "response.failed" => {
                let error = response.error.as_deref().unwrap_or(&Value::Null);
                failed(provider_error(error, "the response failed"))
            }
            "response.incomplete" => {
                let reason = response
                    .incomplete_details
                    .as_ref()
                    .and_then(|details| details.reason.as_deref())
                    .unwrap_or("");
                if reason == "content_filter" {
                    failed(ErrorInfo::new(
                        ErrorCode::Other,
                        "the provider's content filter stopped the response",
                    ))
                } else {
                    StreamEvent::Done {
                        stop_reason: StopReason::Length,
                        usage,
                    }
                }
            }
            _ => {
                let stop_reason = if self.saw_tool_call {
                    StopReason::ToolUse
                } else {
                    StopReason::Stop
                };
                StreamEvent::Done { stop_reason, usage }
            }
        }
    }

    /// Closes open blocks and pushes the terminal event, once.
    fn end(&mut self, event: StreamEvent, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        self.start(None, out);
        for (index, item) in self.items.iter_mut().enumerate().filter(|(_, i)| i.open) {
            item.open = false;
            out.push(match item.kind {
                Kind::Text => StreamEvent::TextEnd { index },
                Kind::Thinking => StreamEvent::ThinkingEnd {
                    index,
                    signature: None,
                    redacted: false,
                },
                Kind::ToolCall => StreamEvent::ToolCallEnd { index },
            });
        }
        out.push(event);
        self.finished = true;
    }
}

impl ResponsesDecoder {
    /// Handles one event; `sse_kind` is its SSE event name, the kind when it has no `type`.
    fn apply(&mut self, mut event: Event<'_>, sse_kind: &str, out: &mut Vec<StreamEvent>) {
        self.start(event.response.as_ref(), out);
        let kind = event.kind.take();
        self.handle(kind.as_deref().unwrap_or(sse_kind), event, out);
    }
}

impl Decoder for ResponsesDecoder {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let data = sse.data.trim();
        // Responses streams have no `[DONE]`, but compatible servers may add one.
        if data.is_empty() || data == "[DONE]" {
            return;
        }
        if let Some(event) = read_object::<Event<'_>>(data)
            && event.is_whole(&sse.event)
        {
            self.apply(event, &sse.event, out);
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(event) => self.apply(Event::lenient(&event), &sse.event, out),
            Err(error) => self.end(malformed(API, error), out),
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.finished {
            let usage = self.usage;
            self.end(cut_stream(usage), out);
        }
    }
}

/// An event as the decoder reads it.
#[derive(Debug, Default)]
struct Event<'a> {
    kind: Option<Str<'a>>,
    output_index: Option<u64>,
    summary_index: Option<u64>,
    delta: Option<Str<'a>>,
    arguments: Option<Str<'a>>,
    item: Option<Cow<'a, Value>>,
    response: Option<Response<'a>>,
    /// What an `error` event's error is read from: its `error` object, else the event itself.
    error: Option<Cow<'a, Value>>,
}

#[derive(Debug, Default)]
struct Response<'a> {
    id: Option<Str<'a>>,
    model: Option<Str<'a>>,
    usage: Option<Cow<'a, Value>>,
    error: Option<Cow<'a, Value>>,
    incomplete_details: Option<IncompleteDetails<'a>>,
}

#[derive(Debug, Default)]
struct IncompleteDetails<'a> {
    reason: Option<Str<'a>>,
}

impl<'de: 'a, 'a> Fields<'de> for Event<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "output_index" => self.output_index = map.next_value()?,
            "summary_index" => self.summary_index = map.next_value()?,
            "delta" => self.delta = map.next_value()?,
            "arguments" => self.arguments = map.next_value()?,
            "item" => self.item = map.next_value()?,
            "response" => map.next_value_seed(Object(&mut self.response))?,
            "error" => self.error = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Response<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = map.next_value()?,
            "model" => self.model = map.next_value()?,
            "usage" => self.usage = map.next_value()?,
            "error" => self.error = map.next_value()?,
            "incomplete_details" => map.next_value_seed(Object(&mut self.incomplete_details))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for IncompleteDetails<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "reason" => self.reason = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'a> Event<'a> {
    /// Whether the strict reading has all the event's handling needs: an `error` event
    /// without an `error` object is its own error object, which only the lenient view has.
    fn is_whole(&self, sse_kind: &str) -> bool {
        self.kind.as_deref().unwrap_or(sse_kind) != "error"
            || self.error.as_deref().is_some_and(Value::is_object)
    }

    /// The event read from a JSON value, a field of an unexpected type (or `null`) counted
    /// as absent.
    fn lenient(event: &'a Value) -> Self {
        Self {
            kind: Str::lenient(event.get("type")),
            output_index: event.get("output_index").and_then(Value::as_u64),
            summary_index: event.get("summary_index").and_then(Value::as_u64),
            delta: Str::lenient(event.get("delta")),
            arguments: Str::lenient(event.get("arguments")),
            item: non_null(event.get("item")),
            response: event.get("response").map(Response::lenient),
            error: Some(Cow::Borrowed(
                event
                    .get("error")
                    .filter(|e| e.is_object())
                    .unwrap_or(event),
            )),
        }
    }
}

impl<'a> Response<'a> {
    fn lenient(response: &'a Value) -> Self {
        Self {
            id: Str::lenient(response.get("id")),
            model: Str::lenient(response.get("model")),
            usage: non_null(response.get("usage")),
            error: non_null(response.get("error")),
            incomplete_details: response.get("incomplete_details").map(|details| {
                IncompleteDetails {
                    reason: Str::lenient(details.get("reason")),
                }
            }),
        }
    }
}

/// The texts of the parts of `parts` whose type is one of `types`, joined by blank lines.
fn item_text(parts: Option<&Value>, types: &[&str]) -> String {
    let mut text = String::new();
    for part in parts.and_then(Value::as_array).into_iter().flatten() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        let body = part
            .get("text")
            .or_else(|| part.get("refusal"))
            .and_then(Value::as_str);
        if let Some(body) = body.filter(|b| !b.is_empty() && types.contains(&kind)) {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(body);
        }
    }
    text
}

/// An error object `{code, message}` (or `{type, message}`) as an error.
fn provider_error(error: &Value, fallback: &str) -> ErrorInfo {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let kind = match error.get("code").or_else(|| error.get("type")) {
        Some(Value::String(code)) => code.clone(),
        Some(Value::Number(code)) => code.to_string(),
        _ => String::new(),
    };
    let code = classify(None, &kind, message);
    ErrorInfo::new(
        code,
        if message.is_empty() {
            fallback
        } else {
            message
        },
    )
}

fn decode_usage(usage: &Value) -> Usage {
    let cache_read = count(usage, "/input_tokens_details/cached_tokens");
    Usage {
        input: count(usage, "/input_tokens").saturating_sub(cache_read),
        output: count(usage, "/output_tokens"),
        cache_read,
        reasoning: count(usage, "/output_tokens_details/reasoning_tokens"),
        ..Usage::default()
    }
}

#[cfg(test)]
#[path = "openai_responses_tests.rs"]
mod tests;
