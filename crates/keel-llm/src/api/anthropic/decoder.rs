//! The Anthropic Messages stream decoder: the open blocks, usage and the terminal event.
//!
//! It takes events already read (by [`super::fast_delta`] or as [`WireEvent`]s), so it holds
//! only the block bookkeeping: blocks keyed by Anthropic's index, signatures and arguments
//! accumulated until a block stops.

use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};
use serde_json::Value;

use super::API;
use super::fast_delta::FastDelta;
use super::wire::{WireBlock, WireDelta, WireEvent, WireUsage};
use crate::api::{Decoder, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::sse::SseEvent;

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
            // again, so it gets the non-retryable `refusal` code.
            Some("refusal") => {
                return StreamEvent::Error {
                    stop_reason: StopReason::Error,
                    error: ErrorInfo::new(
                        ErrorCode::Refusal,
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
