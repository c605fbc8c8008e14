//! The input queue: steering and follow-ups, claimed by kind, acknowledged in part, released
//! back to their places, edited, cancelled and reordered while they wait.

use keel_protocol::{TurnId, TurnOutcome};
use keel_store::{
    Claim, CommitRequest, InputKind, QueuedInput, SessionRecord, Store, StoreError, TurnRecord,
    TurnSource,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{ALL_KINDS, entry, session, temp_store};

async fn steer(store: &Store, s: &SessionRecord, text: &str) -> QueuedInput {
    store
        .enqueue_input(&s.id, InputKind::Steer, json!({ "text": text }))
        .await
        .unwrap()
}

async fn follow_up(store: &Store, s: &SessionRecord, text: &str) -> QueuedInput {
    store
        .enqueue_input(&s.id, InputKind::FollowUp, json!({ "text": text }))
        .await
        .unwrap()
}

async fn queued(store: &Store, s: &SessionRecord) -> Vec<QueuedInput> {
    store.queued_inputs(&s.id).await.unwrap()
}

fn ids(inputs: &[QueuedInput]) -> Vec<String> {
    inputs.iter().map(|input| input.id.clone()).collect()
}

async fn claim(store: &Store, s: &SessionRecord, turn: &TurnRecord, kinds: &[InputKind]) -> Claim {
    store
        .claim_inputs(&s.id, &turn.id, kinds)
        .await
        .unwrap()
        .unwrap()
}

/// Commits one message in `turn` and returns its revision, for acknowledgements.
async fn commit(store: &Store, s: &SessionRecord, turn: &TurnRecord, op: &str) -> u64 {
    let mut request = CommitRequest::append(s.id.clone(), op, vec![entry(op)]);
    request.turn_id = Some(turn.id.clone());
    store.commit(request).await.unwrap().revision
}

fn assert_error(error: &StoreError, code: &str, names: &[&str]) {
    assert_eq!(error.code(), code, "{error}");
    assert!(!error.is_retryable(), "{error}");
    let message = error.to_string();
    for name in names {
        assert!(message.contains(name), "`{name}` is not in: {message}");
    }
}

#[tokio::test]
async fn inputs_wait_in_the_order_they_came_with_their_kind() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    assert_eq!(queued(&store, &s).await, vec![]);
    let a = steer(&store, &s, "also run clippy").await;
    let b = follow_up(&store, &s, "then write the docs").await;
    let c = steer(&store, &s, "and fmt").await;
    assert_eq!(
        (a.kind, &a.payload, a.id.starts_with("i-")),
        (InputKind::Steer, &json!({"text": "also run clippy"}), true)
    );
    assert!(a.created_ms > 0 && a.created_ms <= c.created_ms);
    assert_eq!(queued(&store, &s).await, vec![a, b, c]);
    // Kinds cross process boundaries as snake_case text.
    assert_eq!(
        serde_json::to_value([InputKind::Steer, InputKind::FollowUp]).unwrap(),
        json!(["steer", "follow_up"])
    );

    let missing = keel_protocol::SessionId::new("s-nothing");
    let error = store
        .enqueue_input(&missing, InputKind::Steer, json!("x"))
        .await
        .unwrap_err();
    assert_error(&error, "not_found", &["s-nothing"]);
    let error = store.queued_inputs(&missing).await.unwrap_err();
    assert_error(&error, "not_found", &["s-nothing"]);
}

#[tokio::test]
async fn a_claim_takes_only_the_kinds_asked_for_in_queue_order() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let s1 = steer(&store, &s, "s1").await;
    let f1 = follow_up(&store, &s, "f1").await;
    let s2 = steer(&store, &s, "s2").await;
    let f2 = follow_up(&store, &s, "f2").await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();

    assert_eq!(
        store.claim_inputs(&s.id, &turn.id, &[]).await.unwrap(),
        None
    );
    let steering = claim(&store, &s, &turn, &[InputKind::Steer]).await;
    assert_eq!(
        (&steering.turn_id, &steering.inputs),
        (&turn.id, &vec![s1, s2])
    );
    assert_eq!(queued(&store, &s).await, vec![f1.clone(), f2.clone()]);
    assert_eq!(
        store
            .claim_inputs(&s.id, &turn.id, &[InputKind::Steer])
            .await
            .unwrap(),
        None
    );
    let follow_ups = claim(&store, &s, &turn, &[InputKind::FollowUp]).await;
    assert_eq!(follow_ups.inputs, vec![f1, f2]);
    assert_ne!(follow_ups.id, steering.id);
    assert_eq!(
        store
            .claim_inputs(&s.id, &turn.id, ALL_KINDS)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn only_a_running_turn_of_the_session_claims() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let other = session(&store).await;
    steer(&store, &s, "s1").await;
    let elsewhere = store.start_turn(&other.id, TurnSource::Api).await.unwrap();
    let error = store
        .claim_inputs(&s.id, &elsewhere.id, ALL_KINDS)
        .await
        .unwrap_err();
    assert_error(&error, "turn_mismatch", &[elsewhere.id.as_str()]);

    let ended = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    store
        .finish_turn(&ended.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
    let error = store
        .claim_inputs(&s.id, &ended.id, ALL_KINDS)
        .await
        .unwrap_err();
    assert_error(&error, "turn_mismatch", &[ended.id.as_str()]);

    let error = store
        .claim_inputs(&s.id, &TurnId::new("t-nothing"), ALL_KINDS)
        .await
        .unwrap_err();
    assert_error(&error, "not_found", &["t-nothing"]);
    assert_eq!(queued(&store, &s).await.len(), 1, "nothing was claimed");
}

/// A turn that delivered only part of what it claimed acknowledges that part; releasing the
/// claim puts the rest back at the front, in their order, ahead of what came meanwhile.
#[tokio::test]
async fn a_partial_acknowledgement_then_release_requeues_only_the_rest_at_the_front() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let a = steer(&store, &s, "a").await;
    let b = steer(&store, &s, "b").await;
    let c = steer(&store, &s, "c").await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let claimed = claim(&store, &s, &turn, ALL_KINDS).await;
    assert_eq!(claimed.inputs, vec![a.clone(), b.clone(), c.clone()]);
    let later = follow_up(&store, &s, "later").await;

    let revision = commit(&store, &s, &turn, "b delivered").await;
    let acknowledged = store
        .acknowledge_inputs(&claimed.id, std::slice::from_ref(&b.id), revision)
        .await
        .unwrap();
    assert_eq!(acknowledged, 1);
    // The turn cannot close while the rest is in flight.
    let refused = store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "claims_in_flight");
    assert!(refused.to_string().contains("2 claimed"), "{refused}");

    assert_eq!(store.release_claim(&claimed.id).await.unwrap(), 2);
    assert_eq!(queued(&store, &s).await, vec![a, c, later]);
    store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn acknowledging_what_a_claim_does_not_hold_changes_nothing() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let a = steer(&store, &s, "a").await;
    let b = steer(&store, &s, "b").await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let claimed = claim(&store, &s, &turn, ALL_KINDS).await;
    assert_eq!(claimed.inputs, vec![a.clone(), b]);
    let waiting = steer(&store, &s, "waiting").await;
    let second = claim(&store, &s, &turn, ALL_KINDS).await;
    let revision = commit(&store, &s, &turn, "a delivered").await;

    for (wrong, reason) in [
        ("i-nothing", "no input has this id"),
        (waiting.id.as_str(), second.id.as_str()),
    ] {
        let error = store
            .acknowledge_inputs(&claimed.id, &[a.id.clone(), wrong.to_owned()], revision)
            .await
            .unwrap_err();
        assert_error(
            &error,
            "input_not_in_claim",
            &[wrong, claimed.id.as_str(), reason],
        );
    }
    // All or nothing: `a` is still claimed, so the claim still holds two inputs.
    let error = store
        .acknowledge_inputs(&claimed.id, std::slice::from_ref(&a.id), revision + 1)
        .await
        .unwrap_err();
    assert_error(&error, "not_found", &[&format!("@{}", revision + 1)]);
    let error = store
        .acknowledge_inputs("c-nothing", std::slice::from_ref(&a.id), revision)
        .await
        .unwrap_err();
    assert_error(&error, "not_found", &["c-nothing"]);

    // A repeated id counts once; acknowledging it again is refused, naming its state.
    let acknowledged = store
        .acknowledge_inputs(&claimed.id, &[a.id.clone(), a.id.clone()], revision)
        .await
        .unwrap();
    assert_eq!(acknowledged, 1);
    let error = store
        .acknowledge_inputs(&claimed.id, std::slice::from_ref(&a.id), revision)
        .await
        .unwrap_err();
    assert_error(&error, "input_not_in_claim", &[&a.id, "acknowledged"]);
    assert_eq!(
        store
            .acknowledge_claim(&claimed.id, revision)
            .await
            .unwrap(),
        1,
        "only `b` was left"
    );
    assert_eq!(store.release_claim(&second.id).await.unwrap(), 1);
    assert_eq!(queued(&store, &s).await, vec![waiting]);
}

/// Abort and close re-queue everything the turn claimed, from all its claims, each at its
/// place: the front of the queue, in the order they were queued.
#[tokio::test]
async fn releasing_a_turn_requeues_all_it_claimed_at_the_front() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let s1 = steer(&store, &s, "s1").await;
    let f1 = follow_up(&store, &s, "f1").await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    claim(&store, &s, &turn, &[InputKind::Steer]).await;
    let s2 = steer(&store, &s, "s2").await;
    claim(&store, &s, &turn, &[InputKind::Steer]).await;
    let f2 = follow_up(&store, &s, "f2").await;
    assert_eq!(queued(&store, &s).await, vec![f1.clone(), f2.clone()]);

    assert_eq!(store.release_turn_claims(&turn.id).await.unwrap(), 2);
    assert_eq!(queued(&store, &s).await, vec![s1, f1, s2, f2]);
    assert_eq!(store.release_turn_claims(&turn.id).await.unwrap(), 0);
    store
        .finish_turn(
            &turn.id,
            TurnOutcome::Aborted {
                reason: Some("user".into()),
            },
            None,
        )
        .await
        .unwrap();
    let error = store
        .release_turn_claims(&TurnId::new("t-nothing"))
        .await
        .unwrap_err();
    assert_error(&error, "not_found", &["t-nothing"]);
}

#[tokio::test]
async fn only_a_queued_input_is_edited_or_cancelled() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let other = session(&store).await;
    let a = steer(&store, &s, "a").await;
    let b = follow_up(&store, &s, "b").await;
    let c = steer(&store, &s, "c").await;

    let edited = store
        .edit_input(&s.id, &b.id, json!({"text": "b, but better"}))
        .await
        .unwrap();
    assert_eq!(
        edited,
        QueuedInput {
            payload: json!({"text": "b, but better"}),
            ..b.clone()
        }
    );
    assert_eq!(queued(&store, &s).await, vec![a.clone(), edited, c.clone()]);

    store.cancel_input(&s.id, &c.id).await.unwrap();
    assert_eq!(
        ids(&queued(&store, &s).await),
        vec![a.id.clone(), b.id.clone()]
    );
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let claimed = claim(&store, &s, &turn, &[InputKind::Steer]).await;
    assert_eq!(
        ids(&claimed.inputs),
        vec![a.id.clone()],
        "cancelled is never claimed"
    );

    let revision = commit(&store, &s, &turn, "a delivered").await;
    for (input, state) in [(&c, "cancelled"), (&a, "claimed")] {
        let error = store
            .edit_input(&s.id, &input.id, json!("late"))
            .await
            .unwrap_err();
        assert_error(&error, "input_not_queued", &[&input.id, state]);
        let error = store.cancel_input(&s.id, &input.id).await.unwrap_err();
        assert_error(&error, "input_not_queued", &[&input.id, state]);
    }
    store
        .acknowledge_claim(&claimed.id, revision)
        .await
        .unwrap();
    let error = store
        .edit_input(&s.id, &a.id, json!("late"))
        .await
        .unwrap_err();
    assert_error(&error, "input_not_queued", &[&a.id, "acknowledged"]);

    // An id of another session, or of nothing, is not found there.
    for id in [b.id.as_str(), "i-nothing"] {
        let error = store
            .edit_input(&other.id, id, json!("x"))
            .await
            .unwrap_err();
        assert_error(&error, "not_found", &[id]);
        let error = store.cancel_input(&other.id, id).await.unwrap_err();
        assert_error(&error, "not_found", &[id]);
    }
    assert_eq!(
        queued(&store, &s).await,
        vec![QueuedInput {
            payload: json!({"text": "b, but better"}),
            ..b
        }]
    );
}

#[tokio::test]
async fn a_reorder_is_a_permutation_of_the_queue_or_nothing() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let a = steer(&store, &s, "a").await;
    let b = follow_up(&store, &s, "b").await;
    let c = steer(&store, &s, "c").await;
    let gone = steer(&store, &s, "gone").await;
    store.cancel_input(&s.id, &gone.id).await.unwrap();

    let order = vec![c.id.clone(), a.id.clone(), b.id.clone()];
    let reordered = store.reorder_inputs(&s.id, &order).await.unwrap();
    assert_eq!(reordered, vec![c.clone(), a.clone(), b.clone()]);
    assert_eq!(queued(&store, &s).await, reordered);

    let wrong: [(Vec<&str>, &[&str]); 4] = [
        (vec![&c.id, &a.id], &["missing", &b.id]),
        (
            vec![&c.id, &a.id, &b.id, &gone.id],
            &["not queued", &gone.id],
        ),
        (vec![&c.id, &a.id, &b.id, &a.id], &["named twice", &a.id]),
        (
            vec![&c.id, "i-nothing", &a.id, &a.id],
            &["missing", &b.id, "not queued", "i-nothing", "named twice"],
        ),
    ];
    for (order, names) in wrong {
        let order: Vec<String> = order.into_iter().map(str::to_owned).collect();
        let error = store.reorder_inputs(&s.id, &order).await.unwrap_err();
        assert_error(&error, "queue_order_mismatch", names);
        assert_eq!(
            queued(&store, &s).await,
            reordered,
            "a refused order changes nothing"
        );
    }
    let missing = keel_protocol::SessionId::new("s-nothing");
    let error = store.reorder_inputs(&missing, &[]).await.unwrap_err();
    assert_error(&error, "not_found", &["s-nothing"]);
    // The empty order is the permutation of an empty queue.
    let empty = session(&store).await;
    assert_eq!(store.reorder_inputs(&empty.id, &[]).await.unwrap(), vec![]);
}

/// A reorder hands out the queued inputs' places; a claimed input keeps its own and goes
/// back to it when released.
#[tokio::test]
async fn a_reorder_leaves_the_places_of_claimed_inputs() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let a = steer(&store, &s, "a").await;
    let b = follow_up(&store, &s, "b").await;
    let c = steer(&store, &s, "c").await;
    let d = follow_up(&store, &s, "d").await;
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let claimed = claim(&store, &s, &turn, &[InputKind::Steer]).await;
    let reordered = store
        .reorder_inputs(&s.id, &[d.id.clone(), b.id.clone()])
        .await
        .unwrap();
    assert_eq!(reordered, vec![d.clone(), b.clone()]);
    store.release_claim(&claimed.id).await.unwrap();
    assert_eq!(queued(&store, &s).await, vec![a, d, c, b]);
}

/// A turn a dead process left running is closed when the next one begins; what it claimed
/// goes back to the front of the queue in its order, not behind what came later.
#[tokio::test]
async fn a_dead_turns_claims_go_back_to_their_places() {
    let (dir, store) = temp_store().await;
    let s = session(&store).await;
    let a = steer(&store, &s, "a").await;
    let b = follow_up(&store, &s, "b").await;
    let dead = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    claim(&store, &s, &dead, ALL_KINDS).await;
    let c = steer(&store, &s, "c").await;
    {
        let conn = rusqlite::Connection::open(dir.path().join("keel.db")).unwrap();
        conn.execute(
            "UPDATE turns SET owner = 'another-boot/1/1' WHERE id = ?1",
            [dead.id.as_str()],
        )
        .unwrap();
    }
    let (closed, _mine) = store
        .begin_turn(
            &s.id,
            TurnSource::Api,
            TurnOutcome::Failed {
                code: keel_protocol::FailureCode::Interrupted,
                message: "the process died".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(ids_of_turns(&closed), vec![dead.id.clone()]);
    assert_eq!(queued(&store, &s).await, vec![a, b, c]);
}

fn ids_of_turns(turns: &[TurnRecord]) -> Vec<TurnId> {
    turns.iter().map(|turn| turn.id.clone()).collect()
}
