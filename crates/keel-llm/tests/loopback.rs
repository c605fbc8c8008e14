//! End to end over loopback: the HTTP transport, the four wire APIs and the retry policy
//! against `keel-mockllm`, including every injected fault.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_llm::retry::RetryPolicy;
use keel_llm::{
    Api, AssistantBuilder, HttpProvider, LlmRequest, ModelEntry, ModelSpec, StreamFn,
    StreamSettings, compose_stream_fn, http_client,
};
use keel_mockllm::{Fault, MockServer, Response, Script, ServerOptions, ToolCall};
use keel_protocol::{
    AssistantMessage, ContentBlock, ErrorCode, Message, StopReason, StreamEvent, StreamNotice,
    ToolDefinition,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const APIS: [Api; 4] = [
    Api::AnthropicMessages,
    Api::OpenAiCompletions,
    Api::OpenAiResponses,
    Api::GoogleGenerativeAi,
];

fn entry(api: Api, server: &MockServer) -> ModelEntry {
    let base_url = match api {
        Api::OpenAiCompletions | Api::OpenAiResponses => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    serde_json::from_value(json!({
        "provider": "mock", "id": "mock-model", "api": api, "base_url": base_url,
        "context_window": 100000, "max_output": 4096,
        "prices": {"input": 1.0, "output": 2.0},
        "capabilities": {"reasoning": true, "images": true}
    }))
    .unwrap()
}

fn request() -> LlmRequest {
    LlmRequest {
        model: Arc::new(ModelSpec::scripted()),
        system_prompt: Arc::from("You are a test."),
        messages: Arc::new(vec![Arc::new(Message::user_text("list the files"))]),
        tools: Arc::from(vec![ToolDefinition {
            name: "bash".into(),
            description: "Run a shell command".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        }]),
        options: Default::default(),
    }
}

fn fast_settings() -> StreamSettings {
    StreamSettings {
        retry: Some(RetryPolicy {
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
            ..RetryPolicy::default()
        }),
        ..StreamSettings::default()
    }
}

struct Outcome {
    events: Vec<StreamEvent>,
    message: AssistantMessage,
    requests: usize,
}

async fn call(api: Api, responses: Vec<Response>, settings: StreamSettings) -> Outcome {
    let server = MockServer::start(Script { responses }, ServerOptions::default())
        .await
        .unwrap();
    let provider = HttpProvider::new(
        http_client().unwrap(),
        entry(api, &server),
        Some("test-key".into()),
    );
    let f = compose_stream_fn(Arc::new(provider), &settings);
    let events: Vec<StreamEvent> = f
        .stream(request(), CancellationToken::new())
        .collect()
        .await;
    let mut builder = AssistantBuilder::new();
    for event in &events {
        builder
            .apply(event)
            .unwrap_or_else(|e| panic!("{api:?}: {e}\n{events:#?}"));
    }
    Outcome {
        message: builder.finish(),
        requests: server.requests().len(),
        events,
    }
}

fn retries(events: &[StreamEvent]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                StreamEvent::Notice {
                    notice: StreamNotice::RetryScheduled { .. }
                }
            )
        })
        .count()
}

fn error_code(message: &AssistantMessage) -> ErrorCode {
    message
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("no error on {message:#?}"))
        .code
}

fn full_answer() -> Response {
    Response {
        thinking: Some("The user wants a listing.".into()),
        text: Some("Let me look.".into()),
        tool_calls: vec![ToolCall {
            id: Some("c_read".into()),
            name: "read".into(),
            arguments: json!({"path": "a.rs"}),
        }],
        shell: Some("ls -la".into()),
        chunk_size: Some(3),
        ..Response::default()
    }
}

#[tokio::test]
async fn every_api_streams_thinking_text_and_several_tool_calls() {
    for api in APIS {
        let outcome = call(api, vec![full_answer()], fast_settings()).await;
        let m = &outcome.message;
        assert_eq!(m.stop_reason, StopReason::ToolUse, "{api:?}: {m:#?}");
        assert_eq!(m.text(), "Let me look.", "{api:?}");
        let thinking: String = m
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Thinking(t) => Some(t.thinking.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(thinking, "The user wants a listing.", "{api:?}");
        let calls: Vec<(String, serde_json::Value)> = m
            .tool_calls()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            [
                ("read".to_owned(), json!({"path": "a.rs"})),
                ("bash".to_owned(), json!({"command": "ls -la"}))
            ],
            "{api:?}"
        );
        assert!(
            m.usage.output > 0 && m.usage.cost.total > 0.0,
            "{api:?}: {:?}",
            m.usage
        );
        assert_eq!(outcome.requests, 1);
    }
}

/// Mistral's Magistral models stream thinking and text as lists of content parts; over the
/// wire they fold into the same thinking and text blocks as `reasoning_content` and string
/// content do.
#[tokio::test]
async fn chat_completions_content_part_lists_fold_into_thinking_and_text() {
    let answer = Response {
        thinking: Some("The user wants a listing.".into()),
        text: Some("Here it is.".into()),
        content_parts: true,
        chunk_size: Some(4),
        ..Response::default()
    };
    let outcome = call(Api::OpenAiCompletions, vec![answer], fast_settings()).await;
    let message = outcome.message;
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(
        message.content,
        [
            ContentBlock::Thinking(keel_protocol::ThinkingBlock {
                thinking: "The user wants a listing.".into(),
                signature: Some("thinking_parts".into()),
                redacted: false,
            }),
            ContentBlock::text("Here it is."),
        ]
    );
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_the_requested_wait() {
    for api in APIS {
        let limited = Response {
            fault: Some(Fault::RateLimit {
                retry_after_s: Some(0.05),
            }),
            ..Response::default()
        };
        let outcome = call(
            api,
            vec![
                limited,
                Response {
                    text: Some("ok".into()),
                    ..Response::default()
                },
            ],
            fast_settings(),
        )
        .await;
        assert_eq!(outcome.message.text(), "ok", "{api:?}");
        assert_eq!(outcome.requests, 2);
        let waited = outcome.events.iter().find_map(|e| match e {
            StreamEvent::Notice {
                notice:
                    StreamNotice::RetryScheduled {
                        delay_ms, error, ..
                    },
            } => Some((*delay_ms, error.code)),
            _ => None,
        });
        assert_eq!(waited, Some((50, ErrorCode::RateLimit)), "{api:?}");
    }
}

#[tokio::test]
async fn server_errors_and_overload_are_retried() {
    for fault in [Fault::ServerError, Fault::Overloaded] {
        let failing = Response {
            fault: Some(fault.clone()),
            ..Response::default()
        };
        let outcome = call(
            Api::AnthropicMessages,
            vec![
                failing.clone(),
                failing,
                Response {
                    text: Some("ok".into()),
                    ..Response::default()
                },
            ],
            fast_settings(),
        )
        .await;
        assert_eq!(outcome.message.text(), "ok", "{fault:?}");
        assert_eq!(
            (outcome.requests, retries(&outcome.events)),
            (3, 2),
            "{fault:?}"
        );
    }
}

#[tokio::test]
async fn a_rejected_request_is_never_retried() {
    let rejected = Response {
        fault: Some(Fault::BadRequest),
        ..Response::default()
    };
    let outcome = call(
        Api::OpenAiCompletions,
        vec![rejected, Response::default()],
        fast_settings(),
    )
    .await;
    assert_eq!(error_code(&outcome.message), ErrorCode::InvalidRequest);
    assert_eq!(outcome.requests, 1);
    assert!(outcome.message.error.unwrap().message.contains("HTTP 400"));
}

#[tokio::test]
async fn a_reset_before_any_output_is_retried() {
    let reset = Response {
        text: Some("never".into()),
        fault: Some(Fault::Reset { after_events: 0 }),
        ..Response::default()
    };
    let outcome = call(
        Api::OpenAiResponses,
        vec![
            reset,
            Response {
                text: Some("ok".into()),
                ..Response::default()
            },
        ],
        fast_settings(),
    )
    .await;
    assert_eq!(outcome.message.text(), "ok");
    assert_eq!(outcome.requests, 2);
}

#[tokio::test]
async fn no_request_is_retried_after_visible_output() {
    let after_output = |fault| Response {
        text: Some("partial answer that will break".into()),
        chunk_size: Some(4),
        fault: Some(fault),
        ..Response::default()
    };
    let short = StreamSettings {
        idle_timeout: Duration::from_millis(300),
        ..fast_settings()
    };
    for (fault, code) in [
        (Fault::Reset { after_events: 4 }, ErrorCode::Network),
        (Fault::Truncate { after_events: 4 }, ErrorCode::Network),
        (Fault::Malformed { after_events: 4 }, ErrorCode::Server),
        (Fault::Stall { after_events: 4 }, ErrorCode::Timeout),
    ] {
        let outcome = call(
            Api::AnthropicMessages,
            vec![after_output(fault.clone()), Response::default()],
            short.clone(),
        )
        .await;
        assert_eq!(outcome.requests, 1, "{fault:?}");
        assert_eq!(retries(&outcome.events), 0, "{fault:?}");
        assert_eq!(
            error_code(&outcome.message),
            code,
            "{fault:?}: {:#?}",
            outcome.message
        );
        assert!(
            !outcome.message.text().is_empty(),
            "the partial text is kept: {fault:?}"
        );
    }
}

#[tokio::test]
async fn a_stall_before_the_first_event_times_out_and_is_retried() {
    let stall = Response {
        text: Some("x".into()),
        fault: Some(Fault::Stall { after_events: 0 }),
        ..Response::default()
    };
    let settings = StreamSettings {
        first_event_timeout: Duration::from_millis(200),
        ..fast_settings()
    };
    let outcome = call(
        Api::GoogleGenerativeAi,
        vec![
            stall,
            Response {
                text: Some("ok".into()),
                ..Response::default()
            },
        ],
        settings,
    )
    .await;
    assert_eq!(outcome.message.text(), "ok");
    assert_eq!(outcome.requests, 2);
}

#[tokio::test]
async fn a_truncated_stream_before_output_is_retried_and_then_reported() {
    let cut = || Response {
        text: Some("x".into()),
        fault: Some(Fault::Truncate { after_events: 0 }),
        ..Response::default()
    };
    let policy = RetryPolicy {
        max_retries: 2,
        ..fast_settings().retry.unwrap()
    };
    let settings = StreamSettings {
        retry: Some(policy),
        ..fast_settings()
    };
    let outcome = call(
        Api::OpenAiCompletions,
        vec![cut(), cut(), cut(), cut()],
        settings,
    )
    .await;
    assert_eq!(outcome.requests, 3);
    assert_eq!(error_code(&outcome.message), ErrorCode::Network);
    assert!(outcome.events.iter().any(|e| matches!(
        e,
        StreamEvent::Notice {
            notice: StreamNotice::RetriesExhausted { attempts: 2 }
        }
    )));
}

#[tokio::test]
async fn requests_are_recorded_as_json_lines() {
    let dir = std::env::temp_dir().join(format!("keel-mockllm-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("requests.jsonl");
    let _ = std::fs::remove_file(&path);
    let server = MockServer::start(
        Script {
            responses: vec![Response {
                text: Some("ok".into()),
                ..Response::default()
            }],
        },
        ServerOptions {
            port: 0,
            record: Some(path.clone()),
            ..ServerOptions::default()
        },
    )
    .await
    .unwrap();
    let provider = HttpProvider::new(
        http_client().unwrap(),
        entry(Api::AnthropicMessages, &server),
        Some("k".into()),
    );
    let _: Vec<_> = provider
        .stream(request(), CancellationToken::new())
        .collect()
        .await;
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["path"], "/v1/messages");
    assert_eq!(lines[0]["headers"]["x-api-key"], "k");
    assert_eq!(lines[0]["body"]["model"], "mock-model");
}

#[tokio::test]
async fn an_unreachable_server_is_a_network_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let model: ModelEntry = serde_json::from_value(json!({
        "provider": "mock", "id": "m", "api": "openai-completions", "base_url": format!("http://127.0.0.1:{port}/v1"),
        "context_window": 1000, "max_output": 100
    }))
    .unwrap();
    let provider = HttpProvider::new(http_client().unwrap(), model, None);
    let events: Vec<_> = provider
        .stream(request(), CancellationToken::new())
        .collect()
        .await;
    assert!(
        matches!(&events[..], [StreamEvent::Error { error, .. }] if error.code == ErrorCode::Network),
        "{events:#?}"
    );
}

/// Chat completions bodies are sent from cached message JSON in chunks: every request must
/// still arrive as one JSON document with an exact `content-length`, holding the whole
/// conversation as the plain encoder would write it.
#[tokio::test]
async fn a_growing_conversation_is_sent_whole_with_a_content_length() {
    let responses = (0..3)
        .map(|step| Response {
            text: Some(format!("answer {step} with \"quotes\" and ünïcode")),
            ..Response::default()
        })
        .collect();
    let server = MockServer::start(Script { responses }, ServerOptions::default())
        .await
        .unwrap();
    let model = entry(Api::OpenAiCompletions, &server);
    let provider = HttpProvider::new(http_client().unwrap(), model.clone(), None);
    let mut history: Vec<Arc<Message>> = vec![Arc::new(Message::user_text("start"))];
    for step in 0..3 {
        let request = LlmRequest {
            messages: Arc::new(history.clone()),
            ..request()
        };
        let expected = keel_llm::api::build_request(&model, &request, None).body;
        let mut builder = AssistantBuilder::new();
        let mut events = provider.stream(request, CancellationToken::new());
        while let Some(event) = events.next().await {
            builder.apply(&event).unwrap();
        }
        let answer = builder.finish();
        assert_eq!(answer.stop_reason, StopReason::Stop, "{answer:?}");
        let recorded = server.requests();
        let sent = &recorded[step];
        assert!(
            sent.headers.contains_key("content-length")
                && !sent.headers.contains_key("transfer-encoding"),
            "{:?}",
            sent.headers
        );
        assert_eq!(sent.body, expected, "request {step}");
        history.push(Arc::new(Message::Assistant(answer)));
        history.push(Arc::new(Message::user_text(format!("next {step}"))));
    }
}
