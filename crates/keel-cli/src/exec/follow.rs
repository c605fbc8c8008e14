//! What `keel exec` waits for after its turn: the turns that follow it on their own (a
//! background task's end steers its parent, which starts a turn when none runs; a goal
//! queues its next turn) and the session's background tasks. The runtime says when none
//! is left (`quiescent`), and the run reports the last turn: its answer, its status and
//! its exit code. Nothing here guesses with timers: everything is followed through the
//! session's events, as any front end would.
//!
//! `--timeout`, a signal or a closed stdout stops the tasks and aborts the turns still
//! running; a model call that ignores its cancellation cannot hold the run past
//! [`HALT_LIMIT`]. Background shell commands do not keep the session busy: they end with
//! the process, and the run says how many it stopped.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use keel_protocol::ops;
use keel_protocol::{
    Failure, ItemBody, ItemEvent, SessionEvent, SessionEventBody, SessionId, TurnId, TurnOutcome,
    Usage,
};
use keel_runtime::{ContractExt as _, Runtime, SessionSink, TurnReport};
use tokio::sync::watch;

use super::output::Stop;

/// How long stopping tasks and aborting turns may take before the run ends anyway (only a
/// model call or tool that ignores its cancellation takes this long).
pub const HALT_LIMIT: Duration = Duration::from_secs(10);

/// The turn a run reports: the submitted turn's report, or a later turn as its events told it.
#[derive(Debug, Clone)]
pub struct LastTurn {
    /// The turn.
    pub turn_id: String,
    /// How it ended.
    pub outcome: TurnOutcome,
    /// The text of its last answer.
    pub final_text: String,
    /// The answer parsed by `--output-schema` (the submitted turn only).
    pub structured_output: Option<serde_json::Value>,
    /// Why the answer failed `--output-schema`.
    pub output_failure: Option<Failure>,
    /// History it produced that was not stored, or an end that was not recorded.
    pub lost: Option<String>,
    /// Its wall time.
    pub duration: Duration,
    /// Whether the model answered at all (`-o` is written only then).
    pub has_answer: bool,
    /// The plan it froze with `exit_plan_mode` (plan mode's answer).
    pub frozen_plan: Option<String>,
}

impl From<TurnReport> for LastTurn {
    fn from(report: TurnReport) -> Self {
        Self {
            turn_id: report.turn_id.to_string(),
            final_text: report.final_text(),
            has_answer: report.messages.iter().any(|m| m.as_assistant().is_some()),
            // Its `plan_ready` event says it (see `newest`).
            frozen_plan: None,
            outcome: report.outcome,
            structured_output: report.structured_output,
            output_failure: report.output_failure,
            lost: report.commit_failure.or(report.finish_failure),
            duration: report.duration,
        }
    }
}

/// What the running turn produced so far.
#[derive(Debug, Default)]
struct SoFar {
    final_text: String,
    has_answer: bool,
    lost: Option<String>,
    frozen_plan: Option<String>,
}

/// What the session's events said.
#[derive(Debug, Default)]
struct Seen {
    /// The turn running and when it started.
    running: Option<(TurnId, Instant)>,
    so_far: SoFar,
    /// The last turn that ended.
    ended: Option<LastTurn>,
    /// Whether the runtime said the session is at rest and no turn started since.
    quiet: bool,
    /// Background shell commands still running when it last said so.
    background_commands: usize,
    /// The session's goal as last reported.
    goal: Option<keel_protocol::GoalInfo>,
    /// Tokens over every turn of the run.
    usage: Usage,
}

/// Follows one session's events for [`follow`].
#[derive(Debug)]
pub struct Watch {
    seen: Mutex<Seen>,
    changed: watch::Sender<u64>,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            seen: Mutex::new(Seen::default()),
            changed: watch::channel(0).0,
        }
    }
}

impl Watch {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The goal as last reported and the run's tokens so far.
    fn goal_and_usage(&self) -> (Option<keel_protocol::GoalInfo>, Usage) {
        let seen = self.seen();
        (seen.goal.clone(), seen.usage)
    }
}

impl SessionSink for Watch {
    fn on_event(&self, event: &SessionEvent) {
        let mut seen = self.seen();
        match &event.body {
            SessionEventBody::TurnStarted { turn_id, .. } => {
                seen.quiet = false;
                seen.running = Some((turn_id.clone(), Instant::now()));
                seen.so_far = SoFar::default();
            }
            SessionEventBody::Item {
                event: ItemEvent::Completed { item },
                ..
            } => match &item.body {
                ItemBody::AgentMessage { text } => {
                    seen.so_far.final_text.clone_from(text);
                    seen.so_far.has_answer = true;
                }
                ItemBody::ToolCall { .. } => seen.so_far.has_answer = true,
                _ => return,
            },
            SessionEventBody::Failure {
                turn_id: Some(_),
                failure,
            } if failure.code == keel_protocol::FailureCode::HistoryCommitFailed => {
                seen.so_far.lost = Some(failure.message.clone());
            }
            SessionEventBody::TurnEnded {
                turn_id,
                outcome,
                usage,
                ..
            } => {
                seen.usage += *usage;
                let started = seen.running.take().map(|(_, at)| at);
                let so_far = std::mem::take(&mut seen.so_far);
                seen.ended = Some(LastTurn {
                    turn_id: turn_id.to_string(),
                    outcome: outcome.clone(),
                    final_text: so_far.final_text,
                    structured_output: None,
                    output_failure: None,
                    lost: so_far.lost,
                    duration: started.map(|at| at.elapsed()).unwrap_or_default(),
                    has_answer: so_far.has_answer,
                    frozen_plan: so_far.frozen_plan,
                });
            }
            SessionEventBody::Quiescent {
                background_commands,
                ..
            } => {
                seen.quiet = true;
                seen.background_commands = *background_commands;
            }
            SessionEventBody::Goal { goal, .. } => seen.goal = Some(goal.clone()),
            SessionEventBody::PlanReady { plan, .. } => {
                seen.so_far.frozen_plan = Some(plan.text.clone());
            }
            _ => return,
        }
        drop(seen);
        self.changed.send_modify(|n| *n += 1);
    }
}

/// How the run ended after its turn.
#[derive(Debug)]
pub struct Followed {
    /// The turn to report.
    pub last: LastTurn,
    /// A stop found tasks or a turn still running and ended them: the run did not finish.
    pub halted: bool,
    /// The session's goal as last reported, when it has one.
    pub goal: Option<keel_protocol::GoalInfo>,
    /// Tokens over every turn of the run.
    pub usage: Usage,
    /// Background shell commands still running at the end (they end with the run).
    pub background_commands: usize,
}

/// Waits until the session is at rest, starting from `first` (the submitted turn's report),
/// and returns the last turn.
pub async fn follow(
    runtime: &Runtime,
    session: &SessionId,
    watch: &Watch,
    stop: &Stop,
    first: LastTurn,
) -> Followed {
    let mut changes = watch.changed.subscribe();
    loop {
        changes.borrow_and_update();
        let halted = if stop.reason().is_some() {
            halt(runtime, session, watch).await
        } else if watch.seen().quiet {
            false
        } else {
            tokio::select! {
                _ = changes.changed() => {}
                () = stop.cancel.cancelled() => {}
            }
            continue;
        };
        let (goal, usage) = watch.goal_and_usage();
        return Followed {
            last: newest(watch, first),
            halted,
            goal,
            usage,
            background_commands: watch.seen().background_commands,
        };
    }
}

/// The turn that ended last, when it is newer than `last`; else `last`, with the plan its
/// events said it froze.
fn newest(watch: &Watch, last: LastTurn) -> LastTurn {
    match &watch.seen().ended {
        Some(ended) if ended.turn_id != last.turn_id => ended.clone(),
        Some(ended) => LastTurn {
            frozen_plan: last.frozen_plan.or_else(|| ended.frozen_plan.clone()),
            ..last
        },
        None => last,
    }
}

/// Stops the session's tasks and aborts its turns (a stopped background task's notice may
/// start one more) until the session is at rest or [`HALT_LIMIT`] passed. `true` when there
/// was anything to stop.
async fn halt(runtime: &Runtime, session: &SessionId, watch: &Watch) -> bool {
    let deadline = tokio::time::Instant::now() + HALT_LIMIT;
    let mut changes = watch.changed.subscribe();
    let mut halted = false;
    loop {
        changes.borrow_and_update();
        if watch.seen().quiet {
            return halted;
        }
        halted = true;
        if let Ok(tasks) = runtime
            .request(ops::ListTasks {
                session_id: session.clone(),
            })
            .await
        {
            for task in tasks.into_iter().filter(|t| !t.status.is_terminal()) {
                let _ = runtime.request(ops::StopTask { task_id: task.id }).await;
            }
        }
        let _ = runtime
            .request(ops::Abort {
                session_id: session.clone(),
            })
            .await;
        tokio::select! {
            _ = changes.changed() => {}
            () = tokio::time::sleep_until(deadline) => {
                eprintln!(
                    "keel: warning: tasks or turns still ran {} s after the stop",
                    HALT_LIMIT.as_secs()
                );
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(body: SessionEventBody) -> SessionEvent {
        SessionEvent {
            session_id: "s-1".into(),
            seq: 0,
            body,
        }
    }

    #[test]
    fn the_run_is_at_rest_from_the_runtime_s_word_until_a_turn_starts() {
        let watch = Watch::default();
        assert!(!watch.seen().quiet, "nothing said yet");
        watch.on_event(&event(SessionEventBody::Quiescent {
            queued: 0,
            background_commands: 0,
        }));
        assert!(watch.seen().quiet);
        watch.on_event(&event(SessionEventBody::TurnStarted {
            turn_id: "t-2".into(),
            source: keel_protocol::TurnSource::Api,
        }));
        assert!(!watch.seen().quiet, "a turn that started undoes it");
    }
}
