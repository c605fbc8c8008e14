//! Steering, follow-ups, queue modes and the boundary flag.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{AgentOptions, Boundary, ExecutionMode, LoopHooks, QueueMode};
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn steering_sent_during_a_tool_joins_the_next_request() {
    let tool = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let (agent, provider, _recorder) = agent_with(
        vec![call("c1", "sleep", json!({"ms": 500})), text("ok")],
        vec![tool],
        None,
    );
    let running = agent.start(Some(vec![user("go")])).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    agent.steer(user("use the other file"));
    running.await.unwrap();
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:tool_use",
            "result:c1",
            "user:use the other file",
            "assistant:stop"
        ]
    );
    assert_eq!(provider.requests()[1].messages.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_steer_batch_reaches_the_model_as_one_message() {
    let tool = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let (agent, provider, _recorder) = agent_with(
        vec![call("c1", "sleep", json!({"ms": 500})), text("ok")],
        vec![tool],
        None,
    );
    let running = agent.start(Some(vec![user("go")])).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    agent.steer_batch(vec![user("first"), user("second")]);
    running.await.unwrap();
    assert_eq!(history(&agent).len(), 6, "history keeps both messages");
    let request = &provider.requests()[1];
    assert_eq!(
        request.messages.len(),
        4,
        "the batch projects to one user message"
    );
    let merged = request.messages[3].as_user().unwrap();
    let texts: Vec<_> = merged.content.iter().filter_map(|b| b.as_text()).collect();
    assert_eq!(texts, ["first", "second"]);
    assert!(merged.batch_id.is_none(), "host fields are stripped");
}

async fn queue_mode_run(mode: QueueMode) -> (Vec<String>, usize) {
    let tool = TestTool::new("sleep", ExecutionMode::Parallel, Behaviour::Sleep);
    let provider = ScriptedProvider::with_responses([
        call("c1", "sleep", json!({"ms": 500})),
        text("a"),
        text("b"),
        text("c"),
    ]);
    let mut options = AgentOptions::new(model(), Arc::new(provider.clone())).tools(vec![tool]);
    options.steering_mode = mode;
    let agent = keel_agent::Agent::new(options).unwrap();
    let running = agent.start(Some(vec![user("go")])).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    agent.steer(user("s1"));
    agent.steer(user("s2"));
    running.await.unwrap();
    (history(&agent), provider.call_count())
}

#[tokio::test(start_paused = true)]
async fn one_at_a_time_delivers_one_steering_message_per_step() {
    let (history, calls) = queue_mode_run(QueueMode::OneAtATime).await;
    assert_eq!(
        history,
        [
            "user:go",
            "assistant:tool_use",
            "result:c1",
            "user:s1",
            "assistant:stop",
            "user:s2",
            "assistant:stop"
        ]
    );
    assert_eq!(calls, 3);
}

#[tokio::test(start_paused = true)]
async fn all_mode_delivers_every_queued_message_at_once() {
    let (history, calls) = queue_mode_run(QueueMode::All).await;
    assert_eq!(
        history,
        [
            "user:go",
            "assistant:tool_use",
            "result:c1",
            "user:s1",
            "user:s2",
            "assistant:stop"
        ]
    );
    assert_eq!(calls, 2);
}

#[derive(Default)]
struct HostQueue {
    boundaries: Mutex<Vec<Boundary>>,
    inbox: Mutex<Vec<Vec<Message>>>,
}

#[async_trait]
impl LoopHooks for HostQueue {
    async fn poll_steering(&self, boundary: Boundary) -> Vec<Vec<Message>> {
        self.boundaries.lock().unwrap().push(boundary);
        if boundary == Boundary::MidTurn {
            std::mem::take(&mut *self.inbox.lock().unwrap())
        } else {
            Vec::new()
        }
    }
}

#[tokio::test]
async fn the_boundary_says_whether_more_steps_follow() {
    let tool = TestTool::new("echo", ExecutionMode::Parallel, Behaviour::Echo);
    let host = Arc::new(HostQueue::default());
    host.inbox.lock().unwrap().push(vec![user("from host")]);
    let (agent, _provider, _recorder) = agent_with(
        vec![call("c1", "echo", json!({})), text("done")],
        vec![tool],
        Some(host.clone()),
    );
    agent.prompt(vec![user("go")]).await.unwrap();
    assert_eq!(
        *host.boundaries.lock().unwrap(),
        [Boundary::MidTurn, Boundary::Exit]
    );
    assert_eq!(
        history(&agent),
        [
            "user:go",
            "assistant:tool_use",
            "result:c1",
            "user:from host",
            "assistant:stop"
        ]
    );
}

#[tokio::test]
async fn settled_is_signalled_after_agent_end_listeners_returned() {
    struct SlowEnd(Arc<Mutex<bool>>);
    #[async_trait]
    impl keel_agent::AgentSubscriber for SlowEnd {
        async fn on_event(&self, event: &keel_protocol::AgentEvent) {
            if matches!(event, keel_protocol::AgentEvent::AgentEnd { .. }) {
                tokio::time::sleep(Duration::from_millis(30)).await;
                *self.0.lock().unwrap() = true;
            }
        }
    }
    let (agent, _provider, _recorder) = agent_with(vec![text("a")], vec![], None);
    let flag = Arc::new(Mutex::new(false));
    agent.subscribe(Arc::new(SlowEnd(flag.clone())));
    let _running = agent.start(Some(vec![user("go")])).unwrap();
    agent.wait_for_idle().await;
    assert!(
        *flag.lock().unwrap(),
        "idle only after every agent_end listener returned"
    );
}

#[tokio::test]
async fn the_partial_message_is_visible_while_streaming() {
    let (agent, _provider, _recorder) = agent_with(
        vec![
            ScriptedResponse::text("abcdef")
                .chunk_size(1)
                .delay(Duration::from_millis(20)),
        ],
        vec![],
        None,
    );
    let running = agent.start(Some(vec![user("go")])).unwrap();
    tokio::time::sleep(Duration::from_millis(70)).await;
    let partial = agent.streaming_message().expect("streaming");
    assert!(
        !partial.text().is_empty() && partial.text().len() < 6,
        "{}",
        partial.text()
    );
    running.await.unwrap();
    assert!(agent.streaming_message().is_none());
}
