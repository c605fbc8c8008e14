//! Fixture tests for `openai_responses`.

use std::sync::Arc;

use super::*;
use crate::AssistantBuilder;
use crate::model::{Api, Capabilities, Compat, Prices};
use crate::request::{RequestOptions, ThinkingLevel};
use crate::sse::SseParser;
use keel_protocol::{ThinkingBlock, ToolCall, ToolDefinition, ToolResultMessage};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::super::json_strategies::{array, object_with, quoted};

fn model() -> ModelEntry {
    ModelEntry {
        provider: "openai".into(),
        id: "gpt-test".into(),
        api: Api::OpenAiResponses,
        base_url: "https://api.openai.com/v1".into(),
        context_window: 400_000,
        max_output: 128_000,
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

/// An SSE stream of `(event, data)` pairs, the event name taken from the data's type.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|data| {
            format!(
                "event: {}\ndata: {data}\n\n",
                data["type"].as_str().unwrap()
            )
        })
        .collect()
}

fn decode_raw(stream: &str) -> Vec<StreamEvent> {
    let mut parser = SseParser::new();
    let mut sse = Vec::new();
    parser.feed(stream.as_bytes(), &mut sse);
    let mut decoder = ResponsesDecoder::new(&model());
    let mut out = Vec::new();
    for event in &sse {
        decoder.event(event, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fn decode(events: &[Value]) -> Vec<StreamEvent> {
    decode_raw(&sse(events))
}

fn created() -> Value {
    json!({"type": "response.created", "sequence_number": 0, "response": {
        "id": "resp_1", "object": "response", "status": "in_progress", "model": "gpt-test-2025",
        "output": [], "usage": null,
    }})
}

fn completed(kind: &str, extra: Value, usage: Value) -> Value {
    let mut response = json!({"id": "resp_1", "model": "gpt-test-2025", "usage": usage});
    if let (Some(response), Some(extra)) = (response.as_object_mut(), extra.as_object()) {
        response.extend(extra.clone());
    }
    json!({"type": kind, "response": response})
}

fn start() -> StreamEvent {
    StreamEvent::Start {
        meta: ResponseMeta {
            provider: "openai".into(),
            api: API.into(),
            model: "gpt-test-2025".into(),
            response_id: Some("resp_1".into()),
        },
    }
}

fn usage_json(input: u64, cached: u64, output: u64, reasoning: u64) -> Value {
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    })
}

fn usage(input: u64, output: u64, cache_read: u64, reasoning: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        reasoning,
        ..Usage::default()
    }
}

fn text_delta(index: usize, delta: &str) -> StreamEvent {
    StreamEvent::TextDelta {
        index,
        delta: delta.into(),
    }
}

fn thinking_delta(index: usize, delta: &str) -> StreamEvent {
    StreamEvent::ThinkingDelta {
        index,
        delta: delta.into(),
    }
}

fn args(index: usize, delta: &str) -> StreamEvent {
    StreamEvent::ToolCallDelta {
        index,
        delta: delta.into(),
    }
}

fn message_events(output_index: u64, texts: &[&str]) -> Vec<Value> {
    let full: String = texts.concat();
    let mut events = vec![
        json!({"type": "response.output_item.added", "output_index": output_index, "item": {
            "id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": [],
        }}),
        json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": output_index,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    ];
    for text in texts {
        events.push(
            json!({"type": "response.output_text.delta", "item_id": "msg_1",
            "output_index": output_index, "content_index": 0, "delta": text}),
        );
    }
    events.push(
        json!({"type": "response.output_text.done", "item_id": "msg_1",
        "output_index": output_index, "content_index": 0, "text": full}),
    );
    events.push(
        json!({"type": "response.output_item.done", "output_index": output_index, "item": {
            "id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": full, "annotations": []}],
        }}),
    );
    events
}

#[test]
fn text_only() {
    let mut events = vec![created()];
    events.extend(message_events(0, &["Hello", ", world"]));
    events.push(completed(
        "response.completed",
        json!({}),
        usage_json(12, 0, 3, 0),
    ));
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Hello"),
            text_delta(0, ", world"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: usage(12, 3, 0, 0)
            },
        ]
    );
}

#[test]
fn reasoning_summary_is_signed_with_the_item_and_usage_counts_cache_and_reasoning() {
    let reasoning_item = json!({
        "id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAB-opaque",
        "summary": [
            {"type": "summary_text", "text": "**Plan**"},
            {"type": "summary_text", "text": "Answer."},
        ],
    });
    let mut events = vec![
        created(),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "rs_1", "type": "reasoning", "summary": [],
        }}),
        json!({"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "delta": "**Pl"}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "delta": "an**"}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
            "summary_index": 1, "delta": "Answer."}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning_item}),
    ];
    events.extend(message_events(1, &["42"]));
    events.push(completed(
        "response.completed",
        json!({}),
        usage_json(1000, 800, 300, 256),
    ));
    let decoded = decode(&events);
    assert_eq!(
        decoded,
        [
            start(),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "**Pl"),
            thinking_delta(0, "an**"),
            thinking_delta(0, "\n\n"),
            thinking_delta(0, "Answer."),
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some(reasoning_item.to_string()),
                redacted: false,
            },
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "42"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: usage(200, 300, 800, 256)
            },
        ]
    );
}

#[test]
fn reasoning_without_summary_is_redacted() {
    let reasoning_item = json!({
        "id": "rs_2", "type": "reasoning", "encrypted_content": "gAAAAB-secret", "summary": [],
    });
    let mut events = vec![
        created(),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "rs_2", "type": "reasoning", "summary": [],
        }}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning_item}),
    ];
    events.extend(message_events(1, &["ok"]));
    events.push(completed(
        "response.completed",
        json!({}),
        usage_json(10, 0, 40, 38),
    ));
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some(reasoning_item.to_string()),
                redacted: true,
            },
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "ok"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: usage(10, 40, 0, 38)
            },
        ]
    );
}

fn call_added(output_index: u64, call_id: &str) -> Value {
    json!({"type": "response.output_item.added", "output_index": output_index, "item": {
        "id": format!("fc_{output_index}"), "type": "function_call", "status": "in_progress",
        "call_id": call_id, "name": "read", "arguments": "",
    }})
}

fn call_delta(output_index: u64, delta: &str) -> Value {
    json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{output_index}"),
        "output_index": output_index, "delta": delta})
}

fn call_done(output_index: u64, call_id: &str, arguments: &str) -> Vec<Value> {
    vec![
        json!({"type": "response.function_call_arguments.done", "item_id": format!("fc_{output_index}"),
            "output_index": output_index, "arguments": arguments}),
        json!({"type": "response.output_item.done", "output_index": output_index, "item": {
            "id": format!("fc_{output_index}"), "type": "function_call", "status": "completed",
            "call_id": call_id, "name": "read", "arguments": arguments,
        }}),
    ]
}

#[test]
fn interleaved_tool_calls_fold_into_a_message() {
    let mut events = vec![created()];
    events.extend(message_events(0, &["Reading."]));
    events.extend([
        call_added(1, "call_a"),
        call_added(2, "call_b"),
        call_delta(1, "{\"path\":"),
        call_delta(2, "{\"path\":\"b\"}"),
        call_delta(1, "\"a\"}"),
    ]);
    events.extend(call_done(2, "call_b", "{\"path\":\"b\"}"));
    events.extend(call_done(1, "call_a", "{\"path\":\"a\"}"));
    events.push(completed(
        "response.completed",
        json!({}),
        usage_json(50, 0, 20, 0),
    ));
    let decoded = decode(&events);
    assert_eq!(
        decoded,
        [
            start(),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Reading."),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "call_a".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallStart {
                index: 2,
                id: "call_b".into(),
                name: "read".into()
            },
            args(1, "{\"path\":"),
            args(2, "{\"path\":\"b\"}"),
            args(1, "\"a\"}"),
            StreamEvent::ToolCallEnd { index: 2 },
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: usage(50, 20, 0, 0)
            },
        ]
    );
    let mut builder = AssistantBuilder::new();
    for event in &decoded {
        builder.apply(event).unwrap();
    }
    let mut message = builder.finish();
    message.timestamp = 0;
    assert_eq!(
        message,
        AssistantMessage {
            content: vec![
                ContentBlock::text("Reading."),
                ContentBlock::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a"}),
                }),
                ContentBlock::ToolCall(ToolCall {
                    id: "call_b".into(),
                    name: "read".into(),
                    arguments: json!({"path": "b"}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            usage: usage(50, 20, 0, 0),
            provider: "openai".into(),
            api: API.into(),
            model: "gpt-test-2025".into(),
            response_id: Some("resp_1".into()),
            error: None,
            timestamp: 0,
        }
    );
}

#[test]
fn arguments_given_only_whole_are_one_delta() {
    let mut events = vec![created(), call_added(0, "call_a")];
    events.extend(call_done(0, "call_a", "{\"path\":\"a\"}"));
    events.push(completed(
        "response.completed",
        json!({}),
        usage_json(5, 0, 5, 0),
    ));
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "call_a".into(),
                name: "read".into()
            },
            args(0, "{\"path\":\"a\"}"),
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: usage(5, 5, 0, 0)
            },
        ]
    );
}

#[test]
fn max_output_tokens_is_a_length_stop() {
    let events = vec![
        created(),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        }}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": "Once upon"}),
        completed(
            "response.incomplete",
            json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}),
            usage_json(5, 0, 2, 0),
        ),
    ];
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Once upon"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Length,
                usage: usage(5, 2, 0, 0)
            },
        ]
    );
}

#[test]
fn error_event_mid_stream() {
    let events = vec![
        created(),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "rs_1", "type": "reasoning", "summary": [],
        }}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
            "summary_index": 0, "delta": "Thinking"}),
        json!({"type": "error", "code": "server_is_overloaded", "message": "The server is overloaded.",
            "param": null, "sequence_number": 4}),
        json!({"type": "response.output_text.delta", "output_index": 1, "delta": "ignored"}),
    ];
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "Thinking"),
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: None,
                redacted: false
            },
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(ErrorCode::Overloaded, "The server is overloaded."),
                usage: Usage::default(),
            },
        ]
    );
}

#[test]
fn failed_response_reports_its_error_and_usage() {
    let events = vec![
        created(),
        completed(
            "response.failed",
            json!({"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"}}),
            usage_json(7, 0, 0, 0),
        ),
    ];
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(ErrorCode::RateLimit, "Rate limit reached"),
                usage: usage(7, 0, 0, 0),
            },
        ]
    );
}

#[test]
fn a_stream_cut_before_completion_is_a_network_error() {
    let events = vec![created(), call_added(0, "call_a"), call_delta(0, "{\"pa")];
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "call_a".into(),
                name: "read".into()
            },
            args(0, "{\"pa"),
            StreamEvent::ToolCallEnd { index: 0 },
            cut_stream(Usage::default()),
        ]
    );
}

#[test]
fn malformed_data_ends_the_stream() {
    let stream = format!(
        "{}event: response.output_text.delta\ndata: {{\"type\": oops\n\n{}",
        sse(&[created()]),
        sse(&[completed(
            "response.completed",
            json!({}),
            usage_json(1, 0, 1, 0)
        )]),
    );
    let detail = serde_json::from_str::<Value>("{\"type\": oops").unwrap_err();
    assert_eq!(decode_raw(&stream), [start(), malformed(API, detail)]);
}

#[test]
fn unknown_events_and_items_are_ignored() {
    let mut events = vec![
        created(),
        json!({"type": "response.in_progress", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "ws_1", "type": "web_search_call", "status": "in_progress",
        }}),
        json!({"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
            "id": "ws_1", "type": "web_search_call", "status": "completed",
        }}),
    ];
    events.extend(message_events(1, &["Found it."]));
    events.push(completed(
        "response.completed",
        json!({}),
        usage_json(3, 0, 3, 0),
    ));
    assert_eq!(
        decode(&events),
        [
            start(),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Found it."),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: usage(3, 3, 0, 0)
            },
        ]
    );
}

#[test]
fn odd_events_read_as_a_json_value_would() {
    let stream = [
        sse(&[created()]),
        // A mistyped field is ignored and the rest of the event still applies.
        sse(&[json!({"type": "response.output_text.delta", "output_index": 0, "delta": "a\nb", "summary_index": "x"})]),
        // A repeated field takes its last value; the SSE event name stands in for a `type`.
        "event: response.output_text.delta\ndata: {\"delta\":\"x\",\"delta\":\"c\\u00e9\"}\n\n".to_owned(),
        // An array of a response's fields is not a response.
        sse(&[json!({"type": "response.failed", "response": [null, "m", {"input_tokens": 5}]})]),
    ]
    .concat();
    assert_eq!(
        decode_raw(&stream),
        [
            start(),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "a\nb"),
            text_delta(0, "cé"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(ErrorCode::Server, "the response failed"),
                usage: Usage::default(),
            },
        ]
    );
}

#[test]
fn an_error_event_without_an_error_object_is_its_own_error() {
    let stream = [
        sse(&[created()]),
        "event: error\ndata: {\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\",\"error\":null}\n\n".to_owned(),
    ]
    .concat();
    assert_eq!(
        decode_raw(&stream),
        [
            start(),
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(
                    classify(None, "rate_limit_exceeded", "Slow down"),
                    "Slow down"
                ),
                usage: Usage::default(),
            },
        ]
    );
}

/// An object of up to five of `fields` and an unknown member.
fn object(fields: Vec<(&'static str, BoxedStrategy<String>)>) -> BoxedStrategy<String> {
    object_with(fields, r#""other":{"delta":[1,{"type":"x"}]}"#)
}

fn words() -> BoxedStrategy<String> {
    let words = vec![
        "",
        "x",
        "a\nb",
        "é\"",
        "call_1",
        "bash",
        "{\"a\":",
        "message",
        "reasoning",
        "function_call",
        "output_text",
        "refusal",
        "summary_text",
        "reasoning_text",
        "content_filter",
        "rate_limit_exceeded",
    ];
    prop::sample::select(words).prop_map(quoted).boxed()
}

fn kinds() -> BoxedStrategy<String> {
    let kinds = vec![
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    ];
    prop::sample::select(kinds).prop_map(quoted).boxed()
}

fn count_text() -> BoxedStrategy<String> {
    prop::sample::select(vec!["0", "1", "2", "7"])
        .prop_map(str::to_owned)
        .boxed()
}

/// Event data: every field the decoder reads, mostly well typed.
fn event_data() -> BoxedStrategy<String> {
    let part = object(vec![
        ("type", words()),
        ("text", words()),
        ("refusal", words()),
    ]);
    let item = object(vec![
        ("type", words()),
        ("call_id", words()),
        ("name", words()),
        ("arguments", words()),
        ("content", array(part.clone())),
        ("summary", array(part)),
    ]);
    let usage = object(vec![
        ("input_tokens", count_text()),
        ("output_tokens", count_text()),
        (
            "input_tokens_details",
            object(vec![("cached_tokens", count_text())]),
        ),
    ]);
    let error = object(vec![
        ("message", words()),
        ("code", words()),
        ("type", words()),
    ]);
    let response = object(vec![
        ("id", words()),
        ("model", words()),
        ("usage", usage),
        ("error", error.clone()),
        ("incomplete_details", object(vec![("reason", words())])),
    ]);
    object(vec![
        ("type", kinds()),
        ("output_index", count_text()),
        ("summary_index", count_text()),
        ("delta", words()),
        ("arguments", words()),
        ("item", item),
        ("response", response),
        ("error", error),
        ("message", words()),
        ("code", count_text()),
    ])
}

proptest::proptest! {
    /// The strict reading (with its fallback) and the lenient view of a JSON value decode
    /// every event alike.
    #[test]
    fn strict_and_lenient_readings_agree(
        events in prop::collection::vec((kinds(), event_data()), 0..8),
    ) {
        let model = model();
        let (mut strict, mut lenient) = (ResponsesDecoder::new(&model), ResponsesDecoder::new(&model));
        let (mut strict_out, mut lenient_out) = (Vec::new(), Vec::new());
        for (kind, data) in &events {
            let kind: String = serde_json::from_str(kind).unwrap();
            let event = SseEvent { event: kind.as_str().into(), data: data.clone(), ..SseEvent::default() };
            strict.event(&event, &mut strict_out);
            let value: Value = serde_json::from_str(data).unwrap();
            if !lenient.finished {
                lenient.apply(Event::lenient(&value), &kind, &mut lenient_out);
            }
        }
        strict.finish(&mut strict_out);
        lenient.finish(&mut lenient_out);
        prop_assert_eq!(strict_out, lenient_out);
    }
}

fn request(model: &ModelEntry, messages: Vec<Message>, options: RequestOptions) -> LlmRequest {
    LlmRequest {
        model: Arc::new(model.spec()),
        system_prompt: "You are terse.".into(),
        messages: Arc::new(messages.into_iter().map(Arc::new).collect()),
        tools: Arc::from(vec![ToolDefinition {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]),
        options,
    }
}

#[test]
fn encodes_the_whole_body() {
    let png = ImageBlock {
        data: vec![1, 2, 3],
        mime_type: "image/png".into(),
    };
    let reasoning =
        json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAA", "summary": []});
    let messages = vec![
        Message::User(UserMessage {
            content: vec![
                ContentBlock::text("What is in it?"),
                ContentBlock::Image(png.clone()),
            ],
            timestamp: 1,
            batch_id: None,
            hidden: false,
            shell: None,
        }),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking(ThinkingBlock {
                    thinking: String::new(),
                    signature: Some(reasoning.to_string()),
                    redacted: true,
                }),
                ContentBlock::Thinking(ThinkingBlock {
                    thinking: "unsigned".into(),
                    signature: None,
                    redacted: false,
                }),
                ContentBlock::text("Let me look."),
                ContentBlock::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a.png"}),
                }),
                ContentBlock::ToolCall(ToolCall {
                    id: "call_b".into(),
                    name: "read".into(),
                    arguments: json!({"path": "missing"}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            ..AssistantMessage::default()
        }),
        Message::ToolResult(ToolResultMessage {
            tool_call_id: "call_a".into(),
            tool_name: "read".into(),
            content: vec![ContentBlock::Image(png)],
            details: None,
            is_error: false,
            timestamp: 2,
        }),
        Message::ToolResult(ToolResultMessage::error(
            "call_b".into(),
            "read",
            "no such file",
        )),
        Message::user_text("Thanks"),
    ];
    let options = RequestOptions {
        max_tokens: Some(2000),
        temperature: Some(0.2),
        thinking: Some(ThinkingLevel::Medium),
        cache_retention: Some(CacheRetention::Short),
        session_id: Some("session-1".into()),
        ..RequestOptions::default()
    };
    let model = model();
    let wire = build(&model, &request(&model, messages, options), Some("sk-test"));
    assert_eq!(wire.url, "https://api.openai.com/v1/responses");
    assert_eq!(
        wire.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "store": false,
            "instructions": "You are terse.",
            "input": [
                {"role": "user", "content": [
                    {"type": "input_text", "text": "What is in it?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AQID"},
                ]},
                reasoning,
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
                {"type": "function_call", "call_id": "call_a", "name": "read", "arguments": "{\"path\":\"a.png\"}"},
                {"type": "function_call", "call_id": "call_b", "name": "read", "arguments": "{\"path\":\"missing\"}"},
                {"type": "function_call_output", "call_id": "call_a", "output": "(image output follows)"},
                {"type": "function_call_output", "call_id": "call_b", "output": "no such file"},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "Images returned by tool call call_a (read):"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AQID"},
                ]},
                {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
            ],
            "tools": [{
                "type": "function",
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                "strict": false,
            }],
            "max_output_tokens": 2000,
            "temperature": 0.2,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "session-1",
        })
    );
}

#[test]
fn minimal_body_without_thinking_tools_or_key() {
    let mut model = model();
    model.provider = "azure".into();
    model.base_url = "http://localhost:8080/v1/".into();
    model.headers = vec![("api-key".into(), "azure-key".into())];
    let mut request = request(
        &model,
        vec![Message::user_text("hi")],
        RequestOptions {
            thinking: Some(ThinkingLevel::Off),
            session_id: Some("s".into()),
            cache_retention: Some(CacheRetention::None),
            headers: vec![("API-KEY".into(), "override".into())],
            ..RequestOptions::default()
        },
    );
    request.system_prompt = "".into();
    request.tools = Arc::from(Vec::new());
    let wire = build(&model, &request, None);
    assert_eq!(wire.url, "http://localhost:8080/v1/responses");
    assert_eq!(
        wire.headers,
        [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("API-KEY".to_owned(), "override".to_owned()),
        ]
    );
    assert_eq!(
        wire.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "store": false,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "max_output_tokens": 128_000,
        })
    );
}

#[test]
fn headers_carry_the_bearer_key_and_let_later_ones_win() {
    let mut model = model();
    model.headers = vec![("OpenAI-Beta".into(), "a".into())];
    let options = RequestOptions {
        headers: vec![("openai-beta".into(), "b".into())],
        ..RequestOptions::default()
    };
    let request = request(&model, vec![Message::user_text("hi")], options);
    assert_eq!(
        build(&model, &request, Some("sk-test")).headers,
        [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("authorization".to_owned(), "Bearer sk-test".to_owned()),
            ("openai-beta".to_owned(), "b".to_owned()),
        ]
    );
}
