//! A running turn's history replacement (archive, compaction): one `replace` commit by the
//! turn, the turn's cached history following it, and the session's extensions told of a
//! compaction so they can freeze what they keep beside the session.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::Message;
use keel_store::{CommitRequest, Entry, HistoryOp, new_id};

use super::running::RunningTurn;
use crate::extension::{HistoryWriter, Replaced, Replacement, SessionChange};
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
    ) -> Result<Replaced, String> {
        let store = &self.runtime.inner.store;
        let session = &self.slot.id;
        let before = store
            .session(session)
            .await
            .map_err(|e| format!("cannot read the session before replacing its history: {e}"))?
            .revision;
        // Marked before the await, as for every commit of the turn: if the hook's time limit
        // drops this future after the store wrote the replacement, the turn must fail rather
        // than keep a cached history the store no longer has.
        let marked = {
            let mut failure = self.running.commit_failure();
            failure
                .is_none()
                .then(|| *failure = Some(super::host::UNFINISHED.to_owned()))
                .is_some()
        };
        let result = store
            .commit(CommitRequest {
                session_id: session.clone(),
                turn_id: Some(self.running.turn_id.clone()),
                operation_id: new_id("op-"),
                // Nothing else may have committed since the turn measured the history.
                expected_revision: Some(before),
                op: HistoryOp::Replace {
                    entries: messages
                        .iter()
                        .map(|m| Entry::new(Message::clone(m)))
                        .collect(),
                },
            })
            .await;
        let receipt = {
            let mut failure = self.running.commit_failure();
            match result {
                Ok(receipt) => {
                    if marked {
                        *failure = None;
                    }
                    receipt
                }
                Err(error) => {
                    let message = format!("cannot replace the history: {error}");
                    if marked {
                        *failure = Some(message.clone());
                    }
                    return Err(message);
                }
            }
        };
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
