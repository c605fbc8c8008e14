//! A running turn's history replacement (archive, compaction): one `replace` commit by the
//! turn, the turn's cached history following it, and the session's extensions told of a
//! compaction so they can freeze what they keep beside the session.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::Message;
use keel_store::{CommitRequest, Entry, HistoryOp, new_id};

use super::running::RunningTurn;
use crate::extension::{HistoryError, HistoryWriter, Replaced, Replacement, SessionChange};
use crate::runtime::{Runtime, Slot};

/// The [`HistoryWriter`] a turn's scope carries.
pub(crate) struct TurnHistory {
    pub(crate) runtime: Runtime,
    pub(crate) slot: Arc<Slot>,
    pub(crate) running: Arc<RunningTurn>,
}

#[async_trait]
impl HistoryWriter for TurnHistory {
    async fn replace(
        &self,
        messages: &[Arc<Message>],
        why: Replacement,
    ) -> Result<Replaced, HistoryError> {
        let store = &self.runtime.inner.store;
        let session = &self.slot.id;
        // The turn owns the session (no other process commits to it meanwhile), and its own
        // commits are serial: nothing to check the revision against.
        let request = CommitRequest {
            session_id: session.clone(),
            turn_id: Some(self.running.turn_id.clone()),
            operation_id: new_id("op-"),
            expected_revision: None,
            op: HistoryOp::Replace {
                entries: messages
                    .iter()
                    .map(|m| Entry::new(Message::clone(m)))
                    .collect(),
            },
        };
        let receipt = self
            .running
            .commit(store, request, "replace the history")
            .await?;
        // Every commit makes the next revision: the one before still holds the old history.
        let before = receipt.revision.saturating_sub(1);
        self.running.replaced(messages);
        if why == Replacement::Compaction {
            self.runtime
                .session_changed(
                    session,
                    SessionChange::Compacted {
                        before,
                        revision: receipt.revision,
                    },
                )
                .await;
        }
        Ok(Replaced {
            before,
            revision: receipt.revision,
        })
    }
}
