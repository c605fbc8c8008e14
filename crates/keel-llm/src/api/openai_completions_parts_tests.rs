//! Content part lists (Mistral's Magistral models send `delta.content` as a list of typed
//! parts where other servers send a string): decoding them, and sending their reasoning
//! back.

use super::*;
use pretty_assertions::assert_eq;

fn thinking_block(text: &str) -> ContentBlock {
    ContentBlock::Thinking(ThinkingBlock {
        thinking: text.into(),
        signature: Some("thinking_parts".into()),
        redacted: false,
    })
}

fn fold(events: &[StreamEvent]) -> Vec<ContentBlock> {
    let mut builder = AssistantBuilder::new();
    for event in events {
        builder.apply(event).unwrap();
    }
    builder.finish().content
}

/// A Magistral stream: thinking parts (their reasoning a list of text items, or a string)
/// across several chunks, then text parts, then plain string content. keel used to ignore
/// the lists and end with an empty answer.
#[test]
fn magistral_thinking_then_text_parts_across_chunks() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me"}]}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":" think"},{"type":"text","text":" \u00e9"}]}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":" hard."}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Ans"}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"wer"},{"type":"text","text":" is"}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":" 42."},"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-1","model":"magistral-medium-2509","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":9}}"#,
        "[DONE]",
    ]);
    let events = decode(&stream);
    assert_eq!(
        events,
        [
            start("magistral-medium-2509"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "Let me"),
            thinking_delta(0, " think"),
            thinking_delta(0, " é"),
            thinking_delta(0, " hard."),
            thinking_end(0, "thinking_parts"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "Ans"),
            text_delta(1, "wer"),
            text_delta(1, " is"),
            text_delta(1, " 42."),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: usage(10, 9, 0, 0)
            },
        ]
    );
    assert_eq!(
        fold(&events),
        [
            thinking_block("Let me think é hard."),
            ContentBlock::text("Answer is 42."),
        ]
    );
}

/// Thinking and text parts in one chunk, then thinking again: each switch closes the open
/// block, as with any other reasoning field.
#[test]
fn thinking_and_text_parts_interleave_in_one_chunk() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"a"}]},{"type":"text","text":"b"},{"type":"thinking","thinking":[{"type":"text","text":"c"}]}]},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("m"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "a"),
            thinking_end(0, "thinking_parts"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "b"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::ThinkingStart { index: 2 },
            thinking_delta(2, "c"),
            thinking_end(2, "thinking_parts"),
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

/// Parts of kinds keel does not show (Mistral's references, images, a part without a kind,
/// a thinking item that is not text, a non-object element that fails the strict reading)
/// are skipped, and the stream goes on.
#[test]
fn unknown_part_kinds_are_skipped_without_failing_the_stream() {
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[{"type":"reference","reference_ids":[1,2]},{"type":"text","text":"x"}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[{"type":"image_url","image_url":{"url":"data:,"}},{"text":"no kind"},{"type":"thinking","thinking":[{"type":"signature","text":"s"},{"type":"text","text":"t"}]}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[7,{"type":"text","text":"y"},{"type":"thinking","thinking":5}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[]},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode(&stream),
        [
            start("m"),
            StreamEvent::TextStart { index: 0 },
            text_delta(0, "x"),
            StreamEvent::TextEnd { index: 0 },
            StreamEvent::ThinkingStart { index: 1 },
            thinking_delta(1, "t"),
            thinking_end(1, "thinking_parts"),
            StreamEvent::TextStart { index: 2 },
            text_delta(2, "y"),
            StreamEvent::TextEnd { index: 2 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

/// Text parts go through the `<think>` splitter like a content string does.
#[test]
fn text_parts_are_split_at_think_tags() {
    let mut local = model();
    local.compat.think_tags = true;
    let stream = sse(&[
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"<think>plan</th"}]}}]}"#,
        r#"{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"ink>go"}]},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        decode_with(&local, &stream, true),
        [
            start("m"),
            StreamEvent::ThinkingStart { index: 0 },
            thinking_delta(0, "plan"),
            thinking_end(0, "think_tags"),
            StreamEvent::TextStart { index: 1 },
            text_delta(1, "go"),
            StreamEvent::TextEnd { index: 1 },
            StreamEvent::Done {
                stop_reason: StopReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

/// Reasoning that came as thinking parts goes back as thinking parts, in the message's
/// order, with the text as text parts; a message without any keeps its string content.
#[test]
fn thinking_parts_are_sent_back_as_content_parts() {
    let mut mistral = model();
    mistral.provider = "mistral".into();
    let messages = vec![
        Message::user_text("hi"),
        Message::Assistant(AssistantMessage {
            content: vec![
                thinking_block("Plan."),
                ContentBlock::text("Reading"),
                ContentBlock::text(" it."),
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a"}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            ..AssistantMessage::default()
        }),
        Message::ToolResult(ToolResultMessage::error("c1".into(), "read", "gone")),
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text("Done.")],
            ..AssistantMessage::default()
        }),
    ];
    let mut request = request(&mistral, messages, RequestOptions::default());
    request.system_prompt = "".into();
    request.tools = Arc::from(Vec::new());
    let wire = build(&mistral, &request, None);
    assert_eq!(
        wire.body["messages"],
        json!([
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": [{"type": "text", "text": "Plan."}]},
                    {"type": "text", "text": "Reading it."},
                ],
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "gone"},
            {"role": "assistant", "content": "Done."},
        ])
    );
}
