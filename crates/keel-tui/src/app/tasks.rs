//! The session's background tasks: a line in the transcript when one starts and when it
//! ends (in the runtime's shared wording), a count of the running ones in the footer, and
//! `/tasks`: a picker over the session's tasks (from `list_tasks`) whose Enter shows one
//! task's details, where `s` stops it (`stop_task`) while it runs and Esc goes back.
//!
//! The tasks are known from the session's `task` events and refreshed whenever `/tasks`
//! lists them, so the footer and the details stay current while the popup is open.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use keel_protocol::ops;
use keel_protocol::{Op, TaskInfo, TaskStatus};

use super::popup::{PickItem, Picker, PickerKind, Popup};
use super::{App, Effect, Tag};
use crate::cells::{Cell, Tone};

/// The title of the `/tasks` picker.
const PICKER_TITLE: &str = "Tasks (enter: details)";

/// Whether a task has not ended yet (it holds a slot or waits for one).
pub fn is_active(status: TaskStatus) -> bool {
    !status.is_terminal()
}

impl App {
    /// A task of the session changed: remembered, announced when it started or ended, and
    /// shown afresh in its open details.
    pub(super) fn task_event(&mut self, task: TaskInfo) {
        let previous = match self.tasks.iter_mut().find(|t| t.id == task.id) {
            Some(known) => Some(std::mem::replace(known, task.clone()).status),
            None => {
                self.tasks.push(task.clone());
                None
            }
        };
        if let Some(Popup::Task(shown)) = &mut self.popup
            && shown.id == task.id
        {
            *shown = task.clone();
        }
        if let Some((_, text)) = keel_runtime::notice::task(previous, &task) {
            self.push(Cell::Task(task.status, text));
        }
    }

    /// How many of the session's tasks have not ended.
    pub fn running_tasks(&self) -> usize {
        self.tasks.iter().filter(|t| is_active(t.status)).count()
    }

    /// `/tasks`: lists the session's tasks, then shows them in a picker.
    pub(super) fn open_tasks(&mut self, effects: &mut Vec<Effect>) {
        if let Some(effect) = self.list_tasks(true) {
            effects.push(effect);
        }
    }

    /// Asks the runtime for the session's tasks; `open`: show them in a picker.
    pub(super) fn list_tasks(&self, open: bool) -> Option<Effect> {
        let session_id = self.session_id()?;
        Some(Effect::Call(
            Tag::Tasks { open },
            Op::ListTasks(ops::ListTasks { session_id }),
        ))
    }

    /// The session's tasks arrived.
    pub(super) fn tasks_listed(&mut self, tasks: Vec<TaskInfo>, open: bool) {
        self.tasks = tasks;
        if !open {
            return;
        }
        if self.tasks.is_empty() {
            self.notice(Tone::Info, "this session has started no tasks");
            return;
        }
        self.popup = Some(Popup::Picker(self.tasks_picker()));
    }

    /// The picker over the known tasks, newest first.
    fn tasks_picker(&self) -> Picker {
        let items = self
            .tasks
            .iter()
            .rev()
            .map(|t| PickItem {
                label: t
                    .description
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                detail: format!("{} · {} · {}", t.agent, t.status, t.id),
                value: t.id.clone(),
                revision: None,
            })
            .collect();
        Picker::new(PickerKind::Tasks, PICKER_TITLE, items)
    }

    /// A task was chosen in the picker: its details.
    pub(super) fn task_picked(&mut self, id: &str) {
        if let Some(task) = self.tasks.iter().find(|t| t.id == id) {
            self.popup = Some(Popup::Task(task.clone()));
        }
    }

    /// Keys on a task's details: `s` stops it while it runs, Esc goes back to the list.
    pub(super) fn task_key(&mut self, task: TaskInfo, key: KeyEvent, effects: &mut Vec<Effect>) {
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Esc => {
                self.popup = Some(Popup::Picker(self.tasks_picker()));
                return;
            }
            KeyCode::Char('s') if plain && is_active(task.status) => {
                effects.push(Effect::Call(
                    Tag::StopTask(task.id.clone()),
                    Op::StopTask(ops::StopTask {
                        task_id: task.id.clone(),
                    }),
                ));
            }
            _ => {}
        }
        self.popup = Some(Popup::Task(task));
    }

    /// The runtime's answer to stopping a task.
    pub(super) fn task_stop_answered(&mut self, id: &str, stopped: bool) {
        if stopped {
            self.notice(Tone::Info, format!("stopping {id}"));
        } else {
            self.notice(Tone::Info, format!("{id} had already ended"));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use keel_protocol::{SessionEvent, SessionEventBody, SessionId};
    use keel_runtime::Reply;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::app::UiEvent;
    use crate::app::tests::{SESSION, app};

    fn task(id: &str, status: TaskStatus) -> TaskInfo {
        TaskInfo {
            status,
            child_session_id: Some("s-child00001".into()),
            ..TaskInfo::new(id, SESSION.into(), "map the parser", "explore")
        }
    }

    fn event(app: &mut App, task: TaskInfo) {
        app.update(UiEvent::Session(SessionEvent {
            session_id: SessionId::from(SESSION),
            seq: 0,
            body: SessionEventBody::Task { task },
        }));
    }

    fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
        app.update(UiEvent::Term(crossterm::event::Event::Key(KeyEvent::new(
            code,
            KeyModifiers::NONE,
        ))))
    }

    #[test]
    fn a_task_is_announced_when_it_starts_and_ends_and_counted_while_it_runs() {
        let mut app = app();
        event(&mut app, task("task-1", TaskStatus::Queued));
        assert_eq!(app.transcript, Vec::new(), "made: nothing yet");
        assert_eq!(app.running_tasks(), 1);
        event(&mut app, task("task-1", TaskStatus::Running));
        event(&mut app, task("task-1", TaskStatus::Succeeded));
        let mut delivered = task("task-1", TaskStatus::Succeeded);
        delivered.delivered_ms = Some(5);
        event(&mut app, delivered);
        assert_eq!(
            app.transcript,
            vec![
                Cell::Task(
                    TaskStatus::Running,
                    "task-1 explore \"map the parser\" — running".into()
                ),
                Cell::Task(
                    TaskStatus::Succeeded,
                    "task-1 explore \"map the parser\" — succeeded".into()
                ),
            ]
        );
        assert_eq!(app.running_tasks(), 0);
    }

    #[test]
    fn tasks_lists_picks_and_stops_a_running_task() {
        let mut app = app();
        for c in "/tasks".chars() {
            key(&mut app, KeyCode::Char(c));
        }
        let effects = key(&mut app, KeyCode::Enter);
        assert_eq!(
            effects,
            vec![Effect::Call(
                Tag::Tasks { open: true },
                Op::ListTasks(ops::ListTasks {
                    session_id: SESSION.into()
                })
            )]
        );
        app.update(UiEvent::Reply(
            Tag::Tasks { open: true },
            Ok(Reply::ListTasks(vec![
                task("task-1", TaskStatus::Succeeded),
                task("task-2", TaskStatus::Running),
            ])),
        ));
        // Newest first: Enter shows task-2.
        key(&mut app, KeyCode::Enter);
        assert!(matches!(&app.popup, Some(Popup::Task(t)) if t.id == "task-2"));
        let effects = key(&mut app, KeyCode::Char('s'));
        assert_eq!(
            effects,
            vec![Effect::Call(
                Tag::StopTask("task-2".into()),
                Op::StopTask(ops::StopTask {
                    task_id: "task-2".into()
                })
            )]
        );
        event(&mut app, task("task-2", TaskStatus::Canceled));
        assert!(
            matches!(&app.popup, Some(Popup::Task(t)) if t.status == TaskStatus::Canceled),
            "the details follow the task"
        );
        assert_eq!(
            key(&mut app, KeyCode::Char('s')),
            Vec::new(),
            "ended: no stop"
        );
        key(&mut app, KeyCode::Esc);
        assert!(matches!(&app.popup, Some(Popup::Picker(p)) if p.kind == PickerKind::Tasks));
        app.update(UiEvent::Reply(
            Tag::StopTask("task-2".into()),
            Ok(Reply::StopTask(true)),
        ));
        assert_eq!(
            app.transcript.last(),
            Some(&Cell::Notice(Tone::Info, "stopping task-2".into()))
        );
    }

    #[test]
    fn tasks_says_when_there_are_none() {
        let mut app = app();
        app.update(UiEvent::Reply(
            Tag::Tasks { open: true },
            Ok(Reply::ListTasks(Vec::new())),
        ));
        assert!(app.popup.is_none());
        assert_eq!(
            app.transcript.last(),
            Some(&Cell::Notice(
                Tone::Info,
                "this session has started no tasks".into()
            ))
        );
    }
}
