//! The Chat Completions stream decoder: the state machine that turns chunks into stream events.
//!
//! It is apart from the encoder, with which it shares only [`ReasoningField`], and from the
//! chunk views it reads ([`super::chunk`]), so the block bookkeeping (text and thinking flow,
//! tool-call slots keyed by the provider's `index`, the outcome held until `[DONE]`) reads as
//! one piece.

use std::borrow::Cow;

use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};
use serde_json::Value;

use super::chunk::{Arguments, Chunk, ContentPart, Delta, Function, TextItem};
use super::reader::{Str, TextOr, read_object};
use super::think_tags::ThinkTagSplitter;
use super::{API, ReasoningField};
use crate::api::{Decoder, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::sse::SseEvent;

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
    pub(super) finished: bool,
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

    pub(super) fn chunk(&mut self, chunk: Chunk<'_>, out: &mut Vec<StreamEvent>) {
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
            match delta.content {
                Some(TextOr::Text(text)) => self.content(text, out),
                Some(TextOr::Items(parts)) => {
                    for part in parts {
                        self.content_part(part, out);
                    }
                }
                None => {}
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

    /// One part of a content list. Text parts are text (and may hold `<think>` tags like a
    /// plain content string); thinking parts are reasoning, their `thinking` a string or a
    /// list of text items. Other kinds (Mistral's references, say) carry nothing to show
    /// and are skipped, so a new kind never fails a stream.
    fn content_part(&mut self, part: ContentPart<'_>, out: &mut Vec<StreamEvent>) {
        let flow = Flow::Thinking(ReasoningField::ThinkingParts);
        match part.kind.as_deref() {
            Some("text") => {
                if let Some(Str(text)) = part.text {
                    self.content(text, out);
                }
            }
            Some("thinking") => match part.thinking {
                Some(TextOr::Text(text)) => self.push_flow(flow, text, out),
                Some(TextOr::Items(items)) => {
                    for item in items {
                        if item.kind.as_deref() == Some("text")
                            && let Some(Str(text)) = item.text
                        {
                            self.push_flow(flow, text, out);
                        }
                    }
                }
                None => {}
            },
            _ => {}
        }
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
            ReasoningField::ThinkTags | ReasoningField::ThinkingParts => return None,
        };
        (!text.is_empty()).then_some((field, text))
    })
}

/// The text items of a `reasoning_details` array (encrypted and other items are skipped).
fn details_text(details: &[TextItem<'_>]) -> String {
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

fn finish_outcome(reason: &str) -> Outcome {
    match reason {
        "length" => Outcome::Finished(StopReason::Length),
        "tool_calls" | "function_call" => Outcome::Finished(StopReason::ToolUse),
        "content_filter" => Outcome::Failed(ErrorInfo::new(
            ErrorCode::Refusal,
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
pub(in crate::api) fn count(value: &Value, pointer: &str) -> u64 {
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
