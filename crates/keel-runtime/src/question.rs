//! Questions for the user from outside the model (an MCP server's form or page), asked
//! through the session's event stream and answered with `answer_question`. Like a
//! permission request, a question belongs to the running turn: it is answerable only
//! while that turn runs, and a cancellation ends it at once.

use std::sync::PoisonError;

use keel_protocol::{Ask, Question, QuestionAnswer, SessionEventBody, SessionId};
use tokio::sync::oneshot;

use crate::error::RuntimeError;

/// A question waiting for the user.
pub(crate) struct Pending {
    ask: Ask,
    answer: oneshot::Sender<QuestionAnswer>,
}

/// Why a question could not be asked: no one is there to answer it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoOneToAsk(pub String);

impl crate::Runtime {
    /// Asks `session`'s user `question` (its id is given here) and waits for the answer.
    /// The turn's cancellation answers `Cancel`. Refused where no one can answer: a
    /// runtime without a front end that asks, a task's child session, no running turn.
    pub(crate) async fn ask(
        &self,
        session: &SessionId,
        mut question: Question,
    ) -> Result<QuestionAnswer, NoOneToAsk> {
        if !self.inner.interactive {
            return Err(NoOneToAsk("no one can answer in this run".into()));
        }
        let slot = self
            .slot(session)
            .map_err(|_| NoOneToAsk(format!("session {session} is not open")))?;
        if slot.profile.is_some() {
            return Err(NoOneToAsk("a task's session has no one to ask".into()));
        }
        let Some(turn) = slot.running() else {
            return Err(NoOneToAsk("no turn of the session is running".into()));
        };
        question.id = keel_store::new_id("q-");
        let id = question.id.clone();
        let (tx, rx) = oneshot::channel();
        turn.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Pending {
                    ask: question.ask.clone(),
                    answer: tx,
                },
            );
        self.inner.registry.attention(
            &slot.id,
            format!("the MCP server {} asks you something", question.server),
        );
        slot.emit(SessionEventBody::QuestionAsked {
            turn_id: turn.turn_id.clone(),
            question,
        });
        slot.hub.drained();
        // Whatever ends the wait (an answer, the turn's cancellation, the caller giving up
        // and dropping this future) ends the question for the front ends too.
        struct Resolve {
            slot: std::sync::Arc<crate::runtime::Slot>,
            turn: std::sync::Arc<crate::turn::RunningTurn>,
            id: String,
            outcome: &'static str,
        }
        impl Drop for Resolve {
            fn drop(&mut self) {
                self.turn
                    .questions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&self.id);
                self.slot.emit(SessionEventBody::QuestionResolved {
                    turn_id: self.turn.turn_id.clone(),
                    question_id: std::mem::take(&mut self.id),
                    outcome: self.outcome.to_owned(),
                });
            }
        }
        let mut resolve = Resolve {
            slot: slot.clone(),
            turn: turn.clone(),
            id,
            outcome: QuestionAnswer::Cancel.word(),
        };
        let answer = tokio::select! {
            answer = rx => answer.unwrap_or(QuestionAnswer::Cancel),
            () = turn.cancel.cancelled() => QuestionAnswer::Cancel,
        };
        resolve.outcome = answer.word();
        Ok(answer)
    }
}

impl crate::turns::Turns {
    /// Answers a question waiting in the session's running turn; a form's values must fit
    /// the form.
    pub(crate) fn answer_question(
        &self,
        session: &SessionId,
        question: &str,
        answer: QuestionAnswer,
    ) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(session)?;
        let refused = |reason: String| RuntimeError::QuestionRefused {
            question: question.to_owned(),
            reason,
        };
        let Some(turn) = slot.running() else {
            return Err(refused("no turn of the session is running".into()));
        };
        if turn.cancel.is_cancelled() {
            return Err(refused("its turn was cancelled".into()));
        }
        let mut pending = turn
            .questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(waiting) = pending.get(question) else {
            return Err(refused(
                "it is not waiting in the running turn (answered already, or its call ended)"
                    .into(),
            ));
        };
        if let QuestionAnswer::Accept { content, .. } = &answer {
            match &waiting.ask {
                Ask::Form(form) => form.check(content).map_err(refused)?,
                Ask::Url { .. } if !content.is_empty() => {
                    return Err(refused("a page to open takes no values".into()));
                }
                Ask::Url { .. } => {}
            }
        }
        let Some(waiting) = pending.remove(question) else {
            return Err(refused("it was answered meanwhile".into()));
        };
        waiting
            .answer
            .send(answer)
            .map_err(|_| refused("its call stopped waiting".into()))
    }
}
