//! The stream function: the single seam between the loop and any model.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use keel_protocol::{
    AssistantMessage, ContentBlock, ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent,
    Usage,
};
use tokio_util::sync::CancellationToken;

use crate::assemble::AssistantBuilder;
use crate::request::LlmRequest;

/// A stream of unified events for one response.
pub type EventStream = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// Something that answers a request with a stream of events.
///
/// Contract: the stream yields at most one terminal event (`done` or `error`) and nothing
/// after it. When `cancel` fires the stream should end promptly; consumers also stop
/// reading on cancellation themselves, so a stream that ignores it cannot wedge the loop.
pub trait StreamFn: Send + Sync {
    /// Starts one model call.
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream;
}

impl<F> StreamFn for F
where
    F: Fn(LlmRequest, CancellationToken) -> EventStream + Send + Sync,
{
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream {
        self(request, cancel)
    }
}

/// Runs one call to its end and returns the answer, for the host's own one-shot requests
/// (a checkpoint summary, a goal's verification) that want the message, not the events. A
/// stream that breaks the event contract ends the answer as an error, like a cut one.
pub async fn collect(
    stream_fn: &dyn StreamFn,
    request: LlmRequest,
    cancel: CancellationToken,
) -> AssistantMessage {
    let mut stream = stream_fn.stream(request, cancel);
    let mut builder = AssistantBuilder::new();
    while let Some(event) = stream.next().await {
        if let Err(error) = builder.apply(&event) {
            builder.fail(
                StopReason::Error,
                ErrorInfo::new(ErrorCode::Other, error.to_string()),
            );
        }
        if builder.is_finished() {
            break;
        }
    }
    builder.finish()
}

/// A stream that fails at once with `error`.
pub fn error_stream(stop_reason: StopReason, error: ErrorInfo) -> EventStream {
    Box::pin(futures::stream::iter([StreamEvent::Error {
        stop_reason,
        error,
        usage: Usage::default(),
    }]))
}

/// A stream that replays a finished message, used for synthetic answers (a before-LLM hook
/// that answers directly) so the loop treats them exactly like a model response.
pub fn message_stream(message: &AssistantMessage) -> EventStream {
    Box::pin(futures::stream::iter(message_events(message)))
}

/// The event sequence that rebuilds `message`.
pub(crate) fn message_events(message: &AssistantMessage) -> Vec<StreamEvent> {
    let mut events = Vec::with_capacity(message.content.len() * 3 + 2);
    events.push(StreamEvent::Start {
        meta: ResponseMeta {
            provider: message.provider.clone(),
            api: message.api.clone(),
            model: message.model.clone(),
            response_id: message.response_id.clone(),
        },
    });
    for (index, block) in message.content.iter().enumerate() {
        match block {
            ContentBlock::Text(text) => {
                events.push(StreamEvent::TextStart { index });
                events.push(StreamEvent::TextDelta {
                    index,
                    delta: text.text.clone(),
                });
                events.push(StreamEvent::TextEnd { index });
            }
            ContentBlock::Thinking(thinking) => {
                events.push(StreamEvent::ThinkingStart { index });
                events.push(StreamEvent::ThinkingDelta {
                    index,
                    delta: thinking.thinking.clone(),
                });
                events.push(StreamEvent::ThinkingEnd {
                    index,
                    signature: thinking.signature.clone(),
                    redacted: thinking.redacted,
                });
            }
            ContentBlock::ToolCall(call) => {
                events.push(StreamEvent::ToolCallStart {
                    index,
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
                events.push(StreamEvent::ToolCallDelta {
                    index,
                    delta: call.arguments.to_string(),
                });
                events.push(StreamEvent::ToolCallEnd { index });
            }
            // Images are user-side content; a model response carrying one is replayed as
            // a text note so nothing is silently lost.
            ContentBlock::Image(image) => {
                events.push(StreamEvent::TextStart { index });
                events.push(StreamEvent::TextDelta {
                    index,
                    delta: format!("[image: {}]", image.mime_type),
                });
                events.push(StreamEvent::TextEnd { index });
            }
            _ => {}
        }
    }
    match (&message.stop_reason, &message.error) {
        (StopReason::Error | StopReason::Aborted, Some(error)) => events.push(StreamEvent::Error {
            stop_reason: message.stop_reason,
            error: error.clone(),
            usage: message.usage,
        }),
        _ => events.push(StreamEvent::Done {
            stop_reason: message.stop_reason,
            usage: message.usage,
        }),
    }
    events
}
