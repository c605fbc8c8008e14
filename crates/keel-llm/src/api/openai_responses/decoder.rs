//! The Responses stream decoder: output items become blocks, found again by `output_index`.
//!
//! It takes events already read into [`Event`] views ([`super::event`]), so it holds only
//! the item bookkeeping, the usage and the terminal event.

use std::borrow::Cow;

use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};
use serde_json::Value;

use super::API;
use super::event::{Event, Response};
use crate::api::openai_completions::Str;
use crate::api::openai_completions::{count, read_object};
use crate::api::{Decoder, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::sse::SseEvent;

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
    pub(super) finished: bool,
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
                        ErrorCode::Refusal,
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
    pub(super) fn apply(
        &mut self,
        mut event: Event<'_>,
        sse_kind: &str,
        out: &mut Vec<StreamEvent>,
    ) {
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
