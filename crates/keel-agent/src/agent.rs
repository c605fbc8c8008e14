//! The `Agent` shell: the stateful owner of a transcript around the stateless loop.
//!
//! It holds history, tools, model and the two message queues, and offers `prompt`,
//! `continue_run`, `steer`, `steer_batch`, `follow_up`, `abort`. A run executes in its own
//! task, so dropping the future returned by `prompt` never leaves history half-written;
//! `abort` only signals and returns at once, and the run then ends within the tools' grace
//! period. "Settled" (all `agent_end` listeners returned and the agent is idle again) is a
//! separate signal from the `agent_end` event.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt;
use keel_llm::{AssistantBuilder, ModelSpec};
use keel_protocol::{AssistantMessage, Message};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::emit::{AgentSubscriber, Emitter};
use crate::error::AgentError;
use crate::guard::panic_text;
use crate::hooks::LoopHooks;
use crate::options::{AgentOptions, QueueMode};
use crate::projection::Projector;
use crate::run::{Run, RunConfig, recover_from_panic};
use crate::tool::ToolRef;
use crate::tools_table::ToolTable;

/// Mutable agent state, behind one lock held only for short, await-free sections.
pub(crate) struct State {
    pub(crate) history: Arc<Vec<Arc<Message>>>,
    pub(crate) epoch: u64,
    pub(crate) projector: Projector,
    pub(crate) streaming: Option<AssistantBuilder>,
    pub(crate) steering: VecDeque<Vec<Message>>,
    pub(crate) follow_ups: VecDeque<Vec<Message>>,
    options: AgentOptions,
    tools: ToolTable,
    subscribers: Vec<(u64, Arc<dyn AgentSubscriber>)>,
    next_subscriber: u64,
    run_cancel: Option<CancellationToken>,
}

impl State {
    pub(crate) fn push_message(&mut self, message: Arc<Message>) {
        Arc::make_mut(&mut self.history).push(message);
    }

    pub(crate) fn replace_history(&mut self, messages: Vec<Arc<Message>>) {
        self.history = Arc::new(messages);
        self.epoch += 1;
    }

    pub(crate) fn has_queued(&self) -> bool {
        !self.steering.is_empty() || !self.follow_ups.is_empty()
    }

    /// Takes queued batches per `mode`.
    pub(crate) fn take(queue: &mut VecDeque<Vec<Message>>, mode: QueueMode) -> Vec<Message> {
        match mode {
            QueueMode::OneAtATime => queue.pop_front().unwrap_or_default(),
            QueueMode::All => queue.drain(..).flatten().collect(),
        }
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// `true` while a run is in progress.
    running: watch::Sender<bool>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // State stays consistent across a panic (every section is a few plain writes), so a
        // poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A stateful agent around the loop.
#[derive(Clone)]
pub struct Agent {
    shared: Arc<Shared>,
}

/// A handle that does not keep the agent alive (for hooks the agent itself owns).
#[derive(Clone)]
pub struct WeakAgent {
    shared: std::sync::Weak<Shared>,
}

impl WeakAgent {
    /// The agent, if it still exists.
    pub fn upgrade(&self) -> Option<Agent> {
        self.shared.upgrade().map(|shared| Agent { shared })
    }
}

/// Identifies a subscription so it can be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubscriptionId(u64);

impl Agent {
    /// Builds an agent; fails if tool names collide or a tool schema is invalid.
    pub fn new(options: AgentOptions) -> Result<Self, AgentError> {
        let tools = ToolTable::new(&options.tools)?;
        let (running, _) = watch::channel(false);
        let state = State {
            history: Arc::new(options.messages.clone()),
            epoch: 0,
            projector: Projector::new(options.min_image_bytes),
            streaming: None,
            steering: VecDeque::new(),
            follow_ups: VecDeque::new(),
            options,
            tools,
            subscribers: Vec::new(),
            next_subscriber: 0,
            run_cancel: None,
        };
        Ok(Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                running,
            }),
        })
    }

    /// A handle that does not keep the agent alive.
    pub fn downgrade(&self) -> WeakAgent {
        WeakAgent {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Adds a subscriber; every later run delivers its events to it, in registration order.
    pub fn subscribe(&self, subscriber: Arc<dyn AgentSubscriber>) -> SubscriptionId {
        let mut state = self.shared.lock();
        let id = state.next_subscriber;
        state.next_subscriber += 1;
        state.subscribers.push((id, subscriber));
        SubscriptionId(id)
    }

    /// Removes a subscriber (effective from the next run).
    pub fn unsubscribe(&self, id: SubscriptionId) {
        self.shared
            .lock()
            .subscribers
            .retain(|(sid, _)| *sid != id.0);
    }

    /// Adds `messages` (sent together, as one batch) and runs until the agent is idle.
    pub async fn prompt(&self, messages: Vec<Message>) -> Result<(), AgentError> {
        let done = self.start(Some(messages))?;
        done.await
            .map_err(|_| AgentError::RunLost("the run task was dropped".into()))
    }

    /// Runs on the existing history (after an error, or to deliver queued messages).
    pub async fn continue_run(&self) -> Result<(), AgentError> {
        let done = self.start(None)?;
        done.await
            .map_err(|_| AgentError::RunLost("the run task was dropped".into()))
    }

    /// Starts a run without waiting for it; the receiver fires once it settled.
    pub fn start(&self, prompt: Option<Vec<Message>>) -> Result<oneshot::Receiver<()>, AgentError> {
        // An empty prompt adds nothing: it is a continue, with a continue's checks.
        let prompt = prompt.filter(|messages| !messages.is_empty());
        let (run, emitter, ids) = {
            let mut state = self.shared.lock();
            if state.run_cancel.is_some() {
                return Err(AgentError::Busy);
            }
            if prompt.is_none() && !state.has_queued() {
                let role = state.history.last().map_or("empty", |m| m.role());
                if matches!(role, "assistant" | "empty") {
                    return Err(AgentError::NothingToContinue { role });
                }
            }
            let cancel = match &state.options.abort_on {
                Some(parent) => parent.child_token(),
                None => CancellationToken::new(),
            };
            state.run_cancel = Some(cancel.clone());
            let subscribers: Arc<[Arc<dyn AgentSubscriber>]> =
                state.subscribers.iter().map(|(_, s)| s.clone()).collect();
            let emitter = Emitter::new(subscribers, state.options.hook_timeout);
            let ids = state.options.message_ids.clone();
            let config = RunConfig::new(&state.options, state.tools.clone());
            let start_len = state.history.len();
            let run = Run::new(
                self.shared.clone(),
                config,
                cancel,
                emitter.clone(),
                start_len,
            );
            (run, emitter, ids)
        };
        self.shared.running.send_replace(true);
        let prompt = prompt.map(assign_batch);
        let (done_tx, done_rx) = oneshot::channel();
        let shared = self.shared.clone();
        // The run task logs under the caller's span (the runner's turn), not on its own.
        let span = tracing::Span::current();
        let task = async move {
            let start_len = run.start_len();
            let outcome = AssertUnwindSafe(run.execute(prompt)).catch_unwind().await;
            if let Err(panic) = outcome {
                let text = panic_text(&*panic);
                tracing::error!(panic = %text, "agent run panicked");
                recover_from_panic(&shared, &emitter, &ids, start_len, &text).await;
            }
            {
                let mut state = shared.lock();
                state.run_cancel = None;
                state.streaming = None;
            }
            shared.running.send_replace(false);
            let _ = done_tx.send(());
        };
        tokio::spawn(task.instrument(span));
        Ok(done_rx)
    }

    /// Queues a message to be injected before the next model call of the current run.
    pub fn steer(&self, message: Message) {
        self.shared.lock().steering.push_back(vec![message]);
    }

    /// Queues messages sent together; they are injected as one batch.
    pub fn steer_batch(&self, messages: Vec<Message>) {
        if !messages.is_empty() {
            self.shared
                .lock()
                .steering
                .push_back(assign_batch(messages));
        }
    }

    /// Queues a message for after the current run would otherwise end.
    pub fn follow_up(&self, message: Message) {
        self.shared.lock().follow_ups.push_back(vec![message]);
    }

    /// Queues follow-up messages sent together, delivered as one batch.
    pub fn follow_up_batch(&self, messages: Vec<Message>) {
        if !messages.is_empty() {
            self.shared
                .lock()
                .follow_ups
                .push_back(assign_batch(messages));
        }
    }

    /// Whether steering or follow-up messages are waiting.
    pub fn has_queued_messages(&self) -> bool {
        self.shared.lock().has_queued()
    }

    /// Drops every queued steering and follow-up message, returning them.
    pub fn clear_queues(&self) -> Vec<Message> {
        let mut state = self.shared.lock();
        let mut out: Vec<Message> = state.steering.drain(..).flatten().collect();
        out.extend(state.follow_ups.drain(..).flatten());
        out
    }

    /// Signals the current run to stop and returns at once. Pending tool calls get error
    /// results; tools that ignore the signal are abandoned after the grace period.
    pub fn abort(&self) {
        if let Some(cancel) = &self.shared.lock().run_cancel {
            cancel.cancel();
        }
    }

    /// Waits until no run is in progress (the settled signal).
    pub async fn wait_for_idle(&self) {
        let mut running = self.shared.running.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we wait.
        let _ = running.wait_for(|r| !*r).await;
    }

    /// Whether a run is in progress.
    pub fn is_running(&self) -> bool {
        *self.shared.running.borrow()
    }

    /// A watch that is `true` while a run is in progress.
    pub fn running_signal(&self) -> watch::Receiver<bool> {
        self.shared.running.subscribe()
    }

    /// The history (cheap: a shared pointer).
    pub fn messages(&self) -> Arc<Vec<Arc<Message>>> {
        self.shared.lock().history.clone()
    }

    /// The assistant message being streamed, if any.
    pub fn streaming_message(&self) -> Option<AssistantMessage> {
        self.shared
            .lock()
            .streaming
            .as_ref()
            .map(|b| b.message().clone())
    }

    /// Replaces the history (used between runs, for example after loading a session).
    pub fn replace_messages(&self, messages: Vec<Arc<Message>>) {
        self.shared.lock().replace_history(messages);
    }

    /// Replaces the tools for later runs.
    pub fn set_tools(&self, tools: Vec<ToolRef>) -> Result<(), AgentError> {
        let table = ToolTable::new(&tools)?;
        let mut state = self.shared.lock();
        state.options.tools = tools;
        state.tools = table;
        Ok(())
    }

    /// Changes the model for later model calls.
    pub fn set_model(&self, model: ModelSpec) {
        self.shared.lock().options.model = Arc::new(model);
    }

    /// Changes the system prompt for later runs.
    pub fn set_system_prompt(&self, prompt: impl Into<Arc<str>>) {
        self.shared.lock().options.system_prompt = prompt.into();
    }

    /// Changes the hooks for later runs.
    pub fn set_hooks(&self, hooks: Arc<dyn LoopHooks>) {
        self.shared.lock().options.hooks = hooks;
    }
}

/// Marks user messages sent together with one batch id so they project as one message.
pub(crate) fn assign_batch(mut messages: Vec<Message>) -> Vec<Message> {
    let users = messages
        .iter()
        .filter(|m| matches!(m, Message::User(_)))
        .count();
    if users > 1 {
        let batch = keel_protocol::MessageId::generate().to_string();
        for message in &mut messages {
            if let Message::User(user) = message {
                user.batch_id.get_or_insert_with(|| batch.clone());
            }
        }
    }
    messages
}
