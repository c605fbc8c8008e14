//! Immutable facts about the turn a loop run belongs to.

use keel_protocol::{SessionId, TurnId};

/// Turn-scoped data passed to tools and hooks; never changes during the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnContext {
    /// The session.
    pub session_id: SessionId,
    /// The turn.
    pub turn_id: TurnId,
}
