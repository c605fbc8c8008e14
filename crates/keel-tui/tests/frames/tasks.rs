//! Background tasks on screen: a line when one starts and when it ends, the footer's count
//! of running tasks, the `/tasks` picker and one task's details.

use crossterm::event::{KeyCode, KeyModifiers};
use keel_protocol::{Op, SessionEventBody, TaskInfo, TaskStatus, ops};
use keel_runtime::Reply;
use keel_tui::app::{Effect, Tag, UiEvent};

use super::{app, event, key, screen, type_text};

fn task(id: &str, description: &str, agent: &str, status: TaskStatus) -> TaskInfo {
    TaskInfo {
        status,
        child_session_id: Some(format!("s-child-{id}").as_str().into()),
        background: agent == "explore",
        started_ms: Some(2_000),
        ..TaskInfo::new(id, "s-test000001".into(), description, agent)
    }
}

fn changed(app: &mut keel_tui::app::App, task: TaskInfo) {
    event(app, SessionEventBody::Task { task });
}

#[test]
fn tasks_start_and_end_in_the_transcript_and_the_footer_counts_the_running_ones() {
    let mut app = app(100);
    let explore = task("task-a1", "map the parser", "explore", TaskStatus::Queued);
    let worker = task("task-b2", "fix the\nlexer", "worker", TaskStatus::Queued);
    for (t, status) in [
        (&explore, TaskStatus::Queued),
        (&explore, TaskStatus::Running),
        (&worker, TaskStatus::Queued),
        (&worker, TaskStatus::Running),
    ] {
        changed(
            &mut app,
            TaskInfo {
                status,
                ..t.clone()
            },
        );
    }
    let running = screen(&mut app);
    changed(
        &mut app,
        TaskInfo {
            status: TaskStatus::Succeeded,
            ended_ms: Some(14_000),
            ..explore.clone()
        },
    );
    changed(
        &mut app,
        TaskInfo {
            status: TaskStatus::Failed,
            error: Some("model_error: the provider is overloaded".into()),
            ended_ms: Some(9_000),
            ..worker.clone()
        },
    );
    // Its delivery repeats the status: no second line.
    changed(
        &mut app,
        TaskInfo {
            status: TaskStatus::Succeeded,
            delivered_ms: Some(15_000),
            ..explore
        },
    );
    let ended = screen(&mut app);
    insta::assert_snapshot!(format!("{running}\n=====\n{ended}"));
}

#[test]
fn the_tasks_picker_and_a_running_task_s_details_with_its_stop() {
    let mut app = app(80);
    type_text(&mut app, "/tasks");
    let effects = app.update(UiEvent::Term(crossterm::event::Event::Key(
        crossterm::event::KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE),
    )));
    assert_eq!(
        effects,
        vec![Effect::Call(
            Tag::Tasks { open: true },
            Op::ListTasks(ops::ListTasks {
                session_id: "s-test000001".into()
            })
        )]
    );
    let mut lost = task("task-c3", "check the build", "verifier", TaskStatus::Lost);
    lost.error = Some("the keel process running it stopped".into());
    app.update(UiEvent::Reply(
        Tag::Tasks { open: true },
        Ok(Reply::ListTasks(vec![
            lost,
            task("task-a1", "map the parser", "explore", TaskStatus::Running),
        ])),
    ));
    let picker = screen(&mut app);
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let details = screen(&mut app);
    let stop = app.update(UiEvent::Term(crossterm::event::Event::Key(
        crossterm::event::KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE),
    )));
    assert_eq!(
        stop,
        vec![Effect::Call(
            Tag::StopTask("task-a1".into()),
            Op::StopTask(ops::StopTask {
                task_id: "task-a1".into()
            })
        )]
    );
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let ended = screen(&mut app);
    insta::assert_snapshot!(format!("{picker}\n=====\n{details}\n=====\n{ended}"));
}
