//! A task's executor: waits for a slot, runs the child session's turn, keeps its progress in
//! the store as it comes, and settles the task from the turn's report. The store learns of
//! the end before the live table lets go of the task, so a read never sees an ended task
//! without its result. A background task then tells its parent through the parent's steering
//! queue (which starts a turn of the parent when none runs), so its result gets used.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use keel_protocol::{InputKind, TaskInfo, TaskStatus, TurnId, TurnOutcome, TurnSource, ops};
use keel_store::TaskOutput;

use super::LiveTask;
use super::output::ProgressSink;
use crate::contract::ContractExt;
use crate::runtime::{Runtime, Slot};
use crate::turn::{Start, TurnOptions};

/// How often running progress is written to the store (what a crash can lose of it).
const SAVE_EVERY: Duration = Duration::from_millis(500);

/// The source of a task's own turns.
pub(crate) fn task_source() -> TurnSource {
    TurnSource::Channel("task".into())
}

/// How the child's turn ended, as the task's status.
struct Ended {
    status: TaskStatus,
    error: Option<String>,
    final_text: String,
}

pub(super) async fn execute(
    runtime: Runtime,
    live: Arc<LiveTask>,
    child: Arc<Slot>,
    prompt: String,
) {
    let permits = runtime.inner.tasks.permits.clone();
    let permit = tokio::select! {
        permit = permits.acquire_owned() => permit.ok(),
        () = live.cancel.cancelled() => None,
    };
    let ended = match &permit {
        None => Ended {
            status: TaskStatus::Canceled,
            error: Some("stopped before it started".into()),
            final_text: String::new(),
        },
        Some(_) => run_child(&runtime, &live, &child, prompt).await,
    };
    finish(&runtime, &live, ended).await;
    // The slot frees once the end is on record: a queued task never starts before the task
    // it waited for has ended.
    drop(permit);
}

async fn save(runtime: &Runtime, live: &LiveTask, final_text: &str) {
    let output = live
        .progress
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .output
        .clone();
    let output = TaskOutput {
        output,
        final_text: final_text.to_owned(),
    };
    if let Err(error) = runtime.store().set_task_output(&live.id, output).await {
        tracing::warn!(task = %live.id, %error, "cannot keep the task's output");
    }
}

async fn run_child(
    runtime: &Runtime,
    live: &Arc<LiveTask>,
    child: &Arc<Slot>,
    prompt: String,
) -> Ended {
    let store = runtime.store();
    match store
        .set_task_status(&live.id, TaskStatus::Running, None)
        .await
    {
        Ok(Some(info)) => runtime.task_changed(&live.parent, info),
        Ok(None) => {}
        Err(error) => tracing::warn!(task = %live.id, %error, "cannot mark the task running"),
    }
    live.bump(false);
    let _subscription = child.hub.subscribe(Arc::new(ProgressSink(live.clone())));
    let handle = runtime
        .start_turn(
            child.clone(),
            Start::Input(prompt, Vec::new()),
            task_source(),
            TurnOptions::default(),
        )
        .await;
    let mut handle = match handle {
        Ok(handle) => handle,
        Err(error) => {
            return Ended {
                status: TaskStatus::Failed,
                error: Some(format!("{}: {error}", error.code())),
                final_text: String::new(),
            };
        }
    };
    let mut changed = live.changed.subscribe();
    let mut saved = 0u64;
    let mut tick = tokio::time::interval(SAVE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    let report = loop {
        tokio::select! {
            report = &mut handle.report => break report.ok(),
            () = live.cancel.cancelled(), if !stopping => {
                stopping = true;
                if let Some(turn) = child.running() {
                    turn.cancel.cancel();
                }
            }
            _ = tick.tick() => {
                let seen = changed.borrow_and_update().0;
                if seen != saved {
                    saved = seen;
                    save(runtime, live, "").await;
                }
            }
        }
    };
    let Some(report) = report else {
        return Ended {
            status: TaskStatus::Failed,
            error: Some("the task's turn ended without a report".into()),
            final_text: String::new(),
        };
    };
    let mut final_text = report.final_text();
    let mut recorded = report.recorded.clone();
    if follow_ups(runtime, child, &handle.turn_id).await {
        // Its last turn's answer and outcome stand for the task.
        if let Ok(history) = runtime.store().history(&child.id).await
            && let Some(text) = history
                .iter()
                .rev()
                .find_map(|e| e.message.as_assistant().map(|a| a.text()))
        {
            final_text = text;
        }
        if let Ok(turns) = runtime.store().turns(&child.id).await
            && let Some(last) = turns.last()
        {
            recorded = match last.status {
                keel_store::TurnStatus::Completed => TurnOutcome::Completed,
                keel_store::TurnStatus::Aborted => TurnOutcome::Aborted { reason: None },
                _ => TurnOutcome::Failed {
                    code: last
                        .error_code
                        .as_deref()
                        .and_then(keel_protocol::FailureCode::parse)
                        .unwrap_or(keel_protocol::FailureCode::InternalError),
                    message: "the task's last turn did not complete".into(),
                },
            };
        }
    }
    let (status, error) = match &recorded {
        TurnOutcome::Completed => (TaskStatus::Succeeded, None),
        TurnOutcome::Aborted { .. } if live.cancel.is_cancelled() => {
            (TaskStatus::Canceled, Some("stopped".into()))
        }
        TurnOutcome::Aborted { reason } => (
            TaskStatus::Failed,
            Some(format!(
                "aborted: {}",
                reason.as_deref().unwrap_or("no reason given")
            )),
        ),
        TurnOutcome::Failed { code, message } => {
            (TaskStatus::Failed, Some(format!("{code}: {message}")))
        }
        other => (TaskStatus::Failed, Some(format!("ended as {other:?}"))),
    };
    Ended {
        status,
        error,
        final_text,
    }
}

/// Waits out turns of the child that steering arriving as its answer ended started (the
/// runtime runs such input as a follow-up turn); whether there were any after `first`.
async fn follow_ups(runtime: &Runtime, child: &Arc<Slot>, first: &TurnId) -> bool {
    child.at_rest().await;
    // A quick follow-up may have come and gone before this look: the store knows.
    match runtime.store().turns(&child.id).await {
        Ok(turns) => turns.last().is_some_and(|last| &last.id != first),
        Err(_) => false,
    }
}

async fn finish(runtime: &Runtime, live: &Arc<LiveTask>, ended: Ended) {
    save(runtime, live, &ended.final_text).await;
    let store = runtime.store();
    let info = match store
        .set_task_status(&live.id, ended.status, ended.error)
        .await
    {
        Ok(Some(info)) => Some(info),
        Ok(None) => store.task(&live.id).await.ok(),
        Err(error) => {
            tracing::warn!(task = %live.id, %error, "cannot record the task's end");
            None
        }
    };
    // A read waiting for the result takes it, and so delivers it: no notice then.
    let read_waiting = live.waiters.load(std::sync::atomic::Ordering::SeqCst) > 0;
    live.bump(true);
    // Front ends hear of the end once the parent has been told (or will be, on reopening),
    // and the task leaves the running set last, so nobody sees a gap between the two.
    if let Some(info) = info {
        let info = deliver(runtime, live, info, read_waiting).await;
        runtime.task_changed(&live.parent, info);
    }
    runtime.inner.tasks.remove(&live.id);
    // The last task of an idle parent may have been all that kept it busy.
    runtime.check_quiet_of(&live.parent);
}

/// Tells a background task's parent that it ended: the notice through its steering queue,
/// or nothing when a read was waiting for it (the read delivered it); delivery is recorded
/// either way. A waiting foreground call and a closed parent get nothing here (the closed
/// one is reminded when it is opened again). Returns the task as it is now.
async fn deliver(
    runtime: &Runtime,
    live: &LiveTask,
    info: TaskInfo,
    read_waiting: bool,
) -> TaskInfo {
    if !info.background || runtime.slot(&live.parent).is_err() {
        return info;
    }
    if !read_waiting {
        let op = ops::Enqueue {
            session_id: live.parent.clone(),
            kind: InputKind::Steer,
            text: super::parent::notice(&info),
            source: keel_protocol::TurnSource::Api,
        };
        if let Err(error) = runtime.request(op).await {
            tracing::warn!(task = %live.id, %error, "cannot tell the parent the task ended");
            return info;
        }
    }
    match runtime.store().mark_task_delivered(&live.id).await {
        Ok(delivered) => delivered,
        Err(error) => {
            tracing::warn!(task = %live.id, %error, "cannot record the delivery");
            info
        }
    }
}
