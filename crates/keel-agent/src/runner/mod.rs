//! The turn runner: wraps one loop run into one host turn (DESIGN §2).
//!
//! A runner holds only process-wide defaults; every `run_turn` builds a fresh agent,
//! event bridge, event queue and history cursor, in eight steps:
//! 1. build turn state (composed stream function, tools, bridge, numbering);
//! 2. emit `session.status = running`;
//! 3. create the agent with system prompt, model, tools and history;
//! 4. install the tool and LLM hooks;
//! 5. subscribe to agent events, all into one serial queue;
//! 6. turn the caller's cancellation into `agent.abort()`;
//! 7. `prompt` or `continue`, then converge at idle;
//! 8. drain the queue, hand over history not yet handed over, emit the final status.

mod bridge;
mod classify;
mod hooks;
mod host;
mod state;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use keel_llm::{
    EventStream, LlmRequest, ModelSpec, RequestOptions, StreamFn, StreamSettings, compose_stream_fn,
};
use keel_protocol::{
    AgentEvent, AssistantMessage, ContentBlock, Message, MessageId, RuntimeEvent, SessionId,
    StopReason, ToolCallId, TurnId, TurnOutcome, Usage,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use classify::model_code;
pub use hooks::{
    AfterLlmCallHook, AfterToolCallHook, BeforeLlmAction, BeforeLlmCallHook, BeforeToolCallHook,
    HistoryChangedHook, LlmCallPreparedHook, LlmCallView, RequestOrigin, StepEndHook, StepQueue,
    ToolExecutionStartHook, TurnHooks,
};
pub use host::TurnHost;

use crate::agent::Agent;
use crate::emit::AgentSubscriber;
use crate::guard::{Guarded, guard};
use crate::hooks::Boundary;
use crate::options::{
    AgentOptions, ApiKeySource, DEFAULT_ABORT_GRACE, DEFAULT_HOOK_TIMEOUT, MessageIdSource,
    QueueMode,
};
use crate::tool::ToolRef;
use crate::turn_context::TurnContext;
use bridge::EventBridge;
use classify::Failure;
use state::TurnShared;

/// Loop events buffered between the agent and the bridge. The agent awaits each send, so
/// a slow consumer slows the loop rather than growing this queue.
const EVENT_QUEUE_CAPACITY: usize = 1024;

/// Upper bound on `converge_at_idle` rounds; each round is a full `continue`.
const MAX_CONVERGE_ROUNDS: usize = 64;

/// How long the host may take to assign a message id before one is generated locally.
const ID_TIMEOUT: Duration = Duration::from_secs(10);

/// Process-wide defaults of a runner.
#[derive(Debug, Clone)]
pub struct RunnerDefaults {
    /// Stream wrappers applied to every model call.
    pub stream: StreamSettings,
    /// Grace period for tools after an abort.
    pub abort_grace: Duration,
    /// Bound on each hook call.
    pub hook_timeout: Duration,
    /// Steering delivery.
    pub steering_mode: QueueMode,
    /// Follow-up delivery.
    pub follow_up_mode: QueueMode,
    /// Most steps (model calls) a turn may take; a turn that reaches it while the model
    /// still calls tools fails with `step_limit_exceeded`. `None`: unlimited.
    pub max_steps: Option<u32>,
}

impl Default for RunnerDefaults {
    fn default() -> Self {
        Self {
            stream: StreamSettings::default(),
            abort_grace: DEFAULT_ABORT_GRACE,
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            max_steps: None,
        }
    }
}

/// How a turn starts.
#[derive(Debug, Clone)]
pub enum TurnStart {
    /// A new user message (or several sent together).
    Prompt(Vec<Message>),
    /// Run on the existing history (a resumed run).
    Continue,
}

/// Everything one turn needs.
pub struct TurnInput {
    /// Session.
    pub session_id: SessionId,
    /// Turn.
    pub turn_id: TurnId,
    /// Model.
    pub model: ModelSpec,
    /// The provider's stream function (wrapped by the runner).
    pub stream_fn: Arc<dyn StreamFn>,
    /// System prompt.
    pub system_prompt: String,
    /// Tools.
    pub tools: Vec<ToolRef>,
    /// Tools that join the turn at its next model call.
    pub tool_additions: Option<crate::ToolAdditions>,
    /// History before the turn.
    pub history: Vec<Arc<Message>>,
    /// Prompt or continue.
    pub start: TurnStart,
    /// The turn's hooks.
    pub hooks: TurnHooks,
    /// The host.
    pub host: Arc<dyn TurnHost>,
    /// The caller's abort signal.
    pub cancel: CancellationToken,
    /// Per-call options.
    pub request_options: RequestOptions,
    /// API key source, asked before every call.
    pub api_keys: Option<Arc<dyn ApiKeySource>>,
}

/// What a turn produced.
#[derive(Debug, Clone)]
pub struct TurnResult {
    /// Exactly one terminal outcome.
    pub outcome: TurnOutcome,
    /// Messages the turn added, in order.
    pub messages: Vec<Arc<Message>>,
    /// Usage summed over the turn's model calls.
    pub usage: Usage,
    /// Problems that did not stop the turn (failed step-end or rewrite hooks, …).
    pub degradations: u32,
    /// Queued steering and follow-ups the turn ended without consuming (already handed
    /// back through [`TurnHost::requeue`]).
    pub unconsumed: Vec<Message>,
}

/// Runs turns.
#[derive(Debug, Clone, Default)]
pub struct TurnRunner {
    defaults: RunnerDefaults,
}

enum BridgeInput {
    Agent(AgentEvent),
    Status(keel_protocol::SessionStatus),
    /// A call passed its gate and is about to run.
    Admitted(ToolCallId, String),
    /// Answered once everything sent before it was handed to the host, so what happens
    /// next (a permission question) reaches front ends after it.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

impl TurnRunner {
    /// A runner with these defaults.
    pub fn new(defaults: RunnerDefaults) -> Self {
        Self { defaults }
    }

    /// Runs one turn to its single outcome.
    pub async fn run_turn(&self, input: TurnInput) -> TurnResult {
        let span = tracing::info_span!(
            "turn",
            session = %input.session_id,
            turn = %input.turn_id
        );
        let result = self.run_turn_in_span(input).instrument(span.clone()).await;
        span.in_scope(|| tracing::debug!(outcome = ?result.outcome, "turn ended"));
        result
    }

    async fn run_turn_in_span(&self, input: TurnInput) -> TurnResult {
        // 1. Turn state.
        let turn = Arc::new(TurnContext {
            session_id: input.session_id.clone(),
            turn_id: input.turn_id.clone(),
        });
        let shared = Arc::new(TurnShared::new(
            turn.clone(),
            input.hooks,
            input.host.clone(),
            self.defaults.hook_timeout,
            input.history.len(),
            self.defaults.max_steps,
        ));
        let observed: Arc<dyn StreamFn> = Arc::new(PreparedObserver {
            inner: input.stream_fn,
            shared: shared.clone(),
        });
        let stream_fn = compose_stream_fn(observed, &self.defaults.stream);
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE_CAPACITY);
        let bridge = EventBridge::new(input.session_id.clone(), input.turn_id.clone());
        let bridge_task = tokio::spawn(bridge_loop(
            events_rx,
            bridge,
            input.host.clone(),
            self.defaults.hook_timeout,
        ));

        // 2. First status.
        let _ = events_tx
            .send(BridgeInput::Status(keel_protocol::SessionStatus::Running))
            .await;

        // 3–4. Agent with hooks installed.
        let mut options = AgentOptions::new(input.model, stream_fn)
            .system_prompt(input.system_prompt)
            .tools(input.tools)
            .messages(input.history)
            .hooks(Arc::new(hooks::TurnLoopHooks {
                shared: shared.clone(),
                events: events_tx.downgrade(),
            }));
        options.request_options = input.request_options;
        options.tool_additions = input.tool_additions;
        options.api_keys = input.api_keys;
        options.message_ids = Arc::new(HostIds {
            host: input.host.clone(),
            turn: turn.clone(),
        });
        options.turn = Some(turn.clone());
        options.abort_grace = self.defaults.abort_grace;
        // The caller's cancellation reaches the loop synchronously: a hook that sees the
        // cancellation (a pending approval answered "cancelled") cannot race the loop into
        // another model call.
        options.abort_on = Some(input.cancel.clone());
        // The loop bounds each seam once, around the runner's whole chain of hooks for it,
        // each of which the runner bounds on its own: the outer limit must cover the chain.
        let chain = shared.hooks.longest_chain().max(1) + 1;
        // A before-LLM hook with a longer limit of its own (context management) stretches
        // the seam by that much.
        let longest_own = shared
            .hooks
            .before_llm_call
            .iter()
            .filter_map(|hook| hook.time_limit())
            .max()
            .unwrap_or_default();
        options.hook_timeout = self
            .defaults
            .hook_timeout
            .saturating_mul(u32::try_from(chain).unwrap_or(u32::MAX))
            .saturating_add(longest_own);
        options.steering_mode = self.defaults.steering_mode;
        options.follow_up_mode = self.defaults.follow_up_mode;
        let agent = match Agent::new(options) {
            Ok(agent) => agent,
            Err(error) => {
                let outcome = TurnOutcome::Failed {
                    code: error.failure_code(),
                    message: error.to_string(),
                };
                let _ = events_tx.send(BridgeInput::Status(outcome.status())).await;
                drop(events_tx);
                let _ = bridge_task.await;
                return TurnResult {
                    outcome,
                    messages: Vec::new(),
                    usage: Usage::default(),
                    degradations: 0,
                    unconsumed: Vec::new(),
                };
            }
        };
        let _ = shared.agent.set(agent.downgrade());

        // 5. One serial queue for every event.
        let subscription = agent.subscribe(Arc::new(RunnerSubscriber {
            shared: shared.clone(),
            events: events_tx.clone(),
            cancel: input.cancel.clone(),
        }));

        // 7 (with 6). Run, with the caller's cancellation wired to abort.
        let started = match input.start {
            TurnStart::Prompt(messages) => agent.start(Some(messages)),
            TurnStart::Continue => agent.start(None),
        };
        let cancel = input.cancel;
        let canceller = {
            let agent = agent.clone();
            let cancel = cancel.clone();
            AbortOnDrop(tokio::spawn(async move {
                cancel.cancelled().await;
                agent.abort();
            }))
        };
        match started {
            Ok(done) => {
                let _ = done.await;
                converge_at_idle(&agent, &shared, &cancel).await;
            }
            Err(error) => shared.fail(Failure::Refused {
                code: error.failure_code(),
                message: error.to_string(),
            }),
        }
        drop(canceller);
        if !shared.is_closed() {
            // A failed or aborted turn still stops accepting; the host re-queues leftovers.
            let _ = shared.try_close();
        }

        // 8. Drain: queued input the turn did not consume goes back to the host, history
        // not yet handed over is handed over, then the final status.
        let unconsumed = agent.clear_queues();
        if !unconsumed.is_empty() {
            input.host.requeue(&turn, unconsumed.clone()).await;
        }
        flush_history(&agent, &shared).await;
        agent.unsubscribe(subscription);
        let messages = shared.take_turn_messages();
        let outcome = outcome(&cancel, &shared, &messages);
        let _ = events_tx.send(BridgeInput::Status(outcome.status())).await;
        drop(events_tx);
        let _ = bridge_task.await;
        let mut usage = Usage::default();
        for message in &messages {
            if let Some(assistant) = message.as_assistant() {
                usage += assistant.usage;
            }
        }
        TurnResult {
            outcome,
            messages,
            usage,
            degradations: shared.degradations(),
            unconsumed,
        }
    }
}

/// After the agent went idle: if steering arrived, continue; repeat until the close
/// succeeds.
async fn converge_at_idle(agent: &Agent, shared: &TurnShared, cancel: &CancellationToken) {
    for _ in 0..MAX_CONVERGE_ROUNDS {
        if cancel.is_cancelled() || shared.failure().is_some() || ended_badly(agent) {
            return;
        }
        if !agent.has_queued_messages() {
            if shared.is_closed() {
                return;
            }
            let batches = shared
                .host
                .poll_steering(&shared.turn, Boundary::Exit)
                .await;
            if batches.is_empty() {
                if shared.try_close() {
                    return;
                }
                continue;
            }
            for batch in batches {
                agent.steer_batch(batch);
            }
        }
        let Ok(done) = agent.start(None) else { return };
        // The cancellation watcher may have fired between the check above and the start.
        if cancel.is_cancelled() {
            agent.abort();
        }
        let _ = done.await;
    }
    tracing::warn!("turn did not converge after {MAX_CONVERGE_ROUNDS} rounds");
}

fn ended_badly(agent: &Agent) -> bool {
    agent
        .messages()
        .iter()
        .rev()
        .find_map(|m| m.as_assistant())
        .is_some_and(|a| matches!(a.stop_reason, StopReason::Error | StopReason::Aborted))
}

fn outcome(
    cancel: &CancellationToken,
    shared: &TurnShared,
    messages: &[Arc<Message>],
) -> TurnOutcome {
    if cancel.is_cancelled() {
        return TurnOutcome::Aborted {
            reason: Some("aborted by the caller".into()),
        };
    }
    if let Some(failure) = shared.failure() {
        let (code, message) = failure.classify();
        return TurnOutcome::Failed { code, message };
    }
    let last = messages.iter().rev().find_map(|m| m.as_assistant());
    let failure = match last {
        Some(a) if a.stop_reason == StopReason::Aborted => {
            return TurnOutcome::Aborted {
                reason: a.error.as_ref().map(|e| e.message.clone()),
            };
        }
        Some(a) if a.stop_reason == StopReason::Error => match &a.error {
            Some(error) => Failure::Model(error.clone()),
            None => Failure::Internal("the model call failed without an error".into()),
        },
        Some(a) if is_only_answer(a, messages) && shows_nothing(a) => Failure::EmptyResponse {
            stop_reason: a.stop_reason,
            reasoned: a
                .content
                .iter()
                .any(|block| matches!(block, ContentBlock::Thinking(_))),
        },
        _ => return TurnOutcome::Completed,
    };
    let (code, message) = failure.classify();
    TurnOutcome::Failed { code, message }
}

/// Whether `answer` is the turn's first and only model response. An empty answer after
/// tool steps is left alone here: what to do with one is a recovery of its own.
fn is_only_answer(answer: &AssistantMessage, messages: &[Arc<Message>]) -> bool {
    messages
        .iter()
        .find_map(|m| m.as_assistant())
        .is_some_and(|first| std::ptr::eq(first, answer))
}

/// Whether a response has nothing a user would see as an answer: no text beyond
/// whitespace, no tool call, no image. Reasoning alone is not an answer.
fn shows_nothing(answer: &AssistantMessage) -> bool {
    !answer.content.iter().any(|block| match block {
        ContentBlock::Text(text) => !text.text.trim().is_empty(),
        ContentBlock::Thinking(_) => false,
        _ => true,
    })
}

async fn flush_history(agent: &Agent, shared: &TurnShared) {
    let history = agent.messages();
    let cursor = shared.history_cursor.load(Ordering::SeqCst);
    if let Some(rest) = history.get(cursor..).filter(|rest| !rest.is_empty()) {
        shared.history_changed(rest).await;
    }
}

async fn bridge_loop(
    mut events: mpsc::Receiver<BridgeInput>,
    mut bridge: EventBridge,
    host: Arc<dyn TurnHost>,
    limit: Duration,
) {
    let mut out = Vec::new();
    let mut next = events.recv().await;
    while let Some(input) = next {
        let mut barrier = None;
        let status = match input {
            BridgeInput::Agent(event) => {
                bridge.translate(event, &mut out);
                None
            }
            BridgeInput::Status(status) => {
                bridge.flush_held(&mut out);
                Some(status)
            }
            BridgeInput::Admitted(call, name) => {
                bridge.admitted(call, name, &mut out);
                None
            }
            BridgeInput::Barrier(reply) => {
                barrier = Some(reply);
                None
            }
        };
        let mut numbered: Vec<RuntimeEvent> =
            out.drain(..).map(|body| bridge.number(body)).collect();
        if let Some(status) = status {
            numbered.push(bridge.status(status));
        }
        for event in numbered {
            // A sink that panics or hangs loses that event, never the rest of the turn.
            if let Guarded::Failed(problem) = guard(
                "runtime event sink",
                host.on_runtime_event(event),
                limit,
                None,
            )
            .await
            {
                tracing::warn!(%problem, "runtime event sink failed");
            }
        }
        if let Some(reply) = barrier {
            let _ = reply.send(());
        }
        next = match events.try_recv() {
            Ok(input) => Some(input),
            Err(_) => {
                if let Guarded::Failed(problem) =
                    guard("runtime event sink", host.on_events_drained(), limit, None).await
                {
                    tracing::warn!(%problem, "runtime event sink failed");
                }
                events.recv().await
            }
        };
    }
}

/// Feeds loop events to the hooks that live on them and to the bridge.
struct RunnerSubscriber {
    shared: Arc<TurnShared>,
    events: mpsc::Sender<BridgeInput>,
    cancel: CancellationToken,
}

#[async_trait]
impl AgentSubscriber for RunnerSubscriber {
    async fn on_event(&self, event: &AgentEvent) {
        // The bridge first: a slow persistence hook must not hold back what the user sees.
        let _ = self.events.send(BridgeInput::Agent(event.clone())).await;
        match event {
            AgentEvent::MessageEnd { message, .. } => {
                self.shared
                    .history_changed(std::slice::from_ref(message))
                    .await;
            }
            AgentEvent::TurnEnd {
                message,
                tool_results,
            } if !self.cancel.is_cancelled() => {
                self.shared
                    .step_end(message.clone(), tool_results.clone())
                    .await;
            }
            AgentEvent::AgentEnd { messages } => self.shared.record_turn_messages(messages),
            _ => {}
        }
    }

    fn bounded(&self) -> bool {
        // Each hook it runs is bounded on its own, and the bridge must see every event.
        false
    }
}

/// Message ids from the host, with a local fallback if the host is too slow.
struct HostIds {
    host: Arc<dyn TurnHost>,
    turn: Arc<TurnContext>,
}

#[async_trait]
impl MessageIdSource for HostIds {
    async fn assign(&self, message: &Message) -> MessageId {
        match tokio::time::timeout(ID_TIMEOUT, self.host.assign_message_id(&self.turn, message))
            .await
        {
            Ok(id) => id,
            Err(_) => {
                tracing::warn!("host did not assign a message id in time; generating one");
                MessageId::generate()
            }
        }
    }
}

/// Lets `on_llm_call_prepared` hooks see each request exactly as it is sent.
struct PreparedObserver {
    inner: Arc<dyn StreamFn>,
    shared: Arc<TurnShared>,
}

impl StreamFn for PreparedObserver {
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream {
        if self.shared.hooks.on_llm_call_prepared.is_empty() {
            return self.inner.stream(request, cancel);
        }
        let inner = self.inner.clone();
        let shared = self.shared.clone();
        Box::pin(
            futures::stream::once(async move {
                let origin = shared.origin();
                for hook in &shared.hooks.on_llm_call_prepared {
                    let observed = hook.on_llm_call_prepared(&shared.turn, &request, &origin);
                    if let Err(error) = shared.call("on_llm_call_prepared hook", observed).await {
                        // Observation only: a failure never affects the call.
                        tracing::warn!(%error, "on_llm_call_prepared hook failed");
                        shared.degrade();
                    }
                }
                inner.stream(request, cancel)
            })
            .flatten(),
        )
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
