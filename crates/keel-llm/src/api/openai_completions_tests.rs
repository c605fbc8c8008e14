//! Fixture tests for `openai_completions`.

use std::sync::Arc;

use super::*;
use crate::AssistantBuilder;
use crate::model::{Api, Capabilities, Compat, Prices};
use crate::request::RequestOptions;
use crate::sse::SseParser;
use keel_protocol::{ThinkingBlock, ToolCall, ToolDefinition};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::super::json_strategies::{array, object_with, quoted};

#[path = "openai_completions_parts_tests.rs"]
mod content_parts;

fn model() -> ModelEntry {
    ModelEntry {
        provider: "openai".into(),
        id: "gpt-test".into(),
        api: Api::OpenAiCompletions,
        base_url: "https://api.example.com/v1/".into(),
        context_window: 128_000,
        max_output: 16_384,
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

fn decode_with(model: &ModelEntry, stream: &str, finish: bool) -> Vec<StreamEvent> {
    let mut parser = SseParser::new();
    let mut sse = Vec::new();
    parser.feed(stream.as_bytes(), &mut sse);
    let mut decoder = CompletionsDecoder::new(model);
    let mut out = Vec::new();
    for event in &sse {
        decoder.event(event, &mut out);
    }
    if finish {
        decoder.finish(&mut out);
    }
    out
}

fn decode(stream: &str) -> Vec<StreamEvent> {
    decode_with(&model(), stream, true)
}

/// An SSE stream of `data:` lines.
fn sse(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|line| format!("data: {line}\n\n"))
        .collect()
}

fn start(model: &str) -> StreamEvent {
    StreamEvent::Start {
        meta: ResponseMeta {
            provider: "openai".into(),
            api: API.into(),
            model: model.into(),
            response_id: Some("chatcmpl-1".into()),
        },
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

fn thinking_end(index: usize, signature: &str) -> StreamEvent {
    StreamEvent::ThinkingEnd {
        index,
        signature: Some(signature.into()),
        redacted: false,
    }
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

#[test]
fn text_only() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-test-2025","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test-2025","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test-2025","choices":[{"index":0,"delta":{"content":", world"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test-2025","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test-2025","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test-2025"),
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
fn reasoning_content_then_text_with_cache_and_reasoning_usage() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let me"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" think."},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":"42","reasoning_content":null},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-1","model":"deepseek-reasoner","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":80},"completion_tokens_details":{"reasoning_tokens":40}}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("deepseek-reasoner"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "Let me"),
            thinking_delta(0, " think."),
            thinking_end(0, "reasoning_content"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "42"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: usage(20, 50, 80, 40)
            },
        ]
    );
}

#[test]
fn openrouter_reasoning_is_not_doubled_by_its_details() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"reasoning":"Hmm","reasoning_details":[{"type":"reasoning.text","text":"Hmm","index":0}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":"Yes"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("m"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "Hmm"),
            thinking_end(0, "reasoning"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "Yes"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

#[test]
fn minimax_reasoning_details_are_incremental() {
    let mut minimax = model();
    minimax.compat.reasoning_split = true;
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"MiniMax-M2","choices":[{"index":0,"delta":{"role":"assistant","reasoning_details":[{"type":"reasoning.text","id":"r1","text":"The user"}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"MiniMax-M2","choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","id":"r1","text":" greets."}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"MiniMax-M2","choices":[{"index":0,"delta":{"content":"Hi!"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode_with(&minimax, &stream, true),
        [
            start("MiniMax-M2"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "The user"),
            thinking_delta(0, " greets."),
            thinking_end(0, "reasoning_details"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "Hi!"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

#[test]
fn think_tags_split_across_chunks() {
    let mut local = model();
    local.compat.think_tags = true;
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"qwen3","choices":[{"index":0,"delta":{"content":"<thi"}}]}"#,
        r#"{"id":"chatcmpl-1","model":"qwen3","choices":[{"index":0,"delta":{"content":"nk>plan a</th"}}]}"#,
        r#"{"id":"chatcmpl-1","model":"qwen3","choices":[{"index":0,"delta":{"content":"ink>Answer <"}}]}"#,
        r#"{"id":"chatcmpl-1","model":"qwen3","choices":[{"index":0,"delta":{"content":"b> done"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode_with(&local, &stream, true),
        [
            start("qwen3"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "plan a"),
            thinking_end(0, "think_tags"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "Answer "),
            text_delta(1, "<b> done"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

#[test]
fn interleaved_tool_calls_with_split_arguments_fold_into_a_message() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Reading both."}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":\"b\"}"}}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a\"}"}}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":20}}"#,
        "[DONE]",
    ]);
    let events = decode(&stream);
    assert_eq!(
        events,
        [
            start("gpt-test"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Reading both."),
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
            args(2, "{\"pa"),
            args(1, "{\"path\":"),
            args(2, "th\":\"b\"}"),
            args(1, "\"a\"}"),
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::ToolCallEnd { index: 2 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: usage(30, 20, 0, 0)
            },
        ]
    );
    let mut builder = AssistantBuilder::new();
    for event in &events {
        builder.apply(event).unwrap();
    }
    let mut message = builder.finish();
    message.timestamp = 0;
    assert_eq!(
        message,
        AssistantMessage {
            content: vec![
                ContentBlock::text("Reading both."),
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
            usage: usage(30, 20, 0, 0),
            provider: "openai".into(),
            api: API.into(),
            model: "gpt-test".into(),
            response_id: Some("chatcmpl-1".into()),
            error: None,
            timestamp: 0,
        }
    );
}

#[test]
fn a_call_with_stop_is_tool_use_and_whole_object_arguments_are_one_delta() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"mistral","choices":[{"index":0,"delta":{"tool_calls":[{"id":"abc123XYZ","function":{"name":"ls","arguments":{"dir":"."}}}]},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("mistral"),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "abc123XYZ".into(),
                name: "ls".into()
            },
            args(0, "{\"dir\":\".\"}"),
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage::default()
            },
        ]
    );
}

#[test]
fn max_tokens_stop() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"Once upon"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test"),
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
fn error_chunk_mid_stream_closes_blocks_and_ends_the_stream() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"Par"}}]}"#,
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"ignored"}}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Par"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(ErrorCode::RateLimit, "Rate limit reached for requests"),
                usage: Usage::default(),
            },
        ]
    );
}

#[test]
fn content_filter_is_an_error() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test"),
            StreamEvent::Error {
                stop_reason: StopReason::Error,
                error: ErrorInfo::new(
                    ErrorCode::Refusal,
                    "the provider's content filter stopped the response"
                ),
                usage: Usage::default(),
            },
        ]
    );
}

#[test]
fn a_stream_cut_before_finish_reason_is_a_network_error() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hal"}}]}"#,
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"ls","arguments":"{\"d"}}]}}]}"#,
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "Hal"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "call_a".into(),
                name: "ls".into()
            },
            args(1, "{\"d"),
            StreamEvent::ToolCallEnd { index: 1 },
            cut_stream(Usage::default()),
        ]
    );
}

#[test]
fn a_body_that_ends_after_finish_reason_without_done_is_finished() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "ok"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

#[test]
fn malformed_data_ends_the_stream_once() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"index":0,"delta":{"content":"a"}}]}"#,
        r#"{"choices": [oops"#,
        "[DONE]",
    ]);
    let events = decode(&stream);
    let detail = serde_json::from_str::<Value>(r#"{"choices": [oops"#).unwrap_err();
    assert_eq!(
        events,
        [
            start("gpt-test"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "a"),
            StreamEvent::TextEnd { index: 0 },
            malformed(API, detail),
        ]
    );
}

#[test]
fn splitter_handles_every_split_point() {
    let text = "é<think>ü a</think>x <thin </think><think></think>🎉<";
    let expected = vec![
        (false, "é".to_owned()),
        (true, "ü a".to_owned()),
        (false, "x <thin </think>🎉<".to_owned()),
    ];
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    for &a in &bounds {
        for &b in bounds.iter().filter(|&&b| b >= a) {
            let mut splitter = ThinkTagSplitter::default();
            let mut segments = Vec::new();
            for piece in [&text[..a], &text[a..b], &text[b..]] {
                splitter.push(piece, &mut segments);
                let held = splitter.held.len();
                assert!(held < THINK_CLOSE.len(), "held {held} bytes at {a}/{b}");
            }
            segments.extend(splitter.flush());
            assert_eq!(merge(segments), expected, "split at {a} and {b}");
        }
    }
}

fn merge(segments: Vec<(bool, String)>) -> Vec<(bool, String)> {
    let mut merged: Vec<(bool, String)> = Vec::new();
    for (thinking, text) in segments {
        match merged.last_mut() {
            Some((last, buf)) if *last == thinking => buf.push_str(&text),
            _ => merged.push((thinking, text)),
        }
    }
    merged
}

#[test]
fn odd_chunks_read_as_a_json_value_would() {
    let stream = sse(&[
        // A mistyped field is ignored and the rest of the chunk still applies.
        r#"{"id":"chatcmpl-1","model":"gpt-test","choices":[{"delta":{"content":"a\nb","reasoning":7}}]}"#,
        // A repeated field takes its last value.
        r#"{"choices":[{"delta":{"content":"x","content":"c\u00e9"}}]}"#,
        // An array of a choice's fields is not a choice.
        r#"{"choices":[[{"content":"no"},"stop"]]}"#,
        // Only the first choice counts.
        r#"{"choices":[{"delta":{"content":"d"},"finish_reason":"stop"},{"delta":5}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("gpt-test"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "a\nb"),
            text_delta(0, "cé"),
            text_delta(0, "d"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

/// An object of up to five of `fields` and an unknown member.
fn object(fields: Vec<(&'static str, BoxedStrategy<String>)>) -> BoxedStrategy<String> {
    object_with(fields, r#""other":{"id":[1,{"content":"x"}]}"#)
}

fn words() -> BoxedStrategy<String> {
    let words = vec![
        "",
        "x",
        "a\nb",
        "é\"",
        "<think>",
        "a</th",
        "ink>b",
        "call_1",
        "bash",
        "{\"a\":",
        "stop",
        "length",
        "tool_calls",
        "content_filter",
        "reasoning.text",
        "reasoning.encrypted",
    ];
    prop::sample::select(words).prop_map(quoted).boxed()
}

fn count_text() -> BoxedStrategy<String> {
    prop::sample::select(vec!["0", "1", "2", "7"])
        .prop_map(str::to_owned)
        .boxed()
}

/// Chunk data: every field the decoder reads, mostly well typed.
fn chunk_data() -> BoxedStrategy<String> {
    let function = object(vec![
        ("name", words()),
        (
            "arguments",
            prop_oneof![words(), Just(r#"{"b":[1,2.5],"a":"x"}"#.to_owned())].boxed(),
        ),
    ]);
    let fragment = object(vec![
        ("index", count_text()),
        ("id", words()),
        ("function", function.clone()),
    ]);
    let detail = object(vec![("type", words()), ("text", words())]);
    let part_kind = || {
        prop::sample::select(vec!["text", "thinking", "reference"])
            .prop_map(quoted)
            .boxed()
    };
    let thinking_item = object(vec![("type", part_kind()), ("text", words())]);
    let part = object(vec![
        ("type", part_kind()),
        ("text", words()),
        (
            "thinking",
            prop_oneof![words(), array(thinking_item)].boxed(),
        ),
    ]);
    let delta = object(vec![
        ("content", prop_oneof![words(), array(part)].boxed()),
        ("reasoning_content", words()),
        ("reasoning", words()),
        ("reasoning_details", array(detail)),
        ("tool_calls", array(fragment)),
        ("function_call", function),
    ]);
    let choice = object(vec![("delta", delta), ("finish_reason", words())]);
    let usage = object(vec![
        ("prompt_tokens", count_text()),
        ("completion_tokens", count_text()),
        (
            "prompt_tokens_details",
            object(vec![("cached_tokens", count_text())]),
        ),
        ("prompt_cache_hit_tokens", count_text()),
    ]);
    let error = object(vec![
        ("message", words()),
        ("type", words()),
        ("code", count_text()),
    ]);
    object(vec![
        ("id", words()),
        ("model", words()),
        ("choices", array(choice)),
        ("usage", usage),
        ("error", error),
    ])
}

proptest::proptest! {
    /// The strict reading (with its fallback) and the lenient view of a JSON value decode
    /// every chunk alike.
    #[test]
    fn strict_and_lenient_readings_agree(
        chunks in prop::collection::vec(chunk_data(), 0..8),
        think_tags: bool,
        reasoning_split: bool,
    ) {
        let mut model = model();
        model.compat.think_tags = think_tags;
        model.compat.reasoning_split = reasoning_split;
        let (mut strict, mut lenient) = (CompletionsDecoder::new(&model), CompletionsDecoder::new(&model));
        let (mut strict_out, mut lenient_out) = (Vec::new(), Vec::new());
        for data in &chunks {
            let event = SseEvent { data: data.clone(), ..SseEvent::default() };
            strict.event(&event, &mut strict_out);
            let value: Value = serde_json::from_str(data).unwrap();
            if !lenient.finished {
                lenient.chunk(Chunk::lenient(&value), &mut lenient_out);
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

fn conversation() -> Vec<Message> {
    let png = ImageBlock {
        data: vec![1, 2, 3],
        mime_type: "image/png".into(),
    };
    vec![
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
                    thinking: "Need files.".into(),
                    signature: Some("reasoning_content".into()),
                    redacted: false,
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
            content: vec![ContentBlock::text("a.png"), ContentBlock::Image(png)],
            details: None,
            is_error: false,
            timestamp: 2,
        }),
        Message::ToolResult(ToolResultMessage::error(
            "call_b".into(),
            "read",
            "no such file",
        )),
    ]
}

#[test]
fn encodes_the_whole_body() {
    let options = RequestOptions {
        max_tokens: Some(1000),
        temperature: Some(0.7),
        thinking: Some(ThinkingLevel::High),
        cache_retention: Some(CacheRetention::Long),
        session_id: Some("session-1".into()),
        ..RequestOptions::default()
    };
    let model = model();
    let wire = build(
        &model,
        &request(&model, conversation(), options),
        Some("sk-test"),
    );
    assert_eq!(wire.url, "https://api.example.com/v1/chat/completions");
    assert_eq!(
        wire.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in it?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}},
                ]},
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "reasoning_content": "Need files.",
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.png\"}"}},
                        {"id": "call_b", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"missing\"}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "call_a", "content": "a.png"},
                {"role": "tool", "tool_call_id": "call_b", "content": "no such file"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Images returned by tool call call_a (read):"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}},
                ]},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }}],
            "max_tokens": 1000,
            "temperature": 0.7,
            "reasoning_effort": "high",
            "prompt_cache_key": "session-1",
            "prompt_cache_retention": "24h",
        })
    );
}

#[test]
fn compat_switches_change_the_body() {
    let mut minimax = model();
    minimax.provider = "minimax".into();
    minimax.capabilities.reasoning = false;
    minimax.compat = Compat {
        max_completion_tokens: true,
        reasoning_split: true,
        think_tags: true,
        no_stream_usage: true,
    };
    let messages = vec![
        Message::user_text("hi"),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking(ThinkingBlock {
                    thinking: "inline".into(),
                    signature: Some("think_tags".into()),
                    redacted: false,
                }),
                ContentBlock::text("Hello"),
                ContentBlock::Thinking(ThinkingBlock {
                    thinking: "split".into(),
                    signature: Some("reasoning_details".into()),
                    redacted: false,
                }),
            ],
            ..AssistantMessage::default()
        }),
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::Thinking(ThinkingBlock {
                thinking: "only thinking: nothing to send".into(),
                signature: Some("reasoning_content".into()),
                redacted: false,
            })],
            ..AssistantMessage::default()
        }),
    ];
    let options = RequestOptions {
        thinking: Some(ThinkingLevel::Low),
        session_id: Some("s".into()),
        ..RequestOptions::default()
    };
    let mut request = request(&minimax, messages, options);
    request.system_prompt = "".into();
    request.tools = Arc::from(Vec::new());
    let wire = build(&minimax, &request, None);
    assert_eq!(
        wire.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": "<think>inline</think>Hello",
                    "reasoning_details": [{"type": "reasoning.text", "text": "split"}],
                },
            ],
            "max_completion_tokens": 16_384,
            "reasoning_split": true,
        })
    );
}

#[test]
fn headers_merge_case_insensitively_and_omit_a_missing_key() {
    let mut model = model();
    model.headers = vec![
        ("X-Title".into(), "keel".into()),
        ("Authorization".into(), "Bearer model".into()),
    ];
    let options = RequestOptions {
        headers: vec![
            ("x-title".into(), "call".into()),
            ("X-Extra".into(), "1".into()),
        ],
        ..RequestOptions::default()
    };
    let request = request(&model, vec![Message::user_text("hi")], options);
    assert_eq!(
        build(&model, &request, Some("sk-test")).headers,
        [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("Authorization".to_owned(), "Bearer model".to_owned()),
            ("x-title".to_owned(), "call".to_owned()),
            ("X-Extra".to_owned(), "1".to_owned()),
        ]
    );
    model.headers.clear();
    let request = LlmRequest {
        options: RequestOptions::default(),
        ..request
    };
    assert_eq!(
        build(&model, &request, None).headers,
        [("content-type".to_owned(), "application/json".to_owned())]
    );
    assert_eq!(
        build(&model, &request, Some("k")).headers,
        [
            ("content-type".to_owned(), "application/json".to_owned()),
            ("authorization".to_owned(), "Bearer k".to_owned()),
        ]
    );
}

/// The cached path must send exactly what the plain encoder builds, request after request, as
/// the conversation grows and old messages are dropped.
#[test]
fn the_cached_body_is_the_plain_body_and_reuses_earlier_messages() {
    let model = model();
    let cache = EncodeCache::default();
    let mut all: Vec<Message> = conversation();
    all.push(Message::Host(keel_protocol::HostMessage {
        kind: "note".into(),
        data: json!({"text": "not for the model"}),
        timestamp: 3,
    }));
    all.push(Message::user_text("and now \"quoted\" \u{1F600}\n"));
    all.push(Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::ToolCall(ToolCall {
            id: "call_c".into(),
            name: "read".into(),
            arguments: Value::String("{not json".into()),
        })],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::default()
    }));
    all.push(Message::ToolResult(ToolResultMessage::error(
        "call_c".into(),
        "read",
        "bad arguments",
    )));
    let shared: Vec<Arc<Message>> = all.into_iter().map(Arc::new).collect();
    // One tool set for every request, as in a turn: its JSON is kept after the first.
    let base = request(&model, Vec::new(), RequestOptions::default());
    for end in 0..=shared.len() {
        let request = LlmRequest {
            messages: Arc::new(shared[..end].to_vec()),
            ..base.clone()
        };
        let plain = build(&model, &request, Some("k"));
        let cached = build_cached(&model, &request, Some("k"), &cache);
        assert_eq!(cached.url, plain.url);
        assert_eq!(cached.headers, plain.headers);
        let sent: Value = serde_json::from_slice(&cached.body_bytes().unwrap()).unwrap();
        assert_eq!(sent, plain.body, "after {end} messages");
        assert_eq!(
            plain.body_bytes().unwrap(),
            serde_json::to_vec(&plain.body).unwrap()
        );
    }
    // Every message but the tool result with an image is remembered (host messages give no
    // wire items but are remembered as such).
    assert_eq!(cache.len(), shared.len() - 1);
    // A message nothing holds any more is forgotten after the next request.
    let fresh = request(
        &model,
        vec![Message::user_text("new start")],
        RequestOptions::default(),
    );
    drop(shared);
    build_cached(&model, &fresh, None, &cache);
    assert_eq!(cache.len(), 1);
}
