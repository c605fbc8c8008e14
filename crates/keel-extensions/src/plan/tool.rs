//! `exit_plan_mode`: the model submits its plan for review. The plan file is checked
//! (there, UTF-8, opening with `## Summary`), frozen as a copy only keel writes, reported to
//! the front ends as `plan_ready`, and the turn ends (`terminate`) so the user answers next.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput, ToolRef};
use keel_protocol::{ContentBlock, SessionId, ToolDefinition};
use keel_runtime::extension::{ExtensionEvents, TurnScope};
use keel_tools::args;
use serde_json::json;

use super::EXIT_TOOL;
use super::files::{self, PlanError};

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: EXIT_TOOL.into(),
    description: "Submit the plan for the user's review once the plan file is complete. It \
                  checks that the plan's first section is `## Summary`, freezes the plan and \
                  ends your turn: the user approves it or answers with feedback. Call it on \
                  its own, not together with other tools."
        .into(),
    parameters: args::schema::<NoArgs>(),
});

/// `exit_plan_mode` takes nothing: the plan is the plan file.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// The tool for `scope`'s turn, whose plan file is `plan` (as the model names it).
pub(super) fn exit_plan_mode(scope: &TurnScope, keel_home: PathBuf, plan: PathBuf) -> ToolRef {
    // Read where the gate and the file tools let the model write: keel's home resolved.
    let target = scope
        .host
        .as_ref()
        .and_then(|services| services.env.plan_target())
        .unwrap_or_else(|| files::plan_path(&keel_home, &scope.session_id));
    Arc::new(ExitPlanMode {
        keel_home,
        session: scope.session_id.clone(),
        plan,
        target,
        events: scope.events.clone(),
    })
}

struct ExitPlanMode {
    keel_home: PathBuf,
    session: SessionId,
    /// The plan file as the model was told it.
    plan: PathBuf,
    /// The same, resolved.
    target: PathBuf,
    events: ExtensionEvents,
}

impl ExitPlanMode {
    /// The plan's text and its frozen copy, or what the model must fix.
    fn freeze(&self) -> Result<(String, PathBuf), ToolError> {
        let shown = self.plan.display();
        let text = files::read(&self.target).map_err(|error| {
            ToolError::new(match error {
                PlanError::Missing(_) => format!(
                    "There is no plan file at {shown} yet. Write the plan there with `write` \
                     (its first section `## Summary`), then call {EXIT_TOOL} again."
                ),
                other => {
                    format!("{other}. Rewrite the plan file {shown}, then call {EXIT_TOOL} again.")
                }
            })
        })?;
        if let Some(problem) = files::summary_problem(&text) {
            return Err(ToolError::new(format!(
                "The plan file {shown} does not start with a `## Summary` section: {problem}. \
                 Make `## Summary` its first section, then call {EXIT_TOOL} again."
            )));
        }
        let frozen = files::freeze(&self.keel_home, &self.session, &text)
            .map_err(|e| ToolError::new(e.to_string()))?;
        Ok((text, frozen))
    }
}

#[async_trait]
impl AgentTool for ExitPlanMode {
    fn nature(&self) -> ToolNature {
        // It asks the user to approve the plan; leaving plan mode is the user's answer.
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let NoArgs {} = args::arguments(arguments)?;
        let (text, frozen) = self.freeze()?;
        let details = json!({"path": self.plan, "frozen_path": frozen, "text": text});
        self.events.plan_ready(keel_protocol::PlanInfo {
            text: text.clone(),
            path: self.plan.display().to_string(),
            frozen_path: frozen.display().to_string(),
        });
        Ok(ToolOutput {
            content: vec![ContentBlock::text(format!(
                "The plan is frozen in {} and shown to the user for review. Your turn ends \
                 here: the user approves the plan or answers with feedback.",
                frozen.display()
            ))],
            details: Some(details),
            terminate: true,
            ..ToolOutput::default()
        })
    }
}
