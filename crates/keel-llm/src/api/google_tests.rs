//! Fixture tests for `google`.

use super::*;
use crate::assemble::AssistantBuilder;
use crate::model::{Api, Capabilities, Compat, Prices};
use crate::request::{ModelSpec, RequestOptions};
use crate::sse::SseParser;
use keel_protocol::{AssistantMessage, TextBlock, ThinkingBlock, ToolCall, ToolDefinition};
use pretty_assertions::assert_eq;

use super::super::fixtures::{image_tool_step, thinking};

#[path = "google_signature_tests.rs"]
mod signatures;

fn model() -> ModelEntry {
    ModelEntry {
        provider: "google".into(),
        id: "gemini-2.5-pro".into(),
        api: Api::GoogleGenerativeAi,
        base_url: "https://generativelanguage.googleapis.com/".into(),
        context_window: 1_048_576,
        max_output: 65_536,
        prices: Prices::default(),
        capabilities: Capabilities {
            tools: true,
            images: true,
            reasoning: true,
            thinking_levels: Vec::new(),
        },
        compat: Compat::default(),
        headers: Vec::new(),
    }
}

fn request(messages: Vec<Message>, options: RequestOptions) -> LlmRequest {
    LlmRequest {
        model: Arc::new(ModelSpec::scripted()),
        system_prompt: Arc::from("You are keel."),
        messages: Arc::new(messages.into_iter().map(Arc::new).collect()),
        tools: Arc::from(Vec::<ToolDefinition>::new()),
        options,
    }
}

/// Feeds SSE data lines through the parser and a decoder, then `finish()`.
fn decode(datas: &[&str]) -> Vec<StreamEvent> {
    let fixture: String = datas
        .iter()
        .map(|data| format!("data: {data}\r\n\r\n"))
        .collect();
    let mut parser = SseParser::new();
    let mut sse = Vec::new();
    parser.feed(fixture.as_bytes(), &mut sse);
    let mut decoder = GoogleDecoder::new(&model());
    decoder.call_prefix = "gen".into();
    let mut out = Vec::new();
    for event in &sse {
        decoder.event(event, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fn fold(events: &[StreamEvent]) -> AssistantMessage {
    let mut builder = AssistantBuilder::new();
    for event in events {
        builder.apply(event).unwrap();
    }
    let mut message = builder.finish();
    message.timestamp = 0;
    message
}

fn start(id: &str) -> StreamEvent {
    StreamEvent::Start {
        meta: ResponseMeta {
            provider: "google".into(),
            api: "google-generative-ai".into(),
            model: "gemini-2.5-pro".into(),
            response_id: Some(id.into()),
        },
    }
}

fn text(s: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock { text: s.into() })
}

#[test]
fn text_only() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 1,"totalTokenCount": 9},"modelVersion": "gemini-2.5-pro","responseId": "resp-1"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": ", world"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 3,"totalTokenCount": 11},"modelVersion": "gemini-2.5-pro","responseId": "resp-1"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 4,"totalTokenCount": 12},"modelVersion": "gemini-2.5-pro","responseId": "resp-1"}"#,
    ]);
    let usage = Usage {
        input: 8,
        output: 4,
        ..Usage::default()
    };
    assert_eq!(
        events,
        vec![
            start("resp-1"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "Hello".into()
            },
            StreamEvent::TextDelta {
                index: 0,
                delta: ", world".into()
            },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage
            },
        ]
    );
    assert_eq!(
        fold(&events),
        AssistantMessage {
            content: vec![text("Hello, world")],
            stop_reason: StopReason::Stop,
            usage,
            provider: "google".into(),
            api: "google-generative-ai".into(),
            model: "gemini-2.5-pro".into(),
            response_id: Some("resp-1".into()),
            error: None,
            timestamp: 0,
        }
    );
}

#[test]
fn thinking_with_signature_then_text_and_usage_with_cache_and_reasoning() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "**Planning**\n", "thought": true}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-2"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "Add them.", "thought": true}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-2"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "It is ", "thoughtSignature": "CiQB0e2Kb"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-2"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "4."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1200,"cachedContentTokenCount": 1000,"candidatesTokenCount": 5,"thoughtsTokenCount": 70,"totalTokenCount": 1275},"modelVersion": "gemini-2.5-pro","responseId": "resp-2"}"#,
    ]);
    assert_eq!(
        events,
        vec![
            start("resp-2"),
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "**Planning**\n".into()
            },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "Add them.".into()
            },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some("CiQB0e2Kb".into()),
                redacted: false
            },
            StreamEvent::TextStart { index: 1 },
            StreamEvent::TextDelta {
                index: 1,
                delta: "It is ".into()
            },
            StreamEvent::TextDelta {
                index: 1,
                delta: "4.".into()
            },
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage {
                    input: 200,
                    output: 75,
                    cache_read: 1000,
                    reasoning: 70,
                    ..Usage::default()
                }
            },
        ]
    );
    assert_eq!(
        fold(&events).content,
        vec![
            ContentBlock::Thinking(ThinkingBlock {
                thinking: "**Planning**\nAdd them.".into(),
                signature: Some("CiQB0e2Kb".into()),
                redacted: false,
            }),
            text("It is 4."),
        ]
    );
}

/// A thought keeps its own signature; the answer's signature (on an empty last part) is
/// kept after the text it ends, for the encoder to send back on that text. It used to be
/// dropped.
#[test]
fn a_signature_on_a_thought_part_and_one_on_the_answer() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Hm.", "thought": true, "thoughtSignature": "own"}],"role": "model"},"index": 0}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "Done."}, {"text": "", "thoughtSignature": "answer"}],"role": "model"},"finishReason": "STOP","index": 0}]}"#,
    ]);
    let start = StreamEvent::Start {
        meta: ResponseMeta {
            provider: "google".into(),
            api: "google-generative-ai".into(),
            model: "gemini-2.5-pro".into(),
            response_id: None,
        },
    };
    assert_eq!(
        events,
        vec![
            start,
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "Hm.".into()
            },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some("own".into()),
                redacted: false
            },
            StreamEvent::TextStart { index: 1 },
            StreamEvent::TextDelta {
                index: 1,
                delta: "Done.".into()
            },
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::ThinkingStart { index: 2 },
            StreamEvent::ThinkingEnd {
                index: 2,
                signature: Some("answer".into()),
                redacted: false
            },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
    let req = request(
        vec![Message::user_text("go"), Message::Assistant(fold(&events))],
        RequestOptions::default(),
    );
    assert_eq!(
        build(&model(), &req, None).body["contents"][1]["parts"],
        json!([
            {"text": "Hm.", "thought": true, "thoughtSignature": "own"},
            {"text": "Done.", "thoughtSignature": "answer"},
        ])
    );
}

#[test]
fn several_function_calls_arrive_whole_and_stop_becomes_tool_use() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Checking", "thought": true}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-3"}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "read", "args": {"path": "a.rs"}}, "thoughtSignature": "sig-fc"}, {"functionCall": {"id": "fc-2", "name": "bash", "args": {"command": "ls"}}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-3"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "Running both."}, {"functionCall": {"name": "noop"}}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 50,"candidatesTokenCount": 30,"totalTokenCount": 80},"modelVersion": "gemini-2.5-pro","responseId": "resp-3"}"#,
    ]);
    assert_eq!(
        events,
        vec![
            start("resp-3"),
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "Checking".into()
            },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some("sig-fc".into()),
                redacted: false
            },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "gen-1".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallDelta {
                index: 1,
                delta: r#"{"path":"a.rs"}"#.into()
            },
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::ToolCallStart {
                index: 2,
                id: "fc-2".into(),
                name: "bash".into()
            },
            StreamEvent::ToolCallDelta {
                index: 2,
                delta: r#"{"command":"ls"}"#.into()
            },
            StreamEvent::ToolCallEnd { index: 2 },
            StreamEvent::TextStart { index: 3 },
            StreamEvent::TextDelta {
                index: 3,
                delta: "Running both.".into()
            },
            StreamEvent::TextEnd { index: 3 },
            StreamEvent::ToolCallStart {
                index: 4,
                id: "gen-3".into(),
                name: "noop".into()
            },
            StreamEvent::ToolCallDelta {
                index: 4,
                delta: "{}".into()
            },
            StreamEvent::ToolCallEnd { index: 4 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input: 50,
                    output: 30,
                    ..Usage::default()
                }
            },
        ]
    );
    let message = fold(&events);
    assert_eq!(
        message.tool_calls().cloned().collect::<Vec<_>>(),
        vec![
            ToolCall {
                id: "gen-1".into(),
                name: "read".into(),
                arguments: json!({"path": "a.rs"}),
            },
            ToolCall {
                id: "fc-2".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls"}),
            },
            ToolCall {
                id: "gen-3".into(),
                name: "noop".into(),
                arguments: json!({}),
            },
        ]
    );
}

#[test]
fn generated_call_ids_differ_between_responses() {
    assert_ne!(
        GoogleDecoder::new(&model()).call_prefix,
        GoogleDecoder::new(&model()).call_prefix
    );
}

#[test]
fn error_object_mid_stream_closes_the_block_and_ends_the_stream() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Partial"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 10,"candidatesTokenCount": 1},"modelVersion": "gemini-2.5-pro","responseId": "resp-4"}"#,
        r#"{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "ignored"}],"role": "model"},"finishReason": "STOP","index": 0}]}"#,
    ]);
    assert_eq!(
        events,
        vec![
            start("resp-4"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "Partial".into()
            },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(
                    ErrorCode::Overloaded,
                    "The model is overloaded. Please try again later."
                ),
                usage: Usage {
                    input: 10,
                    output: 1,
                    ..Usage::default()
                },
            },
        ]
    );
}

#[test]
fn a_body_without_finish_reason_was_cut() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Think", "thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 10,"candidatesTokenCount": 0,"thoughtsTokenCount": 4},"modelVersion": "gemini-2.5-pro","responseId": "resp-5"}"#,
    ]);
    assert_eq!(
        events,
        vec![
            start("resp-5"),
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "Think".into()
            },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: None,
                redacted: false
            },
            cut_stream(Usage {
                input: 10,
                output: 4,
                reasoning: 4,
                ..Usage::default()
            }),
        ]
    );
}

#[test]
fn a_malformed_data_line_ends_the_stream() {
    let bad = r#"{"candidates": [{"content": {"parts": [{"text": "x"#;
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "ok"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-6"}"#,
        bad,
        r#"{"candidates": [{"content": {"parts": [{"text": "ignored"}],"role": "model"},"finishReason": "STOP","index": 0}]}"#,
    ]);
    assert_eq!(
        events,
        vec![
            start("resp-6"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "ok".into()
            },
            StreamEvent::TextEnd { index: 0 },
            malformed(API, serde_json::from_str::<Chunk>(bad).unwrap_err()),
        ]
    );
}

#[test]
fn max_tokens_is_length_and_safety_is_an_error() {
    let body = |reason: &str| {
        decode(&[
            r#"{"candidates": [{"content": {"parts": [{"text": "Once"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "resp-7"}"#,
            &format!(
                r#"{{"candidates": [{{"finishReason": "{reason}","index": 0}}],"usageMetadata": {{"promptTokenCount": 3,"candidatesTokenCount": 2,"thoughtsTokenCount": 10}},"modelVersion": "gemini-2.5-pro","responseId": "resp-7"}}"#
            ),
        ])
    };
    let usage = Usage {
        input: 3,
        output: 12,
        reasoning: 10,
        ..Usage::default()
    };
    let prefix = vec![
        start("resp-7"),
        StreamEvent::TextStart { index: 0 },
        StreamEvent::TextDelta {
            index: 0,
            delta: "Once".into(),
        },
        StreamEvent::TextEnd { index: 0 },
    ];
    let mut length = prefix.clone();
    length.push(StreamEvent::Done {
        stop_reason: StopReason::Length,
        usage,
    });
    assert_eq!(body("MAX_TOKENS"), length);
    let mut safety = prefix;
    safety.push(StreamEvent::Error {
        stop_reason: StopReason::Error,
        error: ErrorInfo::new(
            ErrorCode::Other,
            "Gemini stopped the response with finish reason SAFETY: the response was \
             blocked by the safety filters",
        ),
        usage,
    });
    assert_eq!(body("SAFETY"), safety);
}

#[test]
fn malformed_function_call_and_blocked_prompt_are_errors() {
    let usage = Usage::default();
    let meta = |id: &str| StreamEvent::Start {
        meta: ResponseMeta {
            provider: "google".into(),
            api: "google-generative-ai".into(),
            model: "gemini-2.5-pro".into(),
            response_id: Some(id.into()),
        },
    };
    assert_eq!(
        decode(&[
            r#"{"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL","finishMessage": "Malformed function call: print(","index": 0}],"responseId": "r"}"#
        ]),
        vec![
            meta("r"),
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(
                    ErrorCode::Server,
                    "Gemini stopped the response with finish reason MALFORMED_FUNCTION_CALL: \
                     the model produced a function call that did not parse \
                     (Malformed function call: print()"
                ),
                usage,
            },
        ]
    );
    assert_eq!(
        decode(&[
            r#"{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 7},"responseId": "b"}"#
        ]),
        vec![
            meta("b"),
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(
                    ErrorCode::Other,
                    "Gemini blocked the prompt (block reason PROHIBITED_CONTENT)"
                ),
                usage: Usage {
                    input: 7,
                    ..Usage::default()
                },
            },
        ]
    );
}

fn conversation() -> Vec<Message> {
    image_tool_step(
        ["call-1", "call-2"],
        vec![thinking("unsigned, dropped", None, false)],
        vec![thinking("Read it.", Some("sig-1"), false)],
    )
}

#[test]
fn request_body_with_thinking_tools_images_and_results() {
    let mut req = request(
        conversation(),
        RequestOptions {
            max_tokens: Some(4096),
            temperature: Some(0.7),
            thinking: Some(ThinkingLevel::High),
            // Gemini caches implicitly; the retention option has no wire field.
            cache_retention: Some(crate::request::CacheRetention::Long),
            ..RequestOptions::default()
        },
    );
    req.tools = Arc::from(vec![
        ToolDefinition {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
        ToolDefinition {
            name: "bash".into(),
            description: "Run a command".into(),
            parameters: json!({"type": "object"}),
        },
    ]);
    let wire = build(&model(), &req, Some("g-key"));
    assert_eq!(
        wire.url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        wire.body,
        json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "What is in this image?"},
                    {"inlineData": {"mimeType": "image/png", "data": "AQID"}},
                ]},
                {"role": "model", "parts": [
                    {"text": "Let me check."},
                    {"text": "Read it.", "thought": true, "thoughtSignature": "sig-1"},
                    {"functionCall": {"name": "read", "args": {"path": "a.png"}, "id": "call-1"},
                     "thoughtSignature": "sig-1"},
                    {"functionCall": {"name": "bash", "args": {"command": "false"}, "id": "call-2"}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read", "id": "call-1", "response": {"output": "an image"}}},
                    {"inlineData": {"mimeType": "image/jpeg", "data": "BAU="}},
                    {"functionResponse": {"name": "bash", "id": "call-2", "response": {"error": "exit code 1"}}},
                ]},
            ],
            "systemInstruction": {"parts": [{"text": "You are keel."}]},
            "tools": [{"functionDeclarations": [
                {"name": "read", "description": "Read a file",
                 "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "bash", "description": "Run a command", "parameters": {"type": "object"}},
            ]}],
            "generationConfig": {
                "maxOutputTokens": 4096,
                "temperature": 0.7,
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 24_576},
            },
        })
    );
}

#[test]
fn thinking_off_none_and_unsupported() {
    let body = |model: &ModelEntry, thinking| {
        let req = request(
            vec![Message::user_text("hi")],
            RequestOptions {
                thinking,
                ..RequestOptions::default()
            },
        );
        build(model, &req, None).body["generationConfig"].clone()
    };
    assert_eq!(
        body(&model(), Some(ThinkingLevel::Off)),
        json!({"maxOutputTokens": 65_536, "thinkingConfig": {"thinkingBudget": 0}})
    );
    assert_eq!(
        body(&model(), Some(ThinkingLevel::Minimal)),
        json!({"maxOutputTokens": 65_536,
               "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 512}})
    );
    assert_eq!(body(&model(), None), json!({"maxOutputTokens": 65_536}));
    let mut plain = model();
    plain.capabilities.reasoning = false;
    assert_eq!(
        body(&plain, Some(ThinkingLevel::High)),
        json!({"maxOutputTokens": 65_536})
    );
}

#[test]
fn headers_layer_model_then_request_and_omit_a_missing_key() {
    let mut model = model();
    model.headers = vec![
        ("X-Goog-Api-Key".into(), "from-model".into()),
        ("x-team".into(), "a".into()),
    ];
    let req = request(
        vec![Message::user_text("hi")],
        RequestOptions {
            headers: vec![("X-Team".into(), "b".into())],
            ..RequestOptions::default()
        },
    );
    assert_eq!(
        build(&model, &req, Some("g-key")).headers,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("X-Goog-Api-Key".to_owned(), "from-model".to_owned()),
            ("X-Team".to_owned(), "b".to_owned()),
        ]
    );
    model.headers.clear();
    assert_eq!(
        build(&model, &req, Some("g-key")).headers,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-goog-api-key".to_owned(), "g-key".to_owned()),
            ("X-Team".to_owned(), "b".to_owned()),
        ]
    );
    assert_eq!(
        build(&model, &req, None).headers,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("X-Team".to_owned(), "b".to_owned()),
        ]
    );
}

/// What the reference reading gives for `data`, to compare with the in-place reading.
fn reference(data: &str) -> Result<Flat<'_>, String> {
    serde_json::from_str::<Chunk>(data)
        .map(Flat::from)
        .map_err(|err| err.to_string())
}

/// Reads `data` in place, or `None` where it is left to the reference reading.
fn in_place(data: &str) -> Option<Flat<'_>> {
    let mut flat = Flat::default();
    flat.read_in_place(data).then_some(flat)
}

#[test]
fn the_usual_chunks_are_read_in_place_and_odd_shapes_are_left_to_chunk() {
    let taken = [
        r#"{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-pro","responseId": "r1"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "a \"quoted\"\nline \u00e9", "thought": true, "thoughtSignature": "sig"}]}}],"usageMetadata": {"promptTokenCount": 7, "thoughtsTokenCount": 2}}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "bash", "args": {"command": "ls"}}}, {"text": "and"}]},"finishReason": "STOP"}, {"content": {"parts": [{"text": "ignored"}]}}]}"#,
        r#"{"candidates": [{"content": null, "finishReason": "SAFETY", "finishMessage": "blocked"}], "promptFeedback": {"blockReason": "OTHER"}}"#,
        r#"{"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}"#,
        r#" {"candidates": [], "unknown": [[{"deep": [1, 2]}]]} "#,
    ];
    for data in taken {
        let flat = in_place(data).unwrap_or_else(|| panic!("not read in place: {data}"));
        assert_eq!(Ok(flat), reference(data), "{data}");
    }
    let left = [
        // An escaped key, a repeated key, and arrays where structs are expected: serde
        // reads each its own way (or rejects it), so the in-place reading declines.
        r#"{"c\u0061ndidates": [{"content": {"parts": [{"text": "Hi"}]}}]}"#,
        r#"{"modelVersion": "a", "modelVersion": "b"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "Hi"}]}, "content": null}]}"#,
        r#"{"candidates": [[{"parts": [{"text": "Hi"}]}, "STOP"]]}"#,
        r#"{"candidates": [{"content": [[{"text": "Hi"}]]}]}"#,
        r#"[[{"content": {"parts": [{"text": "Hi"}]}}]]"#,
        r#"{"candidates": null}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": 5}]}}]}"#,
        r#"{"candidates": []} trailing"#,
    ];
    for data in left {
        assert_eq!(in_place(data), None, "{data}");
    }
}

#[test]
fn chunks_left_to_the_reference_reading_decode_as_before() {
    let plain = r#"{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"finishReason": "STOP","index": 0}],"responseId": "resp-8"}"#;
    let escaped_key = r#"{"c\u0061ndidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"finishReason": "STOP","index": 0}],"responseId": "resp-8"}"#;
    let array_candidate = r#"{"candidates": [[{"parts": [{"text": "Hi"}],"role": "model"}, "STOP"]],"responseId": "resp-8"}"#;
    let expected = decode(&[plain]);
    assert_eq!(decode(&[escaped_key]), expected);
    assert_eq!(decode(&[array_candidate]), expected);
    let repeated = r#"{"responseId": "a", "responseId": "b"}"#;
    assert_eq!(
        decode(&[plain, repeated]),
        vec![
            start("resp-8"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "Hi".into()
            },
            StreamEvent::TextEnd { index: 0 },
            malformed(API, serde_json::from_str::<Chunk>(repeated).unwrap_err()),
        ]
    );
}

/// JSON text (not `Value`s, which cannot repeat a key) shaped like Gemini chunks, with
/// odd shapes mixed in: other values where structs are expected, repeated and unknown
/// keys, escaped keys, objects written as arrays.
mod chunk_text {
    use proptest::prelude::*;

    fn string() -> BoxedStrategy<String> {
        prop_oneof![
            "[a-zA-Z_ ]{0,8}".prop_map(|text| format!("\"{text}\"")),
            Just(r#""a \"quoted\"\nline""#.to_owned()),
            Just(r#""caf\u00e9""#.to_owned()),
            Just(r#""STOP""#.to_owned()),
        ]
        .boxed()
    }

    fn any_json() -> BoxedStrategy<String> {
        let leaf = prop_oneof![
            string(),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("0".to_owned()),
            Just("-3".to_owned()),
            Just("1.5".to_owned()),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4).prop_map(|pairs| {
                    let fields: Vec<String> =
                        pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
        .boxed()
    }

    /// Mostly `value`, sometimes any JSON at all.
    fn or_any(value: BoxedStrategy<String>) -> BoxedStrategy<String> {
        prop_oneof![40 => value, 1 => any_json()].boxed()
    }

    fn array(item: BoxedStrategy<String>) -> BoxedStrategy<String> {
        or_any(
            prop::collection::vec(item, 0..4)
                .prop_map(|items| format!("[{}]", items.join(",")))
                .boxed(),
        )
    }

    /// An object with some of `fields` in any order; now and then a key repeated, an
    /// unknown key, a key written with an escape, or the values written as an array.
    fn object(fields: Vec<(&'static str, BoxedStrategy<String>)>) -> BoxedStrategy<String> {
        let entries: Vec<_> = fields
            .into_iter()
            .map(|(name, value)| prop::option::weighted(0.85, (Just(name), or_any(value))))
            .collect();
        let object =
            (entries.prop_shuffle(), 0u8..64, any_json()).prop_map(|(entries, roll, noise)| {
                let mut entries: Vec<(String, String)> = entries
                    .into_iter()
                    .flatten()
                    .map(|(name, value)| (format!("\"{name}\""), value))
                    .collect();
                match roll {
                    0 => {
                        if let Some(first) = entries.first().cloned() {
                            entries.push(first);
                        }
                    }
                    1 => entries.push(("\"role\"".to_owned(), noise)),
                    2 => {
                        if let Some((name, _)) = entries.first_mut() {
                            *name =
                                format!("\"\\u{:04x}{}", u32::from(name.as_bytes()[1]), &name[2..]);
                        }
                    }
                    3 => {
                        let values: Vec<&str> = entries.iter().map(|(_, v)| v.as_str()).collect();
                        return format!("[{}]", values.join(","));
                    }
                    _ => {}
                }
                let fields: Vec<String> = entries.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", fields.join(","))
            });
        or_any(object.boxed())
    }

    fn boolean() -> BoxedStrategy<String> {
        prop_oneof![Just("true".to_owned()), Just("false".to_owned())].boxed()
    }

    fn count() -> BoxedStrategy<String> {
        prop_oneof![Just("0".to_owned()), Just("12".to_owned())].boxed()
    }

    fn part() -> BoxedStrategy<String> {
        let call = object(vec![
            ("id", string()),
            ("name", string()),
            ("args", any_json()),
        ]);
        object(vec![
            ("text", string()),
            ("thought", boolean()),
            ("thoughtSignature", string()),
            ("functionCall", call),
        ])
    }

    pub fn chunk() -> BoxedStrategy<String> {
        let content = prop_oneof![
            6 => object(vec![("parts", array(part())), ("role", string())]),
            1 => Just("null".to_owned()),
        ]
        .boxed();
        let candidate = object(vec![
            ("content", content),
            ("finishReason", string()),
            ("finishMessage", string()),
            ("index", count()),
        ]);
        let usage = object(vec![
            ("promptTokenCount", count()),
            ("cachedContentTokenCount", count()),
            ("candidatesTokenCount", count()),
            ("thoughtsTokenCount", count()),
        ]);
        let feedback = object(vec![("blockReason", string())]);
        let error = object(vec![
            ("message", string()),
            ("status", string()),
            ("code", count()),
        ]);
        object(vec![
            ("candidates", array(candidate)),
            ("usageMetadata", usage),
            ("modelVersion", string()),
            ("responseId", string()),
            ("promptFeedback", feedback),
            ("error", error),
        ])
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, ..Default::default() })]

    /// Whatever the in-place reading takes, it reads as the reference reading does.
    #[test]
    fn the_in_place_reading_agrees_with_chunk(data in chunk_text::chunk()) {
        if let Some(flat) = in_place(&data) {
            proptest::prop_assert_eq!(Ok(flat), reference(&data), "{}", data);
        }
    }
}
