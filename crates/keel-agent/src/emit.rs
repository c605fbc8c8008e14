//! Delivering loop events to subscribers, awaited one after another in registration order.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_protocol::AgentEvent;

use crate::guard::{Guarded, guard};

/// Receives every event of every run of an agent.
#[async_trait]
pub trait AgentSubscriber: Send + Sync {
    /// Handles one event. The run waits for this to return before it goes on, which is how
    /// persistence keeps up with the loop; a panic or a hang past the hook time limit is
    /// logged and skipped.
    async fn on_event(&self, event: &AgentEvent);
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

/// The subscribers of one run, snapshotted at its start.
#[derive(Clone)]
pub(crate) struct Emitter {
    subscribers: Arc<[Arc<dyn AgentSubscriber>]>,
    limit: Duration,
}

impl Emitter {
    pub(crate) fn new(subscribers: Arc<[Arc<dyn AgentSubscriber>]>, limit: Duration) -> Self {
        Self { subscribers, limit }
    }

    pub(crate) async fn emit(&self, event: AgentEvent) {
        for subscriber in self.subscribers.iter() {
            if let Guarded::Failed(problem) = guard(
                "event subscriber",
                subscriber.on_event(&event),
                self.limit,
                None,
            )
            .await
            {
                tracing::warn!(event = event.kind(), %problem, "subscriber failed");
            }
        }
    }
}
