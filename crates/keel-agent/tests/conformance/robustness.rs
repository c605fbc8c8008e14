//! Failures of the machinery itself: a crashing stream, a crashing subscriber, hooks that
//! hang past their time limit.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{Agent, AgentOptions, AgentSubscriber, ContextPlan, HookError, LoopHooks};
use keel_llm::{EventStream, LlmRequest};
use keel_protocol::{AgentEvent, ErrorCode, Message, StreamEvent};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use crate::support::*;

fn panicking_stream(_request: LlmRequest, _cancel: CancellationToken) -> EventStream {
    Box::pin(futures::stream::poll_fn(
        |_| -> std::task::Poll<Option<StreamEvent>> { panic!("decoder bug") },
    ))
}

#[tokio::test]
async fn a_run_that_panics_still_ends_with_a_failed_message_and_agent_end() {
    let options = AgentOptions::new(model(), Arc::new(panicking_stream));
    let agent = Agent::new(options).unwrap();
    let recorder = Arc::new(Recorder::default());
    agent.subscribe(recorder.clone());
    agent.prompt(vec![user("hi")]).await.unwrap();
    let messages = agent.messages();
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.error.as_ref().unwrap().code, ErrorCode::Internal);
    assert!(last.error.as_ref().unwrap().message.contains("decoder bug"));
    let trace = recorder.trace();
    assert_eq!(
        &trace[trace.len() - 3..],
        [
            "message_end(assistant:error)",
            "turn_end(assistant:error)",
            "agent_end(2)"
        ]
    );
    assert!(!agent.is_running());
}

struct PanickySubscriber;

#[async_trait]
impl AgentSubscriber for PanickySubscriber {
    async fn on_event(&self, event: &AgentEvent) {
        if matches!(event, AgentEvent::MessageEnd { .. }) {
            panic!("ui bug");
        }
    }
}

#[tokio::test]
async fn a_panicking_subscriber_does_not_stop_the_run_or_later_subscribers() {
    let (agent, _provider, _first) = agent_with(vec![text("ok")], vec![], None);
    agent.subscribe(Arc::new(PanickySubscriber));
    let after = Arc::new(Recorder::default());
    agent.subscribe(after.clone());
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(after.trace().last().unwrap(), "agent_end(2)");
}

struct SlowContext;

#[async_trait]
impl LoopHooks for SlowContext {
    async fn transform_context(
        &self,
        _history: &[Arc<Message>],
        _frame: keel_agent::RequestFrame<'_>,
    ) -> Result<ContextPlan, HookError> {
        tokio::time::sleep(Duration::from_secs(86_400)).await;
        Ok(ContextPlan::default())
    }
}

#[tokio::test(start_paused = true)]
async fn a_hook_that_hangs_is_cut_off_at_its_time_limit() {
    let provider = keel_llm::scripted::ScriptedProvider::with_responses([text("never")]);
    let mut options =
        AgentOptions::new(model(), Arc::new(provider.clone())).hooks(Arc::new(SlowContext));
    options.hook_timeout = Duration::from_secs(2);
    let agent = Agent::new(options).unwrap();
    let started = tokio::time::Instant::now();
    agent.prompt(vec![user("hi")]).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(
        provider.call_count(),
        0,
        "fail closed: no call with an unprepared context"
    );
    assert_eq!(history(&agent), ["user:hi", "assistant:error"]);
}

#[tokio::test]
async fn api_keys_are_fetched_for_every_call() {
    struct Counter(std::sync::atomic::AtomicUsize);
    #[async_trait]
    impl keel_agent::ApiKeySource for Counter {
        async fn api_key(&self, _provider: &str) -> Option<String> {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(format!("token-{n}"))
        }
    }
    let tool = TestTool::new("echo", keel_agent::ExecutionMode::Parallel, Behaviour::Echo);
    let provider = keel_llm::scripted::ScriptedProvider::with_responses([
        call("c1", "echo", serde_json::json!({})),
        text("ok"),
    ]);
    let mut options = AgentOptions::new(model(), Arc::new(provider.clone())).tools(vec![tool]);
    options.api_keys = Some(Arc::new(Counter(Default::default())));
    let agent = Agent::new(options).unwrap();
    agent.prompt(vec![user("hi")]).await.unwrap();
    let keys: Vec<_> = provider
        .requests()
        .iter()
        .map(|r| r.options.api_key.clone().unwrap())
        .collect();
    assert_eq!(keys, ["token-0", "token-1"]);
}

#[tokio::test]
async fn a_crash_mid_stream_still_closes_every_event_it_opened() {
    fn half_then_panic(_request: LlmRequest, _cancel: CancellationToken) -> EventStream {
        let mut sent = 0;
        Box::pin(futures::stream::poll_fn(move |_| {
            sent += 1;
            std::task::Poll::Ready(Some(match sent {
                1 => StreamEvent::Start {
                    meta: Default::default(),
                },
                2 => StreamEvent::TextStart { index: 0 },
                3 => StreamEvent::TextDelta {
                    index: 0,
                    delta: "half an ans".into(),
                },
                _ => panic!("decoder bug"),
            }))
        }))
    }
    let agent = Agent::new(AgentOptions::new(model(), Arc::new(half_then_panic))).unwrap();
    let recorder = Arc::new(Recorder::default());
    agent.subscribe(recorder.clone());
    agent.prompt(vec![user("hi")]).await.unwrap();
    crate::props::check_nesting(&recorder.all()).unwrap();
    let messages = agent.messages();
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.text(), "half an ans", "the partial answer is kept");
    assert_eq!(last.error.as_ref().unwrap().code, ErrorCode::Internal);
}

struct SlowSecondGate;

#[async_trait]
impl LoopHooks for SlowSecondGate {
    async fn before_tool_call(
        &self,
        call: &keel_protocol::ToolCall,
    ) -> Result<keel_agent::ToolGate, HookError> {
        if call.id.as_str() == "c2" {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        Ok(keel_agent::ToolGate::Allow)
    }
}

#[tokio::test(start_paused = true)]
async fn calls_admitted_before_an_abort_never_start() {
    let tool = TestTool::new("echo", keel_agent::ExecutionMode::Parallel, Behaviour::Echo);
    let response = keel_llm::scripted::ScriptedResponse::new()
        .with_tool_call("c1", "echo", serde_json::json!({}))
        .with_tool_call("c2", "echo", serde_json::json!({}));
    let (agent, _provider, _recorder) = agent_with(
        vec![response],
        vec![tool.clone()],
        Some(Arc::new(SlowSecondGate)),
    );
    let running = agent.start(Some(vec![user("go")])).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    agent.abort();
    running.await.unwrap();
    assert_eq!(tool.count(), 0);
    assert!(result_text(&agent, "c1").contains("aborted"));
    assert!(result_text(&agent, "c2").contains("aborted"));
}
