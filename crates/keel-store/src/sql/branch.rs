//! History taken from an earlier revision: a fork copies it into a new session, a rewind makes
//! it the head of the same session again. Both read rows by the revision range they are live in,
//! so neither loses anything: the fork's source is untouched, and the rows a rewind ends stay
//! readable at their revisions.

use keel_protocol::{TurnId, now_ms};
use rusqlite::{Connection, TransactionBehavior, params};

use super::commit::Plan;
use super::history::raw_rows;
use super::{create_session, get_session, int};
use crate::error::{Result, StoreError};
use crate::model::{CommitKind, CommitReceipt, ForkPoint, NewSession, SessionRecord};
use crate::turns::ensure_idle;

/// Brings the history of `session` back to what it was at `to_revision`: the rows both share
/// stay, the rest of the live rows end and the old revision's later rows are written again.
pub(super) fn plan_rewind(
    conn: &Connection,
    session: &SessionRecord,
    turn: Option<&TurnId>,
    to_revision: u64,
) -> Result<Plan> {
    let session_id = session.id.as_str();
    // Rewinding under a running turn would cut history out from under it; only that turn
    // itself may rewind while it runs.
    ensure_idle(conn, session_id, turn.map(TurnId::as_str))?;
    if to_revision > session.revision {
        return Err(StoreError::NotFound {
            kind: "revision",
            id: format!("{session_id}@{to_revision}"),
        });
    }
    let live = raw_rows(conn, session_id, None)?;
    let target = raw_rows(conn, session_id, Some(to_revision))?;
    let common = live
        .iter()
        .zip(&target)
        .take_while(|(row, old)| row.seq == old.seq)
        .count();
    let target: Vec<(String, String)> = target.into_iter().map(|row| (row.id, row.json)).collect();
    Ok(Plan {
        kept: live[..common].iter().map(|row| row.id.clone()).collect(),
        killed_from_seq: live.get(common).map(|row| row.seq),
        inserted: target[common..].to_vec(),
        expected: Some(target),
    })
}

/// Copies a session's history at `at` (head when `None`) into a new session whose first
/// revision is that copy.
pub(crate) fn fork(
    conn: &mut Connection,
    source: &str,
    at: Option<u64>,
    title: Option<&str>,
) -> Result<(SessionRecord, CommitReceipt)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let from = get_session(&tx, source)?;
    let at = at.unwrap_or(from.revision);
    if at > from.revision {
        return Err(StoreError::NotFound {
            kind: "revision",
            id: format!("{source}@{at}"),
        });
    }
    let rows = raw_rows(&tx, source, Some(at))?;
    let point = ForkPoint {
        session_id: from.id.clone(),
        revision: at,
    };
    let new = NewSession {
        title: title.map_or_else(|| format!("Fork of {}", from.title), str::to_owned),
        cwd: from.cwd.clone(),
        model: from.model.clone(),
        parent_id: None,
    };
    let created = create_session(&tx, &new, Some(&point))?;
    let id = created.id.as_str();
    let now = now_ms();
    {
        let mut insert = tx.prepare(
            "INSERT INTO history (session_id, seq, from_rev, message_id, message, created_ms) \
             VALUES (?1, ?2, 1, ?3, ?4, ?5)",
        )?;
        for (seq, row) in (1_i64..).zip(&rows) {
            insert.execute(params![id, seq, row.id, row.json, now])?;
        }
    }
    let length = rows.len() as u64;
    let operation = format!("fork:{source}@{at}");
    tx.execute(
        "INSERT INTO commits (session_id, revision, kind, epoch, operation_id, fingerprint, \
         length, written, created_ms) VALUES (?1, 1, 'fork', 0, ?2, '', ?3, ?3, ?4)",
        params![id, operation, int(length), now],
    )?;
    tx.execute(
        "UPDATE sessions SET revision = 1, length = ?2, updated_ms = ?3 WHERE id = ?1",
        params![id, int(length), now],
    )?;
    tx.commit()?;
    let record = get_session(conn, id)?;
    let receipt = CommitReceipt {
        session_id: record.id.clone(),
        operation_id: operation,
        kind: CommitKind::Fork,
        revision: 1,
        epoch: 0,
        length,
        written: length,
    };
    Ok((record, receipt))
}
