//! `keel exec` and goals: `--goal TEXT` sets the session's goal and runs its first turn,
//! and any run whose session has an active goal after a turn (set by `--goal`, by `/goal`,
//! or by the model) keeps going while the goals extension queues continuation turns (the
//! run follows them until the session is at rest, see `follow.rs`). It ends when a turn
//! ends and the goal does not continue, or when `--timeout` or a signal stops it.
//!
//! Exit status after a goal (when the last turn itself succeeded): `complete` 0;
//! `budget_limited` 7 (`goal_budget_limited`); `paused` 4 (`goal_paused`); `blocked` 4
//! (`goal_blocked`); still active with no continuation 4 (`goal_stalled`).

use keel_protocol::FailureCode;
use serde_json::Value;

use super::report::{ExecError, ExecStatus};

/// Whether a run's error `code` says its goal used up a limit: every goal has limits, so
/// a long one ends so after a turn that completed, whose answer the run still prints.
pub fn ran_out(code: FailureCode) -> bool {
    code == FailureCode::GoalBudgetLimited
}

/// The goal's status in `details`.
fn status_of(goal: Option<&Value>) -> &str {
    goal.and_then(|g| g["status"].as_str()).unwrap_or_default()
}

/// How the run ends by its goal, for a run whose last turn succeeded.
pub fn judge(goal: &Value) -> (ExecStatus, Option<ExecError>) {
    let reason = || {
        goal["reason"]
            .as_str()
            .unwrap_or("no reason was given")
            .to_owned()
    };
    match status_of(Some(goal)) {
        "budget_limited" => (
            ExecStatus::LimitExceeded,
            Some(ExecError::new(FailureCode::GoalBudgetLimited, reason())),
        ),
        "paused" => (
            ExecStatus::Failed,
            Some(ExecError::new(FailureCode::GoalPaused, reason())),
        ),
        "blocked" => (
            ExecStatus::Failed,
            Some(ExecError::new(FailureCode::GoalBlocked, reason())),
        ),
        "active" => (
            ExecStatus::Failed,
            Some(ExecError::new(
                FailureCode::GoalStalled,
                "the goal is still active, but its next turn did not start",
            )),
        ),
        // Complete, or cleared by someone else meanwhile.
        _ => (ExecStatus::Succeeded, None),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_goal_decides_the_exit_status() {
        let status = |s: &str| judge(&json!({"status": s, "reason": "why"}));
        assert_eq!(status("complete"), (ExecStatus::Succeeded, None));
        assert_eq!(status("budget_limited").0.exit_code(), 7);
        assert_eq!(status("paused").1.unwrap().code, FailureCode::GoalPaused);
        assert_eq!(status("blocked").1.unwrap().message, "why");
        assert_eq!(status("active").1.unwrap().code, FailureCode::GoalStalled);
    }
}
