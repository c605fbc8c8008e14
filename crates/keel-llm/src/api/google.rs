//! Google Generative AI (`google-generative-ai`, Gemini): request encoding and stream
//! decoding.
//!
//! Gemini streams whole `GenerateContentResponse` chunks with no block indexes and no end
//! event. The decoder keeps at most one open text or thinking block: a part of the same kind
//! extends it, a part of another kind closes it. Function calls arrive whole and become a
//! complete tool call at once. The terminal event is emitted by `finish()` at the end of the
//! body, not at the chunk that carries `finishReason`, because usage may arrive after it;
//! a body that ends without any `finishReason` was cut short.
//!
//! Thought signatures: keel's content blocks carry a signature only on thinking blocks, so a
//! signature Gemini puts on a call or text part is attached to the unsigned thinking block
//! that is open when it arrives (the one the part closes). With none open, it is kept in an
//! empty signed thinking block: before a function call for the call's signature, after the
//! text for a text part's (Gemini signs the last part of a text answer and asks for it back
//! on that part). The encoder repeats a thinking block's signature on a function call that
//! directly follows it (Gemini 3 requires it on the first call of a step), and puts an empty
//! block's signature back on the text just before it when no call follows. The one shape
//! this cannot tell apart, a signed text part directly followed by an unsigned call, sends
//! the signature on the call; Gemini signs every step's first call, so it does not occur.
//!
//! Decoding is on the hot path (one chunk per streamed delta), so the usual chunk is read
//! in place into a flat value whose strings borrow from the event data: a one-part chunk
//! costs one allocation, the delta's own text (with serde_json's unescaping buffer when it
//! has escapes). The derived `Chunk` stays the reference reading, used for whatever the
//! in-place reading does not take.
//!
//! This file holds the encoder; the decoder's pieces are submodules: [`wire`] (the chunk as
//! serde reads it, the reference reading), [`flat`] (the flat view the decoder uses and its
//! in-place fast path) and [`decoder`] (the stream state machine).

mod decoder;
mod flat;
mod wire;

use std::sync::Arc;

use base64::Engine as _;
use keel_protocol::{ContentBlock, Message, ToolDefinition, ToolResultMessage};
use serde_json::{Map, Value, json};

use super::encode_cache::{EncodeCache, to_json};
use super::{Spliced, WireRequest};
use crate::model::ModelEntry;
use crate::request::{LlmRequest, ThinkingLevel};

pub use decoder::GoogleDecoder;

// What the tests reach through `use super::*` that this file itself does not use.
#[cfg(test)]
use super::{Decoder, cut_stream, malformed};
#[cfg(test)]
use flat::Flat;
#[cfg(test)]
use keel_protocol::{ErrorCode, ErrorInfo, ResponseMeta, StopReason, StreamEvent, Usage};
#[cfg(test)]
use wire::Chunk;

/// The API's stable name.
const API: &str = "google-generative-ai";

/// Builds the request for `POST {base_url}/v1beta/models/{id}:streamGenerateContent`.
pub fn build(model: &ModelEntry, request: &LlmRequest, api_key: Option<&str>) -> WireRequest {
    let options = &request.options;
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(encode_messages(&request.messages)),
    );
    if !request.system_prompt.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": &*request.system_prompt}]}),
        );
    }
    if !request.tools.is_empty() {
        body.insert("tools".into(), encode_tools(&request.tools));
    }
    let mut config = Map::new();
    config.insert(
        "maxOutputTokens".into(),
        json!(options.max_tokens.unwrap_or(model.max_output)),
    );
    if let Some(value) = options.temperature.and_then(super::temperature_value) {
        config.insert("temperature".into(), value);
    }
    if model.capabilities.reasoning
        && let Some(level) = options.thinking
    {
        config.insert("thinkingConfig".into(), thinking_config(level));
    }
    body.insert("generationConfig".into(), Value::Object(config));

    let own = api_key.map(|key| ("x-goog-api-key".to_owned(), key.to_owned()));
    let headers = super::request_headers(model, request, own.into_iter().collect());

    WireRequest {
        url: format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            model.base_url.trim_end_matches('/'),
            model.id
        ),
        headers,
        body: Value::Object(body),
        spliced: None,
    }
}

/// Builds the same request as [`build`], taking the wire JSON of messages sent before from
/// `cache`; the system instruction and tools come before the contents.
pub fn build_cached(
    model: &ModelEntry,
    request: &LlmRequest,
    api_key: Option<&str>,
    cache: &EncodeCache,
) -> WireRequest {
    let mut wire = super::bare_wire(build, model, request, api_key, "contents");
    let mut members = Vec::new();
    if !request.system_prompt.is_empty() {
        members.push((
            "systemInstruction",
            to_json(&json!({"parts": [{"text": &*request.system_prompt}]})),
        ));
    }
    if !request.tools.is_empty() {
        members.push(("tools", cache.tools(&request.tools, encode_tools)));
    }
    let mut fragments = super::Fragments::default();
    for message in request.messages.iter() {
        match &**message {
            Message::ToolResult(result) => {
                let parts = cache.items(message, || {
                    let mut parts = Vec::new();
                    push_tool_result(result, &mut parts);
                    parts
                });
                fragments.group(br#"{"parts":["#, &parts);
            }
            _ => fragments
                .message(&cache.items(message, || encode_content(message).into_iter().collect())),
        }
    }
    wire.spliced = Some(Spliced {
        key: "contents",
        items: fragments.finish(),
        members,
        joined: true,
    });
    cache.forget_dropped();
    wire
}

/// The `tools` member.
fn encode_tools(tools: &[ToolDefinition]) -> Value {
    let declarations: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            })
        })
        .collect();
    json!([{"functionDeclarations": declarations}])
}

/// A user or model message as one content, when it has parts.
fn encode_content(message: &Message) -> Option<Value> {
    let (role, parts): (&str, Vec<Value>) = match message {
        Message::User(user) => ("user", user.content.iter().filter_map(user_part).collect()),
        Message::Assistant(assistant) => ("model", model_parts(&assistant.content)),
        _ => return None,
    };
    (!parts.is_empty()).then(|| json!({"role": role, "parts": parts}))
}

fn thinking_config(level: ThinkingLevel) -> Value {
    let budget = match level {
        ThinkingLevel::Off => return json!({"thinkingBudget": 0}),
        ThinkingLevel::Minimal => 512,
        ThinkingLevel::Low => 1024,
        ThinkingLevel::Medium => 8192,
        ThinkingLevel::High => 24_576,
    };
    json!({"includeThoughts": true, "thinkingBudget": budget})
}

/// Encodes the history. Consecutive tool results become one `user` content.
fn encode_messages(messages: &[Arc<Message>]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut results = Vec::new();
    for message in messages {
        if let Message::ToolResult(result) = &**message {
            push_tool_result(result, &mut results);
            continue;
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "parts": std::mem::take(&mut results)}));
        }
        out.extend(encode_content(message));
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "parts": results}));
    }
    out
}

fn user_part(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text(text) => Some(json!({"text": text.text})),
        ContentBlock::Image(image) => Some(json!({
            "inlineData": {
                "mimeType": image.mime_type,
                "data": base64::engine::general_purpose::STANDARD.encode(&image.data),
            },
        })),
        _ => None,
    }
}

fn model_parts(content: &[ContentBlock]) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::with_capacity(content.len());
    // The signature of the thinking block just before, for a function call that follows it.
    let mut pending_signature: Option<&str> = None;
    // Where in `parts` the text of the block just before went.
    let mut text_before: Option<usize> = None;
    for (at, block) in content.iter().enumerate() {
        let previous_text = text_before.take();
        match block {
            ContentBlock::Thinking(thinking) => {
                // Unsigned or redacted thinking cannot be replayed: leave it out.
                pending_signature = None;
                let Some(signature) = thinking.signature.as_deref().filter(|_| !thinking.redacted)
                else {
                    continue;
                };
                let call_follows = matches!(content.get(at + 1), Some(ContentBlock::ToolCall(_)));
                if !thinking.thinking.is_empty() {
                    parts.push(json!({
                        "text": thinking.thinking,
                        "thought": true,
                        "thoughtSignature": signature,
                    }));
                    pending_signature = Some(signature);
                } else if call_follows {
                    // An empty one only carries the signature of the call after it…
                    pending_signature = Some(signature);
                } else if let Some(Value::Object(part)) =
                    previous_text.and_then(|index| parts.get_mut(index))
                {
                    // …or of the text before it.
                    part.insert("thoughtSignature".into(), json!(signature));
                }
            }
            ContentBlock::Text(text) => {
                pending_signature = None;
                if !text.text.is_empty() {
                    text_before = Some(parts.len());
                    parts.push(json!({"text": text.text}));
                }
            }
            ContentBlock::ToolCall(call) => {
                let mut part = json!({
                    "functionCall": {
                        "name": call.name,
                        "args": call.arguments,
                        "id": call.id.as_str(),
                    },
                });
                if let (Some(signature), Some(fields)) =
                    (pending_signature.take(), part.as_object_mut())
                {
                    fields.insert("thoughtSignature".into(), json!(signature));
                }
                parts.push(part);
            }
            _ => {}
        }
    }
    parts
}

/// A tool result: its `functionResponse` part, then its images as inline data (Gemini's
/// function response carries text only).
fn push_tool_result(result: &ToolResultMessage, parts: &mut Vec<Value>) {
    let text = result.text();
    let response = if result.is_error {
        json!({"error": text})
    } else {
        json!({"output": text})
    };
    parts.push(json!({
        "functionResponse": {
            "name": result.tool_name,
            "id": result.tool_call_id.as_str(),
            "response": response,
        },
    }));
    parts.extend(
        result
            .content
            .iter()
            .filter(|block| matches!(block, ContentBlock::Image(_)))
            .filter_map(user_part),
    );
}

#[cfg(test)]
#[path = "google_tests.rs"]
mod tests;
