//! Every wire API's cached builder sends what its plain builder encodes, warm or cold, and
//! a warm cache gives the same bytes again.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use keel_protocol::{
    AssistantMessage, ContentBlock, ImageBlock, Message, StopReason, ThinkingBlock, ToolCall,
    ToolDefinition, ToolResultMessage, UserMessage,
};
use serde_json::{Value, json};

use super::encode_cache::EncodeCache;
use super::{build_request, build_request_cached};
use crate::model::{Api, Capabilities, Compat, ModelEntry, Prices};
use crate::request::{CacheRetention, LlmRequest, ModelSpec, RequestOptions};

fn entry(api: Api) -> ModelEntry {
    ModelEntry {
        provider: "p".into(),
        id: "m".into(),
        api,
        base_url: "http://127.0.0.1:1".into(),
        context_window: 200_000,
        max_output: 16_000,
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

fn result(id: &str, text: &str, image: bool) -> Message {
    let mut content = vec![ContentBlock::text(text)];
    if image {
        content.push(ContentBlock::Image(ImageBlock {
            data: vec![1, 2, 3],
            mime_type: "image/png".into(),
        }));
    }
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "bash".into(),
        content,
        details: None,
        is_error: id == "c2",
        timestamp: 0,
    })
}

fn history() -> Vec<Arc<Message>> {
    let mut answer = AssistantMessage::from_text("Looking.");
    answer.content.insert(
        0,
        ContentBlock::Thinking(ThinkingBlock {
            thinking: "hmm".into(),
            signature: Some("sig".into()),
            redacted: false,
        }),
    );
    for id in ["c1", "c2", "c3"] {
        answer.content.push(ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: json!({"command": "ls \"x\""}),
        }));
    }
    answer.stop_reason = StopReason::ToolUse;
    let mut second = AssistantMessage::from_text("");
    second.content = vec![ContentBlock::ToolCall(ToolCall {
        id: "c4".into(),
        name: "bash".into(),
        arguments: json!({}),
    })];
    second.stop_reason = StopReason::ToolUse;
    vec![
        Message::user_text("hello \"there\""),
        Message::Assistant(answer),
        result("c1", "one\nline", false),
        result("c2", "failed", false),
        // A message with nothing to send still ends the run of results before it.
        Message::User(UserMessage {
            content: Vec::new(),
            timestamp: 0,
            batch_id: None,
            hidden: false,
            shell: None,
        }),
        result("c3", "picture", true),
        Message::User(UserMessage::hidden_text("a reminder")),
        Message::Assistant(second),
        result("c4", "last", false),
    ]
    .into_iter()
    .map(Arc::new)
    .collect()
}

fn request(messages: Vec<Arc<Message>>, retention: Option<CacheRetention>) -> LlmRequest {
    LlmRequest {
        model: Arc::new(ModelSpec::scripted()),
        system_prompt: Arc::from("You are keel."),
        messages: Arc::new(messages),
        tools: Arc::from(vec![ToolDefinition {
            name: "bash".into(),
            description: "Runs a command".into(),
            parameters: json!({"type": "object"}),
        }]),
        options: RequestOptions {
            cache_retention: retention,
            max_tokens: Some(1_000),
            session_id: Some("s-1".into()),
            ..RequestOptions::default()
        },
    }
}

#[test]
fn cached_builders_send_what_the_plain_builders_encode() {
    for api in [
        Api::AnthropicMessages,
        Api::OpenAiCompletions,
        Api::OpenAiResponses,
        Api::GoogleGenerativeAi,
    ] {
        for retention in [None, Some(CacheRetention::None), Some(CacheRetention::Long)] {
            let model = entry(api);
            let cache = EncodeCache::default();
            let messages = history();
            for len in [0, 1, 3, 5, messages.len()] {
                let request = request(messages[..len].to_vec(), retention);
                let plain = build_request(&model, &request, None);
                let plain: Value = serde_json::from_slice(&plain.body_bytes().unwrap()).unwrap();
                let cold = build_request_cached(&model, &request, None, &EncodeCache::default())
                    .body_bytes()
                    .unwrap();
                let warm = build_request_cached(&model, &request, None, &cache)
                    .body_bytes()
                    .unwrap();
                let again = build_request_cached(&model, &request, None, &cache)
                    .body_bytes()
                    .unwrap();
                let cold_value: Value = serde_json::from_slice(&cold).unwrap();
                assert_eq!(cold_value, plain, "{api:?} {retention:?} {len} messages");
                assert_eq!(
                    warm, cold,
                    "{api:?} {retention:?} {len}: warm and cold differ"
                );
                assert_eq!(again, warm, "{api:?} {retention:?} {len}: not stable");
            }
        }
    }
}

#[test]
fn a_longer_conversation_begins_with_the_bytes_of_the_shorter_one() {
    for api in [
        Api::AnthropicMessages,
        Api::OpenAiCompletions,
        Api::OpenAiResponses,
        Api::GoogleGenerativeAi,
    ] {
        let model = entry(api);
        let cache = EncodeCache::default();
        let messages = history();
        let short =
            build_request_cached(&model, &request(messages[..3].to_vec(), None), None, &cache)
                .body_bytes()
                .unwrap();
        let long = build_request_cached(&model, &request(messages.clone(), None), None, &cache)
            .body_bytes()
            .unwrap();
        let shared = short.iter().zip(&long).take_while(|(a, b)| a == b).count();
        // Everything but the end of the shorter conversation (its closing, its breakpoint,
        // the options after it) is shared.
        assert!(
            shared * 10 >= short.len() * 7,
            "{api:?}: {shared} of {} bytes shared",
            short.len()
        );
    }
}

mod random {
    use super::*;
    use proptest::prelude::*;

    /// One message of a random conversation: its kind and a size.
    fn message(kind: u8, n: usize) -> Message {
        let text = "x\"y\n".repeat(n % 7);
        match kind % 6 {
            0 => Message::user_text(text),
            1 => Message::User(UserMessage {
                content: Vec::new(),
                timestamp: 0,
                batch_id: None,
                hidden: false,
                shell: None,
            }),
            2 => {
                let mut answer = AssistantMessage::from_text(text);
                answer.content.push(ContentBlock::ToolCall(ToolCall {
                    id: format!("c{n}").into(),
                    name: "bash".into(),
                    arguments: json!({"n": n}),
                }));
                Message::Assistant(answer)
            }
            3 => Message::Assistant(AssistantMessage::from_text(text)),
            4 => result(&format!("c{n}"), &text, false),
            _ => result(&format!("c{n}"), &text, n.is_multiple_of(2)),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any sequence of messages, sent in growing prefixes through one warm cache, gives
        /// every API the body its plain builder makes.
        #[test]
        fn cached_bodies_match_plain_ones(
            kinds in proptest::collection::vec((0u8..6, 0usize..20), 0..14),
            retention in 0u8..3,
        ) {
            let retention = [None, Some(CacheRetention::None), Some(CacheRetention::Long)]
                [usize::from(retention)];
            let messages: Vec<Arc<Message>> =
                kinds.iter().map(|(k, n)| Arc::new(message(*k, *n))).collect();
            for api in [
                Api::AnthropicMessages,
                Api::OpenAiCompletions,
                Api::OpenAiResponses,
                Api::GoogleGenerativeAi,
            ] {
                let model = entry(api);
                let cache = EncodeCache::default();
                for len in 0..=messages.len() {
                    let request = request(messages[..len].to_vec(), retention);
                    let plain = build_request(&model, &request, None).body_bytes().unwrap();
                    let plain: Value = serde_json::from_slice(&plain).unwrap();
                    let cached = build_request_cached(&model, &request, None, &cache)
                        .body_bytes()
                        .unwrap();
                    let cached: Value = serde_json::from_slice(&cached).unwrap();
                    prop_assert_eq!(cached, plain, "{:?} at {} messages", api, len);
                }
            }
        }
    }
}
