//! Extension events, retries and background tasks as one-line notices, worded once for every
//! front end (the TUI's notice cells, ACP's `notice` updates, `keel exec`'s stderr notes):
//! context management, the runaway guard, terminal recovery, dropped reminders, MCP servers,
//! skills, custom commands, hooks, and a task's start and end. Unknown events still show, by
//! extension and kind.

use keel_protocol::{TaskInfo, TaskStatus};
use serde_json::Value;

/// How much a notice matters (the protocol's level).
pub use keel_protocol::NoticeLevel as Severity;

/// The notice an extension's event carries to every front end, when it is worth a line.
pub fn for_event(
    extension: &str,
    kind: &str,
    details: &Value,
) -> Option<keel_protocol::ExtensionNotice> {
    describe(extension, kind, details).map(|(level, text)| keel_protocol::ExtensionNotice {
        source: extension.to_owned(),
        level,
        text,
    })
}

/// A token count in a few characters: `950`, `12.3k`, `1.2M`.
pub fn short_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// A failed model request that will be tried again, as a notice.
pub fn retry(reason: &str, attempt: u32, max_retries: u32, delay_ms: u64) -> String {
    let seconds = (delay_ms as f64 / 1000.0).ceil() as u64;
    format!("{reason} · retrying in {seconds} s, attempt {attempt}/{max_retries}")
}

/// Characters of a task's description a notice shows (the rest is cut with `…`).
const TASK_DESCRIPTION_CHARS: usize = 60;

/// A task's notice when it has just started or ended, `None` for the changes front ends do
/// not announce (made, stopping, delivered, consumed). `previous` is the status the front end
/// last saw, so a task's repeated events (its delivery, its consumption) announce nothing.
pub fn task(previous: Option<TaskStatus>, task: &TaskInfo) -> Option<(Severity, String)> {
    if previous == Some(task.status) {
        return None;
    }
    let severity = match task.status {
        TaskStatus::Queued | TaskStatus::Stopping => return None,
        TaskStatus::Running | TaskStatus::Succeeded => Severity::Info,
        TaskStatus::Canceled | TaskStatus::Lost => Severity::Warn,
        TaskStatus::Failed => Severity::Error,
    };
    Some((severity, task_line(task)))
}

/// A task in one line: `task-… explore "map the parser" — failed: model_error: …`.
pub fn task_line(task: &TaskInfo) -> String {
    let words: Vec<&str> = task.description.split_whitespace().collect();
    let mut description = words.join(" ");
    if description.chars().count() > TASK_DESCRIPTION_CHARS {
        description = description
            .chars()
            .take(TASK_DESCRIPTION_CHARS - 1)
            .collect();
        description.push('…');
    }
    let mut line = format!(
        "{} {} \"{description}\" — {}",
        task.id, task.agent, task.status
    );
    if let Some(error) = task.error.as_deref().filter(|_| task.status.is_terminal()) {
        line.push_str(": ");
        line.push_str(&error.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    line
}

fn tokens(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    value
        .as_u64()
        .or_else(|| value.get("tokens").and_then(Value::as_u64))
}

fn text<'a>(details: &'a Value, key: &str) -> &'a str {
    details.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// MCP's events: servers failing and recovering, late joiners, deferred disclosure,
/// skipped tools, configuration warnings.
fn mcp(kind: &str, details: &Value) -> Option<(Severity, String)> {
    let server = text(details, "server");
    Some(match kind {
        "server" => match text(details, "text") {
            "is running again" => (
                Severity::Info,
                format!("MCP: server {server} is running again"),
            ),
            what if what.contains("restarting") => {
                (Severity::Warn, format!("MCP: server {server}: {what}"))
            }
            what => (
                Severity::Error,
                format!("MCP: server {server} failed: {what}"),
            ),
        },
        "joined" => {
            let servers: Vec<&str> = details
                .get("servers")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let (noun, their) = if servers.len() == 1 {
                ("server", "its")
            } else {
                ("servers", "their")
            };
            (
                Severity::Info,
                format!(
                    "MCP: {noun} {} joined; {their} tools are offered from now on",
                    servers.join(", ")
                ),
            )
        }
        // Reported when the decision changes; tools offered directly are the usual case
        // and need no line.
        "disclosure" if details.get("deferred").and_then(Value::as_bool) == Some(true) => {
            let count = |key| details.get(key).and_then(Value::as_u64).unwrap_or(0);
            let tools = count("mcp_tools");
            (
                Severity::Info,
                format!(
                    "MCP: {tools} tool{} held back behind tool_search (≈{} tokens > {})",
                    if tools == 1 { "" } else { "s" },
                    short_count(count("estimated_tokens")),
                    short_count(count("threshold_tokens"))
                ),
            )
        }
        "disclosure" => return None,
        "tool_skipped" => (
            Severity::Warn,
            format!(
                "MCP: skipped a tool of server {server}: {}",
                text(details, "reason")
            ),
        ),
        "warning" => (Severity::Warn, format!("MCP: {}", text(details, "text"))),
        "tool_clash" => {
            let list = |key: &str| -> Vec<String> {
                details
                    .get(key)
                    .and_then(Value::as_array)
                    .map(|v| {
                        v.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let tools: Vec<String> = list("servers")
                .iter()
                .zip(list("tools"))
                .map(|(server, tool)| format!("server {server}'s `{tool}`"))
                .collect();
            (
                Severity::Warn,
                format!(
                    "MCP: no tool is offered as {}: {} {} take that name",
                    text(details, "name"),
                    tools.join(" and "),
                    if tools.len() == 2 { "both" } else { "all" }
                ),
            )
        }
        other => (Severity::Info, format!("MCP: {}", other.replace('_', " "))),
    })
}

/// What a front end says when a plan is ready for review.
pub const PLAN_READY: &str =
    "plan ready for review: /approve-plan to carry it out (auto, or ask), or reply with feedback";

/// The notice an extension event shows, if any.
pub fn describe(extension: &str, kind: &str, details: &Value) -> Option<(Severity, String)> {
    let sizes = || match (tokens(details.get("before")), tokens(details.get("after"))) {
        (Some(before), Some(after)) => {
            format!(" ({} → {} tokens)", short_count(before), short_count(after))
        }
        _ => String::new(),
    };
    Some(match (extension, kind) {
        ("mcp", kind) => return mcp(kind, details),
        ("skills" | "commands", "problem") => (
            Severity::Warn,
            format!("{extension}: {}", text(details, "text")),
        ),
        ("hooks", "warning") => (Severity::Warn, format!("hook: {}", text(details, "text"))),
        ("hooks", "report") => (Severity::Info, format!("hook: {}", text(details, "text"))),
        ("host.lean", "lean_request") => {
            let count = |key| details.get(key).and_then(Value::as_u64).unwrap_or(0);
            let held = details
                .get("held")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect::<Vec<_>>())
                .unwrap_or_default();
            let mut line = format!(
                "the {}-token window leaves {} tokens for the system prompt and tools: \
                 descriptions are shortened",
                short_count(count("window")),
                short_count(count("fixed_limit"))
            );
            if !held.is_empty() {
                line.push_str(&format!(
                    "; {} held behind tool_search ({})",
                    held.len(),
                    held.join(", ")
                ));
            }
            (Severity::Info, line)
        }
        ("host.context", "archived") => {
            let outputs = details.get("outputs").and_then(Value::as_u64).unwrap_or(0);
            (
                Severity::Info,
                format!(
                    "archived {outputs} old tool output{}{}",
                    if outputs == 1 { "" } else { "s" },
                    sizes()
                ),
            )
        }
        ("host.context", "compaction_started") => (
            Severity::Info,
            format!("compacting the conversation ({})…", text(details, "reason")),
        ),
        ("host.context", "compaction_finished") => {
            (Severity::Info, format!("conversation compacted{}", sizes()))
        }
        ("host.context", "compaction_failed") => (
            Severity::Error,
            format!(
                "compaction failed ({}): {}",
                text(details, "code"),
                text(details, "error")
            ),
        ),
        ("host.context", "overflow_recovery") => (
            Severity::Warn,
            "the model rejected the request as too long; shrinking it and sending again".to_owned(),
        ),
        ("host.context", "archive_failed") => (
            Severity::Error,
            format!("cannot archive old outputs: {}", text(details, "error")),
        ),
        ("runaway-guard", kind) => (
            Severity::Warn,
            format!("runaway guard: {}", kind.replace('_', " ")),
        ),
        ("terminal-recovery", "retry") | ("terminal-recovery", "retried") => (
            Severity::Warn,
            "the model answered with nothing; asking it once more for a final answer".to_owned(),
        ),
        (extension, kind) if kind.contains("dropped") => (
            Severity::Warn,
            format!(
                "{extension}: {} {}",
                kind.replace('_', " "),
                text(details, "reminder")
            ),
        ),
        (extension, kind) => (
            Severity::Info,
            format!("{extension}: {}", kind.replace('_', " ")),
        ),
    })
}

/// A tool's name as people read it: an MCP server's tool (`mcp__server__tool`) as
/// "server · tool", any other by its own name.
pub fn tool_title(name: &str) -> String {
    match name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
    {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => {
            format!("{server} · {tool}")
        }
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_name_clash_names_every_server() {
        let (tone, text) = describe(
            "mcp",
            "tool_clash",
            &json!({"name": "mcp__a___deploy", "servers": ["a", "a_"], "tools": ["_deploy", "deploy"]}),
        )
        .unwrap();
        assert_eq!(tone, Severity::Warn);
        assert_eq!(
            text,
            "MCP: no tool is offered as mcp__a___deploy: server a's `_deploy` and server a_'s \
             `deploy` both take that name"
        );
    }

    #[test]
    fn context_events_read_as_sentences() {
        let (_, text) = describe(
            "host.context",
            "archived",
            &json!({"outputs": 3, "before": {"tokens": 120000, "bytes": 1}, "after": {"tokens": 40000, "bytes": 1}}),
        )
        .unwrap();
        assert_eq!(text, "archived 3 old tool outputs (120.0k → 40.0k tokens)");
        let (tone, _) =
            describe("host.context", "compaction_failed", &json!({"code": "x"})).unwrap();
        assert_eq!(tone, Severity::Error);
        let (_, text) = describe("other", "did_a_thing", &json!({})).unwrap();
        assert_eq!(text, "other: did a thing");
    }

    #[test]
    fn a_task_is_announced_when_it_starts_and_when_it_ends_once() {
        let mut info = TaskInfo::new(
            "task-1",
            "s-1".into(),
            format!("map the\nparser {}", "x".repeat(80)),
            "explore",
        );
        assert_eq!(task(None, &info), None, "made: nothing to say yet");
        info.status = TaskStatus::Running;
        let (severity, text) = task(Some(TaskStatus::Queued), &info).unwrap();
        assert_eq!(severity, Severity::Info);
        assert_eq!(
            text,
            format!(
                "task-1 explore \"map the parser {}…\" — running",
                "x".repeat(44)
            )
        );
        info.description = "map the parser".into();
        info.status = TaskStatus::Failed;
        info.error = Some("model_error:\n boom".into());
        assert_eq!(
            task(Some(TaskStatus::Running), &info),
            Some((
                Severity::Error,
                "task-1 explore \"map the parser\" — failed: model_error: boom".to_owned()
            ))
        );
        info.delivered_ms = Some(1);
        assert_eq!(
            task(Some(TaskStatus::Failed), &info),
            None,
            "delivered: said already"
        );
    }
}
