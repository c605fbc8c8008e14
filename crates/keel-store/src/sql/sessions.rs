//! Session rows: create, look up (by id or typed prefix), list, retitle, delete.

use keel_protocol::{SessionId, now_ms};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::{int, uint};
use crate::error::{Result, StoreError};
use crate::ids::{new_id, normalize_prefix};
use crate::model::{ForkPoint, NewSession, SessionRecord};
use crate::turns::ensure_idle;

/// Kind prefix of session ids.
pub const SESSION_KIND: &str = "s-";

/// How many ambiguous candidates an error names.
const AMBIGUOUS_SHOWN: usize = 5;

macro_rules! session_columns {
    () => {
        "id, title, cwd, model, parent_id, forked_from_session, forked_from_revision, \
         created_ms, updated_ms, revision, epoch, length"
    };
}

const SESSION_COLUMNS: &str = session_columns!();
pub(crate) const GET_SESSION: &str = concat!(
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
        first_prompt: None,
    })
}

/// The first message a person typed in the session (not keel's hidden notes, not a `!`
/// command), its first 200 characters: what a listing shows beside the title.
const FIRST_PROMPT: &str = "(SELECT substr(json_extract(h.message, '$.content[0].text'), 1, 200) \
     FROM history h WHERE h.session_id = sessions.id AND h.to_rev IS NULL \
     AND json_extract(h.message, '$.role') = 'user' \
     AND json_extract(h.message, '$.hidden') IS NULL \
     AND json_extract(h.message, '$.shell') IS NULL \
     AND json_extract(h.message, '$.content[0].type') = 'text' \
     ORDER BY h.seq LIMIT 1)";

/// A listed session: its record and its first prompt.
fn listed_from_row(row: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    let mut record = session_from_row(row)?;
    record.first_prompt = row.get(12)?;
    Ok(record)
}

/// Creates a session with a fresh id.
pub(crate) fn create_session(
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
pub(crate) fn get_session(conn: &Connection, id: &str) -> Result<SessionRecord> {
    conn.prepare_cached(GET_SESSION)?
        .query_row([id], session_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "session",
            id: id.to_owned(),
        })
}

/// Resolves a typed id or unique prefix (at least four characters) to a session id.
pub(crate) fn resolve_session(conn: &Connection, typed: &str) -> Result<SessionId> {
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

/// A session someone wrote in: it has history, a turn, or input waiting (a prompt whose turn
/// a stopped process never ran). The rest were opened and left.
const SPOKEN: &str = " AND (length > 0 \
     OR EXISTS (SELECT 1 FROM turns WHERE turns.session_id = sessions.id) \
     OR EXISTS (SELECT 1 FROM inputs WHERE inputs.session_id = sessions.id))";

/// Sessions, most recently updated first; only those in `cwd` when given, and only those
/// with a conversation (history) when `conversations`.
pub(crate) fn list_sessions(
    conn: &Connection,
    cwd: Option<&str>,
    limit: usize,
    conversations: bool,
) -> Result<Vec<SessionRecord>> {
    let limit = int(limit as u64);
    let talked = if conversations { SPOKEN } else { "" };
    let rows = match cwd {
        Some(cwd) => {
            let mut statement = conn.prepare(&format!(
                "SELECT {SESSION_COLUMNS}, {FIRST_PROMPT} FROM sessions WHERE cwd = ?1{talked} \
                 ORDER BY updated_ms DESC, rowid DESC LIMIT ?2"
            ))?;
            statement
                .query_map(params![cwd, limit], listed_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        }
        None => {
            let mut statement = conn.prepare(&format!(
                "SELECT {SESSION_COLUMNS}, {FIRST_PROMPT} FROM sessions WHERE 1{talked} \
                 ORDER BY updated_ms DESC, rowid DESC LIMIT ?1"
            ))?;
            statement
                .query_map([limit], listed_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        }
    };
    Ok(rows)
}

/// The most recently updated session of `cwd` that has a conversation and is not a task's
/// child session.
pub(crate) fn latest_top_session(conn: &Connection, cwd: &str) -> Result<Option<SessionRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE cwd = ?1 AND parent_id IS NULL{SPOKEN} \
             ORDER BY updated_ms DESC, rowid DESC LIMIT 1"
        ))?
        .query_row([cwd], session_from_row)
        .optional()?)
}

/// Sessions whose parent is `parent`, oldest first.
pub(crate) fn child_sessions(conn: &Connection, parent: &str) -> Result<Vec<SessionRecord>> {
    let mut statement = conn.prepare(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_id = ?1 ORDER BY created_ms, rowid"
    ))?;
    let rows = statement
        .query_map([parent], session_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Changes a session's title.
pub(crate) fn set_title(conn: &Connection, id: &str, title: &str) -> Result<()> {
    update(
        conn,
        id,
        "UPDATE sessions SET title = ?2, updated_ms = ?3 WHERE id = ?1",
        title,
    )
}

/// Changes a session's model (`provider/model`).
pub(crate) fn set_model(conn: &Connection, id: &str, model: &str) -> Result<()> {
    update(
        conn,
        id,
        "UPDATE sessions SET model = ?2, updated_ms = ?3 WHERE id = ?1",
        model,
    )
}

/// Runs one of the fixed single-field updates above; a session that is not there is
/// `not_found`.
fn update(conn: &Connection, id: &str, statement: &'static str, value: &str) -> Result<()> {
    let changed = conn.execute(statement, params![id, value, now_ms()])?;
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
pub(crate) fn delete_session(conn: &mut Connection, id: &str) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, id)?;
    ensure_idle(&tx, id, None)?;
    tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
    tx.commit()?;
    Ok(())
}
