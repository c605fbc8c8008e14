//! Opening the database: pragmas and schema migrations.
//!
//! WAL lets readers run beside the one writer, and with `synchronous=NORMAL` a commit survives a
//! killed process (the WAL is in the OS page cache) but not a power cut; `Durability::Full` syncs
//! the WAL on every commit for the price of one fsync per commit. Migrations are numbered SQL
//! batches, each applied in its own transaction together with the `schema_version` update, so a
//! crash mid-migration leaves the previous version intact. A database newer than this code is
//! refused rather than guessed at.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::{Result, StoreError};

/// How long a statement waits for another connection's write lock before failing as busy.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How hard a commit is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=NORMAL`: survives a killed process; a power cut may lose the last commits.
    #[default]
    Normal,
    /// `synchronous=FULL`: every acknowledged commit survives a power cut too.
    Full,
}

impl Durability {
    /// `Full` when every commit must be synced (the `durable` setting), else `Normal`.
    pub fn synced(durable: bool) -> Self {
        if durable { Self::Full } else { Self::Normal }
    }
}

/// The migrations, in order; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, canonical history with validity intervals, commits, turns, inputs.
    r#"
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        cwd TEXT NOT NULL,
        model TEXT NOT NULL DEFAULT '',
        parent_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
        forked_from_session TEXT REFERENCES sessions(id) ON DELETE SET NULL,
        forked_from_revision INTEGER,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        revision INTEGER NOT NULL DEFAULT 0,
        epoch INTEGER NOT NULL DEFAULT 0,
        length INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX sessions_by_cwd ON sessions(cwd, updated_ms);
    CREATE INDEX sessions_by_update ON sessions(updated_ms);

    -- One row per message version. A row is part of canonical history at revision R when
    -- from_rev <= R < to_rev (to_rev NULL: still live). Rows are never deleted, so every
    -- earlier revision can be read back.
    CREATE TABLE history (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        from_rev INTEGER NOT NULL,
        to_rev INTEGER,
        message_id TEXT NOT NULL,
        message TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX history_live ON history(session_id, to_rev, seq);
    CREATE INDEX history_by_message ON history(session_id, message_id);
    CREATE INDEX history_by_revision ON history(session_id, from_rev);

    -- One row per committed revision, contiguous from 1.
    CREATE TABLE commits (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        revision INTEGER NOT NULL,
        kind TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        operation_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        turn_id TEXT,
        length INTEGER NOT NULL,
        written INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (session_id, revision)
    ) STRICT, WITHOUT ROWID;
    CREATE UNIQUE INDEX commits_by_operation ON commits(session_id, operation_id);

    CREATE TABLE turns (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        source TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'aborted', 'failed')),
        usage TEXT,
        error_code TEXT,
        started_ms INTEGER NOT NULL,
        ended_ms INTEGER
    ) STRICT;
    CREATE INDEX turns_by_session ON turns(session_id, started_ms);

    CREATE TABLE inputs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        payload TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'acknowledged')),
        claim_id TEXT,
        turn_id TEXT,
        ack_revision INTEGER,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX inputs_by_session ON inputs(session_id, state);
    CREATE INDEX inputs_by_claim ON inputs(claim_id);
    "#,
    // 2: the process that runs each turn, so resuming closes only turns whose process is gone.
    "ALTER TABLE turns ADD COLUMN owner TEXT;",
    // 3: the queue of steering and follow-ups. Each input has a kind and an explicit place in
    // its session's queue (unique, so order has no ties and a reorder is a permutation of
    // places), and can be cancelled. A CHECK cannot be altered, so the table is rebuilt;
    // earlier inputs were all steering and keep their order (that was the rowid).
    r#"
    CREATE TABLE inputs_v3 (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('steer', 'follow_up')),
        position INTEGER NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'acknowledged', 'cancelled')),
        claim_id TEXT,
        turn_id TEXT,
        ack_revision INTEGER,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    ) STRICT;
    INSERT INTO inputs_v3 (id, session_id, kind, position, payload, state, claim_id, turn_id,
                           ack_revision, created_ms, updated_ms)
        SELECT id, session_id, 'steer', rowid, payload, state, claim_id, turn_id, ack_revision,
               created_ms, updated_ms
        FROM inputs;
    DROP TABLE inputs;
    ALTER TABLE inputs_v3 RENAME TO inputs;
    CREATE UNIQUE INDEX inputs_by_position ON inputs(session_id, position);
    CREATE INDEX inputs_queue ON inputs(session_id, state, position);
    CREATE INDEX inputs_by_claim ON inputs(claim_id);
    CREATE INDEX inputs_by_turn ON inputs(turn_id, state);
    "#,
    // 4: state extensions keep per session (a reminder round counter, when a reminder last
    // fired), and reminders waiting for a session's next turn, claimed by the turn that
    // carries them and acknowledged once that turn's prompt is committed.
    r#"
    CREATE TABLE IF NOT EXISTS session_state (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (session_id, key)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS session_reminders (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        source TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'acknowledged')),
        turn_id TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX IF NOT EXISTS session_reminders_pending ON session_reminders(session_id, state, created_ms);
    "#,
    // 5: background tasks (SPEC §14): a child session working for its parent, the process
    // that executes it (a task whose process is gone is settled `lost`), its progress output
    // and final answer, when its notice was delivered and when its result's reading was
    // committed (consumed).
    r#"
    CREATE TABLE IF NOT EXISTS tasks (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        child_session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
        parent_task_id TEXT,
        description TEXT NOT NULL,
        agent TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN
            ('queued', 'running', 'stopping', 'succeeded', 'failed', 'canceled', 'lost')),
        background INTEGER NOT NULL,
        owner TEXT NOT NULL,
        output TEXT NOT NULL DEFAULT '',
        final_text TEXT NOT NULL DEFAULT '',
        error TEXT,
        created_ms INTEGER NOT NULL,
        started_ms INTEGER,
        ended_ms INTEGER,
        delivered_ms INTEGER,
        consumed_ms INTEGER,
        consumed_turn TEXT
    ) STRICT;
    CREATE INDEX IF NOT EXISTS tasks_by_session ON tasks(session_id, created_ms);
    CREATE INDEX IF NOT EXISTS tasks_by_child ON tasks(child_session_id);
    "#,
];

/// Highest schema version this code knows.
pub fn known_version() -> u32 {
    u32::try_from(MIGRATIONS.len()).unwrap_or(u32::MAX)
}

/// Opens (creating if needed) the database at `path`, sets the pragmas and migrates it.
pub fn open(path: &Path, durability: Durability) -> Result<Connection> {
    if !crate::files::is_special(path) {
        crate::files::make_private(path)?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    enable_wal(&conn)?;
    // Closing must not copy the whole write-ahead log back into the database: that made
    // every `keel exec` end with a checkpoint of the session so far. Commits are already
    // durable in the log, automatic checkpoints still run as it grows, and the next open
    // reads the log.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    // Plans must not depend on bound values: the bundled SQLite is built with STAT4, which
    // otherwise recompiles range and MAX statements (the commit path's tail read and last
    // `seq`) every time a new value is bound, several times per commit.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    let synchronous = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    migrate(&mut conn)?;
    Ok(conn)
}

/// Switches the database to write-ahead logging, waiting out other first openers.
///
/// The switch is stored in the file, so only the first opens of a new database make it. It
/// needs the file to itself, and SQLite fails it at once as busy, without the busy handler,
/// while another process holds any lock on the file: several `keel` processes starting
/// together on a new database would otherwise fail with "database is locked".
fn enable_wal(conn: &Connection) -> Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(error) if is_busy(&error) && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return Ok(done?),
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Applies every migration newer than the database's version, each in its own transaction.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    // Up to date (the common case, and every read-only command): a read, no write lock, so
    // opening the database never waits for or blocks a writer.
    // An error here means the table does not exist yet: migrate from nothing below.
    let current: Option<u32> = conn
        .query_row("SELECT MAX(version) FROM schema_version", [], |row| {
            row.get::<_, Option<u32>>(0)
        })
        .ok()
        .flatten();
    if current == Some(known_version()) {
        return Ok(());
    }
    conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: Option<u32> =
            tx.query_row("SELECT MAX(version) FROM schema_version", [], |row| {
                row.get(0)
            })?;
        let found = found.unwrap_or(0);
        let known = known_version();
        if found > known {
            return Err(StoreError::SchemaTooNew { found, known });
        }
        let Some(sql) = MIGRATIONS.get(found as usize) else {
            return Ok(());
        };
        tx.execute_batch(sql)?;
        tx.execute("DELETE FROM schema_version", [])?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            [found + 1],
        )?;
        tx.commit()?;
        tracing::debug!(version = found + 1, "applied store migration");
    }
}

/// The result of `PRAGMA integrity_check`: `ok` when the file is sound.
pub fn integrity_check(conn: &Connection) -> Result<String> {
    let mut statement = conn.prepare("PRAGMA integrity_check")?;
    let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
    let lines = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::model::{InputKind, QueuedInput};
    use crate::sql;

    fn steer(id: &str, n: u32, created_ms: i64) -> QueuedInput {
        QueuedInput {
            id: id.into(),
            kind: InputKind::Steer,
            payload: json!({ "n": n }),
            created_ms,
        }
    }

    /// A version 2 queue (inputs in rowid order, no kinds, no places) becomes steering in
    /// the same order, and a claimed input goes back to its old place when released.
    #[test]
    fn a_version_2_queue_keeps_its_order_as_steering() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version VALUES (2);
                 INSERT INTO sessions (id, cwd, created_ms, updated_ms) VALUES ('s-1', '/w', 1, 1);
                 INSERT INTO turns (id, session_id, source, status, started_ms)
                     VALUES ('t-1', 's-1', 'api', 'running', 1);
                 INSERT INTO inputs (id, session_id, payload, state, created_ms, updated_ms)
                     VALUES ('i-c', 's-1', '{\"n\":1}', 'queued', 10, 10);
                 INSERT INTO inputs (id, session_id, payload, state, claim_id, turn_id,
                                     created_ms, updated_ms)
                     VALUES ('i-a', 's-1', '{\"n\":2}', 'claimed', 'c-1', 't-1', 11, 11);
                 INSERT INTO inputs (id, session_id, payload, state, created_ms, updated_ms)
                     VALUES ('i-b', 's-1', '{\"n\":3}', 'queued', 12, 12);
                 INSERT INTO inputs (id, session_id, payload, state, claim_id, turn_id,
                                     ack_revision, created_ms, updated_ms)
                     VALUES ('i-0', 's-1', '{\"n\":0}', 'acknowledged', 'c-0', 't-1', 1, 9, 9);",
            )
            .unwrap();
        }
        let mut conn = open(&path, Durability::Normal).unwrap();
        let version: u32 = conn
            .query_row("SELECT version FROM schema_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, known_version());
        assert_eq!(
            sql::queued_inputs(&conn, "s-1").unwrap(),
            vec![steer("i-c", 1, 10), steer("i-b", 3, 12)]
        );
        assert_eq!(sql::release_claim(&mut conn, "c-1").unwrap(), 1);
        let added =
            sql::enqueue_input(&mut conn, "s-1", InputKind::FollowUp, &json!("next")).unwrap();
        assert_eq!(
            sql::queued_inputs(&conn, "s-1").unwrap(),
            vec![
                steer("i-c", 1, 10),
                steer("i-a", 2, 11),
                steer("i-b", 3, 12),
                added
            ]
        );
        let acknowledged: (String, Option<i64>) = conn
            .query_row(
                "SELECT state, ack_revision FROM inputs WHERE id = 'i-0'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert_eq!(acknowledged, ("acknowledged".to_owned(), Some(1)));
        // Places are unique within a session, and kinds are checked.
        let place_of = |id: &str| -> i64 {
            conn.query_row("SELECT position FROM inputs WHERE id = ?1", [id], |row| {
                row.get(0)
            })
            .unwrap()
        };
        let taken = place_of("i-c");
        assert!(
            conn.execute("UPDATE inputs SET position = ?1 WHERE id = 'i-b'", [taken])
                .is_err()
        );
        assert!(
            conn.execute("UPDATE inputs SET kind = 'later' WHERE id = 'i-b'", [])
                .is_err()
        );
        assert_eq!(integrity_check(&conn).unwrap(), "ok");
    }
}
