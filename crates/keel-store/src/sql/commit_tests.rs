//! The commit path's statements stay index probes and stay compiled, however long the session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_protocol::{Message, SessionId};
use rusqlite::types::Value;
use rusqlite::{Connection, StatementStatus};

use super::commit::{
    Applied, INSERT_COMMIT, INSERT_HISTORY, LAST_SEQ, LIVE_MESSAGE_EXISTS, READ_TAIL, UPDATE_HEAD,
    apply, verify,
};
use super::history::FIND_COMMIT;
use super::sessions::GET_SESSION;
use super::{create_session, get_session, int};
use crate::model::{CommitRequest, Entry, NewSession};
use crate::schema::{self, Durability};

/// Appends messages, a hundred per commit, until the session holds `length`.
fn grow(conn: &mut Connection, session: &SessionId, length: usize) {
    let mut have = usize::try_from(get_session(conn, session.as_str()).unwrap().length).unwrap();
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
