//! What the tool tests and benches share.
#![allow(dead_code, reason = "each test binary uses part of it")]

use keel_agent::{ToolCallContext, ToolUpdates};
use keel_protocol::MessageId;
use tokio_util::sync::CancellationToken;

/// A context for call `c1` whose updates go nowhere.
pub fn context() -> ToolCallContext {
    context_with(CancellationToken::new())
}

/// [`context`], cancelled through `cancel`.
pub fn context_with(cancel: CancellationToken) -> ToolCallContext {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    std::mem::forget(rx);
    ToolCallContext {
        tool_call_id: "c1".into(),
        assistant_message_id: MessageId::new("m1"),
        turn: None,
        cancel,
        updates: ToolUpdates::new(0, tx),
    }
}
