//! State shared by the pieces of one running turn.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use keel_protocol::Message;

use crate::agent::WeakAgent;
use crate::guard::{Guarded, guard};
use crate::hooks::StepSummary;
use crate::hooks::{Boundary, HookError};
use crate::runner::classify::Failure;
use crate::runner::hooks::TurnHooks;
use crate::runner::hooks::{RequestOrigin, StepQueue};
use crate::runner::host::TurnHost;
use crate::turn_context::TurnContext;

/// How often a refused close may be retried at one exit boundary before the runner
/// leaves the decision to `converge_at_idle`. A host that keeps refusing while
/// delivering nothing would otherwise spin.
const CLOSE_ATTEMPTS: usize = 16;

/// State of one turn, shared by the loop adapter, the subscriber and the runner.
pub(crate) struct TurnShared {
    pub(crate) turn: Arc<TurnContext>,
    pub(crate) hooks: TurnHooks,
    pub(crate) host: Arc<dyn TurnHost>,
    pub(crate) agent: OnceLock<WeakAgent>,
    turn_messages: Mutex<Vec<Arc<Message>>>,
    pub(crate) hook_timeout: Duration,
    failure: Mutex<Option<Failure>>,
    degradations: AtomicU32,
    calls_made: AtomicUsize,
    /// Messages of the current history already handed to `on_history_changed`.
    pub(crate) history_cursor: AtomicUsize,
    closed: AtomicBool,
    max_steps: Option<u32>,
    steps: AtomicU32,
    /// Where the coming model call's messages come from (set when its context is prepared).
    origin: Mutex<RequestOrigin>,
}

impl TurnShared {
    pub(crate) fn new(
        turn: Arc<TurnContext>,
        hooks: TurnHooks,
        host: Arc<dyn TurnHost>,
        hook_timeout: Duration,
        history_len: usize,
        max_steps: Option<u32>,
    ) -> Self {
        Self {
            turn,
            hooks,
            host,
            agent: OnceLock::new(),
            turn_messages: Mutex::new(Vec::new()),
            hook_timeout,
            failure: Mutex::new(None),
            degradations: AtomicU32::new(0),
            calls_made: AtomicUsize::new(0),
            history_cursor: AtomicUsize::new(history_len),
            closed: AtomicBool::new(false),
            max_steps,
            steps: AtomicU32::new(0),
            origin: Mutex::new(RequestOrigin::default()),
        }
    }

    /// Records where the coming model call's messages come from.
    pub(crate) fn set_origin(&self, origin: RequestOrigin) {
        *self.origin.lock().unwrap_or_else(PoisonError::into_inner) = origin;
    }

    /// Where the model call being made takes its messages from.
    pub(crate) fn origin(&self) -> RequestOrigin {
        self.origin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs one hook call: a panic or a hang past the time limit becomes a `HookError`.
    pub(crate) async fn call<T>(
        &self,
        what: &str,
        future: impl Future<Output = Result<T, HookError>>,
    ) -> Result<T, HookError> {
        self.call_within(None, what, future).await
    }

    /// [`Self::call`] with the hook's own time limit when it has one.
    pub(crate) async fn call_within<T>(
        &self,
        limit: Option<Duration>,
        what: &str,
        future: impl Future<Output = Result<T, HookError>>,
    ) -> Result<T, HookError> {
        let limit = limit.map_or(self.hook_timeout, |l| l.max(self.hook_timeout));
        match guard(what, future, limit, None).await {
            Guarded::Done(result) => result,
            Guarded::Failed(problem) => Err(HookError::new(problem)),
            Guarded::Cancelled => Err(HookError::new(format!("{what} was cancelled"))),
        }
    }

    /// Records the first failure of the turn.
    pub(crate) fn fail(&self, failure: Failure) {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(failure);
    }

    pub(crate) fn failure(&self) -> Option<Failure> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Counts a degradation: something went wrong that did not stop the turn.
    pub(crate) fn degrade(&self) {
        self.degradations.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn degradations(&self) -> u32 {
        self.degradations.load(Ordering::Relaxed)
    }

    pub(crate) fn calls_made(&self) -> usize {
        self.calls_made.load(Ordering::Relaxed)
    }

    pub(crate) fn count_call(&self) {
        self.calls_made.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a finished step; true when the step limit is reached and the step asks for
    /// another (it made tool calls), which fails the turn with the limit.
    pub(crate) fn step_limit_reached(&self, wants_more: bool) -> bool {
        let steps = self.steps.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        match self.max_steps {
            Some(max) if steps >= max && wants_more => {
                self.fail(Failure::StepLimit(max));
                true
            }
            _ => false,
        }
    }

    /// History was replaced by a hook: the replacement is the hook's to persist, so only
    /// what follows it is handed to `on_history_changed`.
    pub(crate) fn history_replaced(&self, len: usize) {
        self.history_cursor.store(len, Ordering::SeqCst);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn try_close(&self) -> bool {
        if self.is_closed() {
            return true;
        }
        let closed = self.host.try_begin_close(&self.turn);
        if closed {
            self.closed.store(true, Ordering::SeqCst);
        }
        closed
    }

    /// Polls the host. At an exit boundary an empty poll tries to close the turn; a
    /// refused close means work arrived first, so it polls again.
    pub(crate) async fn poll_host(&self, boundary: Boundary) -> Vec<Vec<Message>> {
        if self.is_closed() {
            return Vec::new();
        }
        for _ in 0..CLOSE_ATTEMPTS {
            let batches = self.host.poll_steering(&self.turn, boundary).await;
            if !batches.is_empty() || boundary == Boundary::MidTurn || self.try_close() {
                return batches;
            }
        }
        tracing::warn!(
            "host refused to close the turn {CLOSE_ATTEMPTS} times without delivering work"
        );
        Vec::new()
    }

    /// Hands new history to `on_history_changed` hooks and advances the cursor.
    pub(crate) async fn history_changed(&self, messages: &[Arc<Message>]) {
        for hook in &self.hooks.on_history_changed {
            let handed = hook.on_history_changed(&self.turn, messages);
            if let Err(error) = self.call("on_history_changed hook", handed).await {
                tracing::warn!(%error, "on_history_changed hook failed");
                self.degrade();
            }
        }
        self.history_cursor
            .fetch_add(messages.len(), Ordering::SeqCst);
    }

    /// Runs `on_step_end` hooks; their errors only count a degradation.
    pub(crate) async fn step_end(
        &self,
        message: Option<Arc<Message>>,
        tool_results: Vec<Arc<Message>>,
    ) {
        if self.hooks.on_step_end.is_empty() {
            return;
        }
        let Some(agent) = self.agent.get().and_then(WeakAgent::upgrade) else {
            return;
        };
        let queue = StepQueue { agent };
        let step = StepSummary {
            message,
            tool_results,
        };
        for hook in &self.hooks.on_step_end {
            if let Err(error) = self
                .call(
                    "on_step_end hook",
                    hook.on_step_end(&self.turn, &step, &queue),
                )
                .await
            {
                tracing::warn!(%error, "on_step_end hook failed");
                self.degrade();
            }
        }
    }

    /// Remembers what a run added to history.
    pub(crate) fn record_turn_messages(&self, messages: &[Arc<Message>]) {
        self.turn_messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(messages.iter().cloned());
    }

    /// Everything the turn's runs added.
    pub(crate) fn take_turn_messages(&self) -> Vec<Arc<Message>> {
        std::mem::take(
            &mut *self
                .turn_messages
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}
