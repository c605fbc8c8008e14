//! `keel exec --permission plan`: the plan is the answer. A script asking for a plan wants
//! the plan, not the model's closing remark, so the final text is the plan this turn froze
//! with `exit_plan_mode`, else the session's plan file as the model left it, else (no plan
//! written) the model's own answer.

use std::path::Path;

use keel_extensions::plan::{EXIT_TOOL, files};
use keel_protocol::{Message, SessionId};
use keel_runtime::TurnReport;

/// The plan a plan-mode turn produced, if it produced one.
pub fn answer(turn: &TurnReport, keel_home: Option<&Path>, session: &SessionId) -> Option<String> {
    let frozen = turn
        .messages
        .iter()
        .rev()
        .find_map(|message| match &**message {
            Message::ToolResult(result) if result.tool_name == EXIT_TOOL && !result.is_error => {
                result
                    .details
                    .as_ref()?
                    .get("text")?
                    .as_str()
                    .map(str::to_owned)
            }
            _ => None,
        });
    frozen.or_else(|| {
        let home = keel_home?;
        files::read(&files::plan_path(home, session)).ok()
    })
}
