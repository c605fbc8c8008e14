//! The `skill` tool: the model loads a skill by name before using it. Read-only, so it runs
//! beside other calls; it answers from the snapshot of skills it was built with, so what the
//! model was listed and what it can load never disagree within a session.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use keel_agent::{
    AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput, ToolRef,
};
use keel_protocol::{ContentBlock, ToolDefinition};
use keel_tools::args;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Skill, load_with_arguments};

/// The tool's name, as the listing tells the model to call it.
pub const TOOL_NAME: &str = "skill";

/// The arguments of `skill`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The skill's name, as listed
    name: String,
    /// Text for the skill, as a user would type it after /name (optional)
    #[serde(default, deserialize_with = "args::present")]
    arguments: Option<String>,
}

/// Most names an unknown-skill error lists.
const MAX_NAMES_SHOWN: usize = 100;

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: TOOL_NAME.into(),
    description: "Load a skill by name: its instructions, its folder and the files in it. \
        Call it before doing a task a listed skill covers, then follow the instructions."
        .into(),
    parameters: args::schema::<Args>(),
});

/// The `skill` tool over a snapshot of the discovered skills.
pub fn skill_tool(skills: Arc<[Skill]>) -> ToolRef {
    Arc::new(SkillTool { skills })
}

struct SkillTool {
    skills: Arc<[Skill]>,
}

#[async_trait]
impl AgentTool for SkillTool {
    fn nature(&self) -> ToolNature {
        // It reads only the skills keel found for the session, never a path the model names.
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let Args { name, arguments } = args::arguments(arguments)?;
        let extra = arguments.as_deref().unwrap_or("");
        // A model that read about `/name` may pass the slash.
        let wanted = name.trim().trim_start_matches('/');
        let Some(skill) = self.skills.iter().find(|skill| skill.name == wanted) else {
            return Err(ToolError::new(unknown(wanted, &self.skills)));
        };
        Ok(ToolOutput {
            content: vec![ContentBlock::text(load_with_arguments(skill, extra))],
            details: Some(json!({
                "name": skill.name,
                "dir": skill.dir.display().to_string(),
                "scope": skill.scope.as_str(),
            })),
            ..ToolOutput::default()
        })
    }
}

/// The error for a name no skill has, naming the ones there are.
fn unknown(name: &str, skills: &[Skill]) -> String {
    if skills.is_empty() {
        return format!("There is no skill `{name}`: no skills are installed.");
    }
    let shown: Vec<&str> = skills
        .iter()
        .take(MAX_NAMES_SHOWN)
        .map(|skill| skill.name.as_str())
        .collect();
    let more = skills.len().saturating_sub(MAX_NAMES_SHOWN);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "There is no skill `{name}`. The skills are: {}{tail}.",
        shown.join(", ")
    )
}
