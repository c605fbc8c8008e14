//! `keel exec` and goals: `--goal TEXT` sets the session's goal and runs its first turn,
//! and any run whose session has an active goal after a turn (set by `--goal`, by `/goal`,
//! or by the model) keeps going while the goals extension starts continuation turns. The
//! run follows the session's events: `goal_updated` says whether the goal is still active,
//! `turn_started`/`turn_ended` bracket each continuation. It ends when a turn ends and the
//! goal does not continue, when `--timeout` or a signal stops it, or when no continuation
//! comes within [`CONTINUATION_WAIT`] of a turn that should have one.
//!
//! Exit status after a goal (when the last turn itself succeeded): `complete` 0;
//! `budget_limited` 7 (`goal_budget_limited`); `paused` 4 (`goal_paused`); `blocked` 4
//! (`goal_blocked`); still active with no continuation 4 (`goal_stalled`).

use std::time::Duration;

use keel_extensions::goals::{GOAL_UPDATED, GOALS};
use keel_protocol::{SessionEvent, SessionEventBody, TurnId, TurnOutcome, Usage};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use super::output::Stop;
use super::report::{ExecError, ExecStatus};

/// How long a run waits for the goal's next turn to start after a turn that should have
/// one: the extension starts it as soon as the session is idle, so this only bounds a
/// continuation that failed to start.
pub const CONTINUATION_WAIT: Duration = Duration::from_secs(30);

/// How long a stopped run waits for its aborted turn to end, for its usage.
const ABORT_WAIT: Duration = Duration::from_secs(10);

/// Error code of a run whose goal used up a limit.
pub const GOAL_BUDGET_LIMITED: &str = "goal_budget_limited";
/// Error code of a run whose goal a breaker (or the user) paused.
pub const GOAL_PAUSED: &str = "goal_paused";
/// Error code of a run whose goal is blocked.
pub const GOAL_BLOCKED: &str = "goal_blocked";
/// Error code of a run whose active goal got no next turn.
pub const GOAL_STALLED: &str = "goal_stalled";

/// What following the goal saw after the first turn.
#[derive(Debug, Default)]
pub struct Followed {
    /// Turns after the first one.
    pub turns: u32,
    /// The last of them, with its outcome.
    pub last: Option<(TurnId, TurnOutcome)>,
    /// Their usage.
    pub usage: Usage,
    /// The goal as last reported (`goal_updated` details).
    pub goal: Option<Value>,
}

/// The session's events, read while the run follows its goal.
pub struct Watch {
    events: UnboundedReceiver<SessionEvent>,
}

/// The goal's status in `details`.
fn status_of(goal: Option<&Value>) -> &str {
    goal.and_then(|g| g["status"].as_str()).unwrap_or_default()
}

impl Watch {
    /// Watches `events` (a subscription made before the first turn starts).
    pub fn new(events: UnboundedReceiver<SessionEvent>) -> Self {
        Self { events }
    }

    /// Follows the goal's turns after the first one (`first`, which ended `outcome`).
    pub async fn follow(&mut self, first: &TurnId, outcome: &TurnOutcome, stop: &Stop) -> Followed {
        let mut seen = Followed::default();
        let mut open: Option<TurnId> = None;
        let mut last_outcome = outcome.clone();
        loop {
            while let Ok(event) = self.events.try_recv() {
                apply(&mut seen, &mut open, &mut last_outcome, first, event);
            }
            let next = match (&open, stop.reason()) {
                // Stopped mid-turn: the turn is being aborted; wait for its end.
                (Some(_), Some(_)) => tokio::time::timeout(ABORT_WAIT, self.events.recv()).await,
                (None, Some(_)) => break,
                (Some(_), None) => tokio::select! {
                    event = self.events.recv() => Ok(event),
                    () = stop.cancel.cancelled() => continue,
                },
                (None, None) => {
                    let continues = status_of(seen.goal.as_ref()) == "active"
                        && last_outcome == TurnOutcome::Completed;
                    if !continues {
                        break;
                    }
                    tokio::select! {
                        event = tokio::time::timeout(CONTINUATION_WAIT, self.events.recv()) => event,
                        () = stop.cancel.cancelled() => continue,
                    }
                }
            };
            match next {
                Ok(Some(event)) => apply(&mut seen, &mut open, &mut last_outcome, first, event),
                Ok(None) | Err(_) => break,
            }
        }
        seen
    }
}

fn apply(
    seen: &mut Followed,
    open: &mut Option<TurnId>,
    last_outcome: &mut TurnOutcome,
    first: &TurnId,
    event: SessionEvent,
) {
    match event.body {
        SessionEventBody::TurnStarted { turn_id, .. } => {
            if &turn_id != first {
                seen.turns += 1;
            }
            *open = Some(turn_id);
        }
        SessionEventBody::TurnEnded {
            turn_id,
            outcome,
            usage,
            ..
        } => {
            *open = None;
            last_outcome.clone_from(&outcome);
            if &turn_id != first {
                seen.usage += usage;
                seen.last = Some((turn_id, outcome));
            }
        }
        SessionEventBody::Extension {
            extension,
            kind,
            details,
            ..
        } if extension == GOALS && kind == GOAL_UPDATED => seen.goal = Some(details),
        _ => {}
    }
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
            Some(ExecError::new(GOAL_BUDGET_LIMITED, reason())),
        ),
        "paused" => (
            ExecStatus::Failed,
            Some(ExecError::new(GOAL_PAUSED, reason())),
        ),
        "blocked" => (
            ExecStatus::Failed,
            Some(ExecError::new(GOAL_BLOCKED, reason())),
        ),
        "active" => (
            ExecStatus::Failed,
            Some(ExecError::new(
                GOAL_STALLED,
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
        assert_eq!(status("paused").1.unwrap().code, GOAL_PAUSED);
        assert_eq!(status("blocked").1.unwrap().message, "why");
        assert_eq!(status("active").1.unwrap().code, GOAL_STALLED);
    }
}
