//! Sessions, turns, ids, fork, rewind, export, schema versions.

use keel_protocol::{SessionId, TurnOutcome, Usage};
use keel_store::{
    Durability, ForkPoint, InputKind, NewSession, OpenOptions, Store, StoreError, TurnSource,
    TurnStatus,
};
use pretty_assertions::assert_eq;

use crate::{ALL_KINDS, entry, session, session_of, temp_store, texts};

#[tokio::test]
async fn sessions_are_listed_newest_first_and_found_by_prefix() {
    let (_dir, store) = temp_store().await;
    let first = session(&store).await;
    let second = store
        .create_session(NewSession {
            title: "other".into(),
            cwd: "/elsewhere".into(),
            model: String::new(),
            parent_id: Some(first.id.clone()),
        })
        .await
        .unwrap();
    assert!(first.id.as_str().starts_with("s-") && first.id.as_str().len() == 12);
    assert_eq!(second.parent_id, Some(first.id.clone()));

    // Updates are ordered by millisecond: let the clock move past the creations.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    store
        .append(&first.id, "op-1", vec![entry("a")])
        .await
        .unwrap();
    let all = store.list_sessions(None, 10).await.unwrap();
    assert_eq!(
        all.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        vec![first.id.clone(), second.id.clone()]
    );
    let here = store
        .list_sessions(Some("/elsewhere".into()), 10)
        .await
        .unwrap();
    assert_eq!(here, vec![second.clone()]);

    let full = first.id.as_str();
    assert_eq!(store.resolve_session(full).await.unwrap(), first.id);
    assert_eq!(store.resolve_session(&full[..6]).await.unwrap(), first.id);
    assert_eq!(
        store
            .resolve_session(&full[2..7].to_uppercase())
            .await
            .unwrap(),
        first.id
    );
    let short = store.resolve_session("s-a").await.unwrap_err();
    assert_eq!(short.code(), "id_prefix_too_short");
    let unknown = store.resolve_session("s-zzzzzzzzzz").await.unwrap_err();
    assert_eq!(unknown.code(), "not_found");
    assert!(unknown.to_string().contains("s-zzzzzzzzzz"), "{unknown}");
}

#[tokio::test]
async fn an_ambiguous_prefix_names_the_candidates() {
    let (_dir, store) = temp_store().await;
    let mut seen = std::collections::HashMap::<String, SessionId>::new();
    let (prefix, a, b) = loop {
        let made = session(&store).await.id;
        let prefix = made.as_str()[..4].to_owned();
        if let Some(earlier) = seen.insert(prefix.clone(), made.clone()) {
            break (prefix, earlier, made);
        }
    };
    let error = store.resolve_session(&prefix).await.unwrap_err();
    match &error {
        StoreError::Ambiguous { candidates, .. } => {
            assert!(candidates.contains(&a.to_string()) && candidates.contains(&b.to_string()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(error.code(), "id_ambiguous");
    assert!(
        error.to_string().contains("type more characters"),
        "{error}"
    );
}

#[tokio::test]
async fn turns_record_source_status_usage_and_error_code() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let turn = store
        .start_turn(&s.id, TurnSource::Channel("slack".into()))
        .await
        .unwrap();
    assert_eq!(turn.status, TurnStatus::Running);
    assert!(turn.id.as_str().starts_with("t-"));
    let usage = Usage {
        input: 10,
        output: 5,
        ..Usage::default()
    };
    let ended = store
        .finish_turn(
            &turn.id,
            TurnOutcome::Failed {
                code: keel_protocol::FailureCode::ModelOverloaded,
                message: "busy".into(),
            },
            Some(usage),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            ended.status,
            ended.error_code.as_deref(),
            ended.usage,
            ended.source.clone()
        ),
        (
            TurnStatus::Failed,
            Some("model_overloaded"),
            Some(usage),
            TurnSource::Channel("slack".into())
        )
    );
    assert!(ended.ended_ms.is_some());
    let again = store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap_err();
    assert_eq!(again.code(), "invalid_operation");
    assert_eq!(store.turns(&s.id).await.unwrap(), vec![ended]);
    for source in [
        TurnSource::Api,
        TurnSource::Cron,
        TurnSource::ThreadGoal,
        TurnSource::Channel("x".into()),
    ] {
        assert_eq!(TurnSource::parse(&source.as_text()), Some(source));
    }
}

#[tokio::test]
async fn fork_copies_history_up_to_a_revision() {
    let (_dir, store) = temp_store().await;
    let s = session_of(&store, &["a", "b", "c"]).await;
    let fork = store.fork(&s.id, Some(2), None).await.unwrap();
    assert_eq!(
        fork.forked_from,
        Some(ForkPoint {
            session_id: s.id.clone(),
            revision: 2
        })
    );
    assert_eq!(
        (fork.revision, fork.length, fork.title.as_str()),
        (1, 2, "Fork of fix the tests")
    );
    assert_eq!(
        texts(&store.history(&fork.id).await.unwrap()),
        vec!["a", "b"]
    );
    // The fork is independent of its source.
    store
        .append(&fork.id, "op-x", vec![entry("x")])
        .await
        .unwrap();
    assert_eq!(
        texts(&store.history(&s.id).await.unwrap()),
        vec!["a", "b", "c"]
    );
    let beyond = store.fork(&s.id, Some(9), None).await.unwrap_err();
    assert_eq!(beyond.code(), "not_found");
}

#[tokio::test]
async fn rewind_is_recoverable() {
    let (_dir, store) = temp_store().await;
    let s = session_of(&store, &["a", "b", "c"]).await;
    let back = store.rewind(&s.id, 1, "rewind-1").await.unwrap();
    assert_eq!(
        (back.revision, back.epoch, back.length, back.written),
        (4, 1, 1, 0)
    );
    assert_eq!(texts(&store.history(&s.id).await.unwrap()), vec!["a"]);
    assert_eq!(
        texts(&store.history_at(&s.id, 3).await.unwrap()),
        vec!["a", "b", "c"]
    );
    let forward = store.rewind(&s.id, 3, "rewind-3").await.unwrap();
    assert_eq!(
        (forward.revision, forward.length, forward.written),
        (5, 3, 2)
    );
    assert_eq!(
        texts(&store.history(&s.id).await.unwrap()),
        vec!["a", "b", "c"]
    );
    assert_eq!(
        store.commit_revisions(&s.id).await.unwrap(),
        vec![1, 2, 3, 4, 5]
    );
}

#[tokio::test]
async fn export_renders_markdown_and_json() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let answer =
        keel_protocol::Message::Assistant(keel_protocol::AssistantMessage::from_text("done"));
    store
        .append(
            &s.id,
            "op-1",
            vec![entry("fix it"), keel_store::Entry::new(answer)],
        )
        .await
        .unwrap();
    let markdown = store.export_markdown(&s.id).await.unwrap();
    let expected = format!(
        "# fix the tests\n\n- session: `{}`\n- folder: `/work`\n- model: `mock/mock-model`\n- revision: 1\n\n\
         ## User\n\nfix it\n\n## Assistant\n\ndone\n\n",
        s.id
    );
    assert_eq!(markdown, expected);
    let json = store.export_json(&s.id).await.unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["session"]["id"], s.id.as_str());
    assert_eq!(json["history"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["history"][0]["message"]["role"], "user");
}

#[tokio::test]
async fn deleting_a_session_removes_it() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    store.append(&s.id, "op-1", vec![entry("a")]).await.unwrap();
    store.delete_session(&s.id).await.unwrap();
    assert_eq!(store.session(&s.id).await.unwrap_err().code(), "not_found");
    assert_eq!(
        store.delete_session(&s.id).await.unwrap_err().code(),
        "not_found"
    );
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
}

#[tokio::test]
async fn a_newer_schema_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    drop(
        Store::open(
            &path,
            OpenOptions {
                durability: Durability::Full,
                ..OpenOptions::default()
            },
        )
        .await
        .unwrap(),
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE schema_version SET version = 99", [])
        .unwrap();
    drop(conn);
    let error = Store::open(&path, OpenOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "schema_too_new");
    assert!(error.to_string().contains("schema version 99"), "{error}");
    // Reopening a current database is a no-op migration.
    let dir2 = tempfile::tempdir().unwrap();
    let path2 = dir2.path().join("keel.db");
    drop(Store::open(&path2, OpenOptions::default()).await.unwrap());
    let store = Store::open(&path2, OpenOptions::default()).await.unwrap();
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    assert_eq!(keel_store::known_schema_version(), 5);
}

#[tokio::test]
async fn a_version_1_database_is_migrated_and_keeps_its_turns() {
    let (dir, store) = temp_store().await;
    let s = session(&store).await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    drop(store);
    let path = dir.path().join("keel.db");
    {
        // Back to what version 1 wrote: no owner column.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE turns DROP COLUMN owner; UPDATE schema_version SET version = 1;",
        )
        .unwrap();
    }
    let store = Store::open(&path, OpenOptions::default()).await.unwrap();
    let migrated = store.turn(&turn.id).await.unwrap();
    assert_eq!(migrated.status, TurnStatus::Running);
    assert_eq!(migrated.owner, None);
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
}

#[tokio::test]
async fn resuming_closes_only_turns_whose_process_is_gone() {
    let (dir, store) = temp_store().await;
    let s = session(&store).await;
    let interrupted = || TurnOutcome::Failed {
        code: keel_protocol::FailureCode::Interrupted,
        message: "the process stopped".into(),
    };
    // A turn this (live) process runs makes the session busy; nothing changes.
    let live = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    assert!(live.owner.is_some());
    let busy = store
        .begin_turn(&s.id, TurnSource::Api, interrupted())
        .await
        .unwrap_err();
    assert_eq!(busy.code(), "session_busy");
    assert_eq!(
        store.turns(&s.id).await.unwrap().len(),
        1,
        "no turn started"
    );
    assert!(busy.is_retryable());
    let message = busy.to_string();
    assert!(
        message.contains(&std::process::id().to_string()) && message.contains(live.id.as_str()),
        "{message}"
    );
    assert_eq!(
        store.turn(&live.id).await.unwrap().status,
        TurnStatus::Running
    );

    // The same turn as a dead process would have left it (another boot), one from before
    // owners were recorded, and a claimed input: both turns close, the input is queued again.
    let legacy = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let input = store
        .enqueue_input(
            &s.id,
            InputKind::Steer,
            serde_json::json!({"steer": "keep me"}),
        )
        .await
        .unwrap()
        .id;
    store
        .claim_inputs(&s.id, &live.id, ALL_KINDS)
        .await
        .unwrap()
        .unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join("keel.db")).unwrap();
        conn.execute(
            "UPDATE turns SET owner = 'another-boot/1/1' WHERE id = ?1",
            [live.id.as_str()],
        )
        .unwrap();
        conn.execute(
            "UPDATE turns SET owner = NULL WHERE id = ?1",
            [legacy.id.as_str()],
        )
        .unwrap();
    }
    // Starting a turn closes both dead ones, re-queues the input, and owns the session.
    let (closed, mine) = store
        .begin_turn(&s.id, TurnSource::Api, interrupted())
        .await
        .unwrap();
    assert_eq!(closed.len(), 2);
    for turn in &closed {
        assert_eq!(turn.status, TurnStatus::Failed);
        assert_eq!(turn.error_code.as_deref(), Some("interrupted"));
    }
    let queued = store.queued_inputs(&s.id).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].id, input);
    assert_eq!(mine.status, TurnStatus::Running);

    // Checking and starting are one step: a second caller finds the new turn running and
    // starts nothing.
    let before = store.turns(&s.id).await.unwrap().len();
    let busy = store
        .begin_turn(&s.id, TurnSource::Api, interrupted())
        .await
        .unwrap_err();
    assert_eq!(busy.code(), "session_busy");
    assert!(busy.to_string().contains(mine.id.as_str()), "{busy}");
    assert_eq!(store.turns(&s.id).await.unwrap().len(), before);
}

/// Several `keel` processes starting together on a new database: the switch to write-ahead
/// logging reads the file, then must write it, and SQLite fails that upgrade at once (its busy
/// handler would deadlock) while another connection is about to write. Opening waits for that
/// writer instead of failing with "database is locked".
#[tokio::test]
async fn opening_waits_for_a_writer_of_a_new_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer
        .execute_batch("CREATE TABLE early (x INTEGER); BEGIN IMMEDIATE;")
        .unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        writer.execute_batch("COMMIT").unwrap();
    });
    let store = Store::open(&path, OpenOptions::default()).await;
    release.join().unwrap();
    let store = store.unwrap();
    assert_eq!(store.list_sessions(None, 10).await.unwrap(), vec![]);
}

/// A listing carries each session's first typed prompt (never keel's hidden notes or a `!`
/// command), so a renamed session can still be told by what was asked.
#[tokio::test]
async fn a_listing_carries_the_first_prompt_typed() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let hidden = keel_store::Entry::new(keel_protocol::Message::User(
        keel_protocol::UserMessage::hidden_text("<system-reminder>note</system-reminder>"),
    ));
    let mut shell = keel_protocol::UserMessage::text("ran it");
    shell.shell = Some(keel_protocol::ShellRun {
        command: "ls".into(),
        exit_code: Some(0),
    });
    let shell = keel_store::Entry::new(keel_protocol::Message::User(shell));
    store
        .append(&s.id, "op-1", vec![hidden, shell])
        .await
        .unwrap();
    store
        .append(
            &s.id,
            "op-2",
            vec![
                entry("why does the parser reject tabs?"),
                entry("and spaces?"),
            ],
        )
        .await
        .unwrap();
    let listed = store.list_conversations(None, 10).await.unwrap();
    assert_eq!(
        listed[0].first_prompt.as_deref(),
        Some("why does the parser reject tabs?")
    );
    // Reading one session does not look for it.
    assert_eq!(store.session(&s.id).await.unwrap().first_prompt, None);
}
