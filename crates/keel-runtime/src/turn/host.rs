//! The runner's host for one turn: it folds runtime events through the turn view into the
//! session's event stream, hands steering to the runner (claimed from the store's queue
//! before the next model request), and commits history as the runner hands it over,
//! acknowledging delivered inputs once the message carrying them is committed.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::{HistoryChangedHook, TurnHost};
use keel_agent::{Boundary, HookError, TurnContext};
use keel_protocol::{InputKind, Message, RuntimeEvent, SessionEventBody, TurnId, UserMessage};
use keel_store::{CommitRequest, Entry, HistoryOp, Store, new_id};

use super::RunningTurn;
use crate::queue;
use crate::runtime::Slot;
use crate::view::TurnView;

/// The host side of one running turn.
pub(crate) struct TurnHostImpl {
    pub(crate) slot: Arc<Slot>,
    pub(crate) turn: Arc<RunningTurn>,
    pub(crate) store: Store,
    pub(crate) view: Mutex<TurnView>,
}

impl TurnHostImpl {
    /// Completes the items the turn left open.
    pub(crate) fn close_view(&self) {
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        view.close(&mut |body| self.slot.emit(body));
        self.slot.hub.drained();
    }
}

#[async_trait]
impl TurnHost for TurnHostImpl {
    async fn poll_steering(&self, turn: &TurnContext, boundary: Boundary) -> Vec<Vec<Message>> {
        // At an exit boundary the answer is complete: waiting steering becomes a new turn
        // instead of extending this one.
        if boundary == Boundary::Exit || !self.slot.steering_waiting() {
            return Vec::new();
        }
        let claim = match self
            .store
            .claim_inputs(&turn.session_id, &turn.turn_id, &[InputKind::Steer])
            .await
        {
            Ok(Some(claim)) => claim,
            Ok(None) => return Vec::new(),
            Err(error) => {
                self.slot.emit(SessionEventBody::Failure {
                    turn_id: Some(turn.turn_id.clone()),
                    failure: keel_protocol::Failure::new(
                        keel_protocol::FailureCode::QueueFailed,
                        format!("cannot claim queued steering: {error}"),
                    ),
                });
                return Vec::new();
            }
        };
        let mut batches = Vec::with_capacity(claim.inputs.len());
        {
            let mut delivered = self
                .turn
                .delivered
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for input in &claim.inputs {
                delivered.insert(input.id.clone(), claim.id.clone());
                batches.push(vec![queue::message_of(input)]);
            }
        }
        queue::refresh(&self.slot, &self.store).await;
        batches
    }

    fn try_begin_close(&self, _turn: &TurnContext) -> bool {
        // Nothing must join an answered turn: waiting input becomes the next turn.
        true
    }

    async fn on_runtime_event(&self, event: RuntimeEvent) {
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        view.apply(event.body, &mut |body| self.slot.emit(body));
    }

    async fn on_events_drained(&self) {
        self.slot.hub.drained();
    }
}

/// Commits every message the runner hands over, in the running turn, and acknowledges the
/// queued inputs those messages delivered.
pub(crate) struct CommitHistory {
    pub(crate) store: Store,
    pub(crate) turn_id: TurnId,
    pub(crate) turn: Arc<RunningTurn>,
}

#[async_trait]
impl HistoryChangedHook for CommitHistory {
    async fn on_history_changed(
        &self,
        turn: &TurnContext,
        messages: &[Arc<Message>],
    ) -> Result<(), HookError> {
        let entries = messages
            .iter()
            .map(|m| Entry::new(Message::clone(m)))
            .collect();
        let request = CommitRequest {
            session_id: turn.session_id.clone(),
            turn_id: Some(self.turn_id.clone()),
            operation_id: new_id("op-"),
            expected_revision: None,
            op: HistoryOp::Append { entries },
        };
        let receipt = self
            .turn
            .commit(&self.store, request, "store history")
            .await
            .map_err(|e| HookError::new(e.to_string()))?;
        self.turn.committed(messages);
        self.acknowledge(messages, receipt.revision).await;
        self.acknowledge_reminders(messages).await;
        Ok(())
    }
}

impl CommitHistory {
    /// Acknowledges the session reminders the turn's prompt carried, once the hidden
    /// message holding them is committed.
    async fn acknowledge_reminders(&self, messages: &[Arc<Message>]) {
        let carried = {
            let mut batch = self
                .turn
                .reminder_batch
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let found = batch.as_ref().is_some_and(|batch| {
                messages.iter().any(|m| {
                    matches!(&**m, Message::User(UserMessage {
                        batch_id: Some(b),
                        hidden: true,
                        ..
                    }) if b == batch)
                })
            });
            if found {
                *batch = None;
            }
            found
        };
        if carried
            && let Err(error) = self
                .store
                .acknowledge_session_reminders(&self.turn_id)
                .await
        {
            // They are in history; at worst the next turn shows them once more.
            tracing::warn!(turn = %self.turn_id, %error, "cannot acknowledge session reminders");
        }
    }

    /// Acknowledges the inputs `messages` delivered, now that they are committed.
    async fn acknowledge(&self, messages: &[Arc<Message>], revision: u64) {
        let mut by_claim: Vec<(String, Vec<String>)> = Vec::new();
        {
            let mut delivered = self
                .turn
                .delivered
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if delivered.is_empty() {
                return;
            }
            for message in messages {
                // Prefixes and reminders ride in a hidden message of the same batch; the
                // input is consumed by the message that carries it.
                let Message::User(UserMessage {
                    batch_id: Some(input),
                    hidden: false,
                    ..
                }) = &**message
                else {
                    continue;
                };
                let Some(claim) = delivered.remove(input) else {
                    continue;
                };
                match by_claim.iter_mut().find(|(c, _)| *c == claim) {
                    Some((_, ids)) => ids.push(input.clone()),
                    None => by_claim.push((claim, vec![input.clone()])),
                }
            }
        }
        for (claim, ids) in by_claim {
            if let Err(error) = self.store.acknowledge_inputs(&claim, &ids, revision).await {
                // The input is in history; at worst a later release re-queues it once more.
                tracing::warn!(%claim, %error, "cannot acknowledge delivered inputs");
            }
        }
    }
}
