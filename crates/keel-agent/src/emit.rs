//! Delivering loop events to subscribers, awaited one after another in registration order.

use std::sync::Arc;
use std::time::Duration;

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use keel_protocol::{AgentEvent, Message, MessageId, ToolCallId};

use crate::guard::{Guarded, guard};

/// Receives every event of every run of an agent.
#[async_trait]
pub trait AgentSubscriber: Send + Sync {
    /// Handles one event. The run waits for this to return before it goes on, which is how
    /// persistence keeps up with the loop; a panic or a hang past the hook time limit is
    /// logged and skipped.
    async fn on_event(&self, event: &AgentEvent);

    /// Whether the run bounds each call by the hook time limit. A host's own subscriber
    /// that bounds its work itself (and must see every event) returns `false`.
    fn bounded(&self) -> bool {
        true
    }
}

/// A subscriber from a synchronous closure.
pub struct FnSubscriber<F>(pub F);

#[async_trait]
impl<F> AgentSubscriber for FnSubscriber<F>
where
    F: Fn(&AgentEvent) + Send + Sync,
{
    async fn on_event(&self, event: &AgentEvent) {
        (self.0)(event);
    }
}

/// "No limit" for trusted subscribers (a century: `tokio::time` cannot take `MAX`).
const UNBOUNDED: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// What a run has opened and not yet closed, so a crashed run can still be closed
/// exactly: every start gets its end.
#[derive(Debug, Default, Clone)]
pub(crate) struct OpenEvents {
    pub(crate) run: bool,
    pub(crate) step: bool,
    pub(crate) message: Option<(MessageId, Arc<Message>)>,
    pub(crate) tools: Vec<ToolCallId>,
}

impl OpenEvents {
    fn track(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::AgentStart => self.run = true,
            AgentEvent::AgentEnd { .. } => self.run = false,
            AgentEvent::TurnStart => self.step = true,
            AgentEvent::TurnEnd { .. } => self.step = false,
            AgentEvent::MessageStart {
                message_id,
                message,
            } => {
                self.message = Some((message_id.clone(), message.clone()));
            }
            AgentEvent::MessageEnd { .. } => self.message = None,
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                self.tools.push(tool_call_id.clone())
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                self.tools.retain(|t| t != tool_call_id)
            }
            _ => {}
        }
    }
}

/// The subscribers of one run, snapshotted at its start.
#[derive(Clone)]
pub(crate) struct Emitter {
    subscribers: Arc<[Arc<dyn AgentSubscriber>]>,
    limit: Duration,
    open: Arc<Mutex<OpenEvents>>,
}

impl Emitter {
    pub(crate) fn new(subscribers: Arc<[Arc<dyn AgentSubscriber>]>, limit: Duration) -> Self {
        Self {
            subscribers,
            limit,
            open: Arc::default(),
        }
    }

    /// What is open right now.
    pub(crate) fn open(&self) -> OpenEvents {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) async fn emit(&self, event: AgentEvent) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .track(&event);
        for subscriber in self.subscribers.iter() {
            let limit = if subscriber.bounded() {
                self.limit
            } else {
                UNBOUNDED
            };
            if let Guarded::Failed(problem) =
                guard("event subscriber", subscriber.on_event(&event), limit, None).await
            {
                tracing::warn!(event = event.kind(), %problem, "subscriber failed");
            }
        }
    }
}
