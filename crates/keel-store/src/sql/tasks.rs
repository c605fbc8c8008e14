//! Background tasks (SPEC §14) as rows: made `queued` by the process that will execute them,
//! moved along `queued → running → stopping → succeeded | failed | canceled | lost` (a
//! terminal row never changes status again), their progress and final answer kept as they
//! come, delivery and consumption stamped separately. A task whose executing process is gone
//! is settled `lost` by the next process that looks at its session.

use std::collections::HashSet;

use keel_protocol::{SessionId, TaskInfo, TaskStatus, now_ms};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::get_session;
use crate::error::{Result, StoreError};
use crate::model::{NewTask, TaskOutput};
use crate::owner::ProcessOwner;

const COLUMNS: &str = "id, session_id, child_session_id, parent_task_id, description, agent, \
    status, background, error, length(CAST(output AS BLOB)), created_ms, started_ms, ended_ms, \
    delivered_ms, consumed_ms";

fn info_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<TaskInfo> {
    let status: String = row.get(6)?;
    let bytes: i64 = row.get(9)?;
    Ok(TaskInfo {
        id: row.get(0)?,
        session_id: SessionId::from(row.get::<_, String>(1)?),
        child_session_id: row.get::<_, Option<String>>(2)?.map(SessionId::from),
        parent_task_id: row.get(3)?,
        description: row.get(4)?,
        agent: row.get(5)?,
        // The column's CHECK admits only the seven names.
        status: TaskStatus::parse(&status).unwrap_or(TaskStatus::Lost),
        background: row.get::<_, i64>(7)? != 0,
        error: row.get(8)?,
        output_bytes: super::uint(bytes),
        created_ms: row.get(10)?,
        started_ms: row.get(11)?,
        ended_ms: row.get(12)?,
        delivered_ms: row.get(13)?,
        consumed_ms: row.get(14)?,
    })
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound {
        kind: "task",
        id: id.to_owned(),
    }
}

/// Records a new task, `queued`, executed by this process.
pub(crate) fn insert_task(conn: &mut Connection, new: &NewTask) -> Result<TaskInfo> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    get_session(&tx, new.session_id.as_str())?;
    tx.prepare_cached(
        "INSERT INTO tasks (id, session_id, child_session_id, parent_task_id, description, \
         agent, status, background, owner, created_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?8, ?9)",
    )?
    .execute(params![
        new.id,
        new.session_id.as_str(),
        new.child_session_id.as_ref().map(SessionId::as_str),
        new.parent_task_id,
        new.description,
        new.agent,
        i64::from(new.background),
        ProcessOwner::current().to_string(),
        now_ms(),
    ])?;
    let info = get_task(&tx, &new.id)?;
    tx.commit()?;
    Ok(info)
}

/// One task.
pub(crate) fn get_task(conn: &Connection, id: &str) -> Result<TaskInfo> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"))?
        .query_row([id], info_of)
        .optional()?
        .ok_or_else(|| not_found(id))
}

/// The tasks `session` started, oldest first.
pub(crate) fn list_tasks(conn: &Connection, session: &str) -> Result<Vec<TaskInfo>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM tasks WHERE session_id = ?1 ORDER BY created_ms, id"
    ))?;
    let rows = statement.query_map([session], info_of)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// The tasks `session` started, oldest first, as they stand: an unended task whose owner
/// is another process that is gone reads as `lost`. Nothing is written: the record is
/// settled, and the session told, when a runtime next opens the session.
pub(crate) fn list_tasks_as_they_stand(conn: &Connection, session: &str) -> Result<Vec<TaskInfo>> {
    let mut tasks = list_tasks(conn, session)?;
    let me = ProcessOwner::current();
    let mut statement = conn.prepare_cached("SELECT owner FROM tasks WHERE id = ?1")?;
    for task in &mut tasks {
        if !matches!(
            task.status,
            TaskStatus::Queued | TaskStatus::Running | TaskStatus::Stopping
        ) {
            continue;
        }
        let owner: String = statement.query_row([&task.id], |row| row.get(0))?;
        if owner_gone(&owner, &me, || true) {
            task.status = TaskStatus::Lost;
            task.error = Some("the process running it stopped before it ended".to_owned());
        }
    }
    Ok(tasks)
}

/// Whether the process recorded as a task's `owner` no longer runs it: another process
/// that is gone, or this one (`me`) when `runs_here` says it does not.
fn owner_gone(owner: &str, me: &ProcessOwner, runs_here: impl FnOnce() -> bool) -> bool {
    match ProcessOwner::parse(owner) {
        Some(owner) if owner == *me => !runs_here(),
        Some(owner) => !owner.is_alive(),
        None => true,
    }
}

/// The task a child session works for, when it is one.
pub(crate) fn task_of_child(conn: &Connection, child: &str) -> Result<Option<TaskInfo>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE child_session_id = ?1 \
             ORDER BY created_ms DESC, id DESC LIMIT 1"
        ))?
        .query_row([child], info_of)
        .optional()?)
}

/// Moves a task to `status` (with `error` for a failure, cancellation or loss); `None` when
/// it had ended already, which it stays.
pub(crate) fn set_task_status(
    conn: &mut Connection,
    id: &str,
    status: TaskStatus,
    error: Option<&str>,
) -> Result<Option<TaskInfo>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current = get_task(&tx, id)?;
    if current.status.is_terminal() {
        return Ok(None);
    }
    let now = now_ms();
    tx.prepare_cached(
        "UPDATE tasks SET status = ?2, error = COALESCE(?3, error), \
         started_ms = CASE WHEN ?2 = 'running' AND started_ms IS NULL THEN ?4 ELSE started_ms END, \
         ended_ms = CASE WHEN ?5 THEN ?4 ELSE ended_ms END \
         WHERE id = ?1",
    )?
    .execute(params![
        id,
        status.as_str(),
        error,
        now,
        status.is_terminal()
    ])?;
    let info = get_task(&tx, id)?;
    tx.commit()?;
    Ok(Some(info))
}

/// Keeps the task's progress output and final answer as they are now.
pub(crate) fn set_task_output(
    conn: &mut Connection,
    id: &str,
    output: &str,
    final_text: &str,
) -> Result<()> {
    let changed = conn
        .prepare_cached("UPDATE tasks SET output = ?2, final_text = ?3 WHERE id = ?1")?
        .execute(params![id, output, final_text])?;
    if changed == 0 {
        return Err(not_found(id));
    }
    Ok(())
}

/// The task's progress output and final answer.
pub(crate) fn task_output(conn: &Connection, id: &str) -> Result<TaskOutput> {
    conn.prepare_cached("SELECT output, final_text FROM tasks WHERE id = ?1")?
        .query_row([id], |row| {
            Ok(TaskOutput {
                output: row.get(0)?,
                final_text: row.get(1)?,
            })
        })
        .optional()?
        .ok_or_else(|| not_found(id))
}

/// Records that the task's completion notice reached its parent (the first time only).
pub(crate) fn mark_task_delivered(conn: &mut Connection, id: &str) -> Result<TaskInfo> {
    conn.prepare_cached(
        "UPDATE tasks SET delivered_ms = COALESCE(delivered_ms, ?2) WHERE id = ?1",
    )?
    .execute(params![id, now_ms()])?;
    get_task(conn, id)
}

/// Confirms that the committed turn `turn` read the results of `ids`: each ended task not
/// consumed yet is consumed now. Returns the tasks it changed.
pub(crate) fn consume_tasks(
    conn: &mut Connection,
    ids: &[String],
    turn: &str,
) -> Result<Vec<TaskInfo>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let mut changed = Vec::new();
    for id in ids {
        let rows = tx
            .prepare_cached(
                "UPDATE tasks SET consumed_ms = ?2, consumed_turn = ?3 \
                 WHERE id = ?1 AND consumed_ms IS NULL \
                 AND status IN ('succeeded', 'failed', 'canceled', 'lost')",
            )?
            .execute(params![id, now, turn])?;
        if rows > 0 {
            changed.push(get_task(&tx, id)?);
        }
    }
    tx.commit()?;
    Ok(changed)
}

/// Settles as `lost` every unended task of `session` that no live executor runs: its process
/// is gone, or it is this process and `live` (the tasks this process runs) lacks it.
pub(crate) fn settle_lost_tasks(
    conn: &mut Connection,
    session: &str,
    live: &HashSet<String>,
) -> Result<Vec<TaskInfo>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let me = ProcessOwner::current();
    let open: Vec<(String, String)> = {
        let mut statement = tx.prepare_cached(
            "SELECT id, owner FROM tasks WHERE session_id = ?1 \
             AND status IN ('queued', 'running', 'stopping')",
        )?;
        let rows = statement.query_map([session], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let now = now_ms();
    let mut lost = Vec::new();
    for (id, owner) in open {
        if owner_gone(&owner, &me, || live.contains(&id)) {
            tx.prepare_cached(
                "UPDATE tasks SET status = 'lost', ended_ms = ?2, \
                 error = 'the process running it stopped before it ended' WHERE id = ?1",
            )?
            .execute(params![id, now])?;
            lost.push(get_task(&tx, &id)?);
        }
    }
    tx.commit()?;
    Ok(lost)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::NewSession;

    fn db() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        conn
    }

    fn session(conn: &mut Connection) -> SessionId {
        super::super::create_session(
            conn,
            &NewSession {
                title: "t".into(),
                cwd: "/w".into(),
                model: "m".into(),
                parent_id: None,
            },
            None,
        )
        .unwrap()
        .id
    }

    fn new_task(id: &str, session: &SessionId) -> NewTask {
        NewTask {
            id: id.into(),
            session_id: session.clone(),
            child_session_id: None,
            parent_task_id: None,
            description: "look around".into(),
            agent: "explore".into(),
            background: true,
        }
    }

    #[test]
    fn a_task_moves_through_its_states_and_never_leaves_a_terminal_one() {
        let mut conn = db();
        let s = session(&mut conn);
        let made = insert_task(&mut conn, &new_task("task-1", &s)).unwrap();
        assert_eq!(made.status, TaskStatus::Queued);
        let running = set_task_status(&mut conn, "task-1", TaskStatus::Running, None)
            .unwrap()
            .unwrap();
        assert!(running.started_ms.is_some());
        set_task_output(&mut conn, "task-1", "→ read a.rs\n", "done").unwrap();
        let ended = set_task_status(&mut conn, "task-1", TaskStatus::Succeeded, None)
            .unwrap()
            .unwrap();
        assert!(ended.ended_ms.is_some());
        assert_eq!(ended.output_bytes, "→ read a.rs\n".len() as u64);
        assert_eq!(
            set_task_status(&mut conn, "task-1", TaskStatus::Running, None).unwrap(),
            None
        );
        assert_eq!(
            get_task(&conn, "task-1").unwrap().status,
            TaskStatus::Succeeded
        );
        assert_eq!(task_output(&conn, "task-1").unwrap().final_text, "done");
    }

    #[test]
    fn only_ended_tasks_are_consumed_and_only_once() {
        let mut conn = db();
        let s = session(&mut conn);
        insert_task(&mut conn, &new_task("task-a", &s)).unwrap();
        insert_task(&mut conn, &new_task("task-b", &s)).unwrap();
        set_task_status(&mut conn, "task-a", TaskStatus::Failed, Some("boom")).unwrap();
        let ids = vec!["task-a".to_owned(), "task-b".to_owned()];
        let consumed = consume_tasks(&mut conn, &ids, "t-1").unwrap();
        assert_eq!(consumed.len(), 1);
        assert_eq!(consumed[0].id, "task-a");
        assert_eq!(consumed[0].error.as_deref(), Some("boom"));
        assert!(consume_tasks(&mut conn, &ids, "t-2").unwrap().is_empty());
        let delivered = mark_task_delivered(&mut conn, "task-b").unwrap();
        assert!(delivered.delivered_ms.is_some());
        assert_eq!(delivered.consumed_ms, None);
    }

    #[test]
    fn unended_tasks_without_a_live_executor_are_lost() {
        let mut conn = db();
        let s = session(&mut conn);
        insert_task(&mut conn, &new_task("task-live", &s)).unwrap();
        insert_task(&mut conn, &new_task("task-orphan", &s)).unwrap();
        insert_task(&mut conn, &new_task("task-dead", &s)).unwrap();
        insert_task(&mut conn, &new_task("task-done", &s)).unwrap();
        set_task_status(&mut conn, "task-done", TaskStatus::Succeeded, None).unwrap();
        conn.execute(
            "UPDATE tasks SET owner = 'other-boot/1/1' WHERE id = 'task-dead'",
            [],
        )
        .unwrap();
        let live: HashSet<String> = ["task-live".to_owned()].into();
        let mut lost: Vec<String> = settle_lost_tasks(&mut conn, s.as_str(), &live)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        lost.sort();
        assert_eq!(lost, ["task-dead", "task-orphan"]);
        assert_eq!(
            get_task(&conn, "task-live").unwrap().status,
            TaskStatus::Queued
        );
        assert_eq!(
            get_task(&conn, "task-done").unwrap().status,
            TaskStatus::Succeeded
        );
    }
}
