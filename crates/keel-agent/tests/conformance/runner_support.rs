//! A scripted host for turn-runner tests.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_agent::runner::{
    RunnerDefaults, TurnHooks, TurnHost, TurnInput, TurnResult, TurnRunner, TurnStart,
};
use keel_agent::{Boundary, ToolRef, TurnContext};
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::{
    Message, MessageId, RuntimeEvent, RuntimeEventBody, SessionStatus, TurnOutcome,
};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
pub struct TestHost {
    pub events: Mutex<Vec<RuntimeEvent>>,
    pub mid_turn: Mutex<VecDeque<Vec<Message>>>,
    pub exit: Mutex<VecDeque<Vec<Message>>>,
    /// User steering the host withholds at an exit boundary.
    pub withheld: Mutex<Vec<Message>>,
    pub refuse_closes: AtomicUsize,
    /// Delivered on the poll after this many refusals.
    pub deliver_after_refusals: Mutex<Option<(usize, Vec<Message>)>>,
    pub close_calls: AtomicUsize,
    pub polls: Mutex<Vec<Boundary>>,
    pub requeued: Mutex<Vec<Message>>,
    /// How many events had been delivered at each "drained" notice.
    pub drained: Mutex<Vec<usize>>,
    next_id: AtomicUsize,
}

#[async_trait]
impl TurnHost for TestHost {
    async fn assign_message_id(&self, _turn: &TurnContext, _message: &Message) -> MessageId {
        MessageId::new(format!(
            "m{}",
            self.next_id.fetch_add(1, Ordering::SeqCst) + 1
        ))
    }

    async fn poll_steering(&self, _turn: &TurnContext, boundary: Boundary) -> Vec<Vec<Message>> {
        self.polls.lock().unwrap().push(boundary);
        match boundary {
            Boundary::MidTurn => self.mid_turn.lock().unwrap().drain(..).collect(),
            Boundary::Exit => {
                let mut ready = self.deliver_after_refusals.lock().unwrap();
                if let Some((after, _)) = ready.as_ref()
                    && self.close_calls.load(Ordering::SeqCst) >= *after
                {
                    return vec![ready.take().unwrap().1];
                }
                self.exit.lock().unwrap().drain(..).collect()
            }
        }
    }

    fn try_begin_close(&self, _turn: &TurnContext) -> bool {
        self.close_calls.fetch_add(1, Ordering::SeqCst);
        let refusals = self.refuse_closes.load(Ordering::SeqCst);
        if refusals > 0 {
            self.refuse_closes.store(refusals - 1, Ordering::SeqCst);
            return false;
        }
        true
    }

    async fn requeue(&self, _turn: &TurnContext, messages: Vec<Message>) {
        self.requeued.lock().unwrap().extend(messages);
    }

    async fn on_runtime_event(&self, event: RuntimeEvent) {
        self.events.lock().unwrap().push(event);
    }

    async fn on_events_drained(&self) {
        let delivered = self.events.lock().unwrap().len();
        self.drained.lock().unwrap().push(delivered);
    }
}

impl TestHost {
    pub fn all(&self) -> Vec<RuntimeEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Checks numbering and the status envelope; returns the bodies.
    pub fn checked(&self) -> Vec<RuntimeEventBody> {
        let events = self.all();
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event.seq, i as u64, "events are numbered without gaps");
        }
        let statuses: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.body {
                RuntimeEventBody::SessionStatus { status } => Some(status.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            statuses.first(),
            Some(&SessionStatus::Running),
            "running comes first"
        );
        assert_eq!(
            statuses.len(),
            2,
            "exactly one terminal status: {statuses:?}"
        );
        assert!(
            matches!(
                events.last().unwrap().body,
                RuntimeEventBody::SessionStatus { .. }
            ),
            "terminal status is last"
        );
        events.into_iter().map(|e| e.body).collect()
    }
}

pub struct Harness {
    pub provider: ScriptedProvider,
    pub host: Arc<TestHost>,
    pub hooks: TurnHooks,
    pub tools: Vec<ToolRef>,
    pub additions: Option<keel_agent::ToolAdditions>,
    pub history: Vec<Arc<Message>>,
    pub cancel: CancellationToken,
    pub defaults: RunnerDefaults,
}

impl Harness {
    pub fn new(responses: Vec<ScriptedResponse>) -> Self {
        let mut defaults = RunnerDefaults {
            abort_grace: std::time::Duration::from_millis(300),
            ..RunnerDefaults::default()
        };
        // Scripted failures are meant to reach the runner; one test turns retry back on.
        defaults.stream.retry = None;
        Self {
            provider: ScriptedProvider::with_responses(responses),
            host: Arc::new(TestHost::default()),
            hooks: TurnHooks::default(),
            tools: Vec::new(),
            additions: None,
            history: Vec::new(),
            cancel: CancellationToken::new(),
            defaults,
        }
    }

    /// One call of a parallel `echo` tool, then the answer `done`.
    pub fn echo_then_done() -> Self {
        let mut harness = Self::new(vec![
            crate::support::call("c1", "echo", serde_json::json!({})),
            crate::support::text("done"),
        ]);
        harness.tools = vec![crate::support::TestTool::new(
            "echo",
            keel_agent::ExecutionMode::Parallel,
            crate::support::Behaviour::Echo,
        )];
        harness
    }

    pub async fn run(&self, prompt: &str) -> TurnResult {
        self.run_with(TurnStart::Prompt(vec![Message::user_text(prompt)]))
            .await
    }

    pub async fn run_with(&self, start: TurnStart) -> TurnResult {
        let runner = TurnRunner::new(self.defaults.clone());
        let result = runner
            .run_turn(TurnInput {
                session_id: "s1".into(),
                turn_id: "t1".into(),
                model: keel_llm::ModelSpec::scripted(),
                stream_fn: Arc::new(self.provider.clone()),
                system_prompt: "You are a test.".into(),
                tools: self.tools.clone(),
                tool_additions: self.additions.clone(),
                history: self.history.clone(),
                start,
                hooks: self.hooks.clone(),
                host: self.host.clone(),
                cancel: self.cancel.clone(),
                request_options: Default::default(),
                api_keys: None,
            })
            .await;
        let bodies = self.host.checked();
        let last = bodies.last().unwrap();
        assert_eq!(
            last,
            &RuntimeEventBody::SessionStatus {
                status: result.outcome.status()
            }
        );
        result
    }
}

pub fn failed_code(outcome: &TurnOutcome) -> String {
    match outcome {
        TurnOutcome::Failed { code, .. } => code.as_str().to_owned(),
        other => panic!("expected a failure, got {other:?}"),
    }
}
