//! Property test of the input queue as a state machine: random sequences of enqueue, claim,
//! acknowledge (in part or whole), release (a claim or the turn's), edit, cancel and reorder
//! (right and wrong) against a model that is one list of inputs in place order. After every
//! step the store's queue must be the model's queued inputs in that order, and every answer
//! (claimed inputs, counts, error codes) must be the model's.

use keel_store::{CommitRequest, InputKind, QueuedInput, SessionRecord, Store, TurnRecord};
use proptest::prelude::*;
use serde_json::json;

use crate::{entry, session, temp_store, texts};

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// A permutation of the queue.
    None,
    /// One queued id left out.
    Drop(usize),
    /// One queued id named twice.
    Dup(usize),
    /// An id that is not queued (another input's, or none at all) added.
    Extra(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Enqueue(InputKind),
    Claim(Vec<InputKind>),
    /// Acknowledge the inputs picked by the mask of a picked claim; with a stranger, an id it
    /// does not hold is added (the call must then change nothing).
    AckSome {
        claim: usize,
        mask: u8,
        stranger: bool,
    },
    AckAll(usize),
    Release(usize),
    ReleaseTurn,
    Edit(usize),
    Cancel(usize),
    Reorder {
        keys: Vec<u8>,
        fault: Fault,
    },
}

fn kind() -> impl Strategy<Value = InputKind> {
    prop_oneof![Just(InputKind::Steer), Just(InputKind::FollowUp)]
}

fn op() -> impl Strategy<Value = Op> {
    let fault = prop_oneof![
        4 => Just(Fault::None),
        1 => any::<usize>().prop_map(Fault::Drop),
        1 => any::<usize>().prop_map(Fault::Dup),
        1 => any::<usize>().prop_map(Fault::Extra),
    ];
    prop_oneof![
        5 => kind().prop_map(Op::Enqueue),
        3 => proptest::collection::vec(kind(), 0..3).prop_map(Op::Claim),
        2 => (any::<usize>(), any::<u8>(), proptest::bool::weighted(0.2))
            .prop_map(|(claim, mask, stranger)| Op::AckSome { claim, mask, stranger }),
        1 => any::<usize>().prop_map(Op::AckAll),
        2 => any::<usize>().prop_map(Op::Release),
        1 => Just(Op::ReleaseTurn),
        2 => any::<usize>().prop_map(Op::Edit),
        2 => any::<usize>().prop_map(Op::Cancel),
        2 => (proptest::collection::vec(any::<u8>(), 0..12), fault)
            .prop_map(|(keys, fault)| Op::Reorder { keys, fault }),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Queued,
    /// Held by the claim at this index of `Model::claims`.
    Claimed(usize),
    Acknowledged,
    Cancelled,
}

#[derive(Debug, Clone)]
struct Input {
    queued: QueuedInput,
    state: State,
}

/// Every input ever queued, in place order (a reorder moves the queued ones among the places
/// they hold), and the ids of every claim made.
#[derive(Debug, Default)]
struct Model {
    inputs: Vec<Input>,
    claims: Vec<String>,
}

impl Model {
    fn queue(&self) -> Vec<QueuedInput> {
        self.inputs
            .iter()
            .filter(|input| input.state == State::Queued)
            .map(|input| input.queued.clone())
            .collect()
    }

    fn held_by(&self, claim: usize) -> Vec<String> {
        self.inputs
            .iter()
            .filter(|input| input.state == State::Claimed(claim))
            .map(|input| input.queued.id.clone())
            .collect()
    }

    fn set(&mut self, id: &str, state: State) {
        for input in &mut self.inputs {
            if input.queued.id == id {
                input.state = state;
            }
        }
    }

    /// Puts the queued inputs in `order` on the places the queued inputs hold.
    fn reorder(&mut self, order: &[String]) {
        let places: Vec<usize> = (0..self.inputs.len())
            .filter(|&n| self.inputs[n].state == State::Queued)
            .collect();
        let moved: Vec<Input> = order
            .iter()
            .filter_map(|id| {
                self.inputs
                    .iter()
                    .find(|input| &input.queued.id == id)
                    .cloned()
            })
            .collect();
        for (place, input) in places.into_iter().zip(moved) {
            self.inputs[place] = input;
        }
    }
}

/// The error code of a result, or `ok`.
fn code<T>(result: &keel_store::Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(error) => error.code(),
    }
}

async fn step(
    store: &Store,
    s: &SessionRecord,
    turn: &TurnRecord,
    model: &mut Model,
    op: Op,
    serial: usize,
) -> Result<(), TestCaseError> {
    let pick = |n: usize, len: usize| (len > 0).then(|| n % len);
    match op {
        Op::Enqueue(kind) => {
            let payload = json!({ "n": serial });
            let queued = store
                .enqueue_input(&s.id, kind, payload.clone())
                .await
                .unwrap();
            prop_assert_eq!((queued.kind, &queued.payload), (kind, &payload));
            model.inputs.push(Input {
                queued,
                state: State::Queued,
            });
        }
        Op::Claim(kinds) => {
            let expected: Vec<QueuedInput> = model
                .queue()
                .into_iter()
                .filter(|input| kinds.contains(&input.kind))
                .collect();
            let claim = store.claim_inputs(&s.id, &turn.id, &kinds).await.unwrap();
            match claim {
                None => prop_assert!(expected.is_empty(), "nothing claimed of {expected:?}"),
                Some(claim) => {
                    prop_assert_eq!(&claim.inputs, &expected);
                    let index = model.claims.len();
                    model.claims.push(claim.id);
                    for input in &expected {
                        model.set(&input.id, State::Claimed(index));
                    }
                }
            }
        }
        Op::AckSome {
            claim,
            mask,
            stranger,
        } => {
            let Some(claim) = pick(claim, model.claims.len()) else {
                return Ok(());
            };
            let held = model.held_by(claim);
            let mut chosen: Vec<String> = held
                .iter()
                .enumerate()
                .filter(|(n, _)| mask & (1 << (n % 8)) != 0)
                .map(|(_, id)| id.clone())
                .collect();
            let outsider = model
                .inputs
                .iter()
                .find(|input| input.state != State::Claimed(claim))
                .map_or_else(|| "i-nothing".to_owned(), |input| input.queued.id.clone());
            if stranger {
                chosen.push(outsider);
            }
            let result = store
                .acknowledge_inputs(&model.claims[claim], &chosen, 1)
                .await;
            let expected = if held.is_empty() {
                "not_found"
            } else if stranger {
                "input_not_in_claim"
            } else {
                "ok"
            };
            prop_assert_eq!(code(&result), expected, "{:?}", result);
            if let Ok(count) = result {
                prop_assert_eq!(count, chosen.len());
                for id in &chosen {
                    model.set(id, State::Acknowledged);
                }
            }
        }
        Op::AckAll(claim) => {
            let Some(claim) = pick(claim, model.claims.len()) else {
                return Ok(());
            };
            let held = model.held_by(claim);
            let result = store.acknowledge_claim(&model.claims[claim], 1).await;
            if held.is_empty() {
                prop_assert_eq!(code(&result), "not_found");
            } else {
                prop_assert_eq!(result.unwrap(), held.len());
                for id in &held {
                    model.set(id, State::Acknowledged);
                }
            }
        }
        Op::Release(claim) => {
            let Some(claim) = pick(claim, model.claims.len()) else {
                return Ok(());
            };
            let held = model.held_by(claim);
            let result = store.release_claim(&model.claims[claim]).await;
            if held.is_empty() {
                prop_assert_eq!(code(&result), "not_found");
            } else {
                prop_assert_eq!(result.unwrap(), held.len());
                for id in &held {
                    model.set(id, State::Queued);
                }
            }
        }
        Op::ReleaseTurn => {
            let held: Vec<String> = model
                .inputs
                .iter()
                .filter(|input| matches!(input.state, State::Claimed(_)))
                .map(|input| input.queued.id.clone())
                .collect();
            prop_assert_eq!(
                store.release_turn_claims(&turn.id).await.unwrap(),
                held.len()
            );
            for id in &held {
                model.set(id, State::Queued);
            }
        }
        Op::Edit(input) => {
            let Some(n) = pick(input, model.inputs.len()) else {
                return Ok(());
            };
            let payload = json!({ "edited": serial });
            let target = model.inputs[n].clone();
            let result = store
                .edit_input(&s.id, &target.queued.id, payload.clone())
                .await;
            if target.state == State::Queued {
                let edited = QueuedInput {
                    payload,
                    ..target.queued
                };
                prop_assert_eq!(result.unwrap(), edited.clone());
                model.inputs[n].queued = edited;
            } else {
                prop_assert_eq!(code(&result), "input_not_queued");
            }
        }
        Op::Cancel(input) => {
            let Some(n) = pick(input, model.inputs.len()) else {
                return Ok(());
            };
            let target = model.inputs[n].clone();
            let result = store.cancel_input(&s.id, &target.queued.id).await;
            if target.state == State::Queued {
                prop_assert_eq!(code(&result), "ok");
                model.inputs[n].state = State::Cancelled;
            } else {
                prop_assert_eq!(code(&result), "input_not_queued");
            }
        }
        Op::Reorder { keys, fault } => {
            let queue = model.queue();
            let mut order: Vec<(u8, String)> = queue
                .iter()
                .enumerate()
                .map(|(n, input)| {
                    let key = keys.get(n % keys.len().max(1)).copied().unwrap_or(0);
                    (key, input.id.clone())
                })
                .collect();
            order.sort();
            let mut order: Vec<String> = order.into_iter().map(|(_, id)| id).collect();
            let valid = match (fault, order.len()) {
                (Fault::None, _) | (Fault::Drop(_) | Fault::Dup(_), 0) => true,
                (Fault::Drop(n), len) => {
                    order.remove(n % len);
                    false
                }
                (Fault::Dup(n), len) => {
                    order.push(order[n % len].clone());
                    false
                }
                (Fault::Extra(n), _) => {
                    let outsiders: Vec<&Input> = model
                        .inputs
                        .iter()
                        .filter(|input| input.state != State::Queued)
                        .collect();
                    let id = match pick(n, outsiders.len()) {
                        Some(k) => outsiders[k].queued.id.clone(),
                        None => "i-nothing".to_owned(),
                    };
                    order.insert(n % (order.len() + 1), id);
                    false
                }
            };
            let result = store.reorder_inputs(&s.id, &order).await;
            if valid {
                model.reorder(&order);
                prop_assert_eq!(result.unwrap(), model.queue());
            } else {
                prop_assert_eq!(code(&result), "queue_order_mismatch");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_queue_behaves_as_its_model(ops in proptest::collection::vec(op(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (_dir, store) = temp_store().await;
            let s = session(&store).await;
            let turn = store.start_turn(&s.id, keel_store::TurnSource::Api).await.unwrap();
            let mut first = CommitRequest::append(s.id.clone(), "op-1", vec![entry("carrier")]);
            first.turn_id = Some(turn.id.clone());
            prop_assert_eq!(store.commit(first).await.unwrap().revision, 1);
            let mut model = Model::default();
            for (serial, op) in ops.into_iter().enumerate() {
                let described = format!("{op:?}");
                step(&store, &s, &turn, &mut model, op, serial).await?;
                let queue = store.queued_inputs(&s.id).await.unwrap();
                prop_assert_eq!(&queue, &model.queue(), "after step {} {}", serial, described);
            }
            // Queue work never touches history.
            prop_assert_eq!(texts(&store.history(&s.id).await.unwrap()), vec!["carrier"]);
            Ok(())
        })?;
    }
}
