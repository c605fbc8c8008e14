//! The input queue (DESIGN §13 claim-then-acknowledge): steering and follow-ups wait in a
//! session's queue, a running turn claims the kinds it can take, and acknowledges each once
//! the history commit carrying it is acknowledged, or releases it.
//!
//! An input moves `queued → claimed → acknowledged`, back from `claimed` to `queued` when its
//! claim is released (abort, close, a dead process's turn), or from `queued` to `cancelled`.
//! Rows are never deleted while their session lives, so the queue's history can be audited.
//!
//! Queue order is each input's `position`, unique within its session and kept for the input's
//! whole life. A released input therefore goes back to the very place it left (ahead of what
//! was queued after it), and a reorder hands the queued inputs' own places out again in the new
//! order, leaving the places of claimed inputs alone. Every change is one `IMMEDIATE`
//! transaction, so two processes never see a half-moved queue.

use std::collections::HashSet;

use keel_protocol::{TurnId, now_ms};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::{get_session, int};
use crate::error::{Result, StoreError};
use crate::ids::new_id;
use crate::model::{Claim, InputKind, QueuedInput, TurnStatus};
use crate::turns::get_turn;

/// Kind prefix of input ids.
pub(crate) const INPUT_KIND: &str = "i-";

/// Kind prefix of claim ids.
pub(crate) const CLAIM_KIND: &str = "c-";

const INPUT_COLUMNS: &str = "id, kind, payload, created_ms";

/// The queued inputs of a session, in queue order.
const QUEUED: &str = "SELECT id, kind, payload, created_ms, position FROM inputs \
     WHERE session_id = ?1 AND state = 'queued' ORDER BY position";

/// An input row as stored: id, kind and payload text, creation time.
type RawInput = (String, String, String, i64);

fn raw_input(row: &Row<'_>) -> rusqlite::Result<RawInput> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

fn decode_input((id, kind, payload, created_ms): RawInput) -> Result<QueuedInput> {
    let kind = InputKind::parse(&kind)
        .ok_or_else(|| StoreError::Corrupt(format!("input {id} has the unknown kind `{kind}`")))?;
    let payload = serde_json::from_str(&payload)
        .map_err(|error| StoreError::Corrupt(format!("input {id}: {error}")))?;
    Ok(QueuedInput {
        id,
        kind,
        payload,
        created_ms,
    })
}

/// The session's queued inputs with their positions, in queue order.
fn queued_rows(conn: &Connection, session: &str) -> Result<Vec<(QueuedInput, i64)>> {
    let rows = conn
        .prepare_cached(QUEUED)?
        .query_map([session], |row| {
            Ok((raw_input(row)?, row.get::<_, i64>(4)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter()
        .map(|(raw, position)| Ok((decode_input(raw)?, position)))
        .collect()
}

/// Queues an input at the back of the session's queue.
pub(crate) fn enqueue_input(
    conn: &mut Connection,
    session: &str,
    kind: InputKind,
    payload: &serde_json::Value,
) -> Result<QueuedInput> {
    let payload_text = serde_json::to_string(payload)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, session)?;
    // A bare MAX is one probe at the end of the position index. Places of inputs that left
    // the queue stay taken, so a new input is behind everything ever queued.
    let last: Option<i64> = tx
        .prepare_cached("SELECT MAX(position) FROM inputs WHERE session_id = ?1")?
        .query_row([session], |row| row.get(0))?;
    let id = new_id(INPUT_KIND);
    let now = now_ms();
    tx.execute(
        "INSERT INTO inputs (id, session_id, kind, position, payload, state, created_ms, \
         updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?6)",
        params![
            id,
            session,
            kind.as_str(),
            last.unwrap_or(0) + 1,
            payload_text,
            now
        ],
    )?;
    tx.commit()?;
    Ok(QueuedInput {
        id,
        kind,
        payload: payload.clone(),
        created_ms: now,
    })
}

/// Claims, in queue order, every queued input of the session whose kind is in `kinds`, for a
/// running turn of that session; `None` when there is none.
pub(crate) fn claim_inputs(
    conn: &mut Connection,
    session: &str,
    turn: &TurnId,
    kinds: &[InputKind],
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
    let inputs: Vec<QueuedInput> = queued_rows(&tx, session)?
        .into_iter()
        .map(|(input, _)| input)
        .filter(|input| kinds.contains(&input.kind))
        .collect();
    if inputs.is_empty() {
        return Ok(None);
    }
    let claim_id = new_id(CLAIM_KIND);
    let now = now_ms();
    {
        let mut claim = tx.prepare_cached(
            "UPDATE inputs SET state = 'claimed', claim_id = ?2, turn_id = ?3, updated_ms = ?4 \
             WHERE id = ?1",
        )?;
        for input in &inputs {
            claim.execute(params![input.id, claim_id, turn.as_str(), now])?;
        }
    }
    tx.commit()?;
    Ok(Some(Claim {
        id: claim_id,
        turn_id: turn.clone(),
        inputs,
    }))
}

/// The session of a claim that still holds inputs.
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

/// Fails unless `revision` was committed to `session`: an input is acknowledged only by the
/// commit that carried it.
fn ensure_committed(conn: &Connection, session: &str, revision: u64) -> Result<()> {
    let committed: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM commits WHERE session_id = ?1 AND revision = ?2)",
        params![session, int(revision)],
        |row| row.get(0),
    )?;
    if committed {
        Ok(())
    } else {
        Err(StoreError::NotFound {
            kind: "revision",
            id: format!("{session}@{revision}"),
        })
    }
}

/// Marks every input a claim still holds consumed by the committed `revision` of its session.
pub(crate) fn acknowledge_claim(
    conn: &mut Connection,
    claim: &str,
    revision: u64,
) -> Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let session = claimed_session(&tx, claim)?;
    ensure_committed(&tx, &session, revision)?;
    let changed = tx.execute(
        "UPDATE inputs SET state = 'acknowledged', ack_revision = ?2, updated_ms = ?3 \
         WHERE claim_id = ?1 AND state = 'claimed'",
        params![claim, int(revision), now_ms()],
    )?;
    tx.commit()?;
    Ok(changed)
}

/// Marks the named inputs of a claim consumed by the committed `revision` (a turn that
/// delivered only part of what it claimed); the rest stay claimed. All or nothing: an id the
/// claim does not hold fails the call and acknowledges none.
pub(crate) fn acknowledge_inputs(
    conn: &mut Connection,
    claim: &str,
    input_ids: &[String],
    revision: u64,
) -> Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let session = claimed_session(&tx, claim)?;
    ensure_committed(&tx, &session, revision)?;
    let now = now_ms();
    let mut done = HashSet::new();
    for input in input_ids {
        if !done.insert(input.as_str()) {
            continue;
        }
        let row: Option<(String, Option<String>)> = tx
            .query_row(
                "SELECT state, claim_id FROM inputs WHERE id = ?1",
                [input],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let reason = match row {
            Some((state, Some(held_by))) if state == "claimed" && held_by == claim => None,
            Some((state, Some(held_by))) if state == "claimed" => {
                Some(format!("claim {held_by} holds it"))
            }
            Some((state, _)) => Some(format!("it is {state}")),
            None => Some("no input has this id".to_owned()),
        };
        if let Some(reason) = reason {
            return Err(StoreError::InputNotInClaim {
                claim: claim.to_owned(),
                input: input.clone(),
                reason,
            });
        }
        tx.execute(
            "UPDATE inputs SET state = 'acknowledged', ack_revision = ?2, updated_ms = ?3 \
             WHERE id = ?1",
            params![input, int(revision), now],
        )?;
    }
    tx.commit()?;
    Ok(done.len())
}

/// Puts a claim's unacknowledged inputs back in the queue, each at the place it left.
pub(crate) fn release_claim(conn: &mut Connection, claim: &str) -> Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    claimed_session(&tx, claim)?;
    let released = tx.execute(
        "UPDATE inputs SET state = 'queued', claim_id = NULL, turn_id = NULL, updated_ms = ?2 \
         WHERE claim_id = ?1 AND state = 'claimed'",
        params![claim, now_ms()],
    )?;
    tx.commit()?;
    Ok(released)
}

/// Puts every input `turn` claimed and never acknowledged back in the queue, each at the
/// place it left; for a turn that is aborted, closed or was left by a dead process.
pub(crate) fn requeue_turn_claims(conn: &Connection, turn: &str) -> Result<usize> {
    Ok(conn.execute(
        "UPDATE inputs SET state = 'queued', claim_id = NULL, turn_id = NULL, updated_ms = ?2 \
         WHERE turn_id = ?1 AND state = 'claimed'",
        params![turn, now_ms()],
    )?)
}

/// [`requeue_turn_claims`] for a turn that must exist.
pub(crate) fn release_turn_claims(conn: &mut Connection, turn: &TurnId) -> Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_turn(&tx, turn.as_str())?;
    let released = requeue_turn_claims(&tx, turn.as_str())?;
    tx.commit()?;
    Ok(released)
}

/// The session's queued inputs, in queue order.
pub(crate) fn queued_inputs(conn: &Connection, session: &str) -> Result<Vec<QueuedInput>> {
    get_session(conn, session)?;
    Ok(queued_rows(conn, session)?
        .into_iter()
        .map(|(input, _)| input)
        .collect())
}

/// Fails unless `input` is a queued input of `session`: [`StoreError::NotFound`] when the
/// session has no such input, [`StoreError::InputNotQueued`] when it has left the queue.
fn ensure_queued(conn: &Connection, session: &str, input: &str) -> Result<()> {
    let state: Option<String> = conn
        .query_row(
            "SELECT state FROM inputs WHERE id = ?1 AND session_id = ?2",
            [input, session],
            |row| row.get(0),
        )
        .optional()?;
    match state.as_deref() {
        Some("queued") => Ok(()),
        Some(state) => Err(StoreError::InputNotQueued {
            input: input.to_owned(),
            state: state.to_owned(),
        }),
        None => Err(StoreError::NotFound {
            kind: "input",
            id: input.to_owned(),
        }),
    }
}

/// Replaces the payload of a queued input; its kind and place stay.
pub(crate) fn edit_input(
    conn: &mut Connection,
    session: &str,
    input: &str,
    payload: &serde_json::Value,
) -> Result<QueuedInput> {
    let payload_text = serde_json::to_string(payload)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    ensure_queued(&tx, session, input)?;
    tx.execute(
        "UPDATE inputs SET payload = ?2, updated_ms = ?3 WHERE id = ?1",
        params![input, payload_text, now_ms()],
    )?;
    let edited = tx.query_row(
        &format!("SELECT {INPUT_COLUMNS} FROM inputs WHERE id = ?1"),
        [input],
        raw_input,
    )?;
    tx.commit()?;
    decode_input(edited)
}

/// Takes a queued input out of the queue for good; the row stays, marked `cancelled`.
pub(crate) fn cancel_input(conn: &mut Connection, session: &str, input: &str) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    ensure_queued(&tx, session, input)?;
    tx.execute(
        "UPDATE inputs SET state = 'cancelled', updated_ms = ?2 WHERE id = ?1",
        params![input, now_ms()],
    )?;
    tx.commit()?;
    Ok(())
}

/// What a proposed order gets wrong against the queued ids: `(missing, extra, duplicated)`,
/// each in the order first met; `None` when it is a permutation.
pub(crate) fn order_mismatch(
    queued: &[&str],
    ordered: &[String],
) -> Option<(Vec<String>, Vec<String>, Vec<String>)> {
    let queued_set: HashSet<&str> = queued.iter().copied().collect();
    let mut seen = HashSet::new();
    let mut extra = Vec::new();
    let mut duplicated = Vec::new();
    for id in ordered {
        if !seen.insert(id.as_str()) {
            if !duplicated.contains(id) {
                duplicated.push(id.clone());
            }
        } else if !queued_set.contains(id.as_str()) {
            extra.push(id.clone());
        }
    }
    let missing: Vec<String> = queued
        .iter()
        .filter(|id| !seen.contains(*id))
        .map(|id| (*id).to_owned())
        .collect();
    if missing.is_empty() && extra.is_empty() && duplicated.is_empty() {
        None
    } else {
        Some((missing, extra, duplicated))
    }
}

/// Puts the session's queued inputs in the order `ordered` gives, which must name each of
/// them exactly once. The queued inputs' places are handed out again in the new order, so
/// claimed inputs keep theirs. Returns the queue as it now is.
pub(crate) fn reorder_inputs(
    conn: &mut Connection,
    session: &str,
    ordered: &[String],
) -> Result<Vec<QueuedInput>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, session)?;
    let queued = queued_rows(&tx, session)?;
    let ids: Vec<&str> = queued.iter().map(|(input, _)| input.id.as_str()).collect();
    if let Some((missing, extra, duplicated)) = order_mismatch(&ids, ordered) {
        return Err(StoreError::QueueOrderMismatch {
            session: session.to_owned(),
            missing,
            extra,
            duplicated,
        });
    }
    // Places are unique per session and checked row by row, so moving them in place would
    // collide midway: park the queued inputs on negative places (places are positive), then
    // give each its new one.
    tx.execute(
        "UPDATE inputs SET position = -position WHERE session_id = ?1 AND state = 'queued'",
        [session],
    )?;
    let now = now_ms();
    {
        let mut place = tx.prepare_cached(
            "UPDATE inputs SET position = ?2, \
             updated_ms = CASE WHEN position = -?2 THEN updated_ms ELSE ?3 END WHERE id = ?1",
        )?;
        for (id, (_, position)) in ordered.iter().zip(&queued) {
            place.execute(params![id, position, now])?;
        }
    }
    let reordered = queued_rows(&tx, session)?;
    tx.commit()?;
    Ok(reordered.into_iter().map(|(input, _)| input).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    #[test]
    fn a_permutation_has_no_mismatch() {
        assert_eq!(
            order_mismatch(&["a", "b", "c"], &ids(&["c", "a", "b"])),
            None
        );
        assert_eq!(order_mismatch(&[], &[]), None);
    }

    #[test]
    fn an_order_names_what_is_missing_extra_and_twice() {
        assert_eq!(
            order_mismatch(&["a", "b", "c"], &ids(&["c", "x", "c", "a", "x", "y"])),
            Some((ids(&["b"]), ids(&["x", "y"]), ids(&["c", "x"])))
        );
        assert_eq!(
            order_mismatch(&["a", "b"], &ids(&["a"])),
            Some((ids(&["b"]), vec![], vec![]))
        );
    }
}
