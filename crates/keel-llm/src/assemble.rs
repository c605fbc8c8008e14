//! Folding stream events into an assistant message.
//!
//! Each event touches only the block it names: text is appended in place and tool-call
//! argument JSON accumulates in a side buffer that is parsed once, at the block's end. The
//! cost of a delta is therefore proportional to the delta, never to the message so far.

use keel_protocol::{
    AssistantMessage, ContentBlock, ErrorCode, ErrorInfo, StopReason, StreamEvent, TextBlock,
    ThinkingBlock, ToolCall,
};

/// A stream broke the event contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssembleError {
    /// An event named a block index that is neither an open block nor the next one.
    #[error("stream event `{event}` names block {index}, but the message has {len} blocks")]
    BadIndex {
        /// Event type.
        event: &'static str,
        /// Index it named.
        index: usize,
        /// Blocks so far.
        len: usize,
    },
    /// An event's kind does not match the block at its index.
    #[error("stream event `{event}` does not match the {found} block at index {index}")]
    KindMismatch {
        /// Event type.
        event: &'static str,
        /// Index it named.
        index: usize,
        /// Kind of block found there.
        found: &'static str,
    },
    /// An event arrived after the terminal event.
    #[error("stream event after the terminal event")]
    AfterTerminal,
}

impl AssembleError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadIndex { .. } => "stream_bad_index",
            Self::KindMismatch { .. } => "stream_kind_mismatch",
            Self::AfterTerminal => "stream_after_terminal",
        }
    }
}

/// Builds an [`AssistantMessage`] from stream events.
#[derive(Debug, Default)]
pub struct AssistantBuilder {
    message: AssistantMessage,
    /// Raw argument JSON of open tool calls, by block index.
    tool_args: Vec<(usize, String)>,
    finished: bool,
}

impl AssistantBuilder {
    /// An empty builder stamped with the current time.
    pub fn new() -> Self {
        Self {
            message: AssistantMessage {
                timestamp: keel_protocol::now_ms(),
                ..Default::default()
            },
            ..Self::default()
        }
    }

    /// The message as built so far.
    pub fn message(&self) -> &AssistantMessage {
        &self.message
    }

    /// Whether a terminal event was applied.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Applies one event.
    pub fn apply(&mut self, event: &StreamEvent) -> Result<(), AssembleError> {
        if self.finished {
            return Err(AssembleError::AfterTerminal);
        }
        match event {
            StreamEvent::Start { meta } => {
                self.message.provider.clone_from(&meta.provider);
                self.message.api.clone_from(&meta.api);
                self.message.model.clone_from(&meta.model);
                self.message.response_id.clone_from(&meta.response_id);
            }
            StreamEvent::TextStart { index } => {
                self.open(
                    *index,
                    "text_start",
                    ContentBlock::Text(TextBlock {
                        text: String::new(),
                    }),
                )?;
            }
            StreamEvent::TextDelta { index, delta } => match self.block(*index, "text_delta")? {
                ContentBlock::Text(block) => block.text.push_str(delta),
                other => return Err(mismatch("text_delta", *index, other)),
            },
            StreamEvent::TextEnd { index } => {
                self.expect_kind(*index, "text_end", |b| matches!(b, ContentBlock::Text(_)))?;
            }
            StreamEvent::ThinkingStart { index } => {
                self.open(
                    *index,
                    "thinking_start",
                    ContentBlock::Thinking(ThinkingBlock::default()),
                )?;
            }
            StreamEvent::ThinkingDelta { index, delta } => {
                match self.block(*index, "thinking_delta")? {
                    ContentBlock::Thinking(block) => block.thinking.push_str(delta),
                    other => return Err(mismatch("thinking_delta", *index, other)),
                }
            }
            StreamEvent::ThinkingEnd {
                index,
                signature,
                redacted,
            } => match self.block(*index, "thinking_end")? {
                ContentBlock::Thinking(block) => {
                    if signature.is_some() {
                        block.signature.clone_from(signature);
                    }
                    block.redacted = *redacted;
                }
                other => return Err(mismatch("thinking_end", *index, other)),
            },
            StreamEvent::ToolCallStart { index, id, name } => {
                self.open(
                    *index,
                    "tool_call_start",
                    ContentBlock::ToolCall(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: serde_json::Value::Null,
                    }),
                )?;
                self.tool_args.push((*index, String::new()));
            }
            StreamEvent::ToolCallDelta { index, delta } => {
                self.expect_kind(*index, "tool_call_delta", |b| {
                    matches!(b, ContentBlock::ToolCall(_))
                })?;
                if let Some((_, buf)) = self.tool_args.iter_mut().find(|(i, _)| i == index) {
                    buf.push_str(delta);
                }
            }
            StreamEvent::ToolCallEnd { index } => {
                self.expect_kind(*index, "tool_call_end", |b| {
                    matches!(b, ContentBlock::ToolCall(_))
                })?;
                self.close_tool_call(*index);
            }
            StreamEvent::Done { stop_reason, usage } => {
                self.message.stop_reason = *stop_reason;
                self.message.usage = *usage;
                self.finish_open_calls();
                self.finished = true;
            }
            StreamEvent::Error {
                stop_reason,
                error,
                usage,
            } => {
                self.message.stop_reason = match stop_reason {
                    StopReason::Aborted => StopReason::Aborted,
                    _ => StopReason::Error,
                };
                self.message.error = Some(error.clone());
                self.message.usage = *usage;
                self.finish_open_calls();
                self.finished = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// Ends the message with an error (stream broke, was cancelled, or ended early) unless a
    /// terminal event already ended it.
    pub fn fail(&mut self, stop_reason: StopReason, error: ErrorInfo) {
        if self.finished {
            return;
        }
        self.message.stop_reason = stop_reason;
        self.message.error = Some(error);
        self.finish_open_calls();
        self.finished = true;
    }

    /// The finished message. A stream that ended without a terminal event counts as cut.
    pub fn finish(mut self) -> AssistantMessage {
        if !self.finished {
            self.fail(
                StopReason::Error,
                ErrorInfo::new(
                    ErrorCode::Network,
                    "the response stream ended before it finished",
                ),
            );
        }
        self.message
    }

    fn open(
        &mut self,
        index: usize,
        event: &'static str,
        block: ContentBlock,
    ) -> Result<(), AssembleError> {
        let len = self.message.content.len();
        if index != len {
            return Err(AssembleError::BadIndex { event, index, len });
        }
        self.message.content.push(block);
        Ok(())
    }

    fn block(
        &mut self,
        index: usize,
        event: &'static str,
    ) -> Result<&mut ContentBlock, AssembleError> {
        let len = self.message.content.len();
        self.message
            .content
            .get_mut(index)
            .ok_or(AssembleError::BadIndex { event, index, len })
    }

    fn expect_kind(
        &mut self,
        index: usize,
        event: &'static str,
        ok: impl Fn(&ContentBlock) -> bool,
    ) -> Result<(), AssembleError> {
        let block = self.block(index, event)?;
        if ok(block) {
            Ok(())
        } else {
            Err(mismatch(event, index, block))
        }
    }

    fn close_tool_call(&mut self, index: usize) {
        let Some(pos) = self.tool_args.iter().position(|(i, _)| *i == index) else {
            return;
        };
        let (_, raw) = self.tool_args.swap_remove(pos);
        if let Some(ContentBlock::ToolCall(call)) = self.message.content.get_mut(index) {
            call.arguments = parse_arguments(raw);
        }
    }

    fn finish_open_calls(&mut self) {
        while let Some((index, _)) = self.tool_args.last() {
            let index = *index;
            self.close_tool_call(index);
        }
    }
}

/// Parses accumulated argument JSON. Empty means no arguments; text that does not parse
/// is kept verbatim as a JSON string so validation can echo what the model sent.
fn parse_arguments(raw: String) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(&raw).unwrap_or(serde_json::Value::String(raw))
}

fn mismatch(event: &'static str, index: usize, found: &ContentBlock) -> AssembleError {
    let found = match found {
        ContentBlock::Text(_) => "text",
        ContentBlock::Thinking(_) => "thinking",
        ContentBlock::Image(_) => "image",
        ContentBlock::ToolCall(_) => "tool_call",
        _ => "unknown",
    };
    AssembleError::KindMismatch {
        event,
        index,
        found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream_fn::message_events;
    use keel_protocol::{ResponseMeta, Usage};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn build(events: &[StreamEvent]) -> Result<AssistantMessage, AssembleError> {
        let mut builder = AssistantBuilder::new();
        for event in events {
            builder.apply(event)?;
        }
        Ok(builder.finish())
    }

    #[test]
    fn replaying_a_message_rebuilds_it() {
        let mut message = AssistantMessage {
            content: vec![
                ContentBlock::Thinking(ThinkingBlock {
                    thinking: "plan".into(),
                    signature: Some("s".into()),
                    redacted: false,
                }),
                ContentBlock::text("hello"),
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "x"}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            usage: Usage {
                input: 1,
                output: 2,
                ..Usage::default()
            },
            provider: "p".into(),
            api: "a".into(),
            model: "m".into(),
            response_id: None,
            error: None,
            timestamp: 0,
        };
        let mut built = build(&message_events(&message)).unwrap();
        built.timestamp = 0;
        message.timestamp = 0;
        assert_eq!(built, message);
    }

    #[test]
    fn split_argument_json_is_joined_and_parsed_at_the_end() {
        let events = [
            StreamEvent::Start {
                meta: ResponseMeta::default(),
            },
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c".into(),
                name: "t".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                delta: "{\"a\":".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                delta: " [1, 2]}".into(),
            },
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage::default(),
            },
        ];
        let message = build(&events).unwrap();
        assert_eq!(
            message.tool_calls().next().unwrap().arguments,
            json!({"a": [1, 2]})
        );
    }

    #[test]
    fn unparsable_arguments_are_kept_verbatim() {
        let events = [
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c".into(),
                name: "t".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                delta: "{oops".into(),
            },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage::default(),
            },
        ];
        let message = build(&events).unwrap();
        assert_eq!(
            message.tool_calls().next().unwrap().arguments,
            json!("{oops")
        );
    }

    #[test]
    fn a_stream_without_terminal_event_is_an_error() {
        let message = build(&[StreamEvent::TextStart { index: 0 }]).unwrap();
        assert_eq!(message.stop_reason, StopReason::Error);
        assert_eq!(message.error.unwrap().code, ErrorCode::Network);
    }

    #[test]
    fn bad_indexes_and_kinds_are_reported() {
        assert_eq!(
            build(&[StreamEvent::TextDelta {
                index: 3,
                delta: "x".into()
            }])
            .unwrap_err(),
            AssembleError::BadIndex {
                event: "text_delta",
                index: 3,
                len: 0
            }
        );
        assert_eq!(
            build(&[
                StreamEvent::TextStart { index: 0 },
                StreamEvent::ThinkingDelta {
                    index: 0,
                    delta: "x".into()
                }
            ])
            .unwrap_err(),
            AssembleError::KindMismatch {
                event: "thinking_delta",
                index: 0,
                found: "text"
            }
        );
        let mut builder = AssistantBuilder::new();
        builder
            .apply(&StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default(),
            })
            .unwrap();
        assert_eq!(
            builder
                .apply(&StreamEvent::TextStart { index: 0 })
                .unwrap_err(),
            AssembleError::AfterTerminal
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use keel_protocol::{ToolCallId, Usage};
    use proptest::prelude::*;

    fn event() -> impl Strategy<Value = StreamEvent> {
        let index = 0usize..4;
        prop_oneof![
            index
                .clone()
                .prop_map(|index| StreamEvent::TextStart { index }),
            (index.clone(), ".{0,8}")
                .prop_map(|(index, delta)| StreamEvent::TextDelta { index, delta }),
            index
                .clone()
                .prop_map(|index| StreamEvent::TextEnd { index }),
            index
                .clone()
                .prop_map(|index| StreamEvent::ThinkingStart { index }),
            (index.clone(), ".{0,8}")
                .prop_map(|(index, delta)| StreamEvent::ThinkingDelta { index, delta }),
            index.clone().prop_map(|index| StreamEvent::ToolCallStart {
                index,
                id: ToolCallId::new("c"),
                name: "t".into()
            }),
            (index.clone(), "[{}\":a-z0-9,]{0,8}")
                .prop_map(|(index, delta)| StreamEvent::ToolCallDelta { index, delta }),
            index.prop_map(|index| StreamEvent::ToolCallEnd { index }),
            Just(StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            }),
        ]
    }

    proptest! {
        /// Arbitrary (also invalid) event sequences never panic, and the finished message
        /// always has a terminal stop reason and parsed (or verbatim) tool arguments.
        #[test]
        fn any_event_sequence_folds_without_panicking(events in prop::collection::vec(event(), 0..40)) {
            let mut builder = AssistantBuilder::new();
            for event in &events {
                if builder.apply(event).is_err() {
                    builder.fail(StopReason::Error, ErrorInfo::new(ErrorCode::Other, "bad stream"));
                    break;
                }
            }
            let message = builder.finish();
            for call in message.tool_calls() {
                prop_assert!(!call.arguments.is_null());
            }
        }
    }
}
