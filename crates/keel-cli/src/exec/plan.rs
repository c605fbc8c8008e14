//! `keel exec --permission plan`: the plan is the answer. A script asking for a plan wants
//! the plan, not the model's closing remark, so the final text is the plan this turn froze
//! with `exit_plan_mode`, else the session's plan file as the model left it, else (no plan
//! written) the model's own answer. The turn is the run's last (a task's notice may start
//! one after the submitted turn), so the frozen plan comes from its report or its events.

use std::path::Path;
use std::sync::Arc;

use keel_extensions::plan::{EXIT_TOOL, files};
use keel_protocol::{Message, SessionId};

/// The plan a turn froze with `exit_plan_mode`, from its messages.
pub fn frozen(messages: &[Arc<Message>]) -> Option<String> {
    messages.iter().rev().find_map(|message| match &**message {
        Message::ToolResult(result) if result.tool_name == EXIT_TOOL && !result.is_error => {
            frozen_in(result.details.as_ref()?)
        }
        _ => None,
    })
}

/// The plan an `exit_plan_mode` call's details carry.
pub fn frozen_in(details: &serde_json::Value) -> Option<String> {
    details.get("text")?.as_str().map(str::to_owned)
}

/// The plan a plan-mode turn produced, if it produced one: the one it froze, else the
/// session's plan file.
pub fn answer(
    frozen: Option<String>,
    keel_home: Option<&Path>,
    session: &SessionId,
) -> Option<String> {
    frozen.or_else(|| {
        let home = keel_home?;
        files::read(&files::plan_path(home, session)).ok()
    })
}
