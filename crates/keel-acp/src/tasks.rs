//! A session's background tasks for the editor: a notice when one starts and when it ends,
//! in the runtime's shared wording (`keel_runtime::notice::task`), through the translator's
//! notice path (a `notice` update, or a thought line for clients without them).
//!
//! Notices rather than tool calls: a background task outlives the prompt that started it and
//! its end may start a turn no prompt asked for, while an editor ties tool calls to the
//! prompt they came in; a foreground task already shows as its `task` tool call. The runtime
//! repeats a task's status on every change (delivered, read), so what was announced is
//! remembered per task.

use std::collections::HashMap;

use keel_protocol::{TaskInfo, TaskStatus};
use keel_runtime::notice::{self, Severity};

/// The mark task notices start with, as in the TUI.
const MARK: &str = "⧉";

/// The status each task of a session was last announced in.
#[derive(Debug, Default)]
pub struct TaskNotices {
    seen: HashMap<String, TaskStatus>,
}

impl TaskNotices {
    /// The notice a task's change makes, if any: when it started or ended.
    pub fn changed(&mut self, task: &TaskInfo) -> Option<(Severity, String)> {
        let previous = self.seen.insert(task.id.clone(), task.status);
        notice::task(previous, task).map(|(severity, text)| (severity, format!("{MARK} {text}")))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn task(status: TaskStatus) -> TaskInfo {
        TaskInfo {
            status,
            ..TaskInfo::new("task-1", "s-1".into(), "map the parser", "explore")
        }
    }

    #[test]
    fn a_task_is_told_once_when_it_starts_and_once_when_it_ends() {
        let mut notices = TaskNotices::default();
        let mut delivered = task(TaskStatus::Lost);
        delivered.delivered_ms = Some(1);
        let told: Vec<Option<(Severity, String)>> = [
            task(TaskStatus::Queued),
            task(TaskStatus::Running),
            task(TaskStatus::Lost),
            delivered,
        ]
        .iter()
        .map(|t| notices.changed(t))
        .collect();
        assert_eq!(
            told,
            vec![
                None,
                Some((
                    Severity::Info,
                    "⧉ task-1 explore \"map the parser\" — running".to_owned()
                )),
                Some((
                    Severity::Warn,
                    "⧉ task-1 explore \"map the parser\" — lost".to_owned()
                )),
                None,
            ]
        );
    }
}
