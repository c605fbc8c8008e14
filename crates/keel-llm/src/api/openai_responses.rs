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
//!
//! This file holds the encoder; the decoder's pieces are submodules: [`decoder`] (the stream
//! state machine) and [`event`] (the typed view of one event, strict and lenient).

mod decoder;
mod event;

use keel_protocol::{
    AssistantMessage, ContentBlock, ImageBlock, Message, ToolDefinition, UserMessage,
};
use serde_json::{Map, Value, json};

use super::encode_cache::{EncodeCache, to_json};
use super::openai_completions::{
    arguments_string, bearer_headers, data_url, images, insert_cache_options, joined_text,
    reasoning_effort, tool_images_caption,
};
use super::{Spliced, WireRequest};
use crate::model::ModelEntry;
use crate::request::{CacheRetention, LlmRequest};

pub use decoder::ResponsesDecoder;

// What the tests reach through `use super::*` that this file itself does not use.
#[cfg(test)]
use super::{Decoder, cut_stream, malformed};
#[cfg(test)]
use crate::errors::classify;
#[cfg(test)]
use crate::sse::SseEvent;
#[cfg(test)]
use event::Event;
#[cfg(test)]
use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};

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
        body.insert("tools".into(), encode_tools(&request.tools));
    }
    body.insert(
        "max_output_tokens".into(),
        json!(options.max_tokens.unwrap_or(model.max_output)),
    );
    if let Some(temperature) = options.temperature.and_then(super::temperature_value) {
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
        spliced: None,
    }
}

/// Builds the same request as [`build`], taking the wire JSON of messages sent before from
/// `cache`; instructions and tools come before the input.
pub fn build_cached(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
    cache: &EncodeCache,
) -> WireRequest {
    let mut wire = super::bare_wire(build, model, request, api_key, "input");
    let mut members = Vec::new();
    if !request.system_prompt.is_empty() {
        members.push(("instructions", to_json(&json!(&*request.system_prompt))));
    }
    if !request.tools.is_empty() {
        members.push(("tools", cache.tools(&request.tools, encode_tools)));
    }
    let mut items = Vec::with_capacity(request.messages.len());
    let mut tool_images: Vec<Value> = Vec::new();
    for message in request.messages.iter() {
        if !matches!(**message, Message::ToolResult(_)) && !tool_images.is_empty() {
            let parts = std::mem::take(&mut tool_images);
            items.push(to_json(&json!({"role": "user", "content": parts})));
        }
        let with_images = match &**message {
            Message::ToolResult(result) => images(&result.content).next().is_some(),
            _ => false,
        };
        if with_images {
            let mut own = Vec::new();
            encode_message(message, &mut own, &mut tool_images);
            items.extend(own.iter().map(to_json));
        } else {
            let kept = cache.items(message, || {
                let mut own = Vec::new();
                encode_message(message, &mut own, &mut Vec::new());
                own
            });
            items.extend(kept.iter().cloned());
        }
    }
    if !tool_images.is_empty() {
        items.push(to_json(&json!({"role": "user", "content": tool_images})));
    }
    wire.spliced = Some(Spliced {
        key: "input",
        items,
        members,
        joined: false,
    });
    cache.forget_dropped();
    wire
}

/// The `tools` member.
fn encode_tools(tools: &[ToolDefinition]) -> Value {
    tools
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
        .collect()
}

fn encode_input(request: &LlmRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len());
    // Images from a run of tool results, sent as one user message after the run.
    let mut tool_images: Vec<Value> = Vec::new();
    for message in request.messages.iter() {
        if !matches!(**message, Message::ToolResult(_)) {
            flush_tool_images(&mut out, &mut tool_images);
        }
        encode_message(message, &mut out, &mut tool_images);
    }
    flush_tool_images(&mut out, &mut tool_images);
    out
}

/// One message's input items; a tool result's images go to `tool_images`.
fn encode_message(message: &Message, out: &mut Vec<Value>, tool_images: &mut Vec<Value>) {
    {
        match message {
            Message::User(user) => out.push(encode_user(user)),
            Message::Assistant(assistant) => encode_assistant(assistant, out),
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

#[cfg(test)]
#[path = "openai_responses_tests.rs"]
mod tests;
