//! `keel exec` and goals: `--goal TEXT` sets the session's goal and runs its first turn,
//! and any run whose session has an active goal after a turn (set by `--goal`, by `/goal`,
//! or by the model) keeps going while the goals extension queues continuation turns (the
//! run follows them until the session is at rest, see `follow.rs`). It ends when a turn
//! ends and the goal does not continue, or when `--timeout` or a signal stops it.
//!
//! Exit status after a goal (when the last turn itself succeeded): `complete` 0;
//! `budget_limited` 7 (`goal_budget_limited`); `paused` 4 (`goal_paused`); `blocked` 4
//! (`goal_blocked`); still active with no continuation 4 (`goal_stalled`).

use keel_protocol::{FailureCode, GoalInfo, GoalStatus};

use super::report::{ExecError, ExecStatus};

/// Whether a run's error `code` says its goal used up a limit: every goal has limits, so
/// a long one ends so after a turn that completed, whose answer the run still prints.
pub fn ran_out(code: FailureCode) -> bool {
    code == FailureCode::GoalBudgetLimited
}

/// How the run ends by its goal, for a run whose last turn succeeded.
pub fn judge(goal: &GoalInfo) -> (ExecStatus, Option<ExecError>) {
    let reason = || {
        goal.reason
            .clone()
            .unwrap_or_else(|| "no reason was given".to_owned())
    };
    match goal.status {
        GoalStatus::BudgetLimited => (
            ExecStatus::LimitExceeded,
            Some(ExecError::new(FailureCode::GoalBudgetLimited, reason())),
        ),
        GoalStatus::Paused => (
            ExecStatus::Failed,
            Some(ExecError::new(FailureCode::GoalPaused, reason())),
        ),
        GoalStatus::Blocked => (
            ExecStatus::Failed,
            Some(ExecError::new(FailureCode::GoalBlocked, reason())),
        ),
        GoalStatus::Active => (
            ExecStatus::Failed,
            Some(ExecError::new(
                FailureCode::GoalStalled,
                "the goal is still active, but its next turn did not start",
            )),
        ),
        // Complete, or cleared by someone else meanwhile.
        GoalStatus::Complete | GoalStatus::Cleared => (ExecStatus::Succeeded, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_goal_decides_the_exit_status() {
        let status = |status: GoalStatus| {
            judge(&GoalInfo {
                objective: "ship".into(),
                status,
                reason: Some("why".into()),
                banner: String::new(),
                record: serde_json::Value::Null,
            })
        };
        assert_eq!(status(GoalStatus::Complete), (ExecStatus::Succeeded, None));
        assert_eq!(status(GoalStatus::BudgetLimited).0.exit_code(), 7);
        assert_eq!(
            status(GoalStatus::Paused).1.unwrap().code,
            FailureCode::GoalPaused
        );
        assert_eq!(status(GoalStatus::Blocked).1.unwrap().message, "why");
        assert_eq!(
            status(GoalStatus::Active).1.unwrap().code,
            FailureCode::GoalStalled
        );
    }
}
