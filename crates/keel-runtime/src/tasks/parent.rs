//! The runtime's side of tasks: child sessions with their role's profile, the parent's view
//! (task events, the completion notice, the reminder of results not read yet), lost tasks
//! settled when a parent is opened, and consumption confirmed after the parent's commit.

use std::sync::Arc;

use keel_protocol::{Failure, SessionEventBody, SessionId, TaskInfo, TurnId, TurnOutcome};
use keel_store::SessionRecord;
use keel_tools::permission::Mode;

use super::{TaskProfile, live_ids};
use crate::assembly::ResolvedModel;
use crate::error::RuntimeError;
use crate::runtime::{Runtime, Slot};
use crate::turn::TurnReport;

/// Who leaves the reminder of a lost task.
const LOST_SOURCE: &str = "tasks";

/// The completion notice a background task's parent gets through its steering queue.
pub(crate) fn notice(task: &TaskInfo) -> String {
    let mut text = format!(
        "<task_notice task_id=\"{}\" status=\"{}\">Task \"{}\" ({}) ended: {}.",
        task.id,
        task.status,
        one_line(&task.description),
        task.agent,
        task.status
    );
    if let Some(error) = &task.error {
        text.push_str(&format!(" {}", one_line(error)));
    }
    text.push_str(" Read its result with task_output.</task_notice>");
    text
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The reminder of ended tasks whose results the session has not read (SPEC §14: an
/// unconsumed result is reminded again at the next turn).
pub(crate) fn unread_reminder(tasks: &[TaskInfo]) -> Option<String> {
    let unread: Vec<String> = tasks
        .iter()
        .filter(|t| t.status.is_terminal() && t.consumed_ms.is_none())
        .map(|t| {
            format!(
                "- {} \"{}\" ({}): {}",
                t.id,
                one_line(&t.description),
                t.agent,
                t.status
            )
        })
        .collect();
    if unread.is_empty() {
        return None;
    }
    Some(format!(
        "<system-reminder>These tasks have ended and their results have not been read; call \
         task_output with each id:\n{}\n</system-reminder>",
        unread.join("\n")
    ))
}

impl Runtime {
    /// Tells the parent's front ends that one of its tasks changed.
    pub(crate) fn task_changed(&self, parent: &SessionId, task: TaskInfo) {
        if let Ok(slot) = self.slot(parent) {
            slot.emit(SessionEventBody::Task { task });
        }
    }

    /// The model a task asked for: of the parent's provider, or of a provider the user's
    /// configuration defines. A model the model picks never reaches another host with another
    /// key, and a bare id means the parent's provider.
    pub(crate) fn resolve_task_model(
        &self,
        name: &str,
        parent: &ResolvedModel,
    ) -> Result<ResolvedModel, RuntimeError> {
        let parent_provider = parent.name.split_once('/').map_or("", |(p, _)| p);
        let name = match name.split_once('/') {
            Some(_) => name.to_owned(),
            None => format!("{parent_provider}/{name}"),
        };
        let provider = name.split_once('/').map_or("", |(p, _)| p);
        let configured = self
            .inner
            .settings
            .loaded
            .config
            .providers
            .contains_key(provider);
        if provider != parent_provider && !configured {
            return Err(RuntimeError::Usage(format!(
                "a task's model must be of the session's provider `{parent_provider}` or of one \
                 your configuration defines, not `{name}`"
            )));
        }
        self.resolve_named_model(&name)
    }

    /// Opens a task's child session with its role's profile: never asking anyone (a
    /// question is a denial), commands read-only where the role is.
    pub(crate) fn install_child(
        &self,
        record: SessionRecord,
        profile: Arc<TaskProfile>,
        model: ResolvedModel,
        mode: Mode,
    ) -> Result<Arc<Slot>, RuntimeError> {
        let services = self.services(&record.id, None, &model, mode, Some(&profile))?;
        let slot = Slot::new(
            record,
            model,
            mode,
            services,
            Some(profile),
            self.inner.thinking,
        );
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(slots.entry(slot.id.clone()).or_insert(slot).clone())
    }

    /// Queues steering for `session` (a running task's child).
    pub(crate) async fn enqueue_steer(
        &self,
        session: &SessionId,
        text: String,
    ) -> Result<(), RuntimeError> {
        self.turns()
            .enqueue(
                session,
                keel_protocol::InputKind::Steer,
                &text,
                keel_protocol::TurnSource::Api,
            )
            .await
            .map(|_| ())
    }

    /// Settles the session's tasks no live executor runs as `lost`; the parent's next turn
    /// is told which.
    pub(crate) async fn settle_lost(&self, session: &SessionId) {
        let store = &self.inner.store;
        let lost = match store.settle_lost_tasks(session, live_ids()).await {
            Ok(lost) => lost,
            Err(error) => {
                tracing::warn!(%session, %error, "cannot settle the session's lost tasks");
                return;
            }
        };
        for task in lost {
            let text = format!(
                "Task {} \"{}\" ({}) was lost: the keel process running it stopped before it \
                 ended. Its progress so far is readable with task_output; start it again if \
                 it is still needed.",
                task.id,
                one_line(&task.description),
                task.agent
            );
            if let Err(error) = store
                .add_session_reminder(session, LOST_SOURCE, &text)
                .await
            {
                tracing::warn!(%session, %error, "cannot leave the reminder of a lost task");
            }
            self.task_changed(session, task);
        }
    }

    /// The reminder of the session's unread task results, when it ever had tasks.
    pub(crate) async fn task_reminder(&self, slot: &Arc<Slot>) -> Option<String> {
        if !slot.lock().tasks_seen {
            return None;
        }
        match self.inner.store.tasks(&slot.id).await {
            Ok(tasks) => unread_reminder(&tasks),
            Err(error) => {
                tracing::warn!(session = %slot.id, %error, "cannot read the session's tasks");
                None
            }
        }
    }

    /// Confirms the task results `turn` read, now that it has ended: only when it
    /// completed and its history was committed. A failed confirmation is a diagnostic only.
    pub(crate) async fn confirm_task_reads(
        &self,
        slot: &Arc<Slot>,
        turn: &TurnId,
        report: &TurnReport,
    ) {
        let candidates = self.inner.tasks.take_candidates(turn);
        if candidates.is_empty() {
            return;
        }
        let committed = report.recorded == TurnOutcome::Completed
            && report.commit_failure.is_none()
            && report.finish_failure.is_none();
        if !committed {
            return;
        }
        match self.inner.store.consume_tasks(candidates, turn).await {
            Ok(consumed) => {
                for task in consumed {
                    slot.emit(SessionEventBody::Task { task });
                }
            }
            Err(error) => slot.emit(SessionEventBody::Failure {
                turn_id: Some(turn.clone()),
                failure: Failure::new(
                    keel_protocol::FailureCode::TaskConsumptionFailed,
                    format!("cannot record that the turn read its task results: {error}"),
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::TaskStatus;

    fn task(id: &str, status: TaskStatus, consumed: bool) -> TaskInfo {
        TaskInfo {
            id: id.into(),
            session_id: "s-1".into(),
            child_session_id: None,
            parent_task_id: None,
            description: "map the\nparser".into(),
            agent: "explore".into(),
            status,
            background: true,
            error: None,
            output_bytes: 0,
            created_ms: 1,
            started_ms: None,
            ended_ms: None,
            delivered_ms: None,
            consumed_ms: consumed.then_some(2),
        }
    }

    #[test]
    fn only_ended_unread_results_are_reminded() {
        let tasks = [
            task("task-a", TaskStatus::Succeeded, false),
            task("task-b", TaskStatus::Succeeded, true),
            task("task-c", TaskStatus::Running, false),
            task("task-d", TaskStatus::Lost, false),
        ];
        let text = unread_reminder(&tasks).unwrap_or_default();
        assert!(
            text.contains("- task-a \"map the parser\" (explore): succeeded"),
            "{text}"
        );
        assert!(text.contains("- task-d"), "{text}");
        assert!(
            !text.contains("task-b") && !text.contains("task-c"),
            "{text}"
        );
        assert_eq!(unread_reminder(&tasks[1..3]), None);
    }

    #[test]
    fn a_notice_names_the_task_and_how_to_read_it() {
        let mut failed = task("task-x", TaskStatus::Failed, false);
        failed.error = Some("model_error: boom".into());
        assert_eq!(
            notice(&failed),
            "<task_notice task_id=\"task-x\" status=\"failed\">Task \"map the parser\" \
             (explore) ended: failed. model_error: boom Read its result with \
             task_output.</task_notice>"
        );
    }
}
