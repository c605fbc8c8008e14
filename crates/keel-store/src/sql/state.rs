//! What extensions keep per session: small named values (a round counter, when a reminder
//! last fired) and reminders waiting for the session's next turn.
//!
//! A session reminder moves `pending → claimed → acknowledged` like a queued input (DESIGN
//! §13): the turn whose prompt carries it claims it, and acknowledges it once that prompt is
//! committed; a turn that ends without committing it releases it. A claim held by a turn
//! that is no longer running (its process died) counts as pending again, so a crash never
//! loses a reminder.

use keel_protocol::{TurnId, now_ms};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::get_session;
use crate::error::{Result, StoreError};
use crate::ids::new_id;
use crate::model::SessionReminder;

/// Kind prefix of session reminder ids.
const REMINDER_KIND: &str = "r-";

/// A session's value under `key`, when one is stored.
pub(crate) fn get_state(
    conn: &Connection,
    session: &str,
    key: &str,
) -> Result<Option<serde_json::Value>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT value FROM session_state WHERE session_id = ?1 AND key = ?2")?
        .query_row(params![session, key], |row| row.get(0))
        .optional()?;
    text.map(|text| {
        serde_json::from_str(&text).map_err(|error| {
            StoreError::Corrupt(format!("state `{key}` of session {session}: {error}"))
        })
    })
    .transpose()
}

/// Stores `value` under `key` for the session (replacing what was there).
pub(crate) fn set_state(
    conn: &mut Connection,
    session: &str,
    key: &str,
    value: &serde_json::Value,
) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, session)?;
    tx.prepare_cached(
        "INSERT INTO session_state (session_id, key, value, updated_ms) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (session_id, key) DO UPDATE SET value = ?3, updated_ms = ?4",
    )?
    .execute(params![session, key, value.to_string(), now_ms()])?;
    tx.commit()?;
    Ok(())
}

/// Why a session value cannot be read (any error of the caller's).
pub type Unreadable = Box<dyn std::error::Error + Send + Sync>;

/// A rewrite of one session value: the current value (`None` when absent) in, the new one
/// out, or why the current one cannot be read.
pub(crate) type Update =
    dyn FnOnce(Option<serde_json::Value>) -> std::result::Result<serde_json::Value, Unreadable>;

/// Applies `update` to the session's value under `key` inside `tx`; returns the new value.
fn rewrite(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    key: &str,
    update: Box<Update>,
) -> Result<serde_json::Value> {
    get_session(tx, session)?;
    let current = get_state(tx, session, key)?;
    let next = update(current).map_err(|reason| {
        StoreError::Corrupt(format!("state `{key}` of session {session}: {reason}"))
    })?;
    tx.prepare_cached(
        "INSERT INTO session_state (session_id, key, value, updated_ms) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (session_id, key) DO UPDATE SET value = ?3, updated_ms = ?4",
    )?
    .execute(params![session, key, next.to_string(), now_ms()])?;
    Ok(next)
}

/// Replaces the session's value under `key` with what `update` makes of it (`None` when
/// absent), read and written in one transaction; returns the new value. An `Err` from
/// `update` (a value it cannot read) changes nothing.
pub(crate) fn update_state(
    conn: &mut Connection,
    session: &str,
    key: &str,
    update: Box<Update>,
) -> Result<serde_json::Value> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let next = rewrite(&tx, session, key, update)?;
    tx.commit()?;
    Ok(next)
}

/// [`update_state`] and [`session_reminders`] in one transaction: what a turn's reminder
/// round reads and counts before its providers run.
pub(crate) fn reminder_round(
    conn: &mut Connection,
    session: &str,
    key: &str,
    update: Box<Update>,
) -> Result<(serde_json::Value, Vec<SessionReminder>)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let next = rewrite(&tx, session, key, update)?;
    let pending = session_reminders(&tx, session)?;
    tx.commit()?;
    Ok((next, pending))
}

fn reminder_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionReminder> {
    Ok(SessionReminder {
        id: row.get(0)?,
        source: row.get(1)?,
        text: row.get(2)?,
        created_ms: row.get(3)?,
    })
}

/// Leaves a reminder for the session's next turn.
pub(crate) fn add_reminder(
    conn: &mut Connection,
    session: &str,
    source: &str,
    text: &str,
) -> Result<SessionReminder> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, session)?;
    let reminder = SessionReminder {
        id: new_id(REMINDER_KIND),
        source: source.to_owned(),
        text: text.to_owned(),
        created_ms: now_ms(),
    };
    tx.execute(
        "INSERT INTO session_reminders (id, session_id, source, text, state, created_ms, \
         updated_ms) VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)",
        params![
            reminder.id,
            session,
            reminder.source,
            reminder.text,
            reminder.created_ms
        ],
    )?;
    tx.commit()?;
    Ok(reminder)
}

/// A claim whose turn no longer runs counts as pending.
macro_rules! waiting {
    () => {
        "(state = 'pending' OR (state = 'claimed' AND NOT EXISTS \
         (SELECT 1 FROM turns t WHERE t.id = session_reminders.turn_id AND t.status = 'running')))"
    };
}

/// The session's waiting reminders, oldest first.
const WAITING_REMINDERS: &str = concat!(
    "SELECT id, source, text, created_ms FROM session_reminders WHERE session_id = ?1 AND ",
    waiting!(),
    " ORDER BY created_ms, rowid"
);

/// Claims one waiting reminder of the session for a turn.
const CLAIM_REMINDER: &str = concat!(
    "UPDATE session_reminders SET state = 'claimed', turn_id = ?3, updated_ms = ?4 \
     WHERE id = ?1 AND session_id = ?2 AND ",
    waiting!()
);

/// The reminders waiting for the session's next turn, oldest first.
pub(crate) fn session_reminders(conn: &Connection, session: &str) -> Result<Vec<SessionReminder>> {
    let mut statement = conn.prepare_cached(WAITING_REMINDERS)?;
    let rows = statement
        .query_map([session], reminder_of)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Claims for `turn` those of `ids` that are waiting reminders of the session; returns the
/// ones claimed.
pub(crate) fn claim_reminders(
    conn: &mut Connection,
    session: &str,
    turn: &TurnId,
    ids: &[String],
) -> Result<Vec<String>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let mut claimed = Vec::new();
    for id in ids {
        let changed =
            tx.prepare_cached(CLAIM_REMINDER)?
                .execute(params![id, session, turn.as_str(), now])?;
        if changed > 0 {
            claimed.push(id.clone());
        }
    }
    tx.commit()?;
    Ok(claimed)
}

/// Acknowledges the reminders `turn` claimed (its prompt is committed); returns how many.
pub(crate) fn acknowledge_reminders(conn: &mut Connection, turn: &TurnId) -> Result<u64> {
    let changed = conn.execute(
        "UPDATE session_reminders SET state = 'acknowledged', updated_ms = ?2 \
         WHERE turn_id = ?1 AND state = 'claimed'",
        params![turn.as_str(), now_ms()],
    )?;
    Ok(changed as u64)
}

/// Returns the reminders `turn` claimed to waiting; returns how many.
pub(crate) fn release_reminders(conn: &mut Connection, turn: &TurnId) -> Result<u64> {
    let changed = conn.execute(
        "UPDATE session_reminders SET state = 'pending', turn_id = NULL, updated_ms = ?2 \
         WHERE turn_id = ?1 AND state = 'claimed'",
        params![turn.as_str(), now_ms()],
    )?;
    Ok(changed as u64)
}
