//! Every wire API's decoder on arbitrary SSE input: it must never panic, must emit at most
//! one terminal event, and what it emits must fold into a message.
#![no_main]

use keel_llm::api::decoder;
use keel_llm::sse::SseParser;
use keel_llm::{AssistantBuilder, ModelEntry};
use libfuzzer_sys::fuzz_target;

fn model(api: &str) -> ModelEntry {
    let value = serde_json::json!({
        "provider": "fuzz", "id": "m", "api": api, "base_url": "http://127.0.0.1",
        "context_window": 1000, "max_output": 100, "compat": {"think_tags": true, "reasoning_split": true}
    });
    match serde_json::from_value(value) {
        Ok(model) => model,
        Err(error) => panic!("fuzz model entry: {error}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut events = Vec::new();
    SseParser::new().feed(data, &mut events);
    for api in ["anthropic-messages", "openai-completions", "openai-responses", "google-generative-ai"] {
        let mut decoder = decoder(&model(api));
        let mut out = Vec::new();
        for event in &events {
            decoder.event(event, &mut out);
        }
        decoder.finish(&mut out);
        assert_eq!(out.iter().filter(|e| e.is_terminal()).count(), 1, "{api}");
        let mut builder = AssistantBuilder::new();
        for event in &out {
            assert!(builder.apply(event).is_ok(), "{api}: {event:?}");
        }
    }
});
