//! What `keel exec` waits for after its turn: the session's background tasks that still run,
//! and the turns their completion notices start (a background task's end steers its parent,
//! which starts a turn when none runs). The run ends when neither is left, and it reports
//! the last turn: its answer, its status and its exit code.
//!
//! Everything is followed through the session's events, as any front end would: turns
//! start and end, tasks change, the queue changes. The runtime reports a background task's
//! end only once its notice is queued (or a waiting read took the result, which counts as
//! delivery), and takes the task out of the running set after that report, so normally a
//! turn is already running or the task is delivered when its end is seen. As a guard against
//! a notice that failed, "a turn is coming" while a background task that ended has neither
//! been delivered nor read: up to [`NOTICE_GRACE`] when it ended with no turn running, up to
//! [`NOTICE_SETTLE`] when it ended during a turn. Input waiting after a completed turn is
//! coming too, for up to [`NOTICE_GRACE`]. The bounds keep a notice that never arrives from
//! holding the run. A session whose goal is still active after a completed turn gets its next
//! turn from the goals extension: that one is waited for up to
//! [`super::goal::CONTINUATION_WAIT`] (the goal then counts as stalled). `--timeout`, a
//! signal or a closed stdout stops the tasks and aborts the turns still running, bounded by
//! [`HALT_LIMIT`].

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use keel_protocol::{
    Failure, ItemBody, ItemEvent, Op, SessionEvent, SessionEventBody, SessionId, TaskInfo,
    ToolCallStatus, TurnId, TurnOutcome, Usage,
};
use keel_runtime::{ConversationContract as _, Reply, Runtime, SessionSink, TurnReport};
use tokio::sync::watch;

use super::output::Stop;
use super::report::HISTORY_COMMIT_FAILED;

/// How long a "turn is coming" state (a background task that ended with no turn running and
/// whose notice is not delivered yet, input waiting after a completed turn) may last before
/// the run ends anyway. Delivery is a store write and an admission, milliseconds; this only
/// bounds a failure.
pub const NOTICE_GRACE: Duration = Duration::from_secs(5);

/// How long after a background task ended during a turn its notice may still be on its way
/// to the queue (the turn may end first). No notice follows when a read was waiting for the
/// result, so this is waited out whole then, but only once the turn has ended.
pub const NOTICE_SETTLE: Duration = Duration::from_millis(300);

/// How long stopping tasks and aborting turns may take before the run ends anyway.
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
            frozen_plan: super::plan::frozen(&report.messages),
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

/// A task as last told, and when its end was seen.
#[derive(Debug)]
struct Tracked {
    task: TaskInfo,
    /// When its end was seen, and whether a turn of the session ran then.
    ended: Option<(Instant, bool)>,
}

/// A notice the run waits for: until when, and whether missing it is worth a warning (its
/// task ended with no turn running, so its notice had a turn to start).
#[derive(Debug, Clone, Copy)]
struct Awaited {
    until: Instant,
    expected: bool,
}

/// What the session's events said.
#[derive(Debug, Default)]
struct Seen {
    /// The turn running and when it started.
    running: Option<(TurnId, Instant)>,
    so_far: SoFar,
    /// The last turn that ended.
    ended: Option<LastTurn>,
    /// Every task the session started.
    tasks: HashMap<String, Tracked>,
    /// Inputs waiting in the session's queue.
    queued: usize,
    /// The session's goal as last reported (`goal_updated` details).
    goal: Option<serde_json::Value>,
    /// Tokens over every turn of the run.
    usage: Usage,
}

impl Seen {
    /// The soonest-ending wait for a background task's notice (see the module documentation),
    /// `None` when none is awaited at `now`.
    fn notice_awaited(&self, now: Instant) -> Option<Awaited> {
        self.tasks
            .values()
            .filter(|t| {
                t.task.background && t.task.delivered_ms.is_none() && t.task.consumed_ms.is_none()
            })
            .filter_map(|t| t.ended)
            .map(|(at, during_turn)| Awaited {
                until: at
                    + if during_turn {
                        NOTICE_SETTLE
                    } else {
                        NOTICE_GRACE
                    },
                expected: !during_turn,
            })
            .filter(|awaited| awaited.until > now)
            .min_by_key(|awaited| awaited.until)
    }
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
    fn goal_and_usage(&self) -> (Option<serde_json::Value>, Usage) {
        let seen = self.seen();
        (seen.goal.clone(), seen.usage)
    }

    /// Starts from the inputs already waiting when the run began.
    pub fn set_queued(&self, queued: usize) {
        self.seen().queued = queued;
        self.changed.send_modify(|n| *n += 1);
    }
}

impl SessionSink for Watch {
    fn on_event(&self, event: &SessionEvent) {
        let mut seen = self.seen();
        match &event.body {
            SessionEventBody::TurnStarted { turn_id, .. } => {
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
                ItemBody::ToolCall {
                    tool_name,
                    status,
                    details,
                    ..
                } => {
                    seen.so_far.has_answer = true;
                    if tool_name == keel_extensions::plan::EXIT_TOOL
                        && *status == ToolCallStatus::Completed
                        && let Some(plan) = details.as_ref().and_then(super::plan::frozen_in)
                    {
                        seen.so_far.frozen_plan = Some(plan);
                    }
                }
                _ => return,
            },
            SessionEventBody::Failure {
                turn_id: Some(_),
                failure,
            } if failure.code == HISTORY_COMMIT_FAILED => {
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
            SessionEventBody::Task { task } => {
                let during_turn = seen.running.is_some();
                let tracked = seen.tasks.entry(task.id.clone()).or_insert(Tracked {
                    task: task.clone(),
                    ended: None,
                });
                tracked.task = task.clone();
                if task.status.is_terminal() && tracked.ended.is_none() {
                    tracked.ended = Some((Instant::now(), during_turn));
                }
            }
            SessionEventBody::QueueChanged { queue } => seen.queued = queue.len(),
            SessionEventBody::Extension {
                extension,
                kind,
                details,
                ..
            } if extension == keel_extensions::goals::GOALS
                && kind == keel_extensions::goals::GOAL_UPDATED =>
            {
                seen.goal = Some(details.clone());
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
    pub goal: Option<serde_json::Value>,
    /// Tokens over every turn of the run.
    pub usage: Usage,
}

/// Waits until no task of `session` runs and no turn runs or is about to, starting from
/// `first` (the submitted turn's report), and returns the last turn.
pub async fn follow(
    runtime: &Runtime,
    session: &SessionId,
    watch: &Watch,
    stop: &Stop,
    first: LastTurn,
) -> Followed {
    let mut last = first;
    let mut changes = watch.changed.subscribe();
    // Since when the run has waited with nothing running, for input after a completed turn.
    let mut idle_since: Option<Instant> = None;
    loop {
        changes.borrow_and_update();
        if stop.reason().is_some() {
            let halted = halt(runtime, session, watch).await;
            let (goal, usage) = watch.goal_and_usage();
            return Followed {
                last: newest(watch, last),
                halted,
                goal,
                usage,
            };
        }
        last = newest(watch, last);
        let now = Instant::now();
        let (turn_running, notice, queued, continues) = {
            let seen = watch.seen();
            let completed = last.outcome == TurnOutcome::Completed;
            let active = seen
                .goal
                .as_ref()
                .is_some_and(|goal| goal["status"] == "active");
            (
                seen.running.is_some() || admitting(runtime, session),
                seen.notice_awaited(now),
                completed && seen.queued > 0,
                completed && active,
            )
        };
        let tasks_running = runtime.tasks().running(session);
        let idle = !turn_running && !tasks_running;
        if !idle {
            idle_since = None;
        } else if notice.is_none() && !queued && !continues {
            let (goal, usage) = watch.goal_and_usage();
            return Followed {
                last: newest(watch, last),
                halted: false,
                goal,
                usage,
            };
        }
        // With nothing running, a coming turn is waited for until the soonest bound.
        let queue_until = (idle && queued).then(|| *idle_since.get_or_insert(now) + NOTICE_GRACE);
        let goal_until = (idle && continues)
            .then(|| *idle_since.get_or_insert(now) + super::goal::CONTINUATION_WAIT);
        let until = [
            notice.filter(|_| idle).map(|n| n.until),
            queue_until,
            goal_until,
        ]
        .into_iter()
        .flatten()
        .min();
        let tasks = runtime.tasks();
        tokio::select! {
            _ = changes.changed() => {}
            () = stop.cancel.cancelled() => {}
            () = tasks.settled(session), if tasks_running => {}
            () = sleep_until(until) => {
                if notice.is_some_and(|n| n.expected && Some(n.until) == until)
                    || queue_until.is_some_and(|q| Some(q) == until)
                {
                    eprintln!(
                        "keel: warning: a task ended but no turn took its notice within {} s; \
                         it waits in the session's queue",
                        NOTICE_GRACE.as_secs()
                    );
                }
                if queue_until.is_some_and(|q| Some(q) == until)
                    || goal_until.is_some_and(|g| Some(g) == until)
                {
                    let (goal, usage) = watch.goal_and_usage();
                    return Followed {
                        last: newest(watch, last),
                        halted: false,
                        goal,
                        usage,
                    };
                }
            }
        }
    }
}

/// Sleeps until `until`, forever when it is `None`.
async fn sleep_until(until: Option<Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until.into()).await,
        None => std::future::pending().await,
    }
}

/// Whether a turn of `session` is being admitted or runs: a turn from the queue claims its
/// inputs (the queue empties) before its `turn_started` event.
fn admitting(runtime: &Runtime, session: &SessionId) -> bool {
    runtime.registry().host().control.is_busy(session)
}

/// The turn that ended last, when it is newer than `last`.
fn newest(watch: &Watch, last: LastTurn) -> LastTurn {
    match &watch.seen().ended {
        Some(ended) if ended.turn_id != last.turn_id => ended.clone(),
        _ => last,
    }
}

/// Stops the session's tasks and aborts its turns (a stopped background task's notice may
/// start one more) until none is left or [`HALT_LIMIT`] passed. `true` when there was
/// anything to stop.
async fn halt(runtime: &Runtime, session: &SessionId, watch: &Watch) -> bool {
    let deadline = tokio::time::Instant::now() + HALT_LIMIT;
    let mut changes = watch.changed.subscribe();
    let mut halted = false;
    loop {
        changes.borrow_and_update();
        let mut busy = watch.seen().running.is_some() || admitting(runtime, session);
        if let Ok(Reply::Tasks(tasks)) = runtime
            .call(Op::ListTasks {
                session_id: session.clone(),
            })
            .await
        {
            for task in tasks.into_iter().filter(|t| !t.status.is_terminal()) {
                busy = true;
                let _ = runtime.call(Op::StopTask { task_id: task.id }).await;
            }
        }
        let _ = runtime
            .call(Op::Abort {
                session_id: session.clone(),
            })
            .await;
        busy |= runtime.tasks().running(session);
        if !busy && watch.seen().notice_awaited(Instant::now()).is_none() {
            return halted;
        }
        halted |= busy;
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
    use keel_protocol::TaskStatus;

    use super::*;

    fn task(status: TaskStatus) -> SessionEvent {
        SessionEvent {
            session_id: "s-1".into(),
            seq: 0,
            body: SessionEventBody::Task {
                task: TaskInfo {
                    status,
                    ..TaskInfo::new("task-1", "s-1".into(), "map the parser", "explore")
                },
            },
        }
    }

    fn turn(body: SessionEventBody) -> SessionEvent {
        SessionEvent {
            session_id: "s-1".into(),
            seq: 0,
            body,
        }
    }

    #[test]
    fn a_notice_is_awaited_longer_when_its_task_ended_with_no_turn_running() {
        let watch = Watch::default();
        watch.on_event(&task(TaskStatus::Running));
        let now = Instant::now();
        assert!(watch.seen().notice_awaited(now).is_none(), "still running");
        watch.on_event(&task(TaskStatus::Succeeded));
        let idle = watch.seen().notice_awaited(now).map(|a| a.expected);
        assert_eq!(idle, Some(true), "its notice starts a turn");
        assert!(
            watch
                .seen()
                .notice_awaited(now + NOTICE_GRACE + NOTICE_SETTLE)
                .is_none(),
            "bounded"
        );

        // Ended during a turn: only the settle window, and nothing to warn about.
        let watch = Watch::default();
        watch.on_event(&turn(SessionEventBody::TurnStarted {
            turn_id: "t-1".into(),
            source: keel_protocol::TurnSource::Api,
        }));
        watch.on_event(&task(TaskStatus::Failed));
        let awaited = watch.seen().notice_awaited(Instant::now());
        assert!(awaited.is_some_and(|a| !a.expected && a.until <= Instant::now() + NOTICE_SETTLE));
        // Delivered (or read): nothing is awaited.
        let mut delivered = task(TaskStatus::Failed);
        if let SessionEventBody::Task { task } = &mut delivered.body {
            task.delivered_ms = Some(1);
        }
        watch.on_event(&delivered);
        assert!(watch.seen().notice_awaited(Instant::now()).is_none());
    }
}
