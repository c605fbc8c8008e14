//! The session's input queue as front ends use it: steering for the running turn,
//! follow-ups for after it, each waiting input editable, cancellable and reorderable until
//! it is claimed. The store keeps the queue (claim-then-acknowledge, DESIGN §13); the slot
//! keeps the last read copy so polling for steering costs nothing when none waits.

use keel_protocol::{
    InputKind, Message, QueueEntry, SessionEventBody, SessionId, TurnSource, UserMessage,
};
use keel_store::{QueuedInput, Store};
use serde_json::json;

use crate::error::RuntimeError;
use crate::runtime::{Admission, Slot};
use crate::turn::{Start, TurnHandle, TurnOptions};
use crate::turns::Turns;

/// The text a queued input carries.
fn text_of(input: &QueuedInput) -> String {
    input
        .payload
        .get("text")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Who queued a stored input (front ends and API callers store no sender).
fn source_of(input: &QueuedInput) -> TurnSource {
    input
        .payload
        .get("source")
        .and_then(serde_json::Value::as_str)
        .and_then(TurnSource::parse)
        .unwrap_or_default()
}

/// The queue entry front ends see for a stored input.
pub(crate) fn entry_of(input: &QueuedInput) -> QueueEntry {
    QueueEntry {
        id: input.id.clone(),
        kind: input.kind,
        text: text_of(input),
        created_ms: input.created_ms,
        source: source_of(input),
    }
}

/// The user message that delivers a queued input; its batch id is the input's id, so the
/// commit that stores it can acknowledge the input.
pub(crate) fn message_of(input: &QueuedInput) -> Message {
    let mut message = UserMessage::text(text_of(input));
    message.batch_id = Some(input.id.clone());
    Message::User(message)
}

/// Re-reads the queue into the slot and tells subscribers.
pub(crate) async fn refresh(slot: &Slot, store: &Store) {
    match store.queued_inputs(&slot.id).await {
        Ok(inputs) => {
            let queue: Vec<QueueEntry> = inputs.iter().map(entry_of).collect();
            let changed = {
                let mut state = slot.lock();
                let changed = state.queue != queue;
                state.queue.clone_from(&queue);
                changed
            };
            if changed {
                slot.emit(SessionEventBody::QueueChanged { queue });
            }
        }
        Err(error) => slot.emit(SessionEventBody::Failure {
            turn_id: None,
            failure: keel_protocol::Failure::new(
                keel_protocol::FailureCode::QueueFailed,
                format!("cannot read the input queue: {error}"),
            ),
        }),
    }
}

fn payload(text: &str, source: &TurnSource) -> serde_json::Value {
    if source.is_api() {
        json!({ "text": text })
    } else {
        json!({ "text": text, "source": source.as_text() })
    }
}

fn check_text(text: &str) -> Result<(), RuntimeError> {
    if text.trim().is_empty() {
        return Err(RuntimeError::Usage("the input is empty".into()));
    }
    Ok(())
}

impl Turns {
    /// Queues input. With no turn running, a turn starts from the queue now.
    pub(crate) async fn enqueue(
        &self,
        session: &SessionId,
        kind: InputKind,
        text: &str,
        source: TurnSource,
    ) -> Result<(QueueEntry, Option<TurnHandle>), RuntimeError> {
        check_text(text)?;
        let slot = self.runtime.slot_or_open(session).await?;
        self.runtime.sessions().title_from_prompt(&slot, text).await;
        let store = &self.runtime.inner.store;
        let input = store
            .enqueue_input(session, kind, payload(text, &source))
            .await?;
        refresh(&slot, store).await;
        let idle = matches!(slot.lock().admission, Admission::Idle);
        let turn = if idle {
            match self
                .runtime
                .start_turn(slot.clone(), Start::Queue, source, TurnOptions::default())
                .await
            {
                Ok(handle) => Some(handle),
                // A turn got admitted meanwhile: it will take the input.
                Err(RuntimeError::TurnRunning { .. }) => None,
                Err(error) => return Err(error),
            }
        } else {
            None
        };
        Ok((entry_of(&input), turn))
    }

    /// The session's waiting inputs, in delivery order.
    pub(crate) async fn queue(&self, session: &SessionId) -> Result<Vec<QueueEntry>, RuntimeError> {
        let inputs = self.runtime.inner.store.queued_inputs(session).await?;
        Ok(inputs.iter().map(entry_of).collect())
    }

    /// Changes a waiting input's text.
    pub(crate) async fn edit_queued(
        &self,
        session: &SessionId,
        input: &str,
        text: &str,
    ) -> Result<QueueEntry, RuntimeError> {
        check_text(text)?;
        let edited = self
            .runtime
            .inner
            .store
            .edit_input(session, input, payload(text, &TurnSource::Api))
            .await?;
        self.after_queue_change(session).await;
        Ok(entry_of(&edited))
    }

    /// Withdraws a waiting input.
    pub(crate) async fn cancel_queued(
        &self,
        session: &SessionId,
        input: &str,
    ) -> Result<(), RuntimeError> {
        self.runtime
            .inner
            .store
            .cancel_input(session, input)
            .await?;
        self.after_queue_change(session).await;
        Ok(())
    }

    /// Puts the waiting inputs in `order` (every waiting id exactly once).
    pub(crate) async fn reorder_queue(
        &self,
        session: &SessionId,
        order: &[String],
    ) -> Result<Vec<QueueEntry>, RuntimeError> {
        let inputs = self
            .runtime
            .inner
            .store
            .reorder_inputs(session, order)
            .await?;
        self.after_queue_change(session).await;
        Ok(inputs.iter().map(entry_of).collect())
    }

    async fn after_queue_change(&self, session: &SessionId) {
        if let Ok(slot) = self.runtime.slot(session) {
            refresh(&slot, &self.runtime.inner.store).await;
        }
    }

    /// Starts a turn from the waiting inputs.
    pub(crate) async fn dispatch(
        &self,
        session: &SessionId,
        source: keel_protocol::TurnSource,
    ) -> Result<TurnHandle, RuntimeError> {
        let slot = self.runtime.slot_or_open(session).await?;
        refresh(&slot, &self.runtime.inner.store).await;
        self.runtime
            .start_turn(slot, Start::Queue, source, TurnOptions::default())
            .await
    }
}
