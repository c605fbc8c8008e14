//! What extensions keep per session: named values, a counter, and session reminders that
//! move pending → claimed → acknowledged, back to pending when their turn ends without them.

use keel_protocol::{TurnOutcome, TurnSource};
use keel_store::{NewSession, StoreError};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{session, session_of, temp_store};

#[tokio::test]
async fn named_values_and_counters_belong_to_their_session() {
    let (_dir, store) = temp_store().await;
    let a = session(&store).await;
    let b = session(&store).await;
    assert_eq!(store.session_state(&a.id, "k").await.unwrap(), None);
    store
        .set_session_state(&a.id, "k", json!({"x": 1}))
        .await
        .unwrap();
    store
        .set_session_state(&a.id, "k", json!({"x": 2}))
        .await
        .unwrap();
    assert_eq!(
        store.session_state(&a.id, "k").await.unwrap(),
        Some(json!({"x": 2}))
    );
    assert_eq!(store.session_state(&b.id, "k").await.unwrap(), None);
    let counted: Vec<u64> = [
        store.bump_session_counter(&a.id, "n").await.unwrap(),
        store.bump_session_counter(&a.id, "n").await.unwrap(),
        store.bump_session_counter(&b.id, "n").await.unwrap(),
    ]
    .to_vec();
    assert_eq!(counted, [1, 2, 1]);
    let missing = store
        .set_session_state(&"s-missing".into(), "k", json!(1))
        .await
        .unwrap_err();
    assert!(matches!(missing, StoreError::NotFound { .. }), "{missing}");
    // A counter that is not a number is reported, not reset.
    store
        .set_session_state(&a.id, "n", json!("x"))
        .await
        .unwrap();
    let corrupt = store.bump_session_counter(&a.id, "n").await.unwrap_err();
    assert_eq!(corrupt.code(), "store_corrupt");
}

#[tokio::test]
async fn a_session_reminder_is_delivered_once_and_returns_when_its_turn_did_not_commit_it() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let first = store
        .add_session_reminder(&s.id, "runtime", "your last turn was interrupted")
        .await
        .unwrap();
    let second = store
        .add_session_reminder(&s.id, "tasks", "task t-1 finished")
        .await
        .unwrap();
    let texts = |list: Vec<keel_store::SessionReminder>| -> Vec<String> {
        list.into_iter().map(|r| r.text).collect()
    };
    assert_eq!(
        texts(store.session_reminders(&s.id).await.unwrap()),
        ["your last turn was interrupted", "task t-1 finished"]
    );
    // A turn claims the first only; the other stays waiting.
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    let claimed = store
        .claim_session_reminders(&s.id, &turn.id, &[first.id.clone(), "r-unknown".into()])
        .await
        .unwrap();
    assert_eq!(claimed, std::slice::from_ref(&first.id));
    assert_eq!(
        texts(store.session_reminders(&s.id).await.unwrap()),
        ["task t-1 finished"]
    );
    // The turn ends without committing its prompt: the claim goes back.
    assert_eq!(store.release_session_reminders(&turn.id).await.unwrap(), 1);
    store
        .finish_turn(&turn.id, TurnOutcome::Completed, None)
        .await
        .unwrap();
    assert_eq!(store.session_reminders(&s.id).await.unwrap().len(), 2);
    // The next turn claims both and acknowledges them with its prompt.
    let next = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    store
        .claim_session_reminders(&s.id, &next.id, &[first.id.clone(), second.id.clone()])
        .await
        .unwrap();
    assert_eq!(
        store.acknowledge_session_reminders(&next.id).await.unwrap(),
        2
    );
    assert_eq!(store.release_session_reminders(&next.id).await.unwrap(), 0);
    assert!(store.session_reminders(&s.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_claim_held_by_a_turn_that_no_longer_runs_counts_as_waiting() {
    let (_dir, store) = temp_store().await;
    let s = session(&store).await;
    let reminder = store
        .add_session_reminder(&s.id, "runtime", "left for later")
        .await
        .unwrap();
    let turn = store.start_turn(&s.id, TurnSource::Api).await.unwrap();
    store
        .claim_session_reminders(&s.id, &turn.id, std::slice::from_ref(&reminder.id))
        .await
        .unwrap();
    assert!(store.session_reminders(&s.id).await.unwrap().is_empty());
    // Its process died: the turn was closed by a later one, the claim never settled.
    store
        .finish_turn(
            &turn.id,
            TurnOutcome::Failed {
                code: keel_protocol::FailureCode::Interrupted,
                message: "gone".into(),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(store.session_reminders(&s.id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn child_sessions_and_the_turn_of_each_commit_are_listed() {
    let (_dir, store) = temp_store().await;
    let parent = session_of(&store, &["a", "b"]).await;
    let child = store
        .create_session(NewSession {
            title: "task".into(),
            cwd: "/w".into(),
            model: "m".into(),
            parent_id: Some(parent.id.clone()),
        })
        .await
        .unwrap();
    let children = store.child_sessions(&parent.id).await.unwrap();
    assert_eq!(
        children.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        [child.id]
    );
    let commits = store.commit_turns(&parent.id).await.unwrap();
    assert_eq!(commits.len(), parent_revisions(&store, &parent.id).await);
    assert!(commits.iter().all(|(_, turn)| turn.is_none()));
}

async fn parent_revisions(store: &keel_store::Store, id: &keel_protocol::SessionId) -> usize {
    store.commit_revisions(id).await.unwrap().len()
}
