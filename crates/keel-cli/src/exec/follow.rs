//! What `keel exec` waits for after its turn: the session's background tasks that still run,
//! and the turns their completion notices start (a background task's end steers its parent,
//! which starts a turn when none runs). The run ends when neither is left, and it reports
//! the last turn: its answer, its status and its exit code.
//!
//! Everything is followed through the session's events, as any front end would: turns
//! start and end, tasks change, the queue changes. A task's end and the turn its notice
//! starts are two steps (the task leaves the running set, then its notice is queued), so a
//! background task that ended but whose notice is not delivered yet, or input waiting after
//! a completed turn, counts as "a turn is coming" — for at most [`NOTICE_GRACE`], so a notice
//! that never arrives cannot hold the run forever. `--timeout`, a signal or a closed stdout
//! stops the tasks and aborts the turns still running, bounded by [`HALT_LIMIT`].

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use keel_protocol::{
    Failure, ItemBody, ItemEvent, Op, SessionEvent, SessionEventBody, SessionId, TaskInfo, TurnId,
    TurnOutcome, Usage,
};
use keel_runtime::{ConversationContract as _, Reply, Runtime, SessionSink, TurnReport};
use tokio::sync::watch;

use super::output::Stop;
use super::report::HISTORY_COMMIT_FAILED;

/// How long a "turn is coming" state (an ended background task whose notice is not
/// delivered yet, input waiting after a completed turn) may last before the run ends anyway.
/// Delivery is a store write and an admission, milliseconds; this only bounds a failure.
pub const NOTICE_GRACE: Duration = Duration::from_secs(5);

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
    /// Tokens over its model calls.
    pub usage: Usage,
    /// Its wall time.
    pub duration: Duration,
    /// Whether the model answered at all (`-o` is written only then).
    pub has_answer: bool,
}

impl From<TurnReport> for LastTurn {
    fn from(report: TurnReport) -> Self {
        Self {
            turn_id: report.turn_id.to_string(),
            final_text: report.final_text(),
            has_answer: report.messages.iter().any(|m| m.as_assistant().is_some()),
            outcome: report.outcome,
            structured_output: report.structured_output,
            output_failure: report.output_failure,
            lost: report.commit_failure.or(report.finish_failure),
            usage: report.usage,
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
}

/// What the session's events said.
#[derive(Debug, Default)]
struct Seen {
    /// The turn running and when it started.
    running: Option<(TurnId, Instant)>,
    so_far: SoFar,
    /// The last turn that ended.
    ended: Option<LastTurn>,
    /// Every task the session started, as last told.
    tasks: HashMap<String, TaskInfo>,
    /// Inputs waiting in the session's queue.
    queued: usize,
}

impl Seen {
    /// A background task ended and its notice has not reached the session yet.
    fn notice_pending(&self) -> bool {
        self.tasks
            .values()
            .any(|t| t.background && t.status.is_terminal() && t.delivered_ms.is_none())
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
                ItemBody::ToolCall { .. } => seen.so_far.has_answer = true,
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
                let started = seen.running.take().map(|(_, at)| at);
                let so_far = std::mem::take(&mut seen.so_far);
                seen.ended = Some(LastTurn {
                    turn_id: turn_id.to_string(),
                    outcome: outcome.clone(),
                    final_text: so_far.final_text,
                    structured_output: None,
                    output_failure: None,
                    lost: so_far.lost,
                    usage: *usage,
                    duration: started.map(|at| at.elapsed()).unwrap_or_default(),
                    has_answer: so_far.has_answer,
                });
            }
            SessionEventBody::Task { task } => {
                seen.tasks.insert(task.id.clone(), task.clone());
            }
            SessionEventBody::QueueChanged { queue } => seen.queued = queue.len(),
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
    loop {
        changes.borrow_and_update();
        if stop.reason().is_some() {
            let halted = halt(runtime, session, watch).await;
            return Followed {
                last: newest(watch, last),
                halted,
            };
        }
        last = newest(watch, last);
        let (turn_running, coming) = {
            let seen = watch.seen();
            let completed = last.outcome == TurnOutcome::Completed;
            (
                seen.running.is_some() || admitting(runtime, session),
                seen.notice_pending() || (completed && seen.queued > 0),
            )
        };
        let tasks_running = runtime.tasks().running(session);
        if !turn_running && !tasks_running && !coming {
            return Followed {
                last: newest(watch, last),
                halted: false,
            };
        }
        let bounded = !turn_running && !tasks_running;
        let tasks = runtime.tasks();
        tokio::select! {
            _ = changes.changed() => {}
            () = stop.cancel.cancelled() => {}
            () = tasks.settled(session), if tasks_running => {}
            () = tokio::time::sleep(NOTICE_GRACE), if bounded => {
                eprintln!(
                    "keel: warning: a task ended but no turn took its notice within {} s; \
                     it waits in the session's queue",
                    NOTICE_GRACE.as_secs()
                );
                return Followed { last, halted: false };
            }
        }
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
        if !busy && !watch.seen().notice_pending() {
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
