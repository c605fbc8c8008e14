//! The committed-history writer: revisions, replay, identity checks, observers, lanes, claims.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_protocol::{MessageId, TurnOutcome};
use keel_store::{
    CommitKind, CommitReceipt, CommitRequest, Execution, HistoryCommitted, HistoryOp, InputKind,
    OpenOptions, Store, TurnSource, TurnStatus,
};
use pretty_assertions::assert_eq;

use crate::{ALL_KINDS, entry, session, temp_store, temp_store_with, texts, user};

fn receipt(
    request: &CommitRequest,
    kind: CommitKind,
    revision: u64,
    epoch: u64,
    length: u64,
    written: u64,
) -> CommitReceipt {
    CommitReceipt {
        session_id: request.session_id.clone(),
        operation_id: request.operation_id.clone(),
        kind,
        revision,
        epoch,
        length,
        written,
    }
}

#[tokio::test]
async fn appends_take_contiguous_revisions_and_read_back_whole() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let first = CommitRequest::append(s.id.clone(), "op-1", vec![entry("a"), entry("b")]);
    assert_eq!(
        store.commit(first.clone()).await.unwrap(),
        receipt(&first, CommitKind::Append, 1, 0, 2, 2)
    );
    let second = CommitRequest::append(s.id.clone(), "op-2", vec![entry("c")]);
    assert_eq!(
        store.commit(second.clone()).await.unwrap(),
        receipt(&second, CommitKind::Append, 2, 0, 3, 1)
    );
    let history = store.history(&s.id).await.unwrap();
    let read: Vec<_> = history
        .iter()
        .map(|e| (e.id.clone(), e.message.clone(), e.revision))
        .collect();
    assert_eq!(
        read,
        vec![
            (MessageId::new("m-a"), user("a"), 1),
            (MessageId::new("m-b"), user("b"), 1),
            (MessageId::new("m-c"), user("c"), 2),
        ]
    );
    let record = store.session(&s.id).await.unwrap();
    assert_eq!((record.revision, record.epoch, record.length), (2, 0, 3));
}

#[tokio::test]
async fn a_retry_is_replayed_and_a_reused_id_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    let store = Store::open(&path, OpenOptions::default()).await.unwrap();
    let s = session(&store).await;
    let request = CommitRequest::append(s.id.clone(), "op-1", vec![entry("a")]);
    let first = store.commit(request.clone()).await.unwrap();
    assert_eq!(store.commit(request.clone()).await.unwrap(), first);
    assert_eq!(store.session(&s.id).await.unwrap().revision, 1);

    let mut changed = request.clone();
    changed.op = HistoryOp::Append {
        entries: vec![entry("b")],
    };
    let conflict = store.commit(changed.clone()).await.unwrap_err();
    assert_eq!(conflict.code(), "conflict");

    // A new process has an empty registry; the commit records still recognise the retry.
    drop(store);
    let store = Store::open(&path, OpenOptions::default()).await.unwrap();
    assert_eq!(store.commit(request).await.unwrap(), first);
    assert_eq!(store.commit(changed).await.unwrap_err().code(), "conflict");
    assert_eq!(texts(&store.history(&s.id).await.unwrap()), vec!["a"]);
}

#[tokio::test]
async fn identity_and_revision_are_checked_before_writing() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let other = session(&store).await;
    let foreign = store.start_turn(&other.id, TurnSource::Api).await.unwrap();

    let mut request = CommitRequest::append(s.id.clone(), "op-1", vec![entry("a")]);
    request.turn_id = Some(foreign.id.clone());
    assert_eq!(
        store.commit(request.clone()).await.unwrap_err().code(),
        "turn_mismatch"
    );

    let turn = store.start_turn(&s.id, TurnSource::Cron).await.unwrap();
    store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
    request.turn_id = Some(turn.id.clone());
    assert_eq!(
        store.commit(request.clone()).await.unwrap_err().code(),
        "turn_mismatch"
    );

    request.turn_id = None;
    request.expected_revision = Some(3);
    let stale = store.commit(request.clone()).await.unwrap_err();
    assert_eq!(stale.code(), "stale_revision");
    assert!(stale.is_retryable());

    request.operation_id = " ".into();
    request.expected_revision = Some(0);
    assert_eq!(
        store.commit(request.clone()).await.unwrap_err().code(),
        "invalid_operation"
    );

    let missing = CommitRequest::append("s-0000000000".into(), "op-1", vec![entry("a")]);
    assert_eq!(store.commit(missing).await.unwrap_err().code(), "not_found");

    store.append(&s.id, "op-2", vec![entry("a")]).await.unwrap();
    let duplicate = store
        .append(&s.id, "op-3", vec![entry("a")])
        .await
        .unwrap_err();
    assert_eq!(duplicate.code(), "invalid_operation");
    let twice = store
        .append(&s.id, "op-4", vec![entry("b"), entry("b")])
        .await
        .unwrap_err();
    assert_eq!(twice.code(), "invalid_operation");
    assert_eq!(store.commit_revisions(&s.id).await.unwrap(), vec![1]);
}

#[tokio::test]
async fn replace_starts_an_epoch_and_keeps_the_old_revisions_readable() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    store
        .append(&s.id, "op-1", vec![entry("a"), entry("b"), entry("c")])
        .await
        .unwrap();
    let request = CommitRequest {
        session_id: s.id.clone(),
        turn_id: None,
        operation_id: "compact-1".into(),
        expected_revision: Some(1),
        op: HistoryOp::Replace {
            entries: vec![entry("summary"), entry("c")],
        },
    };
    assert_eq!(
        store.commit(request.clone()).await.unwrap(),
        receipt(&request, CommitKind::Replace, 2, 1, 2, 2)
    );
    assert_eq!(
        texts(&store.history(&s.id).await.unwrap()),
        vec!["summary", "c"]
    );
    assert_eq!(
        texts(&store.history_at(&s.id, 1).await.unwrap()),
        vec!["a", "b", "c"]
    );
    assert_eq!(
        texts(&store.history_at(&s.id, 0).await.unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        store.history_at(&s.id, 3).await.unwrap_err().code(),
        "not_found"
    );
}

#[tokio::test]
async fn reconcile_keeps_the_common_prefix() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    store
        .append(&s.id, "op-1", vec![entry("a"), entry("b"), entry("c")])
        .await
        .unwrap();
    let request = CommitRequest {
        session_id: s.id.clone(),
        turn_id: None,
        operation_id: "reconcile-1".into(),
        expected_revision: None,
        op: HistoryOp::Reconcile {
            entries: vec![entry("a"), entry("b"), entry("interrupted")],
        },
    };
    assert_eq!(
        store.commit(request.clone()).await.unwrap(),
        receipt(&request, CommitKind::Reconcile, 2, 1, 3, 1)
    );
    let history = store.history(&s.id).await.unwrap();
    assert_eq!(texts(&history), vec!["a", "b", "interrupted"]);
    assert_eq!(
        history.iter().map(|e| e.revision).collect::<Vec<_>>(),
        vec![1, 1, 2]
    );
    // Reconciling to the same list again writes nothing and keeps the epoch.
    let mut same = request.clone();
    same.operation_id = "reconcile-2".into();
    assert_eq!(
        store.commit(same.clone()).await.unwrap(),
        receipt(&same, CommitKind::Reconcile, 3, 1, 3, 0)
    );
}

#[tokio::test]
async fn observers_see_every_commit_before_it_is_acknowledged() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let seen: Arc<Mutex<Vec<HistoryCommitted>>> = Arc::default();
    let sink = Arc::clone(&seen);
    store
        .add_observer(Arc::new(move |event: Arc<HistoryCommitted>| {
            let sink = Arc::clone(&sink);
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                sink.lock().unwrap().push((*event).clone());
            })
        }))
        .unwrap();
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let mut request = CommitRequest::append(s.id.clone(), "op-1", vec![entry("a")]);
    request.turn_id = Some(turn.id.clone());
    let first = store.commit(request.clone()).await.unwrap();
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![HistoryCommitted {
            receipt: first.clone(),
            turn_id: Some(turn.id.clone())
        }]
    );
    // A replayed retry is not projected again.
    store.commit(request).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stuck_observer_times_out_after_the_durable_write() {
    let (_dir, store) = temp_store_with(Execution::InPlace).await;
    let s = session(&store).await;
    store
        .add_observer(Arc::new(|_event| Box::pin(futures_pending())))
        .unwrap();
    let error = store
        .append(&s.id, "op-1", vec![entry("a")])
        .await
        .unwrap_err();
    assert_eq!(error.code(), "projection_timeout");
    assert_eq!(store.session(&s.id).await.unwrap().revision, 1);
}

async fn futures_pending() {
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_commit_in_parallel_and_one_session_in_order() {
    let (_dir, store) = temp_store().await;
    let slow = session(&store).await;
    let fast = session(&store).await;
    let gate = Arc::new(tokio::sync::Notify::new());
    let slow_id = slow.id.clone();
    let opened = Arc::clone(&gate);
    store
        .add_observer(Arc::new(move |event: Arc<HistoryCommitted>| {
            let opened = Arc::clone(&opened);
            let hold = event.receipt.session_id == slow_id && event.receipt.revision == 1;
            Box::pin(async move {
                if hold {
                    opened.notified().await;
                }
            })
        }))
        .unwrap();
    let held = tokio::spawn({
        let store = store.clone();
        let id = slow.id.clone();
        async move { store.append(&id, "op-1", vec![entry("a")]).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let queued = tokio::spawn({
        let store = store.clone();
        let id = slow.id.clone();
        async move { store.append(&id, "op-2", vec![entry("b")]).await }
    });
    // The other session is not held up by the slow lane.
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        store.append(&fast.id, "op-1", vec![entry("x")]),
    )
    .await
    .expect("the fast session waited for the slow one")
    .unwrap();
    assert_eq!(other.revision, 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !queued.is_finished(),
        "the second commit of a session passed the first"
    );
    gate.notify_one();
    assert_eq!(held.await.unwrap().unwrap().revision, 1);
    assert_eq!(queued.await.unwrap().unwrap().revision, 2);
}

#[tokio::test]
async fn claimed_inputs_are_acknowledged_after_the_commit_or_requeued() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let first = store
        .enqueue_input(
            &s.id,
            InputKind::Steer,
            serde_json::json!({"steer": "also run clippy"}),
        )
        .await
        .unwrap()
        .id;
    let second = store
        .enqueue_input(
            &s.id,
            InputKind::Steer,
            serde_json::json!({"steer": "and fmt"}),
        )
        .await
        .unwrap()
        .id;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();

    // Released claims go back to the queue in their order.
    let claim = store
        .claim_inputs(&s.id, &turn.id, ALL_KINDS)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        claim
            .inputs
            .iter()
            .map(|i| i.id.clone())
            .collect::<Vec<_>>(),
        vec![first.clone(), second.clone()]
    );
    assert!(store.queued_inputs(&s.id).await.unwrap().is_empty());
    assert_eq!(store.release_claim(&claim.id).await.unwrap(), 2);
    assert_eq!(store.queued_inputs(&s.id).await.unwrap().len(), 2);

    let claim = store
        .claim_inputs(&s.id, &turn.id, ALL_KINDS)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .acknowledge_claim(&claim.id, 1)
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
    let mut request = CommitRequest::append(s.id.clone(), "op-1", vec![entry("also run clippy")]);
    request.turn_id = Some(turn.id.clone());
    let committed = store.commit(request).await.unwrap();
    assert_eq!(
        store
            .acknowledge_claim(&claim.id, committed.revision)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store.release_claim(&claim.id).await.unwrap_err().code(),
        "not_found"
    );
    assert!(
        store
            .claim_inputs(&s.id, &turn.id, ALL_KINDS)
            .await
            .unwrap()
            .is_none()
    );
    store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_live_turn_does_not_close_while_a_claim_is_in_flight() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let input = store
        .enqueue_input(&s.id, InputKind::Steer, serde_json::json!({"steer": "one"}))
        .await
        .unwrap()
        .id;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let claim = store
        .claim_inputs(&s.id, &turn.id, ALL_KINDS)
        .await
        .unwrap()
        .unwrap();
    let refused = store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "claims_in_flight");
    assert_eq!(
        store.turn(&turn.id).await.unwrap().status,
        TurnStatus::Running
    );
    // The re-queue path: released, the input is queued again and the turn can close.
    assert_eq!(store.release_claim(&claim.id).await.unwrap(), 1);
    let queued = store.queued_inputs(&s.id).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].id, input);
    store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
}

/// An observer whose first projection never finishes (later ones do); counts projections.
fn hang_first_projection(store: &Store) -> Arc<std::sync::atomic::AtomicUsize> {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    store
        .add_observer(Arc::new(move |_event: Arc<HistoryCommitted>| {
            let first = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            Box::pin(async move {
                if first {
                    std::future::pending::<()>().await;
                }
            })
        }))
        .unwrap();
    calls
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_a_failed_projection_projects_before_it_acknowledges() {
    let (_dir, store) = temp_store_with(Execution::InPlace).await;
    let s = session(&store).await;
    let calls = hang_first_projection(&store);
    let request = CommitRequest::append(s.id.clone(), "op-1", vec![entry("a")]);
    let failed = store.commit(request.clone()).await.unwrap_err();
    assert_eq!(failed.code(), "projection_timeout");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The write is durable; the retry finds it, projects it, and only then acknowledges.
    let receipt = store.commit(request.clone()).await.unwrap();
    assert_eq!(receipt.revision, 1);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // Acknowledged now: a further retry is answered without projecting again.
    assert_eq!(store.commit(request).await.unwrap(), receipt);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(store.history(&s.id).await.unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_a_dropped_commit_projects_before_it_acknowledges() {
    let (_dir, store) = temp_store_with(Execution::InPlace).await;
    let s = session(&store).await;
    let calls = hang_first_projection(&store);
    let request = CommitRequest::append(s.id.clone(), "op-1", vec![entry("a")]);
    // The caller gives up while the first projection hangs: the write is durable, the
    // acknowledgement never happened.
    let gave_up = tokio::time::timeout(Duration::from_millis(50), store.commit(request.clone()));
    assert!(gave_up.await.is_err());
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(store.session(&s.id).await.unwrap().revision, 1);
    let receipt = store.commit(request.clone()).await.unwrap();
    assert_eq!(receipt.revision, 1);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the retry projected the commit before acknowledging it"
    );
    assert_eq!(store.commit(request).await.unwrap(), receipt);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}
