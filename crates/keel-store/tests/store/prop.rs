//! Property test: random appends, replacements, reconciles and rewinds read back as a simple
//! model (a list of histories indexed by revision) says, at the head and at every revision.

use keel_protocol::MessageId;
use keel_store::{CommitRequest, Entry, HistoryOp};
use proptest::prelude::*;

use crate::{session, temp_store, user};

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Replace(usize),
    Reconcile { keep: usize, add: usize },
    Rewind(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..4).prop_map(Op::Append),
        1 => (0usize..3).prop_map(Op::Replace),
        1 => (0usize..6, 0usize..3).prop_map(|(keep, add)| Op::Reconcile { keep, add }),
        2 => any::<u64>().prop_map(Op::Rewind),
    ]
}

fn fresh(counter: &mut usize, count: usize) -> Vec<Entry> {
    (0..count)
        .map(|_| {
            *counter += 1;
            Entry {
                id: MessageId::new(format!("m{counter}")),
                message: user(&format!("text {counter}")),
            }
        })
        .collect()
}

fn key(entries: &[Entry]) -> Vec<(String, keel_protocol::Message)> {
    entries
        .iter()
        .map(|e| (e.id.to_string(), e.message.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn history_reads_back_as_the_model_says(ops in proptest::collection::vec(op(), 1..14)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (_dir, store) = temp_store().await;
            let s = session(&store).await;
            let mut states: Vec<Vec<Entry>> = vec![Vec::new()];
            let mut counter = 0;
            for (n, op) in ops.into_iter().enumerate() {
                let current = states.last().cloned().unwrap_or_default();
                let (history_op, next) = match op {
                    Op::Append(count) => {
                        let added = fresh(&mut counter, count);
                        let mut next = current.clone();
                        next.extend(added.clone());
                        (HistoryOp::Append { entries: added }, next)
                    }
                    Op::Replace(count) => {
                        let next = fresh(&mut counter, count);
                        (HistoryOp::Replace { entries: next.clone() }, next)
                    }
                    Op::Reconcile { keep, add } => {
                        let mut next: Vec<Entry> = current.iter().take(keep).cloned().collect();
                        next.extend(fresh(&mut counter, add));
                        (HistoryOp::Reconcile { entries: next.clone() }, next)
                    }
                    Op::Rewind(pick) => {
                        let to = pick % states.len() as u64;
                        (HistoryOp::Rewind { to_revision: to }, states[to as usize].clone())
                    }
                };
                let receipt = store
                    .commit(CommitRequest {
                        session_id: s.id.clone(),
                        turn_id: None,
                        operation_id: format!("op-{n}"),
                        expected_revision: Some(states.len() as u64 - 1),
                        op: history_op,
                    })
                    .await
                    .unwrap();
                prop_assert_eq!(receipt.revision, states.len() as u64);
                prop_assert_eq!(receipt.length, next.len() as u64);
                states.push(next);
                let head = store.history(&s.id).await.unwrap();
                let read: Vec<_> = head.iter().map(|e| (e.id.to_string(), e.message.clone())).collect();
                prop_assert_eq!(read, key(states.last().unwrap()));
            }
            for (revision, expected) in states.iter().enumerate() {
                let at = store.history_at(&s.id, revision as u64).await.unwrap();
                let read: Vec<_> = at.iter().map(|e| (e.id.to_string(), e.message.clone())).collect();
                prop_assert_eq!(read, key(expected));
            }
            let revisions = store.commit_revisions(&s.id).await.unwrap();
            prop_assert_eq!(revisions, (1..states.len() as u64).collect::<Vec<_>>());
            prop_assert_eq!(store.integrity_check().await.unwrap(), "ok");
            Ok(())
        })?;
    }
}
