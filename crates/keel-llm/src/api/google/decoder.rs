//! The Gemini stream decoder: the open block, usage totals and the terminal event.
//!
//! It sees chunks only as [`Flat`] views, so it is independent of how a chunk was read (in
//! place or through the reference reading).

use std::borrow::Cow;

use keel_protocol::{
    ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, ToolCallId, Usage,
};
use serde_json::Value;

use super::API;
use super::flat::Flat;
use super::wire::{Chunk, Part, UsageMetadata};
use crate::api::{Decoder, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::sse::SseEvent;

/// Gemini's token counts as last reported (each chunk repeats the running totals).
#[derive(Debug, Default, Clone, Copy)]
struct RawUsage {
    prompt: u64,
    cached: u64,
    candidates: u64,
    thoughts: u64,
}

impl RawUsage {
    fn update(&mut self, usage: &UsageMetadata) {
        if let Some(prompt) = usage.prompt_token_count {
            self.prompt = prompt;
        }
        if let Some(cached) = usage.cached_content_token_count {
            self.cached = cached;
        }
        if let Some(candidates) = usage.candidates_token_count {
            self.candidates = candidates;
        }
        if let Some(thoughts) = usage.thoughts_token_count {
            self.thoughts = thoughts;
        }
    }

    /// The prompt count includes cached tokens and the candidate count excludes thoughts.
    fn usage(self) -> Usage {
        Usage {
            input: self.prompt.saturating_sub(self.cached),
            output: self.candidates.saturating_add(self.thoughts),
            cache_read: self.cached,
            reasoning: self.thoughts,
            ..Usage::default()
        }
    }
}

/// The open text or thinking block.
#[derive(Debug)]
struct OpenBlock {
    index: usize,
    kind: OpenKind,
}

#[derive(Debug, PartialEq)]
enum OpenKind {
    Text,
    Thinking { signature: Option<String> },
}

/// How the response ended, held until the body ends.
#[derive(Debug)]
enum Outcome {
    /// A candidate's `finishReason`, with its optional `finishMessage`.
    Finished {
        reason: String,
        message: Option<String>,
    },
    /// The prompt itself was blocked (`promptFeedback.blockReason`).
    PromptBlocked(String),
}

/// Decodes one Gemini response.
#[derive(Debug)]
pub struct GoogleDecoder {
    provider: String,
    model_id: String,
    started: bool,
    finished: bool,
    usage: RawUsage,
    open: Option<OpenBlock>,
    blocks: usize,
    tool_calls: usize,
    outcome: Option<Outcome>,
    /// Prefix of the ids made up for function calls Gemini sends without one.
    pub(super) call_prefix: String,
}

impl GoogleDecoder {
    /// A decoder for one response from `model`.
    pub fn new(model: &ModelEntry) -> Self {
        Self {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
            started: false,
            finished: false,
            usage: RawUsage::default(),
            open: None,
            blocks: 0,
            tool_calls: 0,
            outcome: None,
            call_prefix: ToolCallId::generate().to_string(),
        }
    }

    fn start(&mut self, chunk: Option<&Flat<'_>>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(StreamEvent::Start {
            meta: ResponseMeta {
                provider: self.provider.clone(),
                api: API.to_owned(),
                model: chunk
                    .and_then(|chunk| chunk.model_version.as_deref())
                    .unwrap_or(&self.model_id)
                    .to_owned(),
                response_id: chunk
                    .and_then(|chunk| chunk.response_id.as_deref())
                    .map(str::to_owned),
            },
        });
    }

    fn part(&mut self, mut part: Part<'_>, out: &mut Vec<StreamEvent>) {
        let thought_text = part.thought && part.text.is_some();
        let mut signature = part.thought_signature.take();
        // A signature on a thought part belongs to that part's block, so it is attached
        // after the text opens it; on a call or text part it goes to the thinking block the
        // part is about to close, if that block has none yet.
        let mut text_signature = None;
        if !thought_text {
            let is_call = part.function_call.is_some();
            let signature = signature.take();
            if self.thinking_open_unsigned() {
                self.sign(signature);
            } else if is_call {
                // Gemini 3 signs the first function call of a step even when no thoughts are
                // shown, and refuses the next request unless the call carries the signature
                // back. An empty signed thinking block before the call keeps it; the encoder
                // puts it back on the call.
                self.signed_marker(signature, out);
            } else {
                // A text answer's signature (Gemini puts one on its last part) stays with
                // the text, to be sent back on it.
                text_signature = signature;
            }
        }
        if let Some(call) = part.function_call {
            self.close(out);
            let index = self.blocks;
            self.blocks += 1;
            self.tool_calls += 1;
            let id = match call.id {
                Some(id) if !id.is_empty() => ToolCallId::from(id.into_owned()),
                _ => ToolCallId::from(format!("{}-{}", self.call_prefix, self.tool_calls)),
            };
            let arguments = match call.args {
                Some(args @ Value::Object(_)) => args.to_string(),
                _ => "{}".to_owned(),
            };
            out.push(StreamEvent::ToolCallStart {
                index,
                id,
                name: call.name.into_owned(),
            });
            out.push(StreamEvent::ToolCallDelta {
                index,
                delta: arguments,
            });
            out.push(StreamEvent::ToolCallEnd { index });
        } else if let Some(text) = part.text
            && !text.is_empty()
        {
            let thinking = part.thought;
            let same_kind = match &self.open {
                Some(open) => matches!(open.kind, OpenKind::Thinking { .. }) == thinking,
                None => false,
            };
            if !same_kind {
                self.close(out);
                let index = self.blocks;
                self.blocks += 1;
                let kind = if thinking {
                    out.push(StreamEvent::ThinkingStart { index });
                    OpenKind::Thinking { signature: None }
                } else {
                    out.push(StreamEvent::TextStart { index });
                    OpenKind::Text
                };
                self.open = Some(OpenBlock { index, kind });
            }
            if let Some(open) = &self.open {
                let index = open.index;
                let text = text.into_owned();
                out.push(if thinking {
                    StreamEvent::ThinkingDelta { index, delta: text }
                } else {
                    StreamEvent::TextDelta { index, delta: text }
                });
            }
        }
        self.sign(signature);
        self.end_signed_text(text_signature, out);
    }

    /// Ends the open text block with `signature`: a signature ends the part it rides on, so
    /// the block closes and an empty thinking block holding the signature follows it; the
    /// encoder puts it back on that text. With no text block open it has nothing to ride
    /// on and is dropped.
    fn end_signed_text(&mut self, signature: Option<Cow<'_, str>>, out: &mut Vec<StreamEvent>) {
        if signature.as_deref().is_some_and(|s| !s.is_empty())
            && matches!(
                self.open,
                Some(OpenBlock {
                    kind: OpenKind::Text,
                    ..
                })
            )
        {
            self.signed_marker(signature, out);
        }
    }

    /// Whether a thinking block without a signature yet is open (a call's signature may go
    /// to it; a block's own signature must not be overwritten by a call's).
    fn thinking_open_unsigned(&self) -> bool {
        matches!(
            &self.open,
            Some(OpenBlock {
                kind: OpenKind::Thinking { signature: None },
                ..
            })
        )
    }

    /// An empty thinking block holding only `signature` (nothing when there is none).
    fn signed_marker(&mut self, signature: Option<Cow<'_, str>>, out: &mut Vec<StreamEvent>) {
        let Some(signature) = signature.filter(|signature| !signature.is_empty()) else {
            return;
        };
        self.close(out);
        let index = self.blocks;
        self.blocks += 1;
        out.push(StreamEvent::ThinkingStart { index });
        out.push(StreamEvent::ThinkingEnd {
            index,
            signature: Some(signature.into_owned()),
            redacted: false,
        });
    }

    /// Puts a signature on the open thinking block; with none open it is dropped.
    fn sign(&mut self, signature: Option<Cow<'_, str>>) {
        if let Some(signature) = signature.filter(|signature| !signature.is_empty())
            && let Some(OpenBlock {
                kind: OpenKind::Thinking { signature: slot },
                ..
            }) = &mut self.open
        {
            *slot = Some(signature.into_owned());
        }
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let index = open.index;
        out.push(match open.kind {
            OpenKind::Text => StreamEvent::TextEnd { index },
            OpenKind::Thinking { signature } => StreamEvent::ThinkingEnd {
                index,
                signature,
                redacted: false,
            },
        });
    }

    /// Closes the open block, then emits the terminal event.
    fn terminate(&mut self, terminal: StreamEvent, out: &mut Vec<StreamEvent>) {
        self.close(out);
        out.push(terminal);
        self.finished = true;
    }

    fn outcome_event(&self, outcome: Outcome) -> StreamEvent {
        let usage = self.usage.usage();
        let (reason, detail) = match outcome {
            Outcome::Finished { reason, message } => match reason.as_str() {
                "STOP" if self.tool_calls > 0 => {
                    return StreamEvent::Done {
                        stop_reason: StopReason::ToolUse,
                        usage,
                    };
                }
                "STOP" => {
                    return StreamEvent::Done {
                        stop_reason: StopReason::Stop,
                        usage,
                    };
                }
                "MAX_TOKENS" => {
                    return StreamEvent::Done {
                        stop_reason: StopReason::Length,
                        usage,
                    };
                }
                _ => (reason, message),
            },
            Outcome::PromptBlocked(reason) => {
                let message = format!("Gemini blocked the prompt (block reason {reason})");
                return StreamEvent::Error {
                    stop_reason: StopReason::Error,
                    error: ErrorInfo::new(ErrorCode::Other, message),
                    usage,
                };
            }
        };
        let what = match reason.as_str() {
            "SAFETY" => "the response was blocked by the safety filters",
            "RECITATION" => "the response was blocked for reciting training data",
            "PROHIBITED_CONTENT" => "the response was blocked for prohibited content",
            "BLOCKLIST" => "the response contained a blocklisted term",
            "SPII" => "the response contained sensitive personal information",
            "MALFORMED_FUNCTION_CALL" => "the model produced a function call that did not parse",
            _ => "the response ended abnormally",
        };
        let mut message =
            format!("Gemini stopped the response with finish reason {reason}: {what}");
        if let Some(detail) = detail.filter(|detail| !detail.is_empty()) {
            message.push_str(" (");
            message.push_str(&detail);
            message.push(')');
        }
        // A malformed function call is a generation glitch another attempt may not repeat
        // (`server` is retryable); content-policy stops would recur, so they are `other`.
        let code = if reason == "MALFORMED_FUNCTION_CALL" {
            ErrorCode::Server
        } else {
            ErrorCode::Other
        };
        StreamEvent::Error {
            stop_reason: StopReason::Error,
            error: ErrorInfo::new(code, message),
            usage,
        }
    }
}

impl Decoder for GoogleDecoder {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        let mut chunk = Flat::default();
        if !chunk.read_in_place(&sse.data) {
            chunk = match serde_json::from_str::<Chunk>(&sse.data) {
                Ok(chunk) => Flat::from(chunk),
                Err(err) => {
                    self.start(None, out);
                    let mut terminal = malformed(API, err);
                    if let StreamEvent::Error { usage, .. } = &mut terminal {
                        *usage = self.usage.usage();
                    }
                    self.terminate(terminal, out);
                    return;
                }
            };
        }
        self.start(Some(&chunk), out);
        if let Some(error) = chunk.error.take() {
            let message = if error.message.is_empty() {
                format!("Gemini stream error {}", error.status)
            } else {
                error.message.into_owned()
            };
            let terminal = StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(classify(None, &error.status, &message), message),
                usage: self.usage.usage(),
            };
            self.terminate(terminal, out);
            return;
        }
        if let Some(usage) = &chunk.usage_metadata {
            self.usage.update(usage);
        }
        if let Some(reason) = chunk
            .prompt_feedback
            .take()
            .and_then(|feedback| feedback.block_reason)
        {
            self.outcome = Some(Outcome::PromptBlocked(reason.into_owned()));
        }
        for part in chunk.parts() {
            self.part(part, out);
        }
        if let Some(reason) = chunk.finish_reason {
            self.outcome = Some(Outcome::Finished {
                reason: reason.into_owned(),
                message: chunk.finish_message.map(Cow::into_owned),
            });
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        self.start(None, out);
        let terminal = match self.outcome.take() {
            Some(outcome) => self.outcome_event(outcome),
            None => cut_stream(self.usage.usage()),
        };
        self.terminate(terminal, out);
    }
}
