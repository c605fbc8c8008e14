//! Synchronous SQL over one connection. Everything here runs on the blocking pool, never on the
//! async runtime; `store.rs` decides when. Each history write is one `IMMEDIATE` transaction, so
//! a killed process leaves either the whole commit or none of it.

use std::collections::HashSet;

use keel_protocol::{Message, MessageId, SessionId, TurnId, now_ms};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::error::{Result, StoreError};
use crate::ids::{new_id, normalize_prefix};
use crate::model::{
    Claim, CommitKind, CommitReceipt, CommitRequest, ForkPoint, HistoryOp, NewSession, QueuedInput,
    SessionRecord, StoredEntry, TurnStatus,
};
use crate::turns::{ensure_idle, get_turn};

/// Kind prefix of session ids.
pub const SESSION_KIND: &str = "s-";

/// How many ambiguous candidates an error names.
const AMBIGUOUS_SHOWN: usize = 5;

pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn uint(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

macro_rules! session_columns {
    () => {
        "id, title, cwd, model, parent_id, forked_from_session, forked_from_revision, \
         created_ms, updated_ms, revision, epoch, length"
    };
}

const SESSION_COLUMNS: &str = session_columns!();
const GET_SESSION: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE id = ?1"
);

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    let fork_session: Option<String> = row.get(5)?;
    let fork_revision: Option<i64> = row.get(6)?;
    Ok(SessionRecord {
        id: SessionId::from(row.get::<_, String>(0)?),
        title: row.get(1)?,
        cwd: row.get(2)?,
        model: row.get(3)?,
        parent_id: row.get::<_, Option<String>>(4)?.map(SessionId::from),
        forked_from: fork_session.map(|session| ForkPoint {
            session_id: SessionId::from(session),
            revision: uint(fork_revision.unwrap_or(0)),
        }),
        created_ms: row.get(7)?,
        updated_ms: row.get(8)?,
        revision: uint(row.get(9)?),
        epoch: uint(row.get(10)?),
        length: uint(row.get(11)?),
    })
}

/// Creates a session with a fresh id.
pub fn create_session(
    conn: &Connection,
    new: &NewSession,
    fork: Option<&ForkPoint>,
) -> Result<SessionRecord> {
    let id = new_id(SESSION_KIND);
    let now = now_ms();
    conn.execute(
        "INSERT INTO sessions (id, title, cwd, model, parent_id, forked_from_session, \
         forked_from_revision, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        params![
            id,
            new.title,
            new.cwd,
            new.model,
            new.parent_id.as_ref().map(SessionId::as_str),
            fork.map(|f| f.session_id.as_str()),
            fork.map(|f| int(f.revision)),
            now,
        ],
    )?;
    get_session(conn, &id)
}

/// The session with exactly this id.
pub fn get_session(conn: &Connection, id: &str) -> Result<SessionRecord> {
    conn.prepare_cached(GET_SESSION)?
        .query_row([id], session_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "session",
            id: id.to_owned(),
        })
}

/// Resolves a typed id or unique prefix (at least four characters) to a session id.
pub fn resolve_session(conn: &Connection, typed: &str) -> Result<SessionId> {
    let prefix = normalize_prefix(SESSION_KIND, typed)?;
    let mut upper = prefix.clone();
    upper.push(char::MAX);
    let mut statement =
        conn.prepare("SELECT id FROM sessions WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3")?;
    let candidates = statement
        .query_map(params![prefix, upper, int(AMBIGUOUS_SHOWN as u64)], |row| {
            row.get::<_, String>(0)
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    match candidates.as_slice() {
        [] => Err(StoreError::NotFound {
            kind: "session",
            id: typed.trim().to_owned(),
        }),
        [one] => Ok(SessionId::new(one)),
        _ if candidates.contains(&prefix) => Ok(SessionId::new(prefix)),
        _ => Err(StoreError::Ambiguous {
            prefix: typed.trim().to_owned(),
            candidates,
        }),
    }
}

/// Sessions, most recently updated first; only those in `cwd` when given.
pub fn list_sessions(
    conn: &Connection,
    cwd: Option<&str>,
    limit: usize,
) -> Result<Vec<SessionRecord>> {
    let limit = int(limit as u64);
    let rows = match cwd {
        Some(cwd) => {
            let mut statement = conn.prepare(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE cwd = ?1 \
                 ORDER BY updated_ms DESC, rowid DESC LIMIT ?2"
            ))?;
            statement
                .query_map(params![cwd, limit], session_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        }
        None => {
            let mut statement = conn.prepare(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions ORDER BY updated_ms DESC, rowid DESC LIMIT ?1"
            ))?;
            statement
                .query_map([limit], session_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        }
    };
    Ok(rows)
}

/// Changes a session's title.
pub fn set_title(conn: &Connection, id: &str, title: &str) -> Result<()> {
    let changed = conn.execute(
        "UPDATE sessions SET title = ?2, updated_ms = ?3 WHERE id = ?1",
        params![id, title, now_ms()],
    )?;
    if changed == 0 {
        return Err(StoreError::NotFound {
            kind: "session",
            id: id.to_owned(),
        });
    }
    Ok(())
}

/// Deletes a session with its history, turns and inputs. Forks keep their rows and lose the
/// link. Refused with `session_busy` while a live process runs one of its turns; the check and
/// the delete are one transaction.
pub fn delete_session(conn: &mut Connection, id: &str) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, id)?;
    ensure_idle(&tx, id, None)?;
    tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
    tx.commit()?;
    Ok(())
}

/// Rows of canonical history as stored: `(seq, message id, message JSON, from_rev, created_ms)`.
pub(crate) struct RawEntry {
    pub seq: i64,
    pub id: String,
    pub json: String,
    pub revision: i64,
    pub created_ms: i64,
}

fn raw_rows(conn: &Connection, session: &str, at: Option<u64>) -> Result<Vec<RawEntry>> {
    let map = |row: &Row<'_>| {
        Ok(RawEntry {
            seq: row.get(0)?,
            id: row.get(1)?,
            json: row.get(2)?,
            revision: row.get(3)?,
            created_ms: row.get(4)?,
        })
    };
    let rows = match at {
        None => conn
            .prepare(
                "SELECT seq, message_id, message, from_rev, created_ms FROM history \
                 WHERE session_id = ?1 AND to_rev IS NULL ORDER BY seq",
            )?
            .query_map([session], map)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        Some(revision) => conn
            .prepare(
                "SELECT seq, message_id, message, from_rev, created_ms FROM history \
                 WHERE session_id = ?1 AND from_rev <= ?2 AND (to_rev IS NULL OR to_rev > ?2) \
                 ORDER BY seq",
            )?
            .query_map(params![session, int(revision)], map)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
    };
    Ok(rows)
}

pub(crate) fn decode_entry(session: &str, raw: RawEntry) -> Result<StoredEntry> {
    let message: Message = serde_json::from_str(&raw.json).map_err(|error| {
        StoreError::Corrupt(format!("message {} of session {session}: {error}", raw.id))
    })?;
    Ok(StoredEntry {
        id: MessageId::from(raw.id),
        message,
        revision: uint(raw.revision),
        created_ms: raw.created_ms,
    })
}

/// Canonical history of a session at `at` (the head when `None`), oldest first.
pub fn read_history(conn: &Connection, session: &str, at: Option<u64>) -> Result<Vec<StoredEntry>> {
    let head = get_session(conn, session)?.revision;
    if let Some(revision) = at
        && revision > head
    {
        return Err(StoreError::NotFound {
            kind: "revision",
            id: format!("{session}@{revision}"),
        });
    }
    raw_rows(conn, session, at)?
        .into_iter()
        .map(|raw| decode_entry(session, raw))
        .collect()
}

/// Revisions committed for a session, in order (contiguous from 1 in a sound store).
pub fn commit_revisions(conn: &Connection, session: &str) -> Result<Vec<u64>> {
    let mut statement =
        conn.prepare("SELECT revision FROM commits WHERE session_id = ?1 ORDER BY revision")?;
    let rows = statement
        .query_map([session], |row| row.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows.into_iter().map(uint).collect())
}

/// A commit made earlier under this operation id: its fingerprint and receipt.
pub fn find_commit(
    conn: &Connection,
    session: &SessionId,
    operation: &str,
) -> Result<Option<(String, CommitReceipt)>> {
    let row = conn
        .prepare_cached(FIND_COMMIT)?
        .query_row(params![session.as_str(), operation], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, i64>(5)?,
            ))
        })
        .optional()?;
    let Some((fingerprint, kind, revision, epoch, length, written)) = row else {
        return Ok(None);
    };
    let kind = CommitKind::parse(&kind)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown commit kind `{kind}`")))?;
    Ok(Some((
        fingerprint,
        CommitReceipt {
            session_id: session.clone(),
            operation_id: operation.to_owned(),
            kind,
            revision: uint(revision),
            epoch: uint(epoch),
            length: uint(length),
            written: uint(written),
        },
    )))
}

// Statements on the commit path of every append. Each must stay an index probe or a short index
// range whatever the session's length; `tests::commit_path_statements_do_not_grow_with_history`
// holds them to it. Without `sqlite_stat1` (this store never runs ANALYZE) SQLite's planner
// prefers the primary key `(session_id, seq)` for any `session_id = ?` filter, which walks the
// whole session; hence `INDEXED BY` where another index is the right one.

/// Whether a live row of the session already carries this message id.
const LIVE_MESSAGE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM history INDEXED BY history_by_message \
     WHERE session_id = ?1 AND message_id = ?2 AND to_rev IS NULL)";
/// The session's highest `seq`. A bare MAX keeps SQLite's min/max shortcut (one probe at the end
/// of the primary key); COALESCE around it would scan.
const LAST_SEQ: &str = "SELECT MAX(seq) FROM history WHERE session_id = ?1";
const INSERT_HISTORY: &str = "INSERT INTO history \
     (session_id, seq, from_rev, message_id, message, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const INSERT_COMMIT: &str = "INSERT INTO commits (session_id, revision, kind, epoch, operation_id, \
     fingerprint, turn_id, length, written, created_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
const UPDATE_HEAD: &str =
    "UPDATE sessions SET revision = ?2, epoch = ?3, length = ?4, updated_ms = ?5 WHERE id = ?1";
const FIND_COMMIT: &str = "SELECT fingerprint, kind, revision, epoch, length, written FROM commits \
     WHERE session_id = ?1 AND operation_id = ?2";
/// The history rows from a `seq` to the end (the rows a commit just inserted): a primary-key range.
const READ_TAIL: &str = "SELECT seq, message_id, message, from_rev, created_ms, to_rev \
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

fn encode(entries: &[crate::model::Entry]) -> Result<Vec<(String, String)>> {
    entries
        .iter()
        .map(|entry| Ok((entry.id.to_string(), serde_json::to_string(&entry.message)?)))
        .collect()
}

/// Checks identity and applies one history operation in one transaction (SPEC §13 steps 1–2).
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

    // Decide how many live rows stay (a prefix) and which rows are added after them.
    let (kept, killed_from_seq, inserted, expected) = match &request.op {
        HistoryOp::Append { entries } => {
            let inserted = encode(entries)?;
            let mut exists = tx.prepare_cached(LIVE_MESSAGE_EXISTS)?;
            for (id, _) in &inserted {
                if exists.query_row(params![session_id, id], |row| row.get::<_, bool>(0))? {
                    return Err(StoreError::InvalidOperation(format!(
                        "message id {id} is already in the history of {session_id}"
                    )));
                }
            }
            (Vec::new(), None, inserted, None)
        }
        HistoryOp::Replace { entries } => {
            let inserted = encode(entries)?;
            let live = raw_rows(&tx, session_id, None)?;
            let from = live.first().map(|row| row.seq);
            (Vec::new(), from, inserted.clone(), Some(inserted))
        }
        HistoryOp::Reconcile { entries } => {
            let target = encode(entries)?;
            let live = raw_rows(&tx, session_id, None)?;
            let common = live
                .iter()
                .zip(&target)
                .take_while(|(row, (id, json))| row.id == *id && row.json == *json)
                .count();
            let from = live.get(common).map(|row| row.seq);
            let kept = live[..common].iter().map(|row| row.id.clone()).collect();
            (kept, from, target[common..].to_vec(), Some(target))
        }
        HistoryOp::Rewind { to_revision } => {
            // Rewinding under a running turn would cut history out from under it; only that
            // turn itself may rewind while it runs.
            ensure_idle(
                &tx,
                session_id,
                request.turn_id.as_ref().map(TurnId::as_str),
            )?;
            if *to_revision > session.revision {
                return Err(StoreError::NotFound {
                    kind: "revision",
                    id: format!("{session_id}@{to_revision}"),
                });
            }
            let live = raw_rows(&tx, session_id, None)?;
            let target = raw_rows(&tx, session_id, Some(*to_revision))?;
            let common = live
                .iter()
                .zip(&target)
                .take_while(|(row, old)| row.seq == old.seq)
                .count();
            let from = live.get(common).map(|row| row.seq);
            let kept = live[..common].iter().map(|row| row.id.clone()).collect();
            let target: Vec<(String, String)> =
                target.into_iter().map(|row| (row.id, row.json)).collect();
            (kept, from, target[common..].to_vec(), Some(target))
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

/// Re-reads canonical history after a commit and checks it shows what was written (SPEC §13
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

/// Copies a session's history at `at` (head when `None`) into a new session whose first
/// revision is that copy.
pub fn fork(
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

/// Queues an input for the session's next claim.
pub fn enqueue_input(
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
pub fn claim_inputs(conn: &mut Connection, session: &str, turn: &TurnId) -> Result<Option<Claim>> {
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
pub fn acknowledge_claim(conn: &mut Connection, claim: &str, revision: u64) -> Result<usize> {
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
pub fn release_claim(conn: &Connection, claim: &str) -> Result<usize> {
    claimed_session(conn, claim)?;
    Ok(conn.execute(
        "UPDATE inputs SET state = 'queued', claim_id = NULL, turn_id = NULL, updated_ms = ?2 \
         WHERE claim_id = ?1 AND state = 'claimed'",
        params![claim, now_ms()],
    )?)
}

/// Inputs of the session still waiting to be claimed.
pub fn queued_inputs(conn: &Connection, session: &str) -> Result<Vec<QueuedInput>> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rusqlite::StatementStatus;
    use rusqlite::types::Value;

    use super::*;
    use crate::model::Entry;
    use crate::schema::{self, Durability};

    /// Appends messages, a hundred per commit, until the session holds `length`.
    fn grow(conn: &mut Connection, session: &SessionId, length: usize) {
        let mut have =
            usize::try_from(get_session(conn, session.as_str()).unwrap().length).unwrap();
        while have < length {
            let batch = (length - have).min(100);
            let entries = (0..batch)
                .map(|n| {
                    Entry::new(Message::user_text(format!(
                        "message {} {}",
                        have + n,
                        "x".repeat(500)
                    )))
                })
                .collect();
            let request = CommitRequest::append(session.clone(), format!("grow{have}"), entries);
            let Applied::Written(written) = apply(conn, &request, "fingerprint").unwrap() else {
                panic!("a new operation id was found committed");
            };
            verify(conn, &written).unwrap();
            have += batch;
        }
    }

    /// VM steps each statement of one single-message append takes, in a rolled-back transaction.
    fn append_steps(conn: &mut Connection, session: &str) -> Vec<(&'static str, i32)> {
        let tx = conn.transaction().unwrap();
        let head = get_session(&tx, session).unwrap();
        let last: i64 = tx.query_row(LAST_SEQ, [session], |row| row.get(0)).unwrap();
        let next = int(head.revision) + 1;
        let text = |value: &str| Value::Text(value.to_owned());
        let session_value = text(session);
        let cases: Vec<(&'static str, Vec<Value>)> = vec![
            (GET_SESSION, vec![session_value.clone()]),
            (FIND_COMMIT, vec![session_value.clone(), text("op-new")]),
            (
                LIVE_MESSAGE_EXISTS,
                vec![session_value.clone(), text("m-new")],
            ),
            (LAST_SEQ, vec![session_value.clone()]),
            (
                INSERT_HISTORY,
                vec![
                    session_value.clone(),
                    Value::Integer(last + 1),
                    Value::Integer(next),
                    text("m-new"),
                    text("{}"),
                    Value::Integer(0),
                ],
            ),
            (
                INSERT_COMMIT,
                vec![
                    session_value.clone(),
                    Value::Integer(next),
                    text("append"),
                    Value::Integer(0),
                    text("op-new"),
                    text("fingerprint"),
                    Value::Null,
                    Value::Integer(int(head.length) + 1),
                    Value::Integer(1),
                    Value::Integer(0),
                ],
            ),
            (
                UPDATE_HEAD,
                vec![
                    session_value.clone(),
                    Value::Integer(next),
                    Value::Integer(0),
                    Value::Integer(int(head.length) + 1),
                    Value::Integer(0),
                ],
            ),
            (FIND_COMMIT, vec![session_value.clone(), text("op-new")]),
            (READ_TAIL, vec![session_value, Value::Integer(last + 1)]),
        ];
        let steps = cases
            .into_iter()
            .map(|(sql, values)| {
                let mut statement = tx.prepare(sql).unwrap();
                {
                    let mut rows = statement.query(rusqlite::params_from_iter(values)).unwrap();
                    while rows.next().unwrap().is_some() {}
                }
                (sql, statement.get_status(StatementStatus::VmStep))
            })
            .collect();
        tx.rollback().unwrap();
        steps
    }

    /// The regression this guards: without statistics the planner walked the whole session
    /// through the primary key for the live-id check and the read-back, so every append read
    /// every message of its session.
    #[test]
    fn commit_path_statements_do_not_grow_with_history() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = schema::open(&dir.path().join("plan.db"), Durability::Normal).unwrap();
        let new = NewSession {
            cwd: "/plan".into(),
            ..NewSession::default()
        };
        let short = create_session(&conn, &new, None).unwrap().id;
        let long = create_session(&conn, &new, None).unwrap().id;
        grow(&mut conn, &short, 10);
        grow(&mut conn, &long, 3_000);
        let small = append_steps(&mut conn, short.as_str());
        let large = append_steps(&mut conn, long.as_str());
        for ((sql, few), (_, many)) in small.iter().zip(&large) {
            assert!(
                *many <= few + 16,
                "`{sql}` takes {few} VM steps at 10 messages but {many} at 3,000"
            );
        }
        for (sql, _) in &small {
            let plan = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(
                    rusqlite::params_from_iter(
                        std::iter::repeat_n(Value::Null, 10)
                            .take(conn.prepare(sql).unwrap().parameter_count()),
                    ),
                    |row| row.get::<_, String>(3),
                )
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap();
            assert!(
                plan.iter()
                    .all(|line| !line.starts_with("SCAN ") || line == "SCAN CONSTANT ROW"),
                "`{sql}` scans: {plan:?}"
            );
        }
    }

    /// Cached statements on the commit path must stay compiled across commits: a re-prepare
    /// per use (an expired statement, or one whose plan depends on its bound values) costs
    /// more than the statement itself.
    #[test]
    fn commit_path_statements_are_compiled_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = schema::open(&dir.path().join("prep.db"), Durability::Normal).unwrap();
        let new = NewSession {
            cwd: "/prep".into(),
            ..NewSession::default()
        };
        let session = create_session(&conn, &new, None).unwrap().id;
        grow(&mut conn, &session, 300);
        for sql in [
            GET_SESSION,
            FIND_COMMIT,
            LIVE_MESSAGE_EXISTS,
            LAST_SEQ,
            INSERT_HISTORY,
            INSERT_COMMIT,
            UPDATE_HEAD,
            READ_TAIL,
        ] {
            let statement = conn.prepare_cached(sql).unwrap();
            assert_eq!(
                statement.get_status(StatementStatus::RePrepare),
                0,
                "`{sql}` was compiled again"
            );
        }
    }
}
