//! The async face of the input queue (DESIGN §13 claim-then-acknowledge): what a front end's
//! Enter (steer) and Alt+Enter (follow-up) queue, what a running turn claims before its next
//! model request and acknowledges after the commit that carried it, and what a user inspects,
//! edits, cancels and reorders while it waits. The rules live in `sql/inputs.rs`.

use keel_protocol::{SessionId, TurnId};

use crate::error::Result;
use crate::model::{Claim, InputKind, QueuedInput};
use crate::sql;
use crate::store::Store;

impl Store {
    /// Queues an input at the back of the session's queue.
    pub async fn enqueue_input(
        &self,
        session: &SessionId,
        kind: InputKind,
        payload: serde_json::Value,
    ) -> Result<QueuedInput> {
        let session = session.clone();
        self.call(move |conn| sql::enqueue_input(conn, session.as_str(), kind, &payload))
            .await
    }

    /// Claims, in queue order, every queued input of those `kinds` for a running turn of the
    /// session (`turn_mismatch` otherwise); `None` when there is none.
    pub async fn claim_inputs(
        &self,
        session: &SessionId,
        turn: &TurnId,
        kinds: &[InputKind],
    ) -> Result<Option<Claim>> {
        let session = session.clone();
        let turn = turn.clone();
        let kinds = kinds.to_vec();
        self.call(move |conn| sql::claim_inputs(conn, session.as_str(), &turn, &kinds))
            .await
    }

    /// Acknowledges every input the claim still holds, once the commit of `revision` that
    /// carried them is acknowledged.
    pub async fn acknowledge_claim(&self, claim: &str, revision: u64) -> Result<usize> {
        let claim = claim.to_owned();
        self.call(move |conn| sql::acknowledge_claim(conn, &claim, revision))
            .await
    }

    /// Acknowledges only the named inputs of the claim (partial consumption); the rest stay
    /// claimed. An id the claim does not hold is `input_not_in_claim` and nothing changes.
    pub async fn acknowledge_inputs(
        &self,
        claim: &str,
        input_ids: &[String],
        revision: u64,
    ) -> Result<usize> {
        let claim = claim.to_owned();
        let input_ids = input_ids.to_vec();
        self.call(move |conn| sql::acknowledge_inputs(conn, &claim, &input_ids, revision))
            .await
    }

    /// Re-queues what the claim holds unacknowledged, each input at the place it left.
    pub async fn release_claim(&self, claim: &str) -> Result<usize> {
        let claim = claim.to_owned();
        self.call(move |conn| sql::release_claim(conn, &claim))
            .await
    }

    /// Re-queues every input the turn claimed and never acknowledged, each at the place it
    /// left (the front of the queue, in their order); for abort and close.
    pub async fn release_turn_claims(&self, turn: &TurnId) -> Result<usize> {
        let turn = turn.clone();
        self.call(move |conn| sql::release_turn_claims(conn, &turn))
            .await
    }

    /// The inputs waiting in the session's queue, in queue order.
    pub async fn queued_inputs(&self, session: &SessionId) -> Result<Vec<QueuedInput>> {
        let session = session.clone();
        self.call(move |conn| sql::queued_inputs(conn, session.as_str()))
            .await
    }

    /// Replaces a queued input's payload; `input_not_queued` once it left the queue.
    pub async fn edit_input(
        &self,
        session: &SessionId,
        input_id: &str,
        payload: serde_json::Value,
    ) -> Result<QueuedInput> {
        let session = session.clone();
        let input_id = input_id.to_owned();
        self.call(move |conn| sql::edit_input(conn, session.as_str(), &input_id, &payload))
            .await
    }

    /// Cancels a queued input (kept for audit, never claimed); `input_not_queued` once it
    /// left the queue.
    pub async fn cancel_input(&self, session: &SessionId, input_id: &str) -> Result<()> {
        let session = session.clone();
        let input_id = input_id.to_owned();
        self.call(move |conn| sql::cancel_input(conn, session.as_str(), &input_id))
            .await
    }

    /// Puts the queued inputs in the given order, which must name each of them exactly once
    /// (`queue_order_mismatch` otherwise, naming what is missing, not queued or named twice);
    /// all or nothing. Returns the queue as it now is.
    pub async fn reorder_inputs(
        &self,
        session: &SessionId,
        ordered_ids: &[String],
    ) -> Result<Vec<QueuedInput>> {
        let session = session.clone();
        let ordered_ids = ordered_ids.to_vec();
        self.call(move |conn| sql::reorder_inputs(conn, session.as_str(), &ordered_ids))
            .await
    }
}
