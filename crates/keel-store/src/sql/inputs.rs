//! The input queue beside tool results (SPEC §13): inputs are queued, claimed by a running
//! turn, and acknowledged once the commit carrying them is, or released back to the queue.

use keel_protocol::{TurnId, now_ms};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{get_session, int};
use crate::error::{Result, StoreError};
use crate::ids::new_id;
use crate::model::{Claim, QueuedInput, TurnStatus};
use crate::turns::get_turn;

/// Queues an input for the session's next claim.
pub(crate) fn enqueue_input(
    conn: &Connection,
    session: &str,
    payload: &serde_json::Value,
) -> Result<String> {
    get_session(conn, session)?;
    let id = new_id("i-");
    let now = now_ms();
    conn.execute(
        "INSERT INTO inputs (id, session_id, payload, state, created_ms, updated_ms) \
         VALUES (?1, ?2, ?3, 'queued', ?4, ?4)",
        params![id, session, serde_json::to_string(payload)?, now],
    )?;
    Ok(id)
}

/// Claims every queued input of the session for a running turn; `None` when nothing is queued.
pub(crate) fn claim_inputs(
    conn: &mut Connection,
    session: &str,
    turn: &TurnId,
) -> Result<Option<Claim>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let record = get_turn(&tx, turn.as_str())?;
    if record.session_id.as_str() != session || record.status != TurnStatus::Running {
        return Err(StoreError::TurnMismatch {
            session: session.to_owned(),
            turn: turn.to_string(),
            reason: "only a running turn of the session can claim its inputs".into(),
        });
    }
    let rows = tx
        .prepare(
            "SELECT id, payload FROM inputs WHERE session_id = ?1 AND state = 'queued' ORDER BY rowid",
        )?
        .query_map([session], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if rows.is_empty() {
        return Ok(None);
    }
    let claim_id = new_id("c-");
    let now = now_ms();
    let mut inputs = Vec::with_capacity(rows.len());
    for (id, payload) in rows {
        tx.execute(
            "UPDATE inputs SET state = 'claimed', claim_id = ?2, turn_id = ?3, updated_ms = ?4 \
             WHERE id = ?1",
            params![id, claim_id, turn.as_str(), now],
        )?;
        let payload = serde_json::from_str(&payload)
            .map_err(|error| StoreError::Corrupt(format!("input {id}: {error}")))?;
        inputs.push(QueuedInput { id, payload });
    }
    tx.commit()?;
    Ok(Some(Claim {
        id: claim_id,
        turn_id: turn.clone(),
        inputs,
    }))
}

fn claimed_session(conn: &Connection, claim: &str) -> Result<String> {
    conn.query_row(
        "SELECT session_id FROM inputs WHERE claim_id = ?1 AND state = 'claimed' LIMIT 1",
        [claim],
        |row| row.get(0),
    )
    .optional()?
    .ok_or_else(|| StoreError::NotFound {
        kind: "claim",
        id: claim.to_owned(),
    })
}

/// Marks a claim consumed by the committed `revision` of its session.
pub(crate) fn acknowledge_claim(
    conn: &mut Connection,
    claim: &str,
    revision: u64,
) -> Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let session = claimed_session(&tx, claim)?;
    let committed: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM commits WHERE session_id = ?1 AND revision = ?2)",
        params![session, int(revision)],
        |row| row.get(0),
    )?;
    if !committed {
        return Err(StoreError::NotFound {
            kind: "revision",
            id: format!("{session}@{revision}"),
        });
    }
    let changed = tx.execute(
        "UPDATE inputs SET state = 'acknowledged', ack_revision = ?2, updated_ms = ?3 \
         WHERE claim_id = ?1 AND state = 'claimed'",
        params![claim, int(revision), now_ms()],
    )?;
    tx.commit()?;
    Ok(changed)
}

/// Puts a claim's inputs back in the queue (the turn ended before committing them).
pub(crate) fn release_claim(conn: &Connection, claim: &str) -> Result<usize> {
    claimed_session(conn, claim)?;
    Ok(conn.execute(
        "UPDATE inputs SET state = 'queued', claim_id = NULL, turn_id = NULL, updated_ms = ?2 \
         WHERE claim_id = ?1 AND state = 'claimed'",
        params![claim, now_ms()],
    )?)
}

/// Inputs of the session still waiting to be claimed.
pub(crate) fn queued_inputs(conn: &Connection, session: &str) -> Result<Vec<QueuedInput>> {
    let rows = conn
        .prepare(
            "SELECT id, payload FROM inputs WHERE session_id = ?1 AND state = 'queued' ORDER BY rowid",
        )?
        .query_map([session], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter()
        .map(|(id, payload)| {
            let payload = serde_json::from_str(&payload)
                .map_err(|error| StoreError::Corrupt(format!("input {id}: {error}")))?;
            Ok(QueuedInput { id, payload })
        })
        .collect()
}
