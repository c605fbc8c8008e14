//! The session events a front end renders, each caused through the contract (or, for what
//! extensions say, through the extension interface) and read from a subscription.

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::HookError;
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::{
    ErrorCode, GoalInfo, GoalStatus, NoticeLevel, PlanInfo, SessionEventBody, SessionStatus,
    TaskStatus, TurnOutcome, Usage, ops,
};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, Hook, TurnScope, TurnStartHook, hook_extension,
};
use keel_runtime::tasks::{Ceiling, TaskSpec};
use keel_runtime::{ContractExt, HostControl};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Echo, Harness, Setup, ended};

#[tokio::test]
async fn a_turn_reports_its_status_and_each_answers_usage() {
    let usage = Usage {
        input: 120,
        output: 7,
        ..Usage::default()
    };
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "counted",
    )
    .usage(usage)]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "count").await;
    let reported = events
        .until(|b| matches!(b, SessionEventBody::Usage { .. }))
        .await;
    let SessionEventBody::Usage {
        turn_id,
        usage: seen,
        context_window,
        input_limit,
        compact_at,
    } = reported.body
    else {
        unreachable!()
    };
    assert_eq!(turn_id, turn.turn_id);
    assert_eq!((seen.input, seen.output), (120, 7));
    assert_eq!(context_window, 200_000, "the model's window");
    // The budget in use comes with it, as the context manager computes it.
    let budget = keel_llm::budget::Budget::new(
        200_000,
        u64::from(keel_llm::ModelSpec::scripted().max_output),
    );
    assert_eq!(
        (input_limit, compact_at),
        (budget.input_limit, budget.compact_at)
    );
    events.turn_end(&turn.turn_id).await;
    let statuses: Vec<SessionStatus> = events
        .seen
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::TurnStatus { status, turn_id } if *turn_id == turn.turn_id => {
                Some(status.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses.first(),
        Some(&SessionStatus::Running),
        "{statuses:?}"
    );
    assert_eq!(
        statuses.last(),
        Some(&SessionStatus::Completed),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn a_model_call_tried_again_is_reported_before_it_answers() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::error(ErrorCode::Overloaded, "the model is busy").retry_after(5),
        ScriptedResponse::text("answered on the second try"),
    ]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "try").await;
    let retried = events
        .until(|b| matches!(b, SessionEventBody::Retry { .. }))
        .await;
    let SessionEventBody::Retry {
        turn_id,
        attempt,
        delay_ms,
        failure,
        ..
    } = retried.body
    else {
        unreachable!()
    };
    assert_eq!(turn_id, turn.turn_id);
    assert_eq!((attempt, delay_ms), (1, 5));
    assert!(failure.message.contains("busy"), "{failure:?}");
    let report = ended(turn).await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert_eq!(report.final_text(), "answered on the second try");
}

/// Says, as its turn starts, what extensions say: a notice, a goal and a plan.
struct Announcer;

#[async_trait]
impl TurnStartHook for Announcer {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        scope.events.emit(
            "mcp",
            "server",
            json!({"server": "docs", "text": "is running again"}),
        );
        scope.events.emit("announcer", "counted", json!({"n": 3}));
        scope.events.goal(GoalInfo {
            objective: "tidy the docs".into(),
            status: GoalStatus::Active,
            reason: None,
            banner: "goal: tidy the docs".into(),
            record: json!({}),
        });
        scope.events.plan_ready(PlanInfo {
            text: "1. read\n2. tidy".into(),
            path: "plan.md".into(),
            frozen_path: "plan.1.md".into(),
        });
        Ok(())
    }
}

#[tokio::test]
async fn what_an_extension_says_reaches_the_session_typed() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "ok",
    )]));
    let mut setup = Setup::scripted(&provider);
    setup.extensions = vec![hook_extension(
        "announcer",
        vec![Hook::TurnStart(Arc::new(Announcer))],
    )];
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "go").await;
    events.turn_end(&turn.turn_id).await;
    let mut notices = Vec::new();
    let mut goal = None;
    let mut plan = None;
    for event in &events.seen {
        match &event.body {
            SessionEventBody::Extension {
                turn_id,
                extension,
                kind,
                notice,
                ..
            } => {
                assert_eq!(turn_id.as_ref(), Some(&turn.turn_id));
                notices.push((extension.clone(), kind.clone(), notice.clone()));
            }
            SessionEventBody::Goal { turn_id, goal: g } => {
                assert_eq!(turn_id.as_ref(), Some(&turn.turn_id));
                goal = Some(g.clone());
            }
            SessionEventBody::PlanReady { turn_id, plan: p } => {
                assert_eq!(turn_id, &turn.turn_id);
                plan = Some(p.clone());
            }
            _ => {}
        }
    }
    // Every notice carries its text for people: a known one its own words, any other the
    // extension's name and what it did.
    let said: Vec<(String, NoticeLevel, String)> = notices
        .into_iter()
        .filter_map(|(_, _, notice)| notice.map(|n| (n.source, n.level, n.text)))
        .collect();
    assert_eq!(
        said,
        [
            (
                "mcp".to_owned(),
                NoticeLevel::Info,
                "MCP: server docs is running again".to_owned()
            ),
            (
                "announcer".to_owned(),
                NoticeLevel::Info,
                "announcer: counted".to_owned()
            ),
        ]
    );
    assert_eq!(goal.map(|g| g.status), Some(GoalStatus::Active));
    assert_eq!(plan.map(|p| p.frozen_path), Some("plan.1.md".into()));
}

/// Starts one background task for the turn's session as its turn starts, once.
struct Delegator {
    control: HostControl,
    spawned: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl TurnStartHook for Delegator {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        if self.spawned.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let tasks = self.control.tasks().expect("the runtime runs");
        tasks
            .spawn(
                &scope.session_id,
                TaskSpec {
                    description: "look around".into(),
                    prompt: "list the files".into(),
                    agent: "explore".into(),
                    model: None,
                    background: true,
                    ceiling: Ceiling::AllExcept(Vec::new()),
                    read_only: true,
                    instructions: None,
                },
            )
            .await
            .map_err(|e| HookError::new(e.to_string()))?;
        Ok(())
    }
}

/// Mounts the [`Delegator`] with the control its init is handed.
struct Delegating;

impl Extension for Delegating {
    fn id(&self) -> &str {
        "delegating"
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        api.on(Hook::TurnStart(Arc::new(Delegator {
            control: api.host().control.clone(),
            spawned: std::sync::atomic::AtomicBool::new(false),
        })))
    }
}

#[tokio::test]
async fn a_task_reports_each_change_to_its_parent_session() {
    let mut setup = Setup::scripted(&Arc::new(ScriptedProvider::with_responses([])));
    setup.model = Arc::new(Echo);
    setup.extensions = vec![Arc::new(Delegating)];
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "delegate").await;
    let finished = events
        .until(|b| matches!(b, SessionEventBody::Task { task } if task.status.is_terminal()))
        .await;
    let SessionEventBody::Task { task } = finished.body else {
        unreachable!()
    };
    assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
    assert_eq!(task.description, "look around");
    let seen: Vec<TaskStatus> = events
        .seen
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::Task { task } => Some(task.status),
            _ => None,
        })
        .collect();
    assert!(seen.contains(&TaskStatus::Running), "{seen:?}");
    ended(turn).await;
    events.rest().await;
}

#[tokio::test]
async fn a_changed_session_is_reported_with_what_it_is_now() {
    let provider = Arc::new(ScriptedProvider::with_responses([]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    h.runtime
        .request(ops::UpdateSession {
            session_id: session.clone(),
            title: Some("Renamed".into()),
            model: None,
            mode: Some(keel_protocol::PermissionMode::Plan),
            thinking: None,
        })
        .await
        .unwrap();
    let updated = events
        .until(|b| matches!(b, SessionEventBody::SessionUpdated { .. }))
        .await;
    let SessionEventBody::SessionUpdated { title, mode, .. } = updated.body else {
        unreachable!()
    };
    assert_eq!(title, "Renamed");
    assert_eq!(mode, Some(keel_protocol::PermissionMode::Plan));
}

#[tokio::test]
async fn history_that_cannot_be_stored_is_reported_as_a_failure() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("done"),
    ]));
    let gate = crate::harness::Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "start").await;
    gate.wait_started().await;
    // The disk refuses every history row from now on.
    rusqlite::Connection::open(h.store.path())
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON history \
             BEGIN SELECT RAISE(ABORT, 'the disk refused'); END;",
        )
        .unwrap();
    gate.release.notify_one();
    let report = ended(turn).await;
    assert!(report.commit_failure.is_some(), "{report:?}");
    let failed = events
        .until(|b| matches!(b, SessionEventBody::Failure { .. }))
        .await;
    let SessionEventBody::Failure { turn_id, failure } = failed.body else {
        unreachable!()
    };
    assert_eq!(turn_id, Some(report.turn_id.clone()));
    assert_eq!(
        failure.code,
        keel_protocol::FailureCode::HistoryCommitFailed
    );
    assert!(failure.message.contains("the disk refused"), "{failure:?}");
}
