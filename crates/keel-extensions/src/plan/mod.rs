//! Plan mode (issue 16): the model investigates read-only and writes a plan for the user to
//! approve before anything changes.
//!
//! The `plan` permission mode already makes the gate and the sandbox read-only, but for the
//! session's plan file (`$KEEL_HOME/plans/<session>.md`, keel-tools' plan-file exception).
//! This extension gives the mode its workflow, all through the SPI: while a session is in
//! plan mode each turn gets a reminder of the rules and the plan file's path, and the
//! `exit_plan_mode` tool, which checks the plan opens with `## Summary`, freezes a copy the
//! model can no longer change, reports `plan_ready` to the front ends and ends the turn.
//! The user then answers with feedback (a normal prompt, still in plan mode) or runs
//! `/approve-plan [auto|ask|full]`, which switches the session's mode through the
//! conversation contract and starts the turn that carries the frozen plan out.
//!
//! The mode is read from the turn's own services (what the turn started with), so a mode
//! changed mid-turn changes the next turn only, as everywhere else.

pub mod files;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{CommandInfo, SessionId, ops};
use keel_runtime::HostControl;
use keel_runtime::extension::{
    CommandError, CommandSource, Criticality, Expansion, Extension, ExtensionApi, ExtensionError,
    ReminderData, ReminderProvider, TurnScope,
};
use keel_tools::permission::Mode;

use crate::text::{block, defuse};

/// Id of the plan extension.
pub const PLAN: &str = "plan";
/// The tool that submits the plan for review.
pub const EXIT_TOOL: &str = "exit_plan_mode";
/// The command that approves it.
pub const APPROVE_COMMAND: &str = "approve-plan";

/// Where the reminder stands among extension reminders: before the others, as the mode
/// changes what every other instruction may do.
const REMINDER_PRIORITY: i32 = 100;

/// The plan workflow: the per-turn reminder, `exit_plan_mode` and `/approve-plan`.
#[derive(Default)]
pub struct PlanMode;

impl Extension for PlanMode {
    fn id(&self) -> &str {
        PLAN
    }

    fn description(&self) -> Option<&str> {
        Some("plan mode: a read-only investigation ending in a plan the user approves")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let host = api.host();
        // Without keel's home there is no plan file: plan mode is read-only and no more.
        let Some(keel_home) = host.keel_home.clone() else {
            return Ok(());
        };
        api.register_reminder_provider(REMINDER_PRIORITY, Arc::new(Reminder))?;
        let home = keel_home.clone();
        api.register_tool_factory(Arc::new(move |scope: &TurnScope| {
            plan_file(scope)
                .map(|plan| tool::exit_plan_mode(scope, home.clone(), plan))
                .into_iter()
                .collect()
        }))?;
        api.register_commands(Arc::new(Approve {
            control: host.control.clone(),
            keel_home,
        }))
    }
}

/// The plan file of the turn's session when the turn runs in plan mode.
fn plan_file(scope: &TurnScope) -> Option<PathBuf> {
    let services = scope.host.as_ref()?;
    if services.setup.mode != Mode::Plan {
        return None;
    }
    services.env.plan_file.clone()
}

/// Every plan-mode turn's reminder of the rules and where the plan goes.
struct Reminder;

impl ReminderProvider for Reminder {
    fn id(&self) -> &str {
        "plan-mode"
    }

    /// The model must hear it whatever its reminder settings: without it the mode only
    /// refuses, and the model does not know where its plan may go.
    fn criticality(&self) -> Criticality {
        Criticality::Critical
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        let plan = plan_file(data.scope)?;
        Some(block(&format!(
            "Plan mode is on: the user wants a plan before anything changes.\n\
             - Investigate read-only: read, search and run read-only commands. Every other \
             write, edit, deletion and changing command is refused.\n\
             - Where the task leaves a real trade-off open (an approach, a scope, a risk), ask \
             the user and end your turn with the question rather than guess.\n\
             - Write the plan to {} with `write` (and `edit`), the only file you may change. Its \
             first section must be `## Summary`; then the steps, the files to change and how \
             to verify the result.\n\
             - When the plan is complete, call `{EXIT_TOOL}` on its own: it freezes the plan \
             and ends your turn for the user's review.",
            defuse(&plan.display().to_string())
        )))
    }
}

/// `/approve-plan [auto|ask|full]`.
struct Approve {
    control: HostControl,
    keel_home: PathBuf,
}

impl Approve {
    async fn approve(
        &self,
        session: &SessionId,
        arguments: &str,
    ) -> Result<Expansion, CommandError> {
        let mode = match arguments.trim() {
            "" => Mode::Auto,
            other => match other.parse::<Mode>() {
                Ok(Mode::Plan) => {
                    return Err(CommandError::Usage(
                        "the plan is carried out in auto, ask or full mode; to keep planning, \
                         answer with feedback instead"
                            .into(),
                    ));
                }
                Ok(mode) => mode,
                Err(_) => {
                    return Err(CommandError::Usage(format!(
                        "unknown mode `{other}` (use auto, ask or full)"
                    )));
                }
            },
        };
        if self.control.mode(session) != Some(Mode::Plan) {
            return Err(CommandError::refused(
                "the session is not in plan mode: there is no plan to approve",
            ));
        }
        let Some((_, frozen)) = files::frozen(&self.keel_home, session).pop() else {
            return Err(CommandError::refused(format!(
                "no plan is ready for review yet: the model submits it with {EXIT_TOOL}"
            )));
        };
        let text = files::read(&frozen).map_err(CommandError::failed)?;
        self.control
            .request(ops::UpdateSession {
                session_id: session.clone(),
                title: None,
                model: None,
                mode: Some(mode),
                thinking: None,
            })
            .await
            .map_err(CommandError::failed)?;
        Ok(Expansion::Prompt(format!(
            "I approve the plan frozen in {}; the permission mode is now `{mode}`. Carry the \
             plan out now, step by step, and verify the result as it says.\n\n<plan>\n{}\n</plan>",
            frozen.display(),
            text.trim_end()
        )))
    }
}

#[async_trait]
impl CommandSource for Approve {
    fn commands(&self) -> Vec<CommandInfo> {
        vec![CommandInfo {
            name: APPROVE_COMMAND.to_owned(),
            description: "approve the plan under review and carry it out (in auto mode unless \
                          another is named)"
                .to_owned(),
            argument_hint: Some("[auto|ask|full]".to_owned()),
            source: PLAN.to_owned(),
        }]
    }

    async fn run(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>> {
        if name != APPROVE_COMMAND {
            return None;
        }
        Some(self.approve(session, arguments).await)
    }
}
