//! `keel exec --permission plan`: the plan is the answer. A script asking for a plan wants
//! the plan, not the model's closing remark, so the final text is the plan this turn froze
//! with `exit_plan_mode`, else the session's plan file as the model left it, else (no plan
//! written) the model's own answer. The turn is the run's last (a task's notice may start
//! one after the submitted turn), so the frozen plan comes from its events.

use std::path::Path;

use keel_protocol::SessionId;

/// The plan a plan-mode turn produced, if it produced one: the one it froze (its
/// `plan_ready` event), else the session's plan file.
pub fn answer(
    frozen: Option<String>,
    keel_home: Option<&Path>,
    session: &SessionId,
) -> Option<String> {
    frozen.or_else(|| keel_runtime::read_plan(keel_home?, session))
}
