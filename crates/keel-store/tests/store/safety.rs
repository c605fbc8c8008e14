//! What protects stored sessions: private files, busy sessions that rewind and delete leave
//! alone, and a damaged database named as such.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use keel_protocol::TurnOutcome;
use keel_store::{OpenOptions, Store, TurnSource};
use pretty_assertions::assert_eq;

use crate::{entry, session_of, temp_store, texts};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Marks `turn` as run by a process that is gone (another boot).
fn orphan(db: &Path, turn: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(
        "UPDATE turns SET owner = 'another-boot/1/1' WHERE id = ?1",
        [turn],
    )
    .unwrap();
}

#[tokio::test]
async fn rewind_and_delete_refuse_a_session_a_live_process_runs() {
    let (dir, store) = temp_store().await;
    let s = session_of(&store, &["a", "b"]).await;
    // This test process owns the running turn, as a live `keel exec` would.
    let live = store.start_turn(&s.id, TurnSource::Api).await.unwrap();

    let rewind = store.rewind(&s.id, 1, "rewind-busy").await.unwrap_err();
    assert_eq!(rewind.code(), "session_busy");
    let message = rewind.to_string();
    assert!(
        message.contains(&format!("keel process {}", std::process::id()))
            && message.contains(live.id.as_str()),
        "{message}"
    );
    let delete = store.delete_session(&s.id).await.unwrap_err();
    assert_eq!(delete.code(), "session_busy");
    // A compaction from outside the running turn, too.
    let replace = store
        .commit(keel_store::CommitRequest {
            session_id: s.id.clone(),
            turn_id: None,
            operation_id: "replace-busy".into(),
            expected_revision: None,
            op: keel_store::HistoryOp::Replace {
                entries: vec![entry("summary")],
            },
        })
        .await
        .unwrap_err();
    assert_eq!(replace.code(), "session_busy");
    assert_eq!(
        texts(&store.history(&s.id).await.unwrap()),
        vec!["a", "b"],
        "nothing changed"
    );
    assert_eq!(store.commit_revisions(&s.id).await.unwrap(), vec![1, 2]);

    // The running turn itself may rewind its own session.
    let own = keel_store::CommitRequest {
        session_id: s.id.clone(),
        turn_id: Some(live.id.clone()),
        operation_id: "rewind-own".into(),
        expected_revision: None,
        op: keel_store::HistoryOp::Rewind { to_revision: 2 },
    };
    store.commit(own).await.unwrap();

    // Once its process is gone, the turn no longer holds the session.
    orphan(&dir.path().join("keel.db"), live.id.as_str());
    store.rewind(&s.id, 1, "rewind-free").await.unwrap();
    assert_eq!(texts(&store.history(&s.id).await.unwrap()), vec!["a"]);
    store.delete_session(&s.id).await.unwrap();
    assert_eq!(store.session(&s.id).await.unwrap_err().code(), "not_found");
}

#[tokio::test]
async fn an_ended_turn_does_not_make_a_session_busy() {
    let (_dir, store) = temp_store().await;
    let s = session_of(&store, &["a", "b"]).await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
    store.rewind(&s.id, 1, "rewind").await.unwrap();
    store.delete_session(&s.id).await.unwrap();
}

#[tokio::test]
async fn the_database_and_its_log_are_private_to_their_user() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.path().join("keel.db");
    let store = Store::open(&db, OpenOptions::default()).await.unwrap();
    let s = session_of(&store, &["secret"]).await;
    store
        .append(&s.id, "op-more", vec![entry("more")])
        .await
        .unwrap();
    let wal = dir.path().join("keel.db-wal");
    let shm = dir.path().join("keel.db-shm");
    assert!(wal.is_file() && shm.is_file());
    assert_eq!((mode(&db), mode(&wal), mode(&shm)), (0o600, 0o600, 0o600));
    drop(store);

    // Files an older keel left readable are tightened when the store opens them; the folder
    // around them (which the user may have chosen) is left as it is.
    for file in [&db, &wal, &shm] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let store = Store::open(&db, OpenOptions::default()).await.unwrap();
    assert_eq!((mode(&db), mode(&wal), mode(&shm)), (0o600, 0o600, 0o600));
    assert_eq!(mode(dir.path()), 0o755);
    assert_eq!(store.session(&s.id).await.unwrap().length, 2);
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_named_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    std::fs::write(
        &db,
        "this is not a database, it is a shopping list\n".repeat(200),
    )
    .unwrap();
    let error = Store::open(&db, OpenOptions::default()).await.unwrap_err();
    assert_eq!(error.code(), "database_corrupt");
    assert!(!error.is_retryable());
    let message = error.to_string();
    assert!(
        message.contains(&format!("the session database {} is corrupt", db.display())),
        "{message}"
    );
}

/// A database cut short: at the first page (the schema is damaged), in the middle (a read
/// past the end of the file), near the end.
#[tokio::test]
async fn a_truncated_database_is_named_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.db");
    let store = Store::open(&whole, OpenOptions::default()).await.unwrap();
    let texts: Vec<String> = (0..200)
        .map(|n| format!("{n} {}", "x".repeat(400)))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let s = session_of(&store, &texts).await;
    drop(store);
    {
        // Everything into the main file, so cutting it loses pages.
        let conn = rusqlite::Connection::open(&whole).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
    }
    let length = std::fs::metadata(&whole).unwrap().len();
    for cut in [3_000, length / 2, length * 3 / 4] {
        let db = dir.path().join(format!("cut-{cut}.db"));
        std::fs::copy(&whole, &db).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&db)
            .unwrap()
            .set_len(cut)
            .unwrap();
        // Opening may still succeed (the first pages are intact); reading everything cannot.
        let error = match Store::open(&db, OpenOptions::default()).await {
            Err(error) => error,
            Ok(store) => store.export_json(&s.id).await.unwrap_err(),
        };
        assert_eq!(error.code(), "database_corrupt", "cut at {cut}: {error}");
        assert!(
            error.to_string().contains(&db.display().to_string()),
            "{error}"
        );
    }
}
