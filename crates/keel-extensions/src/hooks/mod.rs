//! User hooks compatible with Claude Code's: the same settings (`hooks` in `settings.json`,
//! or under `hooks:` in keel's `config.yaml`), the same JSON on stdin, the same exit codes
//! and JSON answers, so existing hook scripts work unchanged.
//!
//! This module is the engine only: [`run`] takes an event keel's way (keel's tool names and
//! arguments), runs the matching commands in parallel and returns one [`Outcome`] for the
//! caller to apply. Scripts see Claude Code's tool names and argument names ([`mapping`]);
//! an `updatedInput` comes back in keel's shape. The trade-off is fidelity over invention:
//! where Claude Code's behaviour is odd (unanchored regex matchers, plain stdout as context
//! only for two events) keel copies it, because a script's author tested against it.

pub mod input;
pub mod mapping;
pub mod outcome;
pub mod settings;
pub mod transcript;

mod exec;

use std::path::PathBuf;

pub use input::{
    Common, CompactTrigger, EndReason, EventData, PermissionMode, SessionSource, input_json,
};
pub use mapping::{claude_tool_name, from_claude_input, to_claude_input};
pub use outcome::{Decision, Outcome, Problem, Report};
pub use settings::{CommandHook, DEFAULT_TIMEOUT, HookEvent, HookSettings, merge};

/// The variables with the project's root that every hook gets.
const PROJECT_DIR_VARS: [&str; 2] = ["CLAUDE_PROJECT_DIR", "KEEL_PROJECT_DIR"];

/// Where hooks run besides their working folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    /// The hooks' whole environment, already cleaned by the caller (nothing else is
    /// inherited).
    pub vars: Vec<(String, String)>,
    /// The project's root, given as `CLAUDE_PROJECT_DIR` and `KEEL_PROJECT_DIR`.
    pub project_dir: PathBuf,
}

/// Runs the hooks of `settings` that match `event`, all at once, and combines their
/// answers; without matching hooks it returns at once with the default outcome. Dropping
/// the future kills every hook it started, with their process groups.
pub async fn run(
    settings: &HookSettings,
    event: &EventData,
    common: &Common,
    env: &Environment,
) -> Outcome {
    let kind = event.event();
    let hooks = settings.matching(kind, event.subject());
    if hooks.is_empty() {
        return Outcome::default();
    }
    let stdin = input_json(common, event).to_string();
    let project = env.project_dir.to_string_lossy();
    let mut vars: Vec<(String, String)> = env
        .vars
        .iter()
        .filter(|(key, _)| !PROJECT_DIR_VARS.contains(&key.as_str()))
        .cloned()
        .collect();
    vars.extend(PROJECT_DIR_VARS.map(|key| (key.to_owned(), project.clone().into_owned())));
    let runs = hooks.iter().map(|hook| {
        exec::execute(
            &hook.command,
            hook.timeout,
            stdin.as_bytes(),
            &common.cwd,
            &vars,
        )
    });
    let finished = futures::future::join_all(runs).await;
    let verdicts = hooks
        .iter()
        .zip(finished)
        .map(|(hook, end)| outcome::interpret(kind, hook, end))
        .collect();
    let mut outcome = outcome::combine(verdicts);
    if let EventData::PreToolUse { tool, input, .. } = event {
        outcome.updated_input = outcome
            .updated_input
            .map(|updated| from_claude_input(tool, input, &updated));
    }
    outcome
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
