//! The goal's state machine: what a finished turn, a verdict and a blocker do to it.
//!
//! These are pure functions of the stored goal and what the turn observed, so the store can
//! apply them inside one transaction and tests can drive them without a runtime. The
//! breakers stop auto-continuation before it burns a budget on nothing: the same reply three
//! turns in a row, five failed verifications, a limit reached. A blocker the model reports
//! is accepted at once only when it is about safety; any other must be reported again over
//! three goal turns, so one bad step cannot end a goal the model could still reach.

use super::GoalError;
use super::state::{BlockerStreak, Goal, Status, Verdict};
use crate::report::files::sha256_hex;

/// Verifications in a row that may find the goal not met before it pauses.
pub const NOT_MET_LIMIT: u32 = 5;
/// Completed goal turns in a row with the same final reply that pause the goal.
pub const IDENTICAL_REPLY_LIMIT: u32 = 3;
/// Goal turns in a row a non-safety blocker must be reported in before the goal is blocked.
pub const BLOCKER_TURNS: u32 = 3;

/// What one turn that ran toward the goal observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnFacts {
    /// Tokens its model calls (and verifications) used.
    pub tokens: u64,
    /// Milliseconds it ran.
    pub active_ms: u64,
    /// Whether it completed (not aborted, not failed).
    pub completed: bool,
    /// Its final reply's text.
    pub final_reply: Option<String>,
    /// Whether it reported a (non-safety) blocker.
    pub reported_blocker: bool,
}

/// A limit a goal reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Its token budget.
    Tokens,
    /// Its turn limit.
    Turns,
    /// Its active-seconds limit.
    Seconds,
}

impl Limit {
    /// Why the goal stopped, for people.
    fn reason(self, goal: &Goal) -> String {
        match self {
            Self::Tokens => format!(
                "the token budget is spent ({} of {} tokens)",
                goal.counters.tokens_used,
                goal.limits.token_budget.unwrap_or_default()
            ),
            Self::Turns => format!(
                "the turn limit is reached ({} turns)",
                goal.counters.goal_turns
            ),
            Self::Seconds => format!(
                "the time limit is reached ({} s active)",
                goal.counters.active_ms / 1000
            ),
        }
    }
}

/// What a verdict did to the goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictOutcome {
    /// The goal is complete.
    Complete,
    /// Not met; the goal stays active with this many failed checks in a row.
    NotMet(u32),
    /// Not met for the [`NOT_MET_LIMIT`]th time in a row: the goal is paused.
    Paused,
}

/// What a reported blocker did to the goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockerOutcome {
    /// The goal is blocked.
    Blocked,
    /// Counted; the goal stays active with the blocker reported in this many goal turns.
    Counted(u32),
}

/// The hash breakers compare texts by.
fn fingerprint(text: &str) -> String {
    sha256_hex(text.trim().as_bytes())
}

impl Goal {
    /// The goal turn (1-based) running now.
    pub fn current_turn(&self) -> u32 {
        self.counters.goal_turns.saturating_add(1)
    }

    /// The first limit the goal has reached, if any.
    pub fn exceeded(&self) -> Option<Limit> {
        let used = &self.counters;
        let limits = &self.limits;
        if limits.token_budget.is_some_and(|b| used.tokens_used >= b) {
            Some(Limit::Tokens)
        } else if limits.max_turns.is_some_and(|m| used.goal_turns >= m) {
            Some(Limit::Turns)
        } else if limits
            .max_active_seconds
            .is_some_and(|m| used.active_ms / 1000 >= m)
        {
            Some(Limit::Seconds)
        } else {
            None
        }
    }

    /// Sets the status and why.
    pub fn settle(&mut self, status: Status, reason: impl Into<String>) {
        self.status = status;
        self.reason = Some(reason.into());
    }

    /// Accounts a turn that ran toward the goal and applies the breakers; returns whether
    /// the next turn should start.
    pub fn end_turn(&mut self, facts: &TurnFacts) -> bool {
        let active = self.is_active();
        let counters = &mut self.counters;
        counters.tokens_used = counters.tokens_used.saturating_add(facts.tokens);
        counters.goal_turns = counters.goal_turns.saturating_add(1);
        counters.active_ms = counters.active_ms.saturating_add(facts.active_ms);
        if !active {
            // Settled during the turn: spent, but nothing more to decide.
            return false;
        }
        if !facts.reported_blocker {
            counters.blocker = None;
        }
        if facts.completed {
            let reply = fingerprint(facts.final_reply.as_deref().unwrap_or_default());
            if counters.last_reply_sha256.as_deref() == Some(reply.as_str()) {
                counters.identical_replies = counters.identical_replies.saturating_add(1);
            } else {
                counters.identical_replies = 1;
                counters.last_reply_sha256 = Some(reply);
            }
            if counters.identical_replies >= IDENTICAL_REPLY_LIMIT {
                self.settle(
                    Status::Paused,
                    format!("the model gave the same reply {IDENTICAL_REPLY_LIMIT} turns in a row"),
                );
                return false;
            }
        }
        if let Some(limit) = self.exceeded() {
            let reason = limit.reason(self);
            self.settle(Status::BudgetLimited, reason);
            return false;
        }
        facts.completed
    }

    /// Applies a verification's verdict.
    pub fn record_verdict(&mut self, verdict: Verdict) -> VerdictOutcome {
        let met = verdict.met;
        self.last_verdict = Some(verdict);
        if met {
            self.counters.not_met_streak = 0;
            self.settle(Status::Complete, "the host verified the completion");
            return VerdictOutcome::Complete;
        }
        self.counters.not_met_streak = self.counters.not_met_streak.saturating_add(1);
        if self.counters.not_met_streak >= NOT_MET_LIMIT {
            self.settle(
                Status::Paused,
                format!("{NOT_MET_LIMIT} verifications in a row found the goal not met"),
            );
            return VerdictOutcome::Paused;
        }
        VerdictOutcome::NotMet(self.counters.not_met_streak)
    }

    /// Applies a blocker the model reports in the current goal turn.
    pub fn record_blocker(&mut self, reason: &str, safety: bool) -> BlockerOutcome {
        if safety {
            self.counters.blocker = None;
            self.settle(Status::Blocked, format!("safety: {}", reason.trim()));
            return BlockerOutcome::Blocked;
        }
        let turn = self.current_turn();
        let hash = fingerprint(reason);
        let turns = match &self.counters.blocker {
            Some(streak) if streak.reason_sha256 == hash && streak.last_turn == turn => {
                streak.turns
            }
            Some(streak) if streak.reason_sha256 == hash && streak.last_turn + 1 == turn => {
                streak.turns.saturating_add(1)
            }
            _ => 1,
        };
        self.counters.blocker = Some(BlockerStreak {
            reason_sha256: hash,
            reason: reason.trim().to_owned(),
            turns,
            last_turn: turn,
        });
        if turns >= BLOCKER_TURNS {
            self.counters.blocker = None;
            self.settle(
                Status::Blocked,
                format!(
                    "reported over {BLOCKER_TURNS} goal turns: {}",
                    reason.trim()
                ),
            );
            return BlockerOutcome::Blocked;
        }
        BlockerOutcome::Counted(turns)
    }

    /// Pauses an active goal for the user.
    pub fn pause(&mut self) -> Result<(), GoalError> {
        if !self.is_active() {
            return Err(GoalError::NotActive(self.status));
        }
        self.settle(Status::Paused, "paused by the user");
        Ok(())
    }

    /// Makes a paused, blocked or budget-limited goal active again, with fresh breaker
    /// streaks; refused while a limit is still reached.
    pub fn resume(&mut self) -> Result<(), GoalError> {
        match self.status {
            Status::Active => return Err(GoalError::AlreadyActive),
            Status::Complete | Status::Cleared => return Err(GoalError::Ended(self.status)),
            Status::Paused | Status::BudgetLimited | Status::Blocked => {}
        }
        if let Some(limit) = self.exceeded() {
            return Err(GoalError::LimitReached(limit.reason(self)));
        }
        let counters = &mut self.counters;
        counters.not_met_streak = 0;
        counters.identical_replies = 0;
        counters.last_reply_sha256 = None;
        counters.blocker = None;
        self.status = Status::Active;
        self.reason = None;
        Ok(())
    }

    /// Sets the token budget; a budget-limited goal under the new budget waits paused for
    /// `/goal resume`.
    pub fn set_budget(&mut self, tokens: u64) -> Result<(), GoalError> {
        if tokens == 0 {
            return Err(GoalError::ZeroBudget);
        }
        self.limits.token_budget = Some(tokens);
        if self.status == Status::BudgetLimited && self.exceeded().is_none() {
            self.settle(
                Status::Paused,
                "the budget was raised; /goal resume goes on",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    use super::*;
    use crate::goals::state::{Limits, NewGoal, Verification};

    fn goal(limits: Limits) -> Goal {
        Goal::create(NewGoal {
            objective: "ship it".into(),
            limits,
            verification: Some(Verification::Evaluator),
        })
        .unwrap()
    }

    fn turn(tokens: u64, reply: &str) -> TurnFacts {
        TurnFacts {
            tokens,
            active_ms: 1_500,
            completed: true,
            final_reply: Some(reply.into()),
            reported_blocker: false,
        }
    }

    #[test]
    fn turns_continue_until_the_budget_is_spent() {
        let mut goal = goal(Limits {
            token_budget: Some(250),
            ..Limits::default()
        });
        assert!(goal.end_turn(&turn(100, "one")));
        assert!(goal.end_turn(&turn(100, "two")));
        assert!(!goal.end_turn(&turn(100, "three")));
        assert_eq!(goal.status, Status::BudgetLimited);
        assert_eq!(goal.counters.tokens_used, 300);
        assert_eq!(goal.counters.goal_turns, 3);
        assert_eq!(goal.counters.active_ms, 4_500);
        assert!(
            goal.resume()
                .unwrap_err()
                .to_string()
                .contains("token budget")
        );
        goal.set_budget(1_000).unwrap();
        assert_eq!(goal.status, Status::Paused);
        goal.resume().unwrap();
        assert!(goal.is_active());
    }

    #[test]
    fn turn_and_time_limits_end_the_goal_too() {
        let mut goal1 = goal(Limits {
            max_turns: Some(2),
            ..Limits::default()
        });
        assert!(goal1.end_turn(&turn(1, "a")));
        assert!(!goal1.end_turn(&turn(1, "b")));
        assert_eq!(goal1.exceeded(), Some(Limit::Turns));
        let mut goal2 = goal(Limits {
            max_active_seconds: Some(3),
            ..Limits::default()
        });
        assert!(goal2.end_turn(&turn(1, "a")));
        assert!(!goal2.end_turn(&turn(1, "b")));
        assert_eq!(goal2.status, Status::BudgetLimited);
    }

    #[test]
    fn three_identical_replies_pause_and_a_different_one_resets() {
        let mut goal = goal(Limits::default());
        assert!(goal.end_turn(&turn(1, "same")));
        assert!(goal.end_turn(&turn(1, "  same\n")));
        assert!(goal.end_turn(&turn(1, "other")));
        assert!(goal.end_turn(&turn(1, "other")));
        assert!(!goal.end_turn(&turn(1, "other")));
        assert_eq!(goal.status, Status::Paused);
        assert!(goal.reason.as_deref().unwrap().contains("same reply"));
    }

    #[test]
    fn an_aborted_turn_counts_but_does_not_continue() {
        let mut goal = goal(Limits::default());
        let aborted = TurnFacts {
            completed: false,
            ..turn(10, "")
        };
        assert!(!goal.end_turn(&aborted));
        assert!(goal.is_active());
        assert_eq!(goal.counters.tokens_used, 10);
    }

    #[test]
    fn five_not_met_verdicts_pause_and_met_completes() {
        let not_met = || Verdict {
            met: false,
            evidence: "tests still fail".into(),
            by: Verification::Evaluator,
        };
        let mut goal = goal(Limits::default());
        for n in 1..NOT_MET_LIMIT {
            assert_eq!(goal.record_verdict(not_met()), VerdictOutcome::NotMet(n));
        }
        assert_eq!(goal.record_verdict(not_met()), VerdictOutcome::Paused);
        assert_eq!(goal.status, Status::Paused);
        goal.resume().unwrap();
        let met = Verdict {
            met: true,
            ..not_met()
        };
        assert_eq!(goal.record_verdict(met), VerdictOutcome::Complete);
        assert_eq!(goal.status, Status::Complete);
        assert_eq!(goal.counters.not_met_streak, 0);
    }

    #[test]
    fn a_blocker_must_repeat_over_three_goal_turns_unless_it_is_about_safety() {
        let mut goal = goal(Limits::default());
        let blocked_turn = || TurnFacts {
            reported_blocker: true,
            ..turn(1, "stuck")
        };
        assert_eq!(
            goal.record_blocker("no network", false),
            BlockerOutcome::Counted(1)
        );
        // Twice in one turn is still one turn.
        assert_eq!(
            goal.record_blocker("no network", false),
            BlockerOutcome::Counted(1)
        );
        goal.end_turn(&blocked_turn());
        assert_eq!(
            goal.record_blocker("no network", false),
            BlockerOutcome::Counted(2)
        );
        goal.end_turn(&TurnFacts {
            reported_blocker: true,
            ..turn(1, "stuck again")
        });
        assert_eq!(
            goal.record_blocker(" no network ", false),
            BlockerOutcome::Blocked
        );
        assert_eq!(goal.status, Status::Blocked);

        let mut goal = goal_with_gap();
        assert_eq!(
            goal.record_blocker("no network", false),
            BlockerOutcome::Counted(1)
        );

        let mut safe = self::goal(Limits::default());
        assert_eq!(
            safe.record_blocker("would delete data", true),
            BlockerOutcome::Blocked
        );
        assert_eq!(safe.reason.as_deref(), Some("safety: would delete data"));
    }

    /// A goal whose blocker streak was broken by a turn without it.
    fn goal_with_gap() -> Goal {
        let mut goal = goal(Limits::default());
        goal.record_blocker("no network", false);
        goal.end_turn(&TurnFacts {
            reported_blocker: true,
            ..turn(1, "a")
        });
        goal.end_turn(&turn(1, "b"));
        goal
    }

    #[test]
    fn the_user_pauses_only_an_active_goal() {
        let mut goal = goal(Limits::default());
        goal.pause().unwrap();
        assert!(goal.pause().is_err());
        assert!(!goal.end_turn(&turn(5, "x")));
        assert_eq!(goal.status, Status::Paused);
        goal.resume().unwrap();
        goal.record_verdict(Verdict {
            met: true,
            evidence: "done".into(),
            by: Verification::None,
        });
        assert!(goal.resume().is_err());
    }

    proptest! {
        /// Whatever turns, verdicts and blockers come, the counters only grow, a settled
        /// goal never continues, and a continuing goal is active and under its limits.
        #[test]
        fn continuing_goals_are_active_and_under_their_limits(
            steps in proptest::collection::vec((0u64..400, 0u8..6, any::<bool>(), 0u8..3), 1..40),
        ) {
            let mut goal = goal(Limits {
                token_budget: Some(2_000),
                max_turns: Some(25),
                max_active_seconds: Some(30),
            });
            for (tokens, action, completed, reply) in steps {
                let before = goal.counters.clone();
                match action {
                    0 => { goal.record_verdict(Verdict { met: false, evidence: String::new(), by: Verification::Evaluator }); }
                    1 => { goal.record_blocker("stuck", false); }
                    2 => { let _ = goal.resume(); }
                    _ => {}
                }
                let was_active = goal.is_active();
                let next = goal.end_turn(&TurnFacts {
                    tokens,
                    active_ms: 1_000,
                    completed,
                    final_reply: Some(reply.to_string()),
                    reported_blocker: action == 1,
                });
                prop_assert!(goal.counters.tokens_used >= before.tokens_used);
                prop_assert_eq!(goal.counters.goal_turns, before.goal_turns + 1);
                if next {
                    prop_assert!(was_active && goal.is_active() && completed);
                    prop_assert!(goal.exceeded().is_none());
                }
            }
        }
    }
}
