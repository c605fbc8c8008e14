//! The async face of the input queue (SPEC §13 claim-then-acknowledge): inputs carried beside
//! tool results are claimed by a running turn and acknowledged after the history commit that
//! carried them, or released back to the queue. The rules live in `sql/inputs.rs`.

use keel_protocol::{SessionId, TurnId};

use crate::error::Result;
use crate::model::{Claim, QueuedInput};
use crate::sql;
use crate::store::Store;

impl Store {
    /// Queues an input carried beside tool results (steering, machine input).
    pub async fn enqueue_input(
        &self,
        session: &SessionId,
        payload: serde_json::Value,
    ) -> Result<String> {
        let session = session.clone();
        self.call(move |conn| sql::enqueue_input(conn, session.as_str(), &payload))
            .await
    }

    /// Claims all queued inputs of the session for a running turn.
    pub async fn claim_inputs(&self, session: &SessionId, turn: &TurnId) -> Result<Option<Claim>> {
        let session = session.clone();
        let turn = turn.clone();
        self.call(move |conn| sql::claim_inputs(conn, session.as_str(), &turn))
            .await
    }

    /// Acknowledges a claim once the commit carrying its inputs is acknowledged.
    pub async fn acknowledge_claim(&self, claim: &str, revision: u64) -> Result<usize> {
        let claim = claim.to_owned();
        self.call(move |conn| sql::acknowledge_claim(conn, &claim, revision))
            .await
    }

    /// Re-queues an unacknowledged claim.
    pub async fn release_claim(&self, claim: &str) -> Result<usize> {
        let claim = claim.to_owned();
        self.call(move |conn| sql::release_claim(conn, &claim))
            .await
    }

    /// Inputs waiting to be claimed.
    pub async fn queued_inputs(&self, session: &SessionId) -> Result<Vec<QueuedInput>> {
        let session = session.clone();
        self.call(move |conn| sql::queued_inputs(conn, session.as_str()))
            .await
    }
}
