//! Property test (a fuzz target's twin that runs in CI): every wire decoder, fed random
//! SSE events built from its own vocabulary, never panics, ends with exactly one terminal
//! event, and emits events that fold into a message.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use keel_llm::api::decoder;
use keel_llm::sse::SseEvent;
use keel_llm::{AssistantBuilder, ModelEntry};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: &[&str] = &[
    "type",
    "index",
    "delta",
    "text",
    "content_block",
    "tool_calls",
    "choices",
    "function",
    "arguments",
    "id",
    "name",
    "output_index",
    "item",
    "candidates",
    "content",
    "parts",
    "functionCall",
    "args",
    "finishReason",
    "usageMetadata",
    "usage",
    "thinking",
    "signature",
    "partial_json",
    "finish_reason",
    "reasoning_content",
    "response",
    "error",
    "message",
    "stop_reason",
    "call_id",
    "status",
    "thought",
    "thoughtSignature",
    "reasoning_details",
    "input_tokens",
    "output_tokens",
    "summary",
    "data",
    "code",
];

const WORDS: &[&str] = &[
    "text",
    "thinking",
    "tool_use",
    "text_delta",
    "thinking_delta",
    "signature_delta",
    "input_json_delta",
    "redacted_thinking",
    "message",
    "function_call",
    "reasoning",
    "output_text",
    "end_turn",
    "max_tokens",
    "stop",
    "length",
    "tool_calls",
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "completed",
    "incomplete",
    "failed",
    "reasoning.text",
    "{\"a\":",
    "1}",
    "<think>",
    "</think>",
    "",
    "x",
    "[DONE]",
];

const EVENTS: &[&str] = &[
    "message",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "response.created",
    "response.output_item.added",
    "response.output_text.delta",
    "response.reasoning_summary_text.delta",
    "response.function_call_arguments.delta",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (0usize..WORDS.len()).prop_map(|i| json!(WORDS[i])),
        (0i64..5).prop_map(|n| json!(n)),
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(((0usize..KEYS.len()), inner), 0..6).prop_map(|pairs| {
                let mut map = Map::new();
                for (k, v) in pairs {
                    map.insert(KEYS[k].to_owned(), v);
                }
                Value::Object(map)
            }),
        ]
    })
}

fn sse_event() -> impl Strategy<Value = SseEvent> {
    (
        0usize..EVENTS.len(),
        prop_oneof![4 => json_value().prop_map(|v| v.to_string()), 1 => "[ -~]{0,12}"],
    )
        .prop_map(|(e, data)| SseEvent {
            event: EVENTS[e].into(),
            data,
            ..SseEvent::default()
        })
}

fn model(api: &str) -> ModelEntry {
    serde_json::from_value(json!({
        "provider": "prop", "id": "m", "api": api, "base_url": "http://127.0.0.1",
        "context_window": 1000, "max_output": 100, "compat": {"think_tags": true, "reasoning_split": true}
    }))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decoders_survive_random_streams(events in prop::collection::vec(sse_event(), 0..24)) {
        for api in ["anthropic-messages", "openai-completions", "openai-responses", "google-generative-ai"] {
            let mut decoder = decoder(&model(api));
            let mut out = Vec::new();
            for event in &events {
                decoder.event(event, &mut out);
            }
            decoder.finish(&mut out);
            let terminals = out.iter().filter(|e| e.is_terminal()).count();
            prop_assert_eq!(terminals, 1, "{}: {:?}", api, out);
            prop_assert!(out.last().is_some_and(keel_protocol::StreamEvent::is_terminal), "{}: terminal not last", api);
            let mut builder = AssistantBuilder::new();
            for event in &out {
                prop_assert!(builder.apply(event).is_ok(), "{}: {:?} in {:?}", api, event, out);
            }
        }
    }
}
