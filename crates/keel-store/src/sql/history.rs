//! Reading canonical history: the rows live at a revision, and the commit records.

use keel_protocol::{Message, MessageId, SessionId};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{get_session, int, uint};
use crate::error::{Result, StoreError};
use crate::model::{CommitKind, CommitReceipt, StoredEntry};

/// Looks a commit up by operation id; on the commit path of every append.
pub(crate) const FIND_COMMIT: &str = "SELECT fingerprint, kind, revision, epoch, length, written \
     FROM commits WHERE session_id = ?1 AND operation_id = ?2";

/// Rows of canonical history as stored: `(seq, message id, message JSON, from_rev, created_ms)`.
pub(crate) struct RawEntry {
    pub seq: i64,
    pub id: String,
    pub json: String,
    pub revision: i64,
    pub created_ms: i64,
}

/// The rows live at revision `at` (the head when `None`), in history order.
pub(crate) fn raw_rows(conn: &Connection, session: &str, at: Option<u64>) -> Result<Vec<RawEntry>> {
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
pub(crate) fn read_history(
    conn: &Connection,
    session: &str,
    at: Option<u64>,
) -> Result<Vec<StoredEntry>> {
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
pub(crate) fn commit_revisions(conn: &Connection, session: &str) -> Result<Vec<u64>> {
    let mut statement =
        conn.prepare("SELECT revision FROM commits WHERE session_id = ?1 ORDER BY revision")?;
    let rows = statement
        .query_map([session], |row| row.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows.into_iter().map(uint).collect())
}

/// Every commit of a session with the turn that made it (none for rewinds, forks and
/// other work outside a turn), oldest first.
pub(crate) fn commit_turns(conn: &Connection, session: &str) -> Result<Vec<(u64, Option<String>)>> {
    let mut statement = conn
        .prepare("SELECT revision, turn_id FROM commits WHERE session_id = ?1 ORDER BY revision")?;
    let rows = statement
        .query_map([session], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows.into_iter().map(|(r, t)| (uint(r), t)).collect())
}

/// A commit made earlier under this operation id: its fingerprint and receipt.
pub(crate) fn find_commit(
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
