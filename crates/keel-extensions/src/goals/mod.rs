//! Goals (issue 16): an objective a session keeps working toward over several turns.
//!
//! A goal has an objective pinned by its SHA-256, optional limits (tokens, turns, active
//! seconds) and a verification mode. While it is active and under its limits, every turn
//! that completes starts the next one (source `thread-goal`) once the session is idle. The
//! model only proposes an end through `update_goal`; the host settles it: a completion is
//! verified ([`verification`]), a blocker must be about safety or stand over three goal
//! turns, and breakers ([`breakers`]) pause a goal that repeats itself or fails its checks.
//! The user steers it with `/goal` ([`command`]); every change is reported as the extension
//! event `goal_updated` whose details are the whole goal plus a `banner` line, which the
//! front ends show.
//!
//! A goal never changes what a turn may do: continuation turns run in the session's
//! permission mode like any other, and the objective is only ever text for the model.
//!
//! The state lives in the store (see [`book`]), so a goal survives a restart; a resumed
//! session's goal continues after its next turn.

mod book;
pub mod breakers;
pub mod command;
pub mod prompts;
pub mod state;
pub mod tools;
mod turn;
pub mod verification;

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::HookError;
use keel_protocol::{SessionId, Usage};
use keel_runtime::extension::{
    Criticality, Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, ReminderData,
    ReminderProvider, SessionChange, SessionChangeHook, TurnScope,
};

use crate::per_turn::PerTurn;
use book::Book;
use turn::{GoalTurn, Tally};

pub use state::{Goal, STATE_KEY, Status, Verification};

/// Id of the goals extension, and the `extension` of its events.
pub const GOALS: &str = "goals";
/// Priority of the goal reminder among extension reminders: above the usual ones, since it
/// is what the turn is for.
const REMINDER_PRIORITY: i32 = 100;

/// Tokens a goal is charged for one answer: what the provider processed afresh and what it
/// wrote. Cache reads are left out: every step re-reads the conversation's prefix, so
/// counting them would charge a long goal quadratically for the same text.
pub fn tokens_of(usage: &Usage) -> u64 {
    usage
        .input
        .saturating_add(usage.output)
        .saturating_add(usage.cache_write)
}

/// Why a goal operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GoalError {
    /// The session has no goal.
    #[error("no goal is set for this session")]
    NoGoal,
    /// The goal is not active.
    #[error("the goal is {}, not active", .0.as_str().replace('_', " "))]
    NotActive(Status),
    /// A goal is in force that only the user may replace.
    #[error(
        "a goal is already in force ({}); only the user can replace or clear it (/goal clear)",
        .0.as_str().replace('_', " ")
    )]
    InForce(Status),
    /// The goal is active already.
    #[error("the goal is already active")]
    AlreadyActive,
    /// The goal has ended (complete or cleared): it cannot go on.
    #[error("the goal is {}", .0.as_str().replace('_', " "))]
    Ended(Status),
    /// A limit is still reached: the goal cannot go on until it is raised.
    #[error("{0}; raise the limit first (`/goal budget=…`)")]
    LimitReached(String),
    /// A budget of zero tokens.
    #[error("a budget of zero leaves no turn")]
    ZeroBudget,
    /// The request was not a valid goal.
    #[error("{0}")]
    Invalid(String),
    /// The stored goal cannot be trusted.
    #[error("{0}; `/goal clear` removes it")]
    Damaged(String),
    /// The store failed.
    #[error("cannot store the goal: {0}")]
    Store(String),
    /// The runtime is not running.
    #[error("the runtime is not running")]
    NoRuntime,
}

impl GoalError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoGoal => "goal_missing",
            Self::NotActive(_) => "goal_not_active",
            Self::InForce(_) => "goal_in_force",
            Self::AlreadyActive => "goal_already_active",
            Self::Ended(_) => "goal_ended",
            Self::LimitReached(_) => "goal_limit_reached",
            Self::ZeroBudget => "goal_zero_budget",
            Self::Invalid(_) => "goal_invalid",
            Self::Damaged(_) => "goal_damaged",
            Self::Store(_) => "goal_store_failed",
            Self::NoRuntime => "goal_no_runtime",
        }
    }
}

impl From<keel_store::StoreError> for GoalError {
    fn from(error: keel_store::StoreError) -> Self {
        Self::Store(error.to_string())
    }
}

/// The goals extension.
pub struct Goals;

impl Extension for Goals {
    fn id(&self) -> &str {
        GOALS
    }

    fn description(&self) -> Option<&str> {
        Some("goals: an objective the session keeps working toward over turns, within a budget")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let book = Arc::new(Book::new(
            api.host().control.clone(),
            state::Limits::defaults(&api.config().goals),
        ));
        // One tally per turn, shared by its tools and handlers.
        let turns: Arc<PerTurn<Tally>> = Arc::default();
        let tally_of = move |scope: &TurnScope| turns.get(&scope.turn_id, || Tally::new(scope));
        let for_tools = (book.clone(), tally_of.clone());
        api.register_tool_factory(Arc::new(move |scope: &TurnScope| {
            tools::tools(&for_tools.0, &(for_tools.1)(scope))
        }))?;
        let for_history = tally_of.clone();
        api.on_each_turn(
            ExtensionEvent::OnHistoryChanged,
            Arc::new(move |scope: &TurnScope| Hook::OnHistoryChanged(for_history(scope))),
        )?;
        // The turn's start and end share one handler (and the turn's tally).
        for event in [ExtensionEvent::TurnStart, ExtensionEvent::TurnEnd] {
            let (book, tally_of) = (book.clone(), tally_of.clone());
            api.on_each_turn(
                event,
                Arc::new(move |scope: &TurnScope| {
                    let handler = Arc::new(GoalTurn {
                        book: book.clone(),
                        tally: tally_of(scope),
                    });
                    if event == ExtensionEvent::TurnStart {
                        Hook::TurnStart(handler)
                    } else {
                        Hook::TurnEnd(handler)
                    }
                }),
            )?;
        }
        api.register_reminder_provider(
            REMINDER_PRIORITY,
            Arc::new(GoalReminder { book: book.clone() }),
        )?;
        api.on_session_change(Arc::new(GoalSessions { book: book.clone() }))?;
        api.register_commands(Arc::new(command::GoalCommand { book }))
    }
}

/// Every turn of an active goal is told what it is for and how to finish. Critical: a
/// model without optional reminders still needs to know how to end its goal.
struct GoalReminder {
    book: Arc<Book>,
}

impl ReminderProvider for GoalReminder {
    fn id(&self) -> &str {
        "goal"
    }

    fn criticality(&self) -> Criticality {
        Criticality::Critical
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        let goal = self.book.cached(&data.scope.session_id)?;
        goal.is_active().then(|| prompts::reminder(&goal))
    }
}

/// Reads a session's goal when it opens (reminders need it before any turn handler runs)
/// and forgets it when it goes.
struct GoalSessions {
    book: Arc<Book>,
}

#[async_trait]
impl SessionChangeHook for GoalSessions {
    async fn session_changed(
        &self,
        session: &SessionId,
        _dir: Option<&std::path::Path>,
        change: &SessionChange,
    ) -> Result<(), HookError> {
        match change {
            SessionChange::Opened { .. } => {
                self.book
                    .load(session)
                    .await
                    .map_err(|e| HookError::new(e.to_string()))?;
            }
            SessionChange::Closed | SessionChange::Deleted => self.book.forget(session),
            _ => {}
        }
        Ok(())
    }
}
