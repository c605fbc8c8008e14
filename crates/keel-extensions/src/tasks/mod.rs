//! The `tasks` extension: the model's tools for background tasks and sub-agents (SPEC §14),
//! over the runtime's task executor, with the roles they run in (`explore`, `worker`,
//! `verifier`, and the user's and project's custom agents). The runtime holds every rule
//! that makes a result exact (states, consumption, lost tasks); this is the model's side.

pub mod roles;
mod tools;

use std::sync::Arc;

use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, Hook, TurnScope, TurnStartHook,
};

pub use tools::{TOOL_NAMES, task_result};

/// Id of the tasks extension.
pub const TASKS: &str = "tasks";

/// Background tasks and sub-agents.
pub struct TasksExtension;

impl Extension for TasksExtension {
    fn id(&self) -> &str {
        TASKS
    }

    fn description(&self) -> Option<&str> {
        Some("task, task_append, task_query, task_output and task_stop: sub-agents in roles")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let host = api.host();
        let found = roles::discover(&roles::roots(
            host.keel_home.as_deref(),
            Some(&host.project),
        ));
        for problem in &found.problems {
            tracing::warn!(%problem, "agent file not loaded");
        }
        let problems: Vec<String> = found.problems.iter().map(ToString::to_string).collect();
        let roles: Arc<[roles::Role]> = found.roles.into();
        let control = host.control.clone();
        api.register_tool_factory(Arc::new(move |scope| {
            tools::tools(&tools::Bound {
                control: control.clone(),
                session: scope.session_id.clone(),
                turn: scope.turn_id.clone(),
                roles: roles.clone(),
            })
        }))?;
        if !problems.is_empty() {
            // An agent file keel passed over (another user's, a link in a project) is told
            // once, as a broken skill or command is.
            api.on(Hook::TurnStart(Arc::new(ReportAgentProblems {
                problems,
                reported: crate::extend::Reported::default(),
            })))?;
        }
        Ok(())
    }
}

/// The agent files that could not be used, told once, at the first turn.
struct ReportAgentProblems {
    problems: Vec<String>,
    reported: crate::extend::Reported,
}

#[async_trait::async_trait]
impl TurnStartHook for ReportAgentProblems {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), keel_agent::HookError> {
        self.reported.report(scope, TASKS, self.problems.clone());
        Ok(())
    }
}
