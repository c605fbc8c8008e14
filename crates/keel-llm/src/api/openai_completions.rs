//! OpenAI Chat Completions: request encoding and stream decoding.
//!
//! One wire format serves OpenAI and every OpenAI-compatible server (OpenRouter, DeepSeek,
//! Mistral, MiniMax, Ollama, llama.cpp, vLLM, LM Studio); what differs between them lives in
//! [`crate::Compat`]. Servers report reasoning in one of several delta fields
//! (`reasoning_content`, `reasoning`, `reasoning_details`), inline as `<think>` tags, or
//! (Mistral) as `thinking` parts of a content list instead of a content string. A
//! thinking block's signature records which one, so the encoder can hand the reasoning back
//! the same way (DeepSeek and MiniMax need it back inside a tool-calling turn). The trade-off:
//! the signature here is a field name, not a provider token, and is meaningless to any other
//! provider, which is fine because thinking only ever returns to the provider that made it.
//!
//! The decoder waits for `[DONE]` (or the end of the body) before its terminal event, because
//! the usage chunk comes after the chunk that carries `finish_reason`.
//!
//! Chunks are read into typed views whose strings borrow from the event (a delta's text is
//! copied once, into its stream event), not into a [`Value`] tree. That reading is strict: a
//! field of an unexpected type fails it, and the chunk is then parsed again as a [`Value`]
//! and viewed leniently, a mistyped field counting as absent, which is how the decoder always
//! treated such fields. Both readings decode alike every chunk the strict one accepts (a
//! property test holds them to it), so there is one handling path; the price is a second
//! parse of the odd chunk with a mistyped field. Rare parts (errors, usage) stay JSON values.
//!
//! This file holds the encoder and what the encoder and decoder share ([`ReasoningField`], the
//! `<think>` tags); the decoder's pieces are submodules: [`decoder`] (the stream state
//! machine), [`chunk`] (the typed views of a chunk), [`reader`] (the strict in-place JSON
//! reader, shared with the Responses decoder) and [`think_tags`] (the `<think>` splitter).

mod chunk;
mod decoder;
mod reader;
mod think_tags;

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use keel_protocol::{
    AssistantMessage, ContentBlock, ImageBlock, Message, ToolDefinition, ToolResultMessage,
    UserMessage,
};
use serde_json::{Map, Value, json};

use super::encode_cache::{EncodeCache, to_json};
use super::{Spliced, WireRequest};
use crate::model::ModelEntry;
use crate::request::{CacheRetention, LlmRequest, ThinkingLevel};

pub use decoder::CompletionsDecoder;
pub(super) use decoder::count;
pub(super) use reader::{Fields, Object, Str, non_null, read_object, skip};

// What the tests reach through `use super::*` that this file itself does not use.
#[cfg(test)]
use super::{Decoder, cut_stream, malformed};
#[cfg(test)]
use crate::sse::SseEvent;
#[cfg(test)]
use chunk::Chunk;
#[cfg(test)]
use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};
#[cfg(test)]
use think_tags::ThinkTagSplitter;

/// The API's stable name.
const API: &str = "openai-completions";

/// The inline reasoning tags some servers put in the content.
const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Builds the request for `model`.
pub fn build(model: &ModelEntry, request: &LlmRequest, api_key: Option<&str>) -> WireRequest {
    let mut wire = build_without_messages(model, request, api_key);
    if let Value::Object(body) = &mut wire.body {
        body.insert("messages".into(), Value::Array(encode_messages(request)));
        if !request.tools.is_empty() {
            body.insert("tools".into(), encode_tools(&request.tools));
        }
    }
    wire
}

/// Builds the same request as [`build`], taking the wire JSON of messages sent before from
/// `cache` instead of encoding them again.
pub fn build_cached(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
    cache: &EncodeCache,
) -> WireRequest {
    let mut wire = build_without_messages(model, request, api_key);
    let mut members = Vec::new();
    if !request.tools.is_empty() {
        members.push(("tools", cache.tools(&request.tools, encode_tools)));
    }
    wire.spliced = Some(Spliced {
        key: "messages",
        items: encode_messages_cached(request, cache),
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
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
        })
        .collect()
}

/// Everything of the request but its `messages` and `tools`.
fn build_without_messages(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
) -> WireRequest {
    let options = &request.options;
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("stream".into(), json!(true));
    if !model.compat.no_stream_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let max_tokens = options.max_tokens.unwrap_or(model.max_output);
    let max_key = if model.compat.max_completion_tokens {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(max_key.into(), json!(max_tokens));
    if let Some(temperature) = options.temperature.and_then(super::temperature_value) {
        body.insert("temperature".into(), temperature);
    }
    if model.capabilities.reasoning
        && let Some(effort) = options.thinking.and_then(reasoning_effort)
    {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if model.compat.reasoning_split {
        body.insert("reasoning_split".into(), json!(true));
    }
    if model.provider == "openai" {
        insert_cache_options(&mut body, request);
    }
    WireRequest {
        url: format!("{}/chat/completions", model.base_url.trim_end_matches('/')),
        headers: bearer_headers(model, request, api_key),
        body: Value::Object(body),
        spliced: None,
    }
}

/// Adds OpenAI's prompt-cache routing key and retention, unless caching is off.
pub(super) fn insert_cache_options(body: &mut Map<String, Value>, request: &LlmRequest) {
    let retention = request.options.cache_retention;
    if retention == Some(CacheRetention::None) {
        return;
    }
    if let Some(session) = &request.options.session_id {
        body.insert("prompt_cache_key".into(), json!(session));
    }
    if retention == Some(CacheRetention::Long) {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
}

/// Headers for an API that takes `authorization: Bearer`: content type, the key when there
/// is one (local servers need none), then the model's and the call's headers, later ones
/// replacing earlier ones of the same name.
pub(super) fn bearer_headers(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
) -> Vec<(String, String)> {
    let own = api_key.map(|key| ("authorization".to_owned(), format!("Bearer {key}")));
    super::request_headers(model, request, own.into_iter().collect())
}

/// The effort name both OpenAI APIs use, or `None` when reasoning is off.
pub(super) fn reasoning_effort(level: ThinkingLevel) -> Option<&'static str> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some("minimal"),
        ThinkingLevel::Low => Some("low"),
        ThinkingLevel::Medium => Some("medium"),
        ThinkingLevel::High => Some("high"),
    }
}

/// An image as a `data:` URL.
pub(super) fn data_url(image: &ImageBlock) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
    format!("data:{};base64,{data}", image.mime_type)
}

/// Tool-call arguments as the JSON string both OpenAI APIs expect. Arguments kept verbatim
/// as a string (they did not parse) are sent as that string, not re-encoded.
pub(super) fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The text blocks of `content` joined by newlines.
pub(super) fn joined_text(content: &[ContentBlock]) -> String {
    let mut text = String::new();
    for block in content.iter().filter_map(ContentBlock::as_text) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(block);
    }
    text
}

/// The images of `content`.
pub(super) fn images(content: &[ContentBlock]) -> impl Iterator<Item = &ImageBlock> {
    content.iter().filter_map(|block| match block {
        ContentBlock::Image(image) => Some(image),
        _ => None,
    })
}

/// The caption put before the images of a tool result, which travel in a user message
/// because tool outputs take text only.
pub(super) fn tool_images_caption(result: &ToolResultMessage) -> String {
    format!(
        "Images returned by tool call {} ({}):",
        result.tool_call_id, result.tool_name
    )
}

fn encode_messages(request: &LlmRequest) -> Vec<Value> {
    walk(
        request,
        |message, images| encode_message(message, images),
        |value| value,
    )
}

/// [`encode_messages`] as serialized items, each message's taken from `cache` when it was
/// encoded before. A tool result with images also feeds the images message that follows its
/// run, so it is encoded each time.
fn encode_messages_cached(request: &LlmRequest, cache: &EncodeCache) -> Vec<Bytes> {
    let items = |message: &Arc<Message>, tool_images: &mut Vec<Value>| -> Vec<Bytes> {
        let with_images = match &**message {
            Message::ToolResult(result) => images(&result.content).next().is_some(),
            _ => false,
        };
        if with_images {
            encode_message(message, tool_images)
                .iter()
                .map(to_json)
                .collect()
        } else {
            cache
                .items(message, || encode_message(message, &mut Vec::new()))
                .to_vec()
        }
    };
    walk(request, items, |value| to_json(&value))
}

/// The conversation as wire items: the system prompt, then each message's `items`. Images
/// from a run of tool results are sent as one user message after the run: a user message
/// between tool messages would split the answers to one assistant message.
fn walk<T>(
    request: &LlmRequest,
    mut items: impl FnMut(&Arc<Message>, &mut Vec<Value>) -> Vec<T>,
    item: impl Fn(Value) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system_prompt.is_empty() {
        out.push(item(
            json!({"role": "system", "content": &*request.system_prompt}),
        ));
    }
    let mut tool_images: Vec<Value> = Vec::new();
    for message in request.messages.iter() {
        if !matches!(**message, Message::ToolResult(_)) && !tool_images.is_empty() {
            let parts = std::mem::take(&mut tool_images);
            out.push(item(json!({"role": "user", "content": parts})));
        }
        out.extend(items(message, &mut tool_images));
    }
    if !tool_images.is_empty() {
        out.push(item(json!({"role": "user", "content": tool_images})));
    }
    out
}

/// The wire messages of one message (none for host messages, or an assistant message with
/// nothing to send); images of a tool result go to `tool_images`.
fn encode_message(message: &Message, tool_images: &mut Vec<Value>) -> Vec<Value> {
    match message {
        Message::User(user) => vec![encode_user(user)],
        Message::Assistant(assistant) => encode_assistant(assistant).into_iter().collect(),
        Message::ToolResult(result) => {
            let mut text = joined_text(&result.content);
            let mut pictures = images(&result.content).peekable();
            if pictures.peek().is_some() {
                tool_images.push(json!({"type": "text", "text": tool_images_caption(result)}));
                tool_images.extend(pictures.map(image_part));
                if text.is_empty() {
                    text.push_str("(image output follows)");
                }
            }
            vec![json!({
                "role": "tool",
                "tool_call_id": result.tool_call_id.as_str(),
                "content": text,
            })]
        }
        // Host messages never reach a model.
        _ => Vec::new(),
    }
}

fn image_part(image: &ImageBlock) -> Value {
    json!({"type": "image_url", "image_url": {"url": data_url(image)}})
}

fn encode_user(user: &UserMessage) -> Value {
    if images(&user.content).next().is_none() {
        return json!({"role": "user", "content": joined_text(&user.content)});
    }
    let parts: Vec<Value> = user
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
            ContentBlock::Image(image) => Some(image_part(image)),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": parts})
}

/// An assistant message, or `None` when nothing of it can be sent (no text, no calls).
///
/// The content is a string, unless the message holds reasoning a server sent as thinking
/// parts: then it is the list of parts in the message's order, the shape that server reads
/// back.
fn encode_assistant(assistant: &AssistantMessage) -> Option<Value> {
    let mut content = String::new();
    let mut parts: Vec<Value> = Vec::new();
    let mut has_thinking_parts = false;
    let mut tool_calls = Vec::new();
    let mut reasoning_fields: Vec<(ReasoningField, String)> = Vec::new();
    for block in &assistant.content {
        match block {
            ContentBlock::Text(text) => {
                content.push_str(&text.text);
                push_text_part(&mut parts, &text.text);
            }
            ContentBlock::ToolCall(call) => tool_calls.push(json!({
                "id": call.id.as_str(),
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_string(&call.arguments)},
            })),
            ContentBlock::Thinking(thinking) => {
                let Some(field) = thinking
                    .signature
                    .as_deref()
                    .and_then(ReasoningField::parse)
                else {
                    continue;
                };
                match field {
                    ReasoningField::ThinkTags => {
                        let tagged = format!("{THINK_OPEN}{}{THINK_CLOSE}", thinking.thinking);
                        content.push_str(&tagged);
                        push_text_part(&mut parts, &tagged);
                    }
                    ReasoningField::ThinkingParts => {
                        has_thinking_parts = true;
                        parts.push(json!({
                            "type": "thinking",
                            "thinking": [{"type": "text", "text": thinking.thinking}],
                        }));
                    }
                    ReasoningField::Content
                    | ReasoningField::Reasoning
                    | ReasoningField::Details => {
                        match reasoning_fields.iter_mut().find(|(f, _)| *f == field) {
                            Some((_, text)) => text.push_str(&thinking.thinking),
                            None => reasoning_fields.push((field, thinking.thinking.clone())),
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if content.is_empty() && tool_calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        if has_thinking_parts {
            Value::Array(parts)
        } else if content.is_empty() {
            Value::Null
        } else {
            Value::String(content)
        },
    );
    if !tool_calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    for (field, text) in reasoning_fields {
        let value = match field {
            ReasoningField::Details => json!([{"type": "reasoning.text", "text": text}]),
            _ => Value::String(text),
        };
        message.insert(field.as_str().into(), value);
    }
    Some(Value::Object(message))
}

/// Appends `text` to the content parts: to the text part at their end, else as a new one.
fn push_text_part(parts: &mut Vec<Value>, text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(Value::Object(last)) = parts.last_mut()
        && last.get("type").and_then(Value::as_str) == Some("text")
        && let Some(Value::String(held)) = last.get_mut("text")
    {
        held.push_str(text);
        return;
    }
    parts.push(json!({"type": "text", "text": text}));
}

/// Where a server put its reasoning. The name is the thinking block's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReasoningField {
    /// `reasoning_content` (DeepSeek, vLLM, llama.cpp).
    Content,
    /// `reasoning` (OpenRouter, Ollama).
    Reasoning,
    /// `reasoning_details` text items (MiniMax `reasoning_split`).
    Details,
    /// Inline `<think>` tags in the content (MiniMax, local reasoning models).
    ThinkTags,
    /// `thinking` parts of a content list (Mistral's Magistral models).
    ThinkingParts,
}

impl ReasoningField {
    fn as_str(self) -> &'static str {
        match self {
            Self::Content => "reasoning_content",
            Self::Reasoning => "reasoning",
            Self::Details => "reasoning_details",
            Self::ThinkTags => "think_tags",
            Self::ThinkingParts => "thinking_parts",
        }
    }

    fn parse(signature: &str) -> Option<Self> {
        [
            Self::Content,
            Self::Reasoning,
            Self::Details,
            Self::ThinkTags,
            Self::ThinkingParts,
        ]
        .into_iter()
        .find(|field| field.as_str() == signature)
    }
}

#[cfg(test)]
#[path = "openai_completions_tests.rs"]
mod tests;
