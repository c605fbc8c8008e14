//! The write of one history commit and the re-read that validates it (DESIGN §13 steps 1–3).

use std::collections::HashSet;

use keel_protocol::{TurnId, now_ms};
use rusqlite::{Connection, TransactionBehavior, params};

use super::branch::plan_rewind;
use super::history::{RawEntry, find_commit, raw_rows};
use super::{get_session, int};
use crate::error::{Result, StoreError};
use crate::model::{CommitKind, CommitReceipt, CommitRequest, Entry, HistoryOp, TurnStatus};
use crate::turns::get_turn;

// Statements on the commit path of every append. Each must stay an index probe or a short index
// range whatever the session's length; `commit_path_statements_do_not_grow_with_history` (in
// `commit_tests.rs`) holds them to it. Without `sqlite_stat1` (this store never runs ANALYZE) SQLite's planner
// prefers the primary key `(session_id, seq)` for any `session_id = ?` filter, which walks the
// whole session; hence `INDEXED BY` where another index is the right one.

/// Whether a live row of the session already carries this message id.
pub(super) const LIVE_MESSAGE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM history INDEXED BY history_by_message \
     WHERE session_id = ?1 AND message_id = ?2 AND to_rev IS NULL)";
/// The session's highest `seq`. A bare MAX keeps SQLite's min/max shortcut (one probe at the end
/// of the primary key); COALESCE around it would scan.
pub(super) const LAST_SEQ: &str = "SELECT MAX(seq) FROM history WHERE session_id = ?1";
pub(super) const INSERT_HISTORY: &str = "INSERT INTO history \
     (session_id, seq, from_rev, message_id, message, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
pub(super) const INSERT_COMMIT: &str = "INSERT INTO commits (session_id, revision, kind, epoch, operation_id, \
     fingerprint, turn_id, length, written, created_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
/// Moves the session's head to the new revision.
pub(super) const UPDATE_HEAD: &str =
    "UPDATE sessions SET revision = ?2, epoch = ?3, length = ?4, updated_ms = ?5 WHERE id = ?1";
/// The history rows from a `seq` to the end (the rows a commit just inserted): a primary-key range.
pub(super) const READ_TAIL: &str = "SELECT seq, message_id, message, from_rev, created_ms, to_rev \
     FROM history WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq";

/// What [`apply`] did.
pub(crate) enum Applied {
    /// The operation id was already committed (by an earlier attempt or process): its
    /// fingerprint and receipt; nothing was written.
    Earlier(String, CommitReceipt),
    /// The operation was written now.
    Written(Written),
}

/// What a commit wrote, for the re-read that follows it.
pub(crate) struct Written {
    pub receipt: CommitReceipt,
    /// `seq` of the first row this revision inserted (where it would be when it inserted none).
    pub first_seq: i64,
    /// Rows this revision inserted: `(message id, message JSON)`.
    pub inserted: Vec<(String, String)>,
    /// The whole history the commit should leave, when it was not a plain append.
    pub expected: Option<Vec<(String, String)>>,
}

/// What a history operation does to the live rows: a prefix stays, the rest ends, new rows
/// follow.
pub(super) struct Plan {
    /// Message ids of the live rows that stay.
    pub kept: Vec<String>,
    /// The first live `seq` this revision ends (with every later one); `None`: none end.
    pub killed_from_seq: Option<i64>,
    /// Rows added after the kept ones: `(message id, message JSON)`.
    pub inserted: Vec<(String, String)>,
    /// The whole history the commit should leave, when it was not a plain append.
    pub expected: Option<Vec<(String, String)>>,
}

fn encode(entries: &[Entry]) -> Result<Vec<(String, String)>> {
    entries
        .iter()
        .map(|entry| Ok((entry.id.to_string(), serde_json::to_string(&entry.message)?)))
        .collect()
}

/// Checks identity and applies one history operation in one transaction (DESIGN §13 steps 1–2).
/// An operation id already committed is found in the same transaction and written again never.
pub(crate) fn apply(
    conn: &mut Connection,
    request: &CommitRequest,
    fingerprint: &str,
) -> Result<Applied> {
    let session_id = request.session_id.as_str();
    if request.operation_id.trim().is_empty() {
        return Err(StoreError::InvalidOperation(
            "the operation id is empty".into(),
        ));
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if let Some((earlier, receipt)) = find_commit(&tx, &request.session_id, &request.operation_id)?
    {
        return Ok(Applied::Earlier(earlier, receipt));
    }
    let session = get_session(&tx, session_id)?;
    if let Some(turn_id) = &request.turn_id {
        let mismatch = |reason: String| StoreError::TurnMismatch {
            session: session_id.to_owned(),
            turn: turn_id.to_string(),
            reason,
        };
        let turn = get_turn(&tx, turn_id.as_str())?;
        if turn.session_id != request.session_id {
            return Err(mismatch(format!(
                "it belongs to session {}",
                turn.session_id
            )));
        }
        if turn.status != TurnStatus::Running {
            return Err(mismatch(format!(
                "it already ended as {}",
                turn.status.as_str()
            )));
        }
    }
    if let Some(expected) = request.expected_revision
        && expected != session.revision
    {
        return Err(StoreError::StaleRevision {
            session: session_id.to_owned(),
            expected,
            actual: session.revision,
        });
    }
    let revision = session.revision + 1;
    let kind = request.op.kind();

    let Plan {
        kept,
        killed_from_seq,
        inserted,
        expected,
    } = match &request.op {
        HistoryOp::Append { entries } => plan_append(&tx, session_id, entries)?,
        HistoryOp::Replace { entries } => {
            // A compaction from outside would cut history out from under a running turn;
            // only that turn itself may replace it while it runs.
            crate::turns::ensure_idle(
                &tx,
                session_id,
                request.turn_id.as_ref().map(TurnId::as_str),
            )?;
            plan_replace(&tx, session_id, entries)?
        }
        HistoryOp::Reconcile { entries } => plan_reconcile(&tx, session_id, entries)?,
        HistoryOp::Rewind { to_revision } => {
            plan_rewind(&tx, &session, request.turn_id.as_ref(), *to_revision)?
        }
    };
    let mut seen: HashSet<&str> = kept.iter().map(String::as_str).collect();
    for (id, _) in &inserted {
        if !seen.insert(id.as_str()) {
            return Err(StoreError::InvalidOperation(format!(
                "message id {id} appears twice in the history of {session_id}"
            )));
        }
    }

    let killed = match killed_from_seq {
        Some(seq) => tx.execute(
            "UPDATE history SET to_rev = ?3 WHERE session_id = ?1 AND to_rev IS NULL AND seq >= ?2",
            params![session_id, seq, int(revision)],
        )?,
        None => 0,
    };
    let epoch = if killed > 0 || kind == CommitKind::Replace {
        session.epoch + 1
    } else {
        session.epoch
    };
    let now = now_ms();
    let last: Option<i64> = tx
        .prepare_cached(LAST_SEQ)?
        .query_row([session_id], |row| row.get(0))?;
    let mut seq = last.unwrap_or(0);
    let first_seq = seq + 1;
    {
        let mut insert = tx.prepare_cached(INSERT_HISTORY)?;
        for (id, json) in &inserted {
            seq += 1;
            insert.execute(params![session_id, seq, int(revision), id, json, now])?;
        }
    }
    let length = session.length - (killed as u64).min(session.length) + inserted.len() as u64;
    let written = inserted.len() as u64;
    tx.prepare_cached(INSERT_COMMIT)?.execute(params![
        session_id,
        int(revision),
        kind.as_str(),
        int(epoch),
        request.operation_id,
        fingerprint,
        request.turn_id.as_ref().map(TurnId::as_str),
        int(length),
        int(written),
        now,
    ])?;
    tx.prepare_cached(UPDATE_HEAD)?.execute(params![
        session_id,
        int(revision),
        int(epoch),
        int(length),
        now
    ])?;
    tx.commit()?;
    Ok(Applied::Written(Written {
        receipt: CommitReceipt {
            session_id: request.session_id.clone(),
            operation_id: request.operation_id.clone(),
            kind,
            revision,
            epoch,
            length,
            written,
        },
        first_seq,
        inserted,
        expected,
    }))
}

/// Adds `entries` at the end; a message id already live in the session is refused.
fn plan_append(conn: &Connection, session_id: &str, entries: &[Entry]) -> Result<Plan> {
    let inserted = encode(entries)?;
    let mut exists = conn.prepare_cached(LIVE_MESSAGE_EXISTS)?;
    for (id, _) in &inserted {
        if exists.query_row(params![session_id, id], |row| row.get::<_, bool>(0))? {
            return Err(StoreError::InvalidOperation(format!(
                "message id {id} is already in the history of {session_id}"
            )));
        }
    }
    Ok(Plan {
        kept: Vec::new(),
        killed_from_seq: None,
        inserted,
        expected: None,
    })
}

/// Ends every live row and writes `entries` as the whole history.
fn plan_replace(conn: &Connection, session_id: &str, entries: &[Entry]) -> Result<Plan> {
    let inserted = encode(entries)?;
    let live = raw_rows(conn, session_id, None)?;
    Ok(Plan {
        kept: Vec::new(),
        killed_from_seq: live.first().map(|row| row.seq),
        inserted: inserted.clone(),
        expected: Some(inserted),
    })
}

/// Keeps the longest prefix the live history shares with `entries` and writes the rest.
fn plan_reconcile(conn: &Connection, session_id: &str, entries: &[Entry]) -> Result<Plan> {
    let target = encode(entries)?;
    let live = raw_rows(conn, session_id, None)?;
    let common = live
        .iter()
        .zip(&target)
        .take_while(|(row, (id, json))| row.id == *id && row.json == *json)
        .count();
    Ok(Plan {
        kept: live[..common].iter().map(|row| row.id.clone()).collect(),
        killed_from_seq: live.get(common).map(|row| row.seq),
        inserted: target[common..].to_vec(),
        expected: Some(target),
    })
}

/// Re-reads canonical history after a commit and checks it shows what was written (DESIGN §13
/// step 3). Every commit re-reads, from the database, its commit record, the session's head
/// (revision, epoch, length) and the history rows from its first inserted `seq` to the end: they
/// must be exactly the rows it inserted, live and stamped with its revision. These reads are index
/// probes and one primary-key range, so an append costs the same however long the session is.
/// Operations that end rows (replace, reconcile, rewind) also re-read the whole history at the
/// new revision.
pub(crate) fn verify(conn: &Connection, written: &Written) -> Result<()> {
    // One read transaction: every read sees the same snapshot, for one lock round trip.
    let snapshot = conn.unchecked_transaction()?;
    verify_in(&snapshot, written)?;
    snapshot.commit()?;
    Ok(())
}

fn verify_in(conn: &Connection, written: &Written) -> Result<()> {
    let receipt = &written.receipt;
    let session = receipt.session_id.as_str();
    let mismatch = |reason: String| StoreError::ReadBackMismatch {
        session: session.to_owned(),
        reason,
    };
    let recorded = find_commit(conn, &receipt.session_id, &receipt.operation_id)?
        .ok_or_else(|| mismatch(format!("commit {} is missing", receipt.operation_id)))?;
    if recorded.1 != *receipt {
        return Err(mismatch(format!(
            "commit record {:?} differs from {:?}",
            recorded.1, receipt
        )));
    }
    let head = get_session(conn, session)?;
    if (head.revision, head.epoch, head.length) != (receipt.revision, receipt.epoch, receipt.length)
    {
        return Err(mismatch(format!(
            "the head reads back as revision {} (epoch {}, {} messages), the commit made \
             revision {} (epoch {}, {} messages)",
            head.revision, head.epoch, head.length, receipt.revision, receipt.epoch, receipt.length
        )));
    }
    let same = |rows: &[RawEntry], expected: &[(String, String)]| {
        rows.len() == expected.len()
            && rows
                .iter()
                .zip(expected)
                .all(|(row, (id, json))| row.id == *id && row.json == *json)
    };
    let mut statement = conn.prepare_cached(READ_TAIL)?;
    let tail = statement
        .query_map(params![session, written.first_seq], |row| {
            Ok((
                RawEntry {
                    seq: row.get(0)?,
                    id: row.get(1)?,
                    json: row.get(2)?,
                    revision: row.get(3)?,
                    created_ms: row.get(4)?,
                },
                row.get::<_, Option<i64>>(5)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let in_place = tail
        .iter()
        .zip(written.first_seq..)
        .all(|((row, to_rev), seq)| {
            row.seq == seq && row.revision == int(receipt.revision) && to_rev.is_none()
        });
    let rows: Vec<RawEntry> = tail.into_iter().map(|(row, _)| row).collect();
    if !in_place || !same(&rows, &written.inserted) {
        return Err(mismatch(format!(
            "revision {} reads back {} rows from seq {}, {} were written",
            receipt.revision,
            rows.len(),
            written.first_seq,
            written.inserted.len()
        )));
    }
    if let Some(expected) = &written.expected {
        let rows = raw_rows(conn, session, Some(receipt.revision))?;
        if !same(&rows, expected) || rows.len() as u64 != receipt.length {
            return Err(mismatch(format!(
                "revision {} reads back {} messages, expected {}",
                receipt.revision,
                rows.len(),
                expected.len()
            )));
        }
    }
    Ok(())
}
