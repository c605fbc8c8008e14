//! Anthropic Messages (`anthropic-messages`): request encoding and stream decoding.
//!
//! The same code serves Anthropic-compatible endpoints (MiniMax). The encoder marks three
//! prompt-cache breakpoints on the stable prefix (system prompt, last tool definition, last
//! block of the last user message), so each step of a turn reads what the previous step
//! wrote. The decoder keeps only the blocks that are still open, keyed by Anthropic's block
//! index, so a delta costs a short lookup and never touches the text accumulated so far.
//!
//! Nearly every event of a stream is a `content_block_delta`, so those are first read into
//! small types that borrow from the event data (`FastDelta`): the delta's own text is the
//! only allocation (with serde_json's unescaping buffer when it has escapes). Anything
//! that reading does not take (every other event, and any delta of an odd shape) goes
//! through `WireEvent`, which defines the behaviour; the fast read accepts only what
//! `WireEvent` would read the same way.
//!
//! This file holds the encoder; the decoder's pieces are submodules: [`wire`] (the events as
//! serde reads them, which define behaviour), [`fast_delta`] (the borrowing fast path for
//! `content_block_delta`) and [`decoder`] (the stream state machine).

mod decoder;
mod fast_delta;
mod wire;

use std::sync::Arc;

use base64::Engine as _;
use keel_protocol::{ContentBlock, Message, ToolDefinition, ToolResultMessage};
use serde_json::{Map, Value, json};

use super::encode_cache::{EncodeCache, to_json};
use super::{Spliced, WireRequest};
use crate::model::ModelEntry;
use crate::request::{CacheRetention, LlmRequest, ThinkingLevel};

pub use decoder::AnthropicDecoder;

// What the tests reach through `use super::*` that this file itself does not use.
#[cfg(test)]
use super::{Decoder, cut_stream, malformed};
#[cfg(test)]
use fast_delta::FastDelta;
#[cfg(test)]
use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};
#[cfg(test)]
use wire::{WireDelta, WireEvent};

/// The API's stable name.
const API: &str = "anthropic-messages";

/// The API version every request pins.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// Output tokens kept for the answer after the thinking budget.
const ANSWER_RESERVE: u32 = 1024;

/// Builds the request for `POST {base_url}/v1/messages`.
pub fn build(model: &ModelEntry, request: &LlmRequest, api_key: Option<&str>) -> WireRequest {
    let options = &request.options;
    let cache = cache_control(options.cache_retention);
    let mut max_tokens = options.max_tokens.unwrap_or(model.max_output);
    let mut thinking_budget = None;
    if model.capabilities.reasoning
        && let Some(budget) = options.thinking.and_then(budget_for)
    {
        (max_tokens, thinking_budget) = fit_thinking(max_tokens, budget, model.max_output);
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system_prompt.is_empty() {
        let mut block = json!({"type": "text", "text": &*request.system_prompt});
        mark_cache(&mut block, cache.as_ref());
        body.insert("system".into(), json!([block]));
    }
    body.insert(
        "messages".into(),
        Value::Array(encode_messages(&request.messages, cache.as_ref())),
    );
    if !request.tools.is_empty() {
        body.insert("tools".into(), encode_tools(&request.tools, cache.as_ref()));
    }
    match thinking_budget {
        Some(budget) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        // The API rejects a temperature other than 1 while thinking is enabled.
        None => {
            if let Some(value) = options.temperature.and_then(super::temperature_value) {
                body.insert("temperature".into(), value);
            }
        }
    }

    let mut own = vec![("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned())];
    own.extend(api_key.map(|key| ("x-api-key".to_owned(), key.to_owned())));
    let headers = super::request_headers(model, request, own);

    WireRequest {
        url: format!("{}/v1/messages", model.base_url.trim_end_matches('/')),
        headers,
        body: Value::Object(body),
        spliced: None,
    }
}

/// Builds the same request as [`build`], taking the wire JSON of messages sent before from
/// `cache`; system prompt and tools come before the messages. The block that carries the
/// moving cache breakpoint (the newest user block) is encoded afresh each time.
pub fn build_cached(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
    cache: &EncodeCache,
) -> WireRequest {
    let marker = cache_control(request.options.cache_retention);
    let mut wire = super::bare_wire(build, model, request, api_key, "messages");
    let mut members = Vec::new();
    if !request.system_prompt.is_empty() {
        let mut block = json!({"type": "text", "text": &*request.system_prompt});
        mark_cache(&mut block, marker.as_ref());
        members.push(("system", to_json(&json!([block]))));
    }
    if !request.tools.is_empty() {
        let tools = cache.tools(&request.tools, |tools| encode_tools(tools, marker.as_ref()));
        members.push(("tools", tools));
    }
    // The message whose last block gets the breakpoint: the newest user content.
    let marked = marker.as_ref().and_then(|_| {
        request.messages.iter().rposition(|m| match &**m {
            Message::ToolResult(_) => true,
            Message::User(user) => user.content.iter().any(|b| user_block(b).is_some()),
            _ => false,
        })
    });
    let mut fragments = super::Fragments::default();
    for (index, message) in request.messages.iter().enumerate() {
        let fresh = marked == Some(index);
        match &**message {
            Message::ToolResult(result) => {
                let part = if fresh {
                    let mut block = tool_result(result);
                    mark_cache(&mut block, marker.as_ref());
                    to_json(&block)
                } else {
                    cache
                        .items(message, || vec![tool_result(result)])
                        .first()
                        .cloned()
                        .unwrap_or_default()
                };
                fragments.group(br#"{"content":["#, std::slice::from_ref(&part));
            }
            _ if fresh => {
                let mut item = encode_message(message);
                if let Some(last) = item
                    .as_mut()
                    .and_then(|item| item.get_mut("content"))
                    .and_then(Value::as_array_mut)
                    .and_then(|content| content.last_mut())
                {
                    mark_cache(last, marker.as_ref());
                }
                let items: Vec<_> = item.iter().map(to_json).collect();
                fragments.message(&items);
            }
            _ => fragments
                .message(&cache.items(message, || encode_message(message).into_iter().collect())),
        }
    }
    wire.spliced = Some(Spliced {
        key: "messages",
        items: fragments.finish(),
        members,
        joined: true,
    });
    cache.forget_dropped();
    wire
}

/// The `tools` member, the last tool marked as a cache breakpoint.
fn encode_tools(tools: &[ToolDefinition], cache: Option<&Value>) -> Value {
    let mut tools: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            })
        })
        .collect();
    if let Some(last) = tools.last_mut() {
        mark_cache(last, cache);
    }
    Value::Array(tools)
}

/// A user or assistant message as one wire message, when it has content.
fn encode_message(message: &Message) -> Option<Value> {
    match message {
        Message::User(user) => {
            let content: Vec<Value> = user.content.iter().filter_map(user_block).collect();
            (!content.is_empty()).then(|| json!({"role": "user", "content": content}))
        }
        Message::Assistant(assistant) => {
            let content: Vec<Value> = assistant
                .content
                .iter()
                .filter_map(assistant_block)
                .collect();
            (!content.is_empty()).then(|| json!({"role": "assistant", "content": content}))
        }
        _ => None,
    }
}

/// The thinking budget for a level (`None`: no thinking).
fn budget_for(level: ThinkingLevel) -> Option<u32> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some(1024),
        ThinkingLevel::Low => Some(2048),
        ThinkingLevel::Medium => Some(8192),
        ThinkingLevel::High => Some(16_384),
    }
}

/// Makes `max_tokens` exceed the thinking budget, as the API requires: raises `max_tokens`
/// to leave [`ANSWER_RESERVE`] tokens after the budget (never above the model's limit), and
/// if that cannot fit, shrinks the budget instead. Returns no budget when not even the
/// smallest budget fits below `max_tokens`.
fn fit_thinking(max_tokens: u32, budget: u32, model_max: u32) -> (u32, Option<u32>) {
    let wanted = budget.saturating_add(ANSWER_RESERVE);
    let max_tokens = if max_tokens < wanted {
        wanted.min(model_max).max(max_tokens)
    } else {
        max_tokens
    };
    let budget = if wanted <= max_tokens {
        budget
    } else {
        max_tokens
            .saturating_sub(ANSWER_RESERVE)
            .max(MIN_THINKING_BUDGET)
    };
    (max_tokens, (budget < max_tokens).then_some(budget))
}

/// The `cache_control` marker for a retention (`None`: do not cache).
fn cache_control(retention: Option<CacheRetention>) -> Option<Value> {
    match retention {
        None | Some(CacheRetention::Short) => Some(json!({"type": "ephemeral"})),
        Some(CacheRetention::Long) => Some(json!({"type": "ephemeral", "ttl": "1h"})),
        Some(CacheRetention::None) => None,
    }
}

fn mark_cache(block: &mut Value, cache: Option<&Value>) {
    if let (Some(cache), Some(block)) = (cache, block.as_object_mut()) {
        block.insert("cache_control".into(), cache.clone());
    }
}

/// Encodes the history. Consecutive tool results become one user message; the last block
/// of the last user message carries the cache breakpoint.
fn encode_messages(messages: &[Arc<Message>], cache: Option<&Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut results = Vec::new();
    for message in messages {
        if let Message::ToolResult(result) = &**message {
            results.push(tool_result(result));
            continue;
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        out.extend(encode_message(message));
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "content": results}));
    }
    if let Some(last_block) = out
        .iter_mut()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|message| message.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|content| content.last_mut())
    {
        mark_cache(last_block, cache);
    }
    out
}

fn user_block(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
        ContentBlock::Image(image) => Some(image_block(&image.data, &image.mime_type)),
        _ => None,
    }
}

fn image_block(data: &[u8], mime_type: &str) -> Value {
    json!({
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": mime_type,
            "data": base64::engine::general_purpose::STANDARD.encode(data),
        },
    })
}

fn assistant_block(block: &ContentBlock) -> Option<Value> {
    match block {
        // The API rejects empty text blocks.
        ContentBlock::Text(text) if text.text.is_empty() => None,
        ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
        ContentBlock::Thinking(thinking) => {
            // Unsigned thinking cannot be verified by the API: leave it out.
            let signature = thinking.signature.as_deref()?;
            Some(if thinking.redacted {
                json!({"type": "redacted_thinking", "data": signature})
            } else {
                json!({"type": "thinking", "thinking": thinking.thinking, "signature": signature})
            })
        }
        ContentBlock::ToolCall(call) => Some(json!({
            "type": "tool_use",
            "id": call.id.as_str(),
            "name": call.name,
            "input": call.arguments,
        })),
        _ => None,
    }
}

fn tool_result(result: &ToolResultMessage) -> Value {
    let content: Vec<Value> = result.content.iter().filter_map(user_block).collect();
    json!({
        "type": "tool_result",
        "tool_use_id": result.tool_call_id.as_str(),
        "content": content,
        "is_error": result.is_error,
    })
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
