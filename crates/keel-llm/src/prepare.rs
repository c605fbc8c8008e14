//! Cleaning a request's messages right before they are encoded for a provider.
//!
//! Providers reject whole requests over small inconsistencies, and a rejected request loses
//! the user's turn. So before every send: errored and aborted assistant messages go (their
//! partial output confuses models and some APIs reject it); every tool call gets a result
//! (a missing one becomes a synthetic error result) and results without a call go; every
//! call's arguments become a JSON object (MiniMax rejects anything else); thinking from
//! another provider becomes plain text while this provider's keeps its signature; empty
//! blocks and then-empty messages go. Messages that need no change are shared, not copied.

use std::collections::HashSet;
use std::sync::Arc;

use keel_protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCallId, ToolResultMessage,
};

use crate::model::ModelEntry;

/// Text of the synthetic result given to a tool call that has none.
pub const MISSING_RESULT: &str =
    "No result was recorded for this tool call (the run was interrupted).";

/// The cleaned message list for `model`.
pub fn prepare_messages(messages: &[Arc<Message>], model: &ModelEntry) -> Vec<Arc<Message>> {
    let answered: HashSet<&ToolCallId> = messages
        .iter()
        .filter_map(|m| m.as_tool_result())
        .map(|r| &r.tool_call_id)
        .collect();
    let mut out: Vec<Arc<Message>> = Vec::with_capacity(messages.len());
    let mut open_calls: Vec<(ToolCallId, String)> = Vec::new();
    let mut known_calls: HashSet<ToolCallId> = HashSet::new();
    for message in messages {
        match &**message {
            Message::Assistant(assistant) => {
                flush_missing(&mut out, &mut open_calls);
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) {
                    continue;
                }
                let Some(cleaned) = clean_assistant(message, assistant, model) else {
                    continue;
                };
                if let Some(a) = cleaned.as_assistant() {
                    for call in a.tool_calls() {
                        known_calls.insert(call.id.clone());
                        if !answered.contains(&call.id) {
                            open_calls.push((call.id.clone(), call.name.clone()));
                        }
                    }
                }
                out.push(cleaned);
            }
            Message::ToolResult(result) if known_calls.contains(&result.tool_call_id) => {
                out.push(message.clone());
            }
            Message::User(_) => {
                flush_missing(&mut out, &mut open_calls);
                out.push(message.clone());
            }
            _ => {}
        }
    }
    flush_missing(&mut out, &mut open_calls);
    out
}

fn flush_missing(out: &mut Vec<Arc<Message>>, open: &mut Vec<(ToolCallId, String)>) {
    for (id, name) in open.drain(..) {
        out.push(Arc::new(Message::ToolResult(ToolResultMessage::error(
            id,
            name,
            MISSING_RESULT,
        ))));
    }
}

fn clean_assistant(
    original: &Arc<Message>,
    assistant: &AssistantMessage,
    model: &ModelEntry,
) -> Option<Arc<Message>> {
    let same_provider = assistant.provider == model.provider && assistant.api == model.api.as_str();
    let needs_change = assistant.content.iter().any(|block| match block {
        ContentBlock::Text(text) => text.text.is_empty(),
        ContentBlock::Thinking(thinking) => {
            !same_provider || thinking.thinking.is_empty() && thinking.signature.is_none()
        }
        ContentBlock::ToolCall(call) => !call.arguments.is_object(),
        _ => false,
    });
    if !needs_change {
        return (!assistant.content.is_empty()).then(|| original.clone());
    }
    let mut cleaned = assistant.clone();
    cleaned.content = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) if text.text.is_empty() => None,
            ContentBlock::Thinking(thinking) if !same_provider => (!thinking.redacted
                && !thinking.thinking.is_empty())
            .then(|| ContentBlock::text(thinking.thinking.clone())),
            ContentBlock::Thinking(thinking)
                if thinking.thinking.is_empty() && thinking.signature.is_none() =>
            {
                None
            }
            ContentBlock::ToolCall(call) if !call.arguments.is_object() => {
                let mut call = call.clone();
                call.arguments = as_object(&call.arguments);
                Some(ContentBlock::ToolCall(call))
            }
            other => Some(other.clone()),
        })
        .collect();
    (!cleaned.content.is_empty()).then(|| Arc::new(Message::Assistant(cleaned)))
}

/// Arguments as a JSON object: a string holding an object is parsed, anything else is empty.
fn as_object(arguments: &serde_json::Value) -> serde_json::Value {
    if let serde_json::Value::String(raw) = arguments
        && let Ok(value @ serde_json::Value::Object(_)) = serde_json::from_str(raw)
    {
        return value;
    }
    serde_json::Value::Object(serde_json::Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Api;
    use keel_protocol::{ErrorCode, ErrorInfo, ThinkingBlock, ToolCall};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn model() -> ModelEntry {
        serde_json::from_value(json!({
            "provider": "minimax", "id": "MiniMax-M2.7", "api": "anthropic-messages",
            "base_url": "http://x", "context_window": 1000, "max_output": 100
        }))
        .unwrap()
    }

    fn assistant(provider: &str, content: Vec<ContentBlock>, stop: StopReason) -> Arc<Message> {
        Arc::new(Message::Assistant(AssistantMessage {
            content,
            stop_reason: stop,
            provider: provider.into(),
            api: Api::AnthropicMessages.as_str().into(),
            ..AssistantMessage::default()
        }))
    }

    fn call(id: &str, arguments: serde_json::Value) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments,
        })
    }

    fn thinking(text: &str, signature: Option<&str>) -> ContentBlock {
        ContentBlock::Thinking(ThinkingBlock {
            thinking: text.into(),
            signature: signature.map(Into::into),
            redacted: false,
        })
    }

    #[test]
    fn cleans_everything_providers_reject() {
        let mut failed = AssistantMessage {
            stop_reason: StopReason::Error,
            ..AssistantMessage::default()
        };
        failed.error = Some(ErrorInfo::new(ErrorCode::Server, "x"));
        let history = vec![
            Arc::new(Message::user_text("q")),
            assistant(
                "minimax",
                vec![
                    thinking("mine", Some("sig")),
                    call("c1", json!("{\"a\":1}")),
                    call("c2", json!(null)),
                ],
                StopReason::ToolUse,
            ),
            Arc::new(Message::ToolResult(ToolResultMessage::error(
                "c1".into(),
                "bash",
                "r1",
            ))),
            Arc::new(Message::Assistant(failed)),
            Arc::new(Message::ToolResult(ToolResultMessage::error(
                "ghost".into(),
                "bash",
                "orphan",
            ))),
            Arc::new(Message::user_text("next")),
            assistant(
                "openai",
                vec![thinking("theirs", Some("opaque")), ContentBlock::text("")],
                StopReason::Stop,
            ),
        ];
        let prepared = prepare_messages(&history, &model());
        let summary: Vec<String> = prepared
            .iter()
            .map(|m| match &**m {
                Message::User(_) => "user".to_owned(),
                Message::Assistant(a) => format!("assistant{:?}", a.content),
                Message::ToolResult(r) => format!("result:{}:{}", r.tool_call_id, r.text()),
                _ => "other".to_owned(),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "user".to_owned(),
                format!(
                    "assistant{:?}",
                    vec![
                        thinking("mine", Some("sig")),
                        call("c1", json!({"a": 1})),
                        call("c2", json!({}))
                    ]
                ),
                "result:c1:r1".to_owned(),
                format!("result:c2:{MISSING_RESULT}"),
                "user".to_owned(),
                format!("assistant{:?}", vec![ContentBlock::text("theirs")]),
            ]
        );
    }

    #[test]
    fn unchanged_messages_are_shared() {
        let history = vec![
            Arc::new(Message::user_text("q")),
            assistant("minimax", vec![ContentBlock::text("a")], StopReason::Stop),
        ];
        let prepared = prepare_messages(&history, &model());
        assert!(Arc::ptr_eq(&prepared[1], &history[1]));
    }
}
