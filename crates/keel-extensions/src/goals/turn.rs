//! One turn as the goal sees it: what it spent (the usage of every answer that entered
//! history, plus verifications), how long it ran, its final reply and whether it reported
//! a blocker; and at its end, the accounting, the breakers and the next turn.
//!
//! Usage is read from history rather than from `after_llm_call`, because an earlier
//! extension's retry stops that chain, and an answer it hides still cost tokens.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use keel_agent::HookError;
use keel_agent::TurnContext;
use keel_agent::runner::HistoryChangedHook;
use keel_protocol::{InputKind, Message, TurnOutcome, TurnSource, ops};
use keel_runtime::extension::{TurnEndHook, TurnScope, TurnStartHook};

use super::book::Book;
use super::breakers::TurnFacts;
use super::{prompts, tokens_of};

/// Messages of the turn kept for the verifier (the latest ones).
const TRANSCRIPT_MESSAGES: usize = 40;

/// What one turn observed for the goal.
pub(crate) struct Tally {
    /// The turn.
    pub(crate) scope: TurnScope,
    started: Mutex<Option<Instant>>,
    tokens: AtomicU64,
    final_reply: Mutex<Option<String>>,
    transcript: Mutex<VecDeque<Arc<Message>>>,
    reported_blocker: AtomicBool,
    /// The goal was active at the turn's start, or created or settled during it: the turn
    /// counts toward it.
    touched: AtomicBool,
}

impl Tally {
    pub(crate) fn new(scope: &TurnScope) -> Self {
        Self {
            scope: scope.clone(),
            started: Mutex::new(None),
            tokens: AtomicU64::new(0),
            final_reply: Mutex::new(None),
            transcript: Mutex::new(VecDeque::new()),
            reported_blocker: AtomicBool::new(false),
            touched: AtomicBool::new(false),
        }
    }

    /// Adds tokens spent for the goal outside the turn's own answers (a verification).
    pub(crate) fn add_tokens(&self, tokens: u64) {
        self.tokens.fetch_add(tokens, Ordering::Relaxed);
    }

    /// The turn counts toward the goal.
    pub(crate) fn touch(&self) {
        self.touched.store(true, Ordering::Relaxed);
    }

    /// The turn reported a blocker that did not block the goal yet.
    pub(crate) fn reported_blocker(&self) {
        self.reported_blocker.store(true, Ordering::Relaxed);
    }

    /// The turn's latest messages.
    pub(crate) fn transcript(&self) -> Vec<Arc<Message>> {
        self.transcript
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn facts(&self, outcome: &TurnOutcome) -> TurnFacts {
        let started = *self.started.lock().unwrap_or_else(PoisonError::into_inner);
        TurnFacts {
            tokens: self.tokens.load(Ordering::Relaxed),
            active_ms: started.map_or(0, |at| {
                u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)
            }),
            completed: *outcome == TurnOutcome::Completed,
            final_reply: self
                .final_reply
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            reported_blocker: self.reported_blocker.load(Ordering::Relaxed),
        }
    }
}

#[async_trait]
impl HistoryChangedHook for Tally {
    async fn on_history_changed(
        &self,
        _turn: &TurnContext,
        messages: &[Arc<Message>],
    ) -> Result<(), HookError> {
        let mut transcript = self
            .transcript
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for message in messages {
            if let Message::Assistant(answer) = message.as_ref() {
                self.add_tokens(tokens_of(&answer.usage));
                *self
                    .final_reply
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(answer.text());
            }
            transcript.push_back(message.clone());
            if transcript.len() > TRANSCRIPT_MESSAGES {
                transcript.pop_front();
            }
        }
        Ok(())
    }
}

/// The goal's handler of a turn's start and end.
pub(crate) struct GoalTurn {
    pub(crate) book: Arc<Book>,
    pub(crate) tally: Arc<Tally>,
}

/// The turn's start: the clock starts, the session's latest events are remembered, and an
/// active goal is shown again (a resumed session's banner comes back).
#[async_trait]
impl TurnStartHook for GoalTurn {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        *self
            .tally
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        // A turn the goal started counts toward it, whatever happened to the goal since.
        if self.book.take_starting(&scope.session_id) || scope.source == TurnSource::ThreadGoal {
            self.tally.touch();
        }
        // A goal that cannot be read must not stop the user's turn: it only does not
        // continue.
        match self.book.load(&scope.session_id).await {
            Ok(Some(goal)) if goal.is_active() => {
                self.tally.touch();
                self.book
                    .announce(&scope.session_id, Some(&scope.events), &goal);
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(session = %scope.session_id, %error, "cannot read the goal")
            }
        }
        Ok(())
    }
}

/// The turn's end: the goal is charged, the breakers judge, and an active goal under its
/// limits gets its next turn once this one is over.
#[async_trait]
impl TurnEndHook for GoalTurn {
    async fn turn_end(&self, scope: &TurnScope, outcome: &TurnOutcome) -> Result<(), HookError> {
        let session = &scope.session_id;
        let touched = self.tally.touched.load(Ordering::Relaxed);
        if !touched && !self.book.cached(session).is_some_and(|g| g.is_active()) {
            return Ok(());
        }
        let facts = self.tally.facts(outcome);
        let updated = self
            .book
            .update(session, move |current| match current {
                Some(mut goal) if goal.is_active() || touched => {
                    let next = goal.end_turn(&facts);
                    Ok((Some(goal), Some(next)))
                }
                other => Ok((other, None)),
            })
            .await
            .map_err(|error| HookError::new(format!("cannot account the goal's turn: {error}")))?;
        let (Some(goal), Some(next)) = updated else {
            return Ok(());
        };
        self.book.announce(session, Some(&scope.events), &goal);
        if next {
            // Queued before this turn ends, so the runtime starts it as this turn's
            // follow-up and the session is never seen at rest in between.
            let op = ops::Enqueue {
                session_id: session.clone(),
                kind: InputKind::FollowUp,
                text: prompts::continuation(&goal),
                source: TurnSource::ThreadGoal,
            };
            if let Err(error) = self.book.control().request(op).await {
                tracing::warn!(%session, %error, "cannot queue the goal's next turn");
            }
        }
        Ok(())
    }
}
