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
//! signature Gemini puts on any part is attached to the thinking block that is open when it
//! arrives (the one the part closes). Gemini 3 requires the signature back on the first
//! function call of a step, so the encoder also repeats a thinking block's signature on a
//! function call that directly follows it.
//!
//! Decoding is on the hot path (one chunk per streamed delta), so the usual chunk is read
//! in place into a flat value whose strings borrow from the event data: a one-part chunk
//! costs one allocation, the delta's own text (with serde_json's unescaping buffer when it
//! has escapes). The derived `Chunk` stays the reference reading, used for whatever the
//! in-place reading does not take.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use keel_protocol::{
    ContentBlock, ErrorCode, ErrorInfo, Message, ResponseMeta, StopReason, StreamEvent, ToolCallId,
    ToolResultMessage, Usage,
};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::{Decoder, WireRequest, cut_stream, malformed};
use crate::errors::classify;
use crate::model::ModelEntry;
use crate::request::{LlmRequest, ThinkingLevel};
use crate::sse::SseEvent;

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
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                })
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mut config = Map::new();
    config.insert(
        "maxOutputTokens".into(),
        json!(options.max_tokens.unwrap_or(model.max_output)),
    );
    if let Some(temperature) = options.temperature {
        config.insert("temperature".into(), json!(f32_to_f64(temperature)));
    }
    if model.capabilities.reasoning
        && let Some(level) = options.thinking
    {
        config.insert("thinkingConfig".into(), thinking_config(level));
    }
    body.insert("generationConfig".into(), Value::Object(config));

    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(key) = api_key {
        set_header(&mut headers, "x-goog-api-key", key);
    }
    for (name, value) in model.headers.iter().chain(&options.headers) {
        set_header(&mut headers, name, value);
    }

    WireRequest {
        url: format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            model.base_url.trim_end_matches('/'),
            model.id
        ),
        headers,
        body: Value::Object(body),
    }
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
        let (role, parts) = match &**message {
            Message::User(user) => ("user", user.content.iter().filter_map(user_part).collect()),
            Message::Assistant(assistant) => ("model", model_parts(&assistant.content)),
            _ => continue,
        };
        if !parts.is_empty() {
            out.push(json!({"role": role, "parts": parts}));
        }
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
    let mut parts = Vec::with_capacity(content.len());
    // The signature of the thinking block just before, for a function call that follows it.
    let mut pending_signature: Option<&str> = None;
    for block in content {
        match block {
            ContentBlock::Thinking(thinking) => {
                // Unsigned or redacted thinking cannot be replayed: leave it out.
                pending_signature = None;
                if let Some(signature) = thinking.signature.as_deref()
                    && !thinking.redacted
                {
                    parts.push(json!({
                        "text": thinking.thinking,
                        "thought": true,
                        "thoughtSignature": signature,
                    }));
                    pending_signature = Some(signature);
                }
            }
            ContentBlock::Text(text) => {
                pending_signature = None;
                if !text.text.is_empty() {
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

/// Sets a header, replacing any earlier one of the same name (names are case-insensitive).
fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), value.to_owned()));
}

/// `f32` to JSON without the binary noise of a plain widening (`0.7` stays `0.7`).
fn f32_to_f64(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

/// One streamed `GenerateContentResponse` (or an error object), as serde reads it. This
/// is the reference reading: [`Flat::read_in_place`] takes the usual chunk faster, and
/// everything it leaves goes through here.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default, borrow)]
    candidates: Vec<Candidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    model_version: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    response_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default, borrow)]
    error: Option<WireError<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default, borrow)]
    content: Option<WireContent<'a>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    finish_message: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct WireContent<'a> {
    #[serde(default, borrow)]
    parts: Vec<Part<'a>>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed")]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: bool,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    thought_signature: Option<Cow<'a, str>>,
    /// Boxed to keep the usual text part small: parts are moved as they are read.
    #[serde(default, borrow)]
    function_call: Option<Box<FunctionCall<'a>>>,
}

#[derive(Debug, PartialEq, Deserialize)]
struct FunctionCall<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed")]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed")]
    block_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, PartialEq, Deserialize)]
struct WireError<'a> {
    #[serde(default, borrow)]
    message: Cow<'a, str>,
    #[serde(default, borrow)]
    status: Cow<'a, str>,
}

/// A string borrowed from the data when it has no escapes.
#[derive(Deserialize)]
#[serde(transparent)]
struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

/// An optional [`Borrowed`] string. (A plain `Option<Cow<str>>` field always copies:
/// serde borrows only a bare `Cow` field.)
fn borrowed<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    Ok(Option::<Borrowed<'a>>::deserialize(deserializer)?.map(|text| text.0))
}

/// What the decoder uses from one chunk: the chunk's own fields and the first candidate's
/// parts and finish (one candidate is requested; any others are ignored).
#[derive(Debug, Default, PartialEq)]
struct Flat<'a> {
    /// The first part, held inline: nearly every chunk has exactly one.
    first_part: Option<Part<'a>>,
    more_parts: Vec<Part<'a>>,
    finish_reason: Option<Cow<'a, str>>,
    finish_message: Option<Cow<'a, str>>,
    usage_metadata: Option<UsageMetadata>,
    model_version: Option<Cow<'a, str>>,
    response_id: Option<Cow<'a, str>>,
    prompt_feedback: Option<PromptFeedback<'a>>,
    error: Option<WireError<'a>>,
}

impl<'a> From<Chunk<'a>> for Flat<'a> {
    fn from(chunk: Chunk<'a>) -> Self {
        let mut flat = Flat {
            usage_metadata: chunk.usage_metadata,
            model_version: chunk.model_version,
            response_id: chunk.response_id,
            prompt_feedback: chunk.prompt_feedback,
            error: chunk.error,
            ..Flat::default()
        };
        if let Some(candidate) = chunk.candidates.into_iter().next() {
            flat.finish_reason = candidate.finish_reason;
            flat.finish_message = candidate.finish_message;
            for part in candidate
                .content
                .into_iter()
                .flat_map(|content| content.parts)
            {
                flat.push_part(part);
            }
        }
        flat
    }
}

impl<'a> Flat<'a> {
    /// Reads `data` with the first candidate's fields written straight into `self`. Read
    /// as a [`Chunk`], every level of the nesting (chunk, candidate, content, part) is
    /// built and then moved into the level above, a cost paid on every chunk.
    ///
    /// It takes only the usual shape, each struct a JSON object with every known key once,
    /// and returns `false` for anything else (the caller then reads a [`Chunk`], which
    /// decides what it means). Where it returns `true`, `self` is what `From<Chunk>` gives.
    fn read_in_place(&mut self, data: &'a str) -> bool {
        let mut deserializer = serde_json::Deserializer::from_str(data);
        deserializer.deserialize_map(InPlace::Chunk(self)).is_ok() && deserializer.end().is_ok()
    }

    fn push_part(&mut self, part: Part<'a>) {
        if self.first_part.is_none() && self.more_parts.is_empty() {
            self.first_part = Some(part);
        } else {
            self.more_parts.push(part);
        }
    }

    fn parts(&mut self) -> impl Iterator<Item = Part<'a>> + use<'a> {
        self.first_part
            .take()
            .into_iter()
            .chain(std::mem::take(&mut self.more_parts))
    }
}

/// The levels of a chunk [`Flat::read_in_place`] walks, each writing into the [`Flat`].
enum InPlace<'f, 'a> {
    /// The chunk object.
    Chunk(&'f mut Flat<'a>),
    /// `candidates`: the first is read in place, the rest are read as [`Candidate`]s
    /// (so they fail where a `Chunk` would) and dropped.
    Candidates(&'f mut Flat<'a>),
    /// The first candidate.
    Candidate(&'f mut Flat<'a>),
    /// Its `content`, which may be `null`.
    Content(&'f mut Flat<'a>),
    /// Its `parts`.
    Parts(&'f mut Flat<'a>),
}

/// Fails the in-place reading (the message is never shown: the caller reads again).
fn decline<E: serde::de::Error>() -> E {
    E::custom("not the usual chunk shape")
}

/// Marks a known key seen; a repeated one declines, as a derived struct rejects it.
fn first_time<E: serde::de::Error>(seen: &mut u8, key: u8) -> Result<(), E> {
    if *seen & key != 0 {
        return Err(decline());
    }
    *seen |= key;
    Ok(())
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for InPlace<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self {
            Self::Chunk(_) | Self::Candidate(_) => deserializer.deserialize_map(self),
            Self::Candidates(_) | Self::Parts(_) => deserializer.deserialize_seq(self),
            Self::Content(_) => deserializer.deserialize_option(self),
        }
    }
}

impl<'de: 'a, 'a> Visitor<'de> for InPlace<'_, 'a> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("the usual Gemini chunk")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0u8;
        // Keys are borrowed: one with an escape fails here and is left to `Chunk`.
        match self {
            Self::Chunk(flat) => {
                while let Some(key) = map.next_key::<&'de str>()? {
                    match key {
                        "candidates" => {
                            first_time(&mut seen, 1)?;
                            map.next_value_seed(InPlace::Candidates(flat))?;
                        }
                        "usageMetadata" => {
                            first_time(&mut seen, 2)?;
                            flat.usage_metadata = map.next_value()?;
                        }
                        "modelVersion" => {
                            first_time(&mut seen, 4)?;
                            flat.model_version =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        "responseId" => {
                            first_time(&mut seen, 8)?;
                            flat.response_id =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        "promptFeedback" => {
                            first_time(&mut seen, 16)?;
                            flat.prompt_feedback = map.next_value()?;
                        }
                        "error" => {
                            first_time(&mut seen, 32)?;
                            flat.error = map.next_value()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
            Self::Candidate(flat) => {
                while let Some(key) = map.next_key::<&'de str>()? {
                    match key {
                        "content" => {
                            first_time(&mut seen, 1)?;
                            map.next_value_seed(InPlace::Content(flat))?;
                        }
                        "finishReason" => {
                            first_time(&mut seen, 2)?;
                            flat.finish_reason =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        "finishMessage" => {
                            first_time(&mut seen, 4)?;
                            flat.finish_message =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
            Self::Content(flat) => {
                while let Some(key) = map.next_key::<&'de str>()? {
                    if key == "parts" {
                        first_time(&mut seen, 1)?;
                        map.next_value_seed(InPlace::Parts(flat))?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Self::Candidates(_) | Self::Parts(_) => return Err(decline()),
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        match self {
            Self::Candidates(flat) => {
                if seq.next_element_seed(InPlace::Candidate(flat))?.is_some() {
                    while seq.next_element::<Candidate<'a>>()?.is_some() {}
                }
            }
            Self::Parts(flat) => {
                while let Some(part) = seq.next_element()? {
                    flat.push_part(part);
                }
            }
            _ => return Err(decline()),
        }
        Ok(())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        match self {
            Self::Content(_) => Ok(()),
            _ => Err(decline()),
        }
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self {
            Self::Content(_) => deserializer.deserialize_map(self),
            _ => Err(decline()),
        }
    }
}

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
    call_prefix: String,
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
        // after the text opens it; on any other part it goes to the thinking block the part
        // is about to close.
        if !thought_text {
            self.sign(signature.take());
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

#[cfg(test)]
#[path = "google_tests.rs"]
mod tests;
