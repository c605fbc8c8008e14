//! What the runner needs from its host: ids, steering, closing, and an event sink.

use async_trait::async_trait;
use keel_protocol::{Message, MessageId, RuntimeEvent};

use crate::hooks::Boundary;
use crate::turn_context::TurnContext;

/// The host side of one turn.
#[async_trait]
pub trait TurnHost: Send + Sync {
    /// Assigns the id of a message that is starting. Hosts own message ids.
    async fn assign_message_id(&self, _turn: &TurnContext, _message: &Message) -> MessageId {
        MessageId::generate()
    }

    /// External messages for the turn. At [`Boundary::Exit`] a host withholds user
    /// steering (it becomes a new request) and returns only what must join this turn.
    /// Each inner list was sent together.
    async fn poll_steering(&self, _turn: &TurnContext, _boundary: Boundary) -> Vec<Vec<Message>> {
        Vec::new()
    }

    /// Atomically stops accepting work for this turn. `false` means new work arrived
    /// first, so the runner polls again.
    fn try_begin_close(&self, _turn: &TurnContext) -> bool {
        true
    }

    /// Takes back steering and follow-ups the turn ended without consuming (after a
    /// failure or an abort), so they can become a new request instead of being lost.
    async fn requeue(&self, _turn: &TurnContext, _messages: Vec<Message>) {}

    /// Receives the turn's runtime events, in order. Awaited: a slow sink slows the turn
    /// instead of letting events pile up.
    async fn on_runtime_event(&self, event: RuntimeEvent);

    /// Every event sent so far has been delivered and no other is waiting: a host that
    /// batches its output (one write for a burst of streamed deltas) writes it now.
    async fn on_events_drained(&self) {}
}
