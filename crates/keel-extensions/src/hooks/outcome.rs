//! What hooks decided: each finished command read as Claude Code reads it (exit code, then
//! JSON or plain stdout), and the results of all an event's hooks combined.
//!
//! Reading is forgiving in the way Claude Code is: a hook that fails, hangs or prints bad
//! JSON is reported and otherwise ignored, never taken as a decision. Combining is
//! strictest-wins: any deny or block beats an ask, which beats an allow, so adding a hook
//! can only make keel more careful.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::exec::{Finished, Status};
use super::settings::{CommandHook, HookEvent};

/// Exit code with which a hook blocks (Claude Code's convention).
const BLOCKING_EXIT: i32 = 2;

/// A PreToolUse hook's verdict on a tool call, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// Run it without asking.
    Allow,
    /// Ask the user, whatever the rules say.
    Ask,
    /// Do not run it.
    Deny,
}

/// What went wrong with one hook (or what keel ignored in its answer).
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// It ran past its timeout and was killed with its process group.
    TimedOut(Duration),
    /// It could not be started or waited for.
    NotStarted(String),
    /// It exited with a code other than 0 and 2 (or a signal ended it, no code); the first
    /// line of its stderr.
    Failed {
        /// The exit code, if it exited.
        code: Option<i32>,
        /// The first line of stderr.
        stderr: String,
    },
    /// Its stdout began like JSON but is not valid hook output.
    BadJson(String),
    /// Its stdout or stderr was longer than keel keeps.
    Truncated,
    /// Part of its answer was not used, and why.
    Ignored(String),
}

/// One hook's problem, for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The hook's command, as in the settings.
    pub command: String,
    /// What happened.
    pub problem: Problem,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let command = &self.command;
        match &self.problem {
            Problem::TimedOut(after) => write!(
                f,
                "hook `{command}` timed out after {} s and was stopped",
                after.as_secs_f64()
            ),
            Problem::NotStarted(why) => write!(f, "hook `{command}` did not run: {why}"),
            Problem::Failed { code, stderr } => {
                match code {
                    Some(code) => write!(f, "hook `{command}` failed with exit code {code}")?,
                    None => write!(f, "hook `{command}` was killed by a signal")?,
                }
                if stderr.is_empty() {
                    Ok(())
                } else {
                    write!(f, ": {stderr}")
                }
            }
            Problem::BadJson(why) => write!(f, "hook `{command}` printed invalid JSON: {why}"),
            Problem::Truncated => write!(f, "hook `{command}` printed more than keel keeps"),
            Problem::Ignored(what) => write!(f, "hook `{command}`: {what}"),
        }
    }
}

/// What an event's hooks decided together; the default is "carry on".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The event's action must not go ahead, with the reason: PreToolUse, the call is denied
    /// (reason for the model); PostToolUse, the reason goes to the model; UserPromptSubmit,
    /// the prompt is refused (reason for the user); Stop, the agent goes on (reason for the
    /// model). Never set for other events.
    pub block: Option<String>,
    /// PreToolUse only: the strictest permission decision and its reasons (a deny is also
    /// in `block`).
    pub permission: Option<(Decision, String)>,
    /// PreToolUse only: the arguments to run the call with instead, in keel's shape, from
    /// the last hook that gave some; none when the call is denied.
    pub updated_input: Option<Value>,
    /// Context for the model, in hook order.
    pub context: Vec<String>,
    /// Messages for the user (`systemMessage`, and the stderr of exit 2 on events that
    /// cannot block), in hook order.
    pub system_messages: Vec<String>,
    /// A hook asked to stop the session's work (`continue: false`): its `stopReason`, for
    /// the user.
    pub stop: Option<String>,
    /// Hooks that failed, hung or answered badly, in hook order.
    pub reports: Vec<Report>,
}

/// One hook's answer.
#[derive(Debug, Default)]
pub(super) struct Verdict {
    command: String,
    permission: Option<(Decision, String)>,
    block: Option<String>,
    updated_input: Option<Value>,
    context: Option<String>,
    system_messages: Vec<String>,
    stop: Option<String>,
    reports: Vec<Report>,
}

/// Claude Code's JSON answer; unknown fields (`suppressOutput`, newer ones) are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HookOutput {
    #[serde(rename = "continue")]
    proceed: Option<bool>,
    stop_reason: Option<String>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<SpecificOutput>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecificOutput {
    hook_event_name: Option<String>,
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Value>,
    additional_context: Option<String>,
}

/// How Claude Code reads `finished`, the end of `hook` on `event`.
pub(super) fn interpret(event: HookEvent, hook: &CommandHook, finished: Finished) -> Verdict {
    let command = hook.command.as_str();
    let mut verdict = Verdict {
        command: command.to_owned(),
        ..Verdict::default()
    };
    let report = |problem| Report {
        command: command.to_owned(),
        problem,
    };
    if finished.truncated {
        verdict.reports.push(report(Problem::Truncated));
    }
    match finished.status {
        Status::Exited(0) => succeeded(event, command, &finished.stdout, &mut verdict),
        Status::Exited(BLOCKING_EXIT) => {
            let reason = match finished.stderr.trim() {
                "" => format!("blocked by hook `{command}`"),
                stderr => stderr.to_owned(),
            };
            blocked(event, reason, &mut verdict);
        }
        Status::Exited(code) => verdict.reports.push(report(Problem::Failed {
            code: Some(code),
            stderr: first_line(&finished.stderr),
        })),
        Status::Signalled(_) => verdict.reports.push(report(Problem::Failed {
            code: None,
            stderr: first_line(&finished.stderr),
        })),
        Status::TimedOut => verdict
            .reports
            .push(report(Problem::TimedOut(hook.timeout))),
        Status::NotStarted(why) => verdict.reports.push(report(Problem::NotStarted(why))),
    }
    verdict
}

/// A blocking answer (exit 2 or `decision: "block"`) on `event`.
fn blocked(event: HookEvent, reason: String, verdict: &mut Verdict) {
    match event {
        HookEvent::PreToolUse => verdict.permission = Some((Decision::Deny, reason)),
        HookEvent::PostToolUse | HookEvent::UserPromptSubmit | HookEvent::Stop => {
            verdict.block = Some(reason);
        }
        // These cannot block: Claude Code shows the reason to the user only.
        HookEvent::SessionStart
        | HookEvent::SessionEnd
        | HookEvent::PreCompact
        | HookEvent::Notification => verdict.system_messages.push(reason),
    }
}

/// Exit 0: JSON when stdout looks like it, plain text otherwise.
fn succeeded(event: HookEvent, command: &str, stdout: &str, verdict: &mut Verdict) {
    let text = stdout.trim();
    if !text.starts_with('{') {
        // Plain text is context only where Claude Code makes it so; elsewhere it is a log.
        let adds_context = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
        if adds_context && !text.is_empty() {
            verdict.context = Some(text.to_owned());
        }
        return;
    }
    let ignored = |what: String| Report {
        command: command.to_owned(),
        problem: Problem::Ignored(what),
    };
    let output: HookOutput = match serde_json::from_str(text) {
        Ok(output) => output,
        Err(error) => {
            verdict.reports.push(Report {
                command: command.to_owned(),
                problem: Problem::BadJson(error.to_string()),
            });
            return;
        }
    };
    if output.proceed == Some(false) {
        verdict.stop = Some(output.stop_reason.unwrap_or_default());
    }
    verdict.system_messages.extend(output.system_message);
    let reason = || {
        output
            .reason
            .clone()
            .unwrap_or_else(|| format!("blocked by hook `{command}`"))
    };
    match (output.decision.as_deref(), event) {
        (None, _) => {}
        (Some("block"), _) => blocked(event, reason(), verdict),
        // Claude Code's older spelling of a PreToolUse allow.
        (Some("approve"), HookEvent::PreToolUse) => {
            verdict.permission = Some((Decision::Allow, output.reason.clone().unwrap_or_default()));
        }
        (Some("approve"), _) => {}
        (Some(other), _) => verdict
            .reports
            .push(ignored(format!("unknown decision `{other}` ignored"))),
    }
    let Some(specific) = output.hook_specific_output else {
        return;
    };
    if let Some(name) = &specific.hook_event_name
        && name != event.name()
    {
        verdict.reports.push(ignored(format!(
            "hookSpecificOutput for `{name}` ignored on {}",
            event.name()
        )));
        return;
    }
    if let Some(decision) = specific.permission_decision {
        let decision = match decision.as_str() {
            "allow" => Some(Decision::Allow),
            "ask" => Some(Decision::Ask),
            "deny" => Some(Decision::Deny),
            _ => None,
        };
        match (decision, event) {
            // The newer field wins over a `decision` in the same answer, as in Claude Code.
            (Some(decision), HookEvent::PreToolUse) => {
                let mut reason = specific.permission_decision_reason.unwrap_or_default();
                // The model is owed a reason for a refusal.
                if decision == Decision::Deny && reason.trim().is_empty() {
                    reason = format!("denied by hook `{command}`");
                }
                verdict.permission = Some((decision, reason));
            }
            (Some(_), _) => verdict.reports.push(ignored(format!(
                "permissionDecision ignored on {}",
                event.name()
            ))),
            (None, _) => verdict
                .reports
                .push(ignored("unknown permissionDecision ignored".into())),
        }
    }
    match (specific.updated_input, event) {
        (None, _) => {}
        (Some(input @ Value::Object(_)), HookEvent::PreToolUse) => {
            verdict.updated_input = Some(input);
        }
        (Some(_), HookEvent::PreToolUse) => verdict
            .reports
            .push(ignored("updatedInput is not an object; ignored".into())),
        (Some(_), _) => verdict
            .reports
            .push(ignored(format!("updatedInput ignored on {}", event.name()))),
    }
    if let Some(context) = specific.additional_context.filter(|c| !c.trim().is_empty()) {
        verdict.context = Some(context);
    }
}

/// The first line of `text`, trimmed.
fn first_line(text: &str) -> String {
    text.trim().lines().next().unwrap_or_default().to_owned()
}

/// The answers of an event's hooks, in hook order, as one outcome.
pub(super) fn combine(verdicts: Vec<Verdict>) -> Outcome {
    let mut outcome = Outcome::default();
    let mut blocks = Vec::new();
    let mut decisions: Vec<(Decision, String)> = Vec::new();
    let mut stops = Vec::new();
    let mut inputs = Vec::new();
    for verdict in verdicts {
        blocks.extend(verdict.block);
        decisions.extend(verdict.permission);
        stops.extend(verdict.stop);
        if let Some(input) = verdict.updated_input {
            inputs.push((verdict.command, input));
        }
        outcome.context.extend(verdict.context);
        outcome.system_messages.extend(verdict.system_messages);
        outcome.reports.extend(verdict.reports);
    }
    if let Some(strictest) = decisions.iter().map(|(d, _)| *d).max() {
        let reasons = decisions
            .iter()
            .filter(|(d, r)| *d == strictest && !r.is_empty())
            .map(|(_, r)| r.as_str());
        let reason = join(reasons);
        if strictest == Decision::Deny {
            blocks.insert(0, reason.clone());
        }
        outcome.permission = Some((strictest, reason));
    }
    if !blocks.is_empty() {
        outcome.block = Some(join(blocks.iter().map(String::as_str)));
    }
    if !stops.is_empty() {
        outcome.stop = Some(join(stops.iter().map(String::as_str)));
    }
    let rewrites = inputs.len();
    if let Some((command, input)) = inputs.pop() {
        if rewrites > 1 {
            outcome.reports.push(Report {
                command,
                problem: Problem::Ignored(format!(
                    "{rewrites} hooks gave updatedInput; only this last one's is used"
                )),
            });
        }
        // A denied call does not run, so a rewrite of it means nothing.
        if outcome.permission.as_ref().map(|(d, _)| *d) != Some(Decision::Deny) {
            outcome.updated_input = Some(input);
        }
    }
    outcome
}

/// Non-empty `parts` joined by newlines.
fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    parts
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
