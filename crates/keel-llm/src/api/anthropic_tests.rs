//! Fixture tests for `anthropic`.

use super::*;
use crate::assemble::AssistantBuilder;
use crate::model::{Api, Capabilities, Compat, Prices};
use crate::request::{ModelSpec, RequestOptions};
use crate::sse::SseParser;
use keel_protocol::{AssistantMessage, TextBlock, ThinkingBlock, ToolCall, ToolDefinition};
use pretty_assertions::assert_eq;

use super::super::fixtures::{image_tool_step, thinking};

fn model() -> ModelEntry {
    ModelEntry {
        provider: "anthropic".into(),
        id: "claude-sonnet-4-5".into(),
        api: Api::AnthropicMessages,
        base_url: "https://api.anthropic.com/".into(),
        context_window: 200_000,
        max_output: 64_000,
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

/// Feeds a fixture through the SSE parser and the decoder, then `finish()`.
fn decode(fixture: &str) -> Vec<StreamEvent> {
    let mut parser = SseParser::new();
    let mut sse = Vec::new();
    parser.feed(fixture.as_bytes(), &mut sse);
    let mut decoder = AnthropicDecoder::new(&model());
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
            provider: "anthropic".into(),
            api: "anthropic-messages".into(),
            model: "claude-sonnet-4-5-20250929".into(),
            response_id: Some(id.into()),
        },
    }
}

fn message_start(id: &str, input: u64) -> String {
    format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{{\"input_tokens\":{input},\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}}}}\n\n"
    )
}

fn text(s: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock { text: s.into() })
}

#[test]
fn text_only() {
    let fixture = message_start("msg_1", 12)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: ping\ndata: {\"type\": \"ping\"}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\", world\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":6}}\n\n"
        + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let events = decode(&fixture);
    let usage = Usage {
        input: 12,
        output: 6,
        ..Usage::default()
    };
    assert_eq!(
        events,
        vec![
            start("msg_1"),
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
            provider: "anthropic".into(),
            api: "anthropic-messages".into(),
            model: "claude-sonnet-4-5-20250929".into(),
            response_id: Some("msg_1".into()),
            error: None,
            timestamp: 0,
        }
    );
}

#[test]
fn thinking_with_signature_and_redacted_thinking() {
    let fixture = message_start("msg_2", 40)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me \"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"think.\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"zz9=\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque-blob\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"text_delta\",\"text\":\"42\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
        + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":90}}\n\n"
        + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let events = decode(&fixture);
    let usage = Usage {
        input: 40,
        output: 90,
        ..Usage::default()
    };
    assert_eq!(
        events,
        vec![
            start("msg_2"),
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "Let me ".into()
            },
            StreamEvent::ThinkingDelta {
                index: 0,
                delta: "think.".into()
            },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some("EqQBzz9=".into()),
                redacted: false
            },
            StreamEvent::ThinkingStart { index: 1 },
            StreamEvent::ThinkingEnd {
                index: 1,
                signature: Some("opaque-blob".into()),
                redacted: true
            },
            StreamEvent::TextStart { index: 2 },
            StreamEvent::TextDelta {
                index: 2,
                delta: "42".into()
            },
            StreamEvent::TextEnd { index: 2 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage
            },
        ]
    );
    assert_eq!(
        fold(&events).content,
        vec![
            ContentBlock::Thinking(ThinkingBlock {
                thinking: "Let me think.".into(),
                signature: Some("EqQBzz9=".into()),
                redacted: false,
            }),
            ContentBlock::Thinking(ThinkingBlock {
                thinking: String::new(),
                signature: Some("opaque-blob".into()),
                redacted: true,
            }),
            text("42"),
        ]
    );
}

#[test]
fn interleaved_tool_calls_with_split_arguments_and_skipped_server_blocks() {
    // Block 1 is a server tool the message does not hold; blocks 2 and 3 interleave.
    let fixture = message_start("msg_3", 100)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Reading.\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"query\\\":\\\"x\\\"}\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_a\",\"name\":\"read\",\"input\":{}}}\n\n"
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_b\",\"name\":\"bash\",\"input\":{}}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"a\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\".rs\\\"}\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\": \\\"ls\\\"}\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":3}\n\n"
        + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":55}}\n\n"
        + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let events = decode(&fixture);
    let usage = Usage {
        input: 100,
        output: 55,
        ..Usage::default()
    };
    assert_eq!(
        events,
        vec![
            start("msg_3"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "Reading.".into()
            },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "toolu_a".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallStart {
                index: 2,
                id: "toolu_b".into(),
                name: "bash".into()
            },
            StreamEvent::ToolCallDelta {
                index: 1,
                delta: "{\"path\": \"a".into()
            },
            StreamEvent::ToolCallDelta {
                index: 2,
                delta: "{\"command\"".into()
            },
            StreamEvent::ToolCallDelta {
                index: 1,
                delta: ".rs\"}".into()
            },
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::ToolCallDelta {
                index: 2,
                delta: ": \"ls\"}".into()
            },
            StreamEvent::ToolCallEnd { index: 2 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage
            },
        ]
    );
    assert_eq!(
        fold(&events).content,
        vec![
            text("Reading."),
            ContentBlock::ToolCall(ToolCall {
                id: "toolu_a".into(),
                name: "read".into(),
                arguments: json!({"path": "a.rs"}),
            }),
            ContentBlock::ToolCall(ToolCall {
                id: "toolu_b".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls"}),
            }),
        ]
    );
}

#[test]
fn whole_arguments_in_the_start_event_are_passed_once() {
    let fixture = message_start("msg_c", 5)
        + "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"read\",\"input\":{\"path\":\"x\"}}}\n\n"
        + "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        + "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n"
        + "data: {\"type\":\"message_stop\"}\n\n";
    assert_eq!(
        decode(&fixture),
        vec![
            start("msg_c"),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "call_1".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                delta: "{\"path\":\"x\"}".into()
            },
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input: 5,
                    output: 3,
                    ..Usage::default()
                }
            },
        ]
    );
}

#[test]
fn usage_with_cache_reads_and_writes_takes_the_latest_values() {
    let fixture = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_4\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":5000,\"output_tokens\":1}}}\n\n".to_owned()
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"
        + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":5000,\"output_tokens\":20}}\n\n"
        + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":25}}\n\n"
        + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    assert_eq!(
        decode(&fixture),
        vec![
            start("msg_4"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "ok".into()
            },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage {
                    input: 7,
                    output: 25,
                    cache_read: 5000,
                    cache_write: 300,
                    ..Usage::default()
                }
            },
        ]
    );
}

#[test]
fn error_event_mid_stream_closes_blocks_and_ends_the_stream() {
    let fixture = message_start("msg_5", 9)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
        + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ignored\"}}\n\n";
    assert_eq!(
        decode(&fixture),
        vec![
            start("msg_5"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextDelta {
                index: 0,
                delta: "Hi".into()
            },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(ErrorCode::Overloaded, "Overloaded"),
                usage: Usage {
                    input: 9,
                    output: 1,
                    ..Usage::default()
                },
            },
        ]
    );
}

#[test]
fn a_stream_cut_before_message_stop_is_a_network_error() {
    let fixture = message_start("msg_6", 9)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_x\",\"name\":\"read\",\"input\":{}}}\n\n"
        + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"pa\"}}\n\n";
    assert_eq!(
        decode(&fixture),
        vec![
            start("msg_6"),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "toolu_x".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                delta: "{\"pa".into()
            },
            StreamEvent::ToolCallEnd { index: 0 },
            cut_stream(Usage {
                input: 9,
                output: 1,
                ..Usage::default()
            }),
        ]
    );
}

#[test]
fn a_malformed_data_line_ends_the_stream() {
    let bad = "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_de";
    let fixture = message_start("msg_7", 9)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: "
        + bad
        + "\n\n"
        + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let StreamEvent::Error {
        stop_reason, error, ..
    } = malformed(API, serde_json::from_str::<WireEvent>(bad).unwrap_err())
    else {
        unreachable!()
    };
    assert_eq!(
        decode(&fixture),
        vec![
            start("msg_7"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Error {
                stop_reason,
                error,
                usage: Usage {
                    input: 9,
                    output: 1,
                    ..Usage::default()
                },
            },
        ]
    );
}

#[test]
fn max_tokens_stops_with_length_and_refusal_is_an_error() {
    let body = |reason: &str| {
        message_start("msg_8", 3)
            + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
            + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Once upon\"}}\n\n"
            + &format!(
                "event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{reason}\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":2}}}}\n\n"
            )
            + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    };
    let usage = Usage {
        input: 3,
        output: 2,
        ..Usage::default()
    };
    let prefix = vec![
        start("msg_8"),
        StreamEvent::TextStart { index: 0 },
        StreamEvent::TextDelta {
            index: 0,
            delta: "Once upon".into(),
        },
        StreamEvent::TextEnd { index: 0 },
    ];
    let mut length = prefix.clone();
    length.push(StreamEvent::Done {
        stop_reason: StopReason::Length,
        usage,
    });
    assert_eq!(decode(&body("max_tokens")), length);
    let mut refusal = prefix;
    refusal.push(StreamEvent::Error {
        stop_reason: StopReason::Error,
        error: ErrorInfo::new(
            ErrorCode::Refusal,
            "the model refused to continue this response (stop reason `refusal`)",
        ),
        usage,
    });
    assert_eq!(decode(&body("refusal")), refusal);
}

#[test]
fn an_empty_body_still_starts_and_ends() {
    let mut decoder = AnthropicDecoder::new(&model());
    let mut out = Vec::new();
    decoder.finish(&mut out);
    decoder.finish(&mut out);
    assert_eq!(
        out,
        vec![
            StreamEvent::Start {
                meta: ResponseMeta {
                    provider: "anthropic".into(),
                    api: "anthropic-messages".into(),
                    model: "claude-sonnet-4-5".into(),
                    response_id: None,
                },
            },
            cut_stream(Usage::default()),
        ]
    );
}

fn conversation() -> Vec<Message> {
    image_tool_step(
        ["toolu_1", "toolu_2"],
        vec![
            thinking("Look closer.", Some("sig-1"), false),
            thinking("", Some("blob"), true),
            thinking("unsigned, dropped", None, false),
        ],
        Vec::new(),
    )
}

#[test]
fn request_body_with_thinking_tools_images_results_and_long_caching() {
    let mut req = request(
        conversation(),
        RequestOptions {
            max_tokens: Some(4096),
            temperature: Some(0.7),
            thinking: Some(ThinkingLevel::Medium),
            cache_retention: Some(CacheRetention::Long),
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
    let wire = build(&model(), &req, Some("sk-ant"));
    assert_eq!(wire.url, "https://api.anthropic.com/v1/messages");
    let cache = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(
        wire.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 9216,
            "stream": true,
            "system": [{"type": "text", "text": "You are keel.", "cache_control": cache}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in this image?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AQID"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look closer.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "blob"},
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.png"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "false"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false, "content": [
                        {"type": "text", "text": "an image"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "BAU="}},
                    ]},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                     "content": [{"type": "text", "text": "exit code 1"}],
                     "cache_control": cache},
                ]},
            ],
            "tools": [
                {"name": "read", "description": "Read a file",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "bash", "description": "Run a command", "input_schema": {"type": "object"},
                 "cache_control": cache},
            ],
            "thinking": {"type": "enabled", "budget_tokens": 8192},
        })
    );
}

#[test]
fn no_thinking_sends_temperature_and_cache_none_sends_no_markers() {
    let req = request(
        vec![Message::user_text("hi")],
        RequestOptions {
            temperature: Some(0.7),
            thinking: Some(ThinkingLevel::Off),
            cache_retention: Some(CacheRetention::None),
            ..RequestOptions::default()
        },
    );
    assert_eq!(
        build(&model(), &req, None).body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64_000,
            "stream": true,
            "system": [{"type": "text", "text": "You are keel."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "temperature": 0.7,
        })
    );
    // Default retention is the short one; the marker sits on the last user block.
    let req = request(vec![Message::user_text("hi")], RequestOptions::default());
    assert_eq!(
        build(&model(), &req, None).body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
        ]}])
    );
}

#[test]
fn thinking_budget_fits_below_the_output_limit() {
    // Room to spare: untouched.
    assert_eq!(fit_thinking(32_000, 16_384, 64_000), (32_000, Some(16_384)));
    // max_tokens raised to leave room for the answer.
    assert_eq!(fit_thinking(4096, 8192, 64_000), (9216, Some(8192)));
    // The model cannot go higher: the budget shrinks.
    assert_eq!(fit_thinking(8192, 16_384, 8192), (8192, Some(7168)));
    // Only the smallest budget fits, with little room for the answer.
    assert_eq!(fit_thinking(1500, 1024, 1500), (1500, Some(1024)));
    // Not even that: no thinking.
    assert_eq!(fit_thinking(1024, 1024, 1024), (1024, None));
    // A model that cannot reason gets no thinking at all.
    let mut plain = model();
    plain.capabilities.reasoning = false;
    let req = request(
        vec![Message::user_text("hi")],
        RequestOptions {
            thinking: Some(ThinkingLevel::High),
            ..RequestOptions::default()
        },
    );
    assert_eq!(build(&plain, &req, None).body.get("thinking"), None);
}

#[test]
fn headers_layer_model_then_request_and_omit_a_missing_key() {
    let mut model = model();
    model.headers = vec![
        ("anthropic-beta".into(), "model-beta".into()),
        ("X-Team".into(), "a".into()),
    ];
    let req = request(
        vec![Message::user_text("hi")],
        RequestOptions {
            headers: vec![
                ("x-team".into(), "b".into()),
                ("Anthropic-Version".into(), "2099-01-01".into()),
            ],
            ..RequestOptions::default()
        },
    );
    assert_eq!(
        build(&model, &req, Some("sk-ant")).headers,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-api-key".to_owned(), "sk-ant".to_owned()),
            ("anthropic-beta".to_owned(), "model-beta".to_owned()),
            ("x-team".to_owned(), "b".to_owned()),
            ("Anthropic-Version".to_owned(), "2099-01-01".to_owned()),
        ]
    );
    assert_eq!(
        build(&model, &req, None).headers,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("anthropic-beta".to_owned(), "model-beta".to_owned()),
            ("x-team".to_owned(), "b".to_owned()),
            ("Anthropic-Version".to_owned(), "2099-01-01".to_owned()),
        ]
    );
}

/// What `WireEvent` reads from `data`, when it reads a `content_block_delta`.
fn reference_delta(data: &str) -> Option<(u64, WireDelta)> {
    match serde_json::from_str::<WireEvent>(data) {
        Ok(WireEvent::ContentBlockDelta { index, delta }) => Some((index, delta)),
        _ => None,
    }
}

#[test]
fn deltas_are_read_fast_and_odd_shapes_are_left_to_wire_event() {
    let taken = [
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"index":2,"delta":{"thinking":"a \"quoted\"\nline \u00e9","type":"thinking_delta"},"type":"content_block_delta"}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"c2ln"}}"#,
        r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"","thinking":null}}"#,
        r#"{"typ\u0065":"content_block_d\u0065lta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
    ];
    for data in taken {
        let fast = FastDelta::read(data).unwrap_or_else(|| panic!("not read fast: {data}"));
        assert_eq!(Some(fast), reference_delta(data), "{data}");
    }
    let nested = format!(
        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"Hi"}},"x":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let left = [
        // Other events, kinds and shapes `WireEvent` reads its own way (or rejects).
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi","thinking":5}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":["text_delta","Hi"]}"#,
        r#"["content_block_delta",0,{"type":"text_delta","text":"Hi"}]"#,
        r#"{"type":"content_block_delta","index":0,"index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi","extra":1}}"#,
        r#"{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"Hi"}}"#,
        &nested,
    ];
    for data in left {
        assert_eq!(FastDelta::read(data), None, "{data}");
    }
}

#[test]
fn a_delta_with_a_deeply_nested_unknown_key_is_still_malformed() {
    // `WireEvent` buffers the unknown value and hits serde_json's nesting limit; skipping
    // it has no limit, so a fast reading that skipped unknown keys would take this delta.
    let bad = format!(
        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"Hi"}},"x":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let fixture = message_start("msg_9", 9)
        + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        + "event: content_block_delta\ndata: "
        + &bad
        + "\n\n";
    let StreamEvent::Error {
        stop_reason, error, ..
    } = malformed(API, serde_json::from_str::<WireEvent>(&bad).unwrap_err())
    else {
        unreachable!()
    };
    assert_eq!(
        decode(&fixture),
        vec![
            start("msg_9"),
            StreamEvent::TextStart { index: 0 },
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Error {
                stop_reason,
                error,
                usage: Usage {
                    input: 9,
                    output: 1,
                    ..Usage::default()
                },
            },
        ]
    );
}

/// JSON text (not `Value`s, which cannot repeat a key) shaped like `content_block_delta`
/// events, with odd shapes mixed in: other values where structs are expected, repeated
/// and unknown keys, escaped keys, objects written as arrays.
mod delta_text {
    use proptest::prelude::*;

    fn string() -> BoxedStrategy<String> {
        prop_oneof![
            "[a-zA-Z_ ]{0,8}".prop_map(|text| format!("\"{text}\"")),
            Just(r#""a \"quoted\"\nline""#.to_owned()),
            Just(r#""caf\u00e9""#.to_owned()),
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
        prop_oneof![20 => value, 1 => any_json()].boxed()
    }

    /// One of `words` as a JSON string.
    fn word(words: &'static [&'static str]) -> BoxedStrategy<String> {
        prop::sample::select(words)
            .prop_map(|word| format!("\"{word}\""))
            .boxed()
    }

    /// An object with some of `fields` in any order; now and then a key repeated, an
    /// unknown key, a key written with an escape, or the values written as an array.
    fn object(fields: Vec<(&'static str, BoxedStrategy<String>)>) -> BoxedStrategy<String> {
        let entries: Vec<_> = fields
            .into_iter()
            .map(|(name, value)| prop::option::weighted(0.9, (Just(name), or_any(value))))
            .collect();
        let object =
            (entries.prop_shuffle(), 0u8..32, any_json()).prop_map(|(entries, roll, noise)| {
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

    pub fn event() -> BoxedStrategy<String> {
        let index = prop_oneof![
            4 => Just("0".to_owned()),
            4 => Just("7".to_owned()),
            1 => Just("-1".to_owned()),
            1 => Just("2.0".to_owned()),
        ]
        .boxed();
        let delta = object(vec![
            (
                "type",
                word(&[
                    "text_delta",
                    "thinking_delta",
                    "signature_delta",
                    "input_json_delta",
                    "citations_delta",
                ]),
            ),
            ("text", string()),
            ("thinking", string()),
            ("signature", string()),
            ("partial_json", string()),
        ]);
        object(vec![
            (
                "type",
                word(&[
                    "content_block_delta",
                    "content_block_delta",
                    "content_block_delta",
                    "content_block_stop",
                ]),
            ),
            ("index", index),
            ("delta", delta),
        ])
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, ..Default::default() })]

    /// Whatever the fast reading takes, `WireEvent` reads the same way.
    #[test]
    fn the_fast_delta_reading_agrees_with_wire_event(data in delta_text::event()) {
        if let Some(fast) = FastDelta::read(&data) {
            proptest::prop_assert_eq!(Some(fast), reference_delta(&data), "{}", data);
        }
    }
}
