//! Turns: started by one process, ended once, and closed on resume only when the process
//! that ran them is gone.
//!
//! A live turn does not close while a consumption is in flight (DESIGN §13): its host
//! acknowledges or releases what it claimed first. A turn whose process died cannot, so
//! closing it puts what it claimed back in the queue, at the places it left, in the same
//! transaction; delivery is then at least once (an input already committed to history whose
//! claim the crash left unacknowledged reaches the next turn a second time), never lost.

use keel_protocol::{SessionId, TurnId, TurnOutcome, Usage, now_ms};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::error::{Result, StoreError};
use crate::ids::new_id;
use crate::model::{TurnRecord, TurnSource, TurnStatus};
use crate::owner::ProcessOwner;
use crate::sql::{get_session, requeue_turn_claims};

/// Kind prefix of turn ids.
pub const TURN_KIND: &str = "t-";

const TURN_COLUMNS: &str =
    "id, session_id, source, status, usage, error_code, started_ms, ended_ms, owner";

fn turn_from_row(row: &Row<'_>) -> rusqlite::Result<(TurnRecord, Option<String>)> {
    let source: String = row.get(2)?;
    let status: String = row.get(3)?;
    let usage: Option<String> = row.get(4)?;
    let bad = |what: &str, text: &str| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("unknown turn {what} `{text}`").into(),
        )
    };
    Ok((
        TurnRecord {
            id: TurnId::from(row.get::<_, String>(0)?),
            session_id: SessionId::from(row.get::<_, String>(1)?),
            source: TurnSource::parse(&source).ok_or_else(|| bad("source", &source))?,
            status: TurnStatus::parse(&status).ok_or_else(|| bad("status", &status))?,
            usage: None,
            error_code: row.get(5)?,
            started_ms: row.get(6)?,
            ended_ms: row.get(7)?,
            owner: row.get(8)?,
        },
        usage,
    ))
}

fn decode_turn((mut turn, usage): (TurnRecord, Option<String>)) -> Result<TurnRecord> {
    turn.usage = usage
        .map(|json| serde_json::from_str::<Usage>(&json))
        .transpose()
        .map_err(|error| StoreError::Corrupt(format!("usage of turn {}: {error}", turn.id)))?;
    Ok(turn)
}

/// Starts a turn in `running` state, owned by this process.
pub fn create_turn(conn: &Connection, session: &str, source: &TurnSource) -> Result<TurnRecord> {
    get_session(conn, session)?;
    let id = new_id(TURN_KIND);
    conn.execute(
        "INSERT INTO turns (id, session_id, source, status, started_ms, owner) \
         VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
        params![
            id,
            session,
            source.as_text(),
            now_ms(),
            ProcessOwner::current().to_string()
        ],
    )?;
    get_turn(conn, &id)
}

/// The turn with exactly this id.
pub fn get_turn(conn: &Connection, id: &str) -> Result<TurnRecord> {
    // Cached: every commit of a turn checks its turn.
    let row = conn
        .prepare_cached(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ?1"))?
        .query_row([id], turn_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound {
            kind: "turn",
            id: id.to_owned(),
        })?;
    decode_turn(row)
}

/// The turns of a session, oldest first.
pub fn list_turns(conn: &Connection, session: &str) -> Result<Vec<TurnRecord>> {
    let mut statement = conn.prepare(&format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ?1 ORDER BY started_ms, rowid"
    ))?;
    let rows = statement
        .query_map([session], turn_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(decode_turn).collect()
}

/// The stored status and error code of a turn outcome.
pub fn outcome_status(outcome: &TurnOutcome) -> (TurnStatus, Option<String>) {
    match outcome {
        TurnOutcome::Completed => (TurnStatus::Completed, None),
        TurnOutcome::Aborted { .. } => (TurnStatus::Aborted, None),
        TurnOutcome::Failed { code, .. } => (TurnStatus::Failed, Some(code.as_str().to_owned())),
        // A newer protocol outcome this store does not know yet is kept as a failure.
        _ => (TurnStatus::Failed, Some("unknown_outcome".into())),
    }
}

fn end_turn(
    conn: &Connection,
    id: &str,
    outcome: &TurnOutcome,
    usage: Option<&Usage>,
) -> Result<()> {
    let (status, code) = outcome_status(outcome);
    let usage = usage.map(serde_json::to_string).transpose()?;
    conn.execute(
        "UPDATE turns SET status = ?2, error_code = ?3, usage = ?4, ended_ms = ?5 WHERE id = ?1",
        params![id, status.as_str(), code, usage, now_ms()],
    )?;
    Ok(())
}

/// Ends a running turn. Refused while inputs it claimed are neither acknowledged nor released.
pub fn finish_turn(
    conn: &mut Connection,
    id: &str,
    outcome: &TurnOutcome,
    usage: Option<&Usage>,
) -> Result<TurnRecord> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let turn = get_turn(&tx, id)?;
    if turn.status != TurnStatus::Running {
        return Err(StoreError::InvalidOperation(format!(
            "turn {id} already ended as {}",
            turn.status.as_str()
        )));
    }
    let in_flight: i64 = tx.query_row(
        "SELECT COUNT(*) FROM inputs WHERE turn_id = ?1 AND state = 'claimed'",
        [id],
        |row| row.get(0),
    )?;
    if in_flight > 0 {
        return Err(StoreError::ClaimsInFlight {
            turn: id.to_owned(),
            count: usize::try_from(in_flight).unwrap_or(usize::MAX),
        });
    }
    end_turn(&tx, id, outcome, usage)?;
    tx.commit()?;
    get_turn(conn, id)
}

/// Starts a turn of this process in `session` after closing the turns dead processes left
/// running, in one transaction: of two processes resuming the same session at once, exactly
/// one gets the turn and the other [`StoreError::SessionBusy`], before either touches its
/// history. Returns the closed turns and the new one.
pub fn begin_turn(
    conn: &mut Connection,
    session: &str,
    source: &TurnSource,
    abandoned: &TurnOutcome,
) -> Result<(Vec<TurnRecord>, TurnRecord)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let closed = close_abandoned_in(&tx, session, abandoned)?;
    let started = create_turn(&tx, session, source)?;
    tx.commit()?;
    let closed = closed
        .iter()
        .map(|turn| get_turn(conn, turn.id.as_str()))
        .collect::<Result<_>>()?;
    Ok((closed, started))
}

/// The session's turns still marked running, oldest first.
fn running_turns(conn: &Connection, session: &str) -> Result<Vec<TurnRecord>> {
    // Only the running ones: a long session has many ended turns to skip.
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ?1 AND status = 'running' \
         ORDER BY started_ms, rowid"
    ))?;
    let running = statement
        .query_map([session], turn_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    running.into_iter().map(decode_turn).collect()
}

/// [`StoreError::SessionBusy`] when a live process (this one included) runs one of
/// `running`, other than `except`.
fn refuse_live(session: &str, running: &[TurnRecord], except: Option<&str>) -> Result<()> {
    for turn in running {
        if except == Some(turn.id.as_str()) {
            continue;
        }
        // Rows from before owners were recorded have none: their process is long gone.
        if let Some(owner) = turn.owner.as_deref().and_then(ProcessOwner::parse)
            && owner.is_alive()
        {
            return Err(StoreError::SessionBusy {
                session: session.to_owned(),
                turn: turn.id.to_string(),
                pid: owner.pid,
            });
        }
    }
    Ok(())
}

/// Fails with [`StoreError::SessionBusy`] while a live process runs a turn of `session`
/// other than `except` (the caller's own turn). Call it inside the transaction that then
/// changes the session, so no turn can start between the check and the change.
pub(crate) fn ensure_idle(conn: &Connection, session: &str, except: Option<&str>) -> Result<()> {
    refuse_live(session, &running_turns(conn, session)?, except)
}

/// Closes the session's turns whose process is gone with `outcome`, re-queueing what they
/// claimed at the places it left; a running turn whose process is alive (this one included) is
/// [`StoreError::SessionBusy`].
fn close_abandoned_in(
    conn: &Connection,
    session: &str,
    outcome: &TurnOutcome,
) -> Result<Vec<TurnRecord>> {
    get_session(conn, session)?;
    let running = running_turns(conn, session)?;
    refuse_live(session, &running, None)?;
    for turn in &running {
        let requeued = requeue_turn_claims(conn, turn.id.as_str())?;
        if requeued > 0 {
            tracing::debug!(turn = %turn.id, requeued, "a dead turn's claimed inputs went back to the queue");
        }
        end_turn(conn, turn.id.as_str(), outcome, turn.usage.as_ref())?;
    }
    Ok(running)
}
