//! How a keel tool call looks in an editor: its ACP kind, a one-line title, the files it
//! touches and, once it ended, its content (edits as diffs, everything else as text).
//! Pure functions of the call's name, arguments, result and details, so a live turn and a
//! replayed one show the same thing.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, Diff, PlanEntry, PlanEntryPriority, PlanEntryStatus, TextContent, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolKind,
};
use serde_json::Value;

/// Most characters of a tool's output put into the tool call's content; the model's copy
/// is not affected, and the editor can open the file or rerun the command for the rest.
const MAX_SHOWN_OUTPUT: usize = 64 * 1024;

/// The ACP kind of a keel tool.
pub fn kind(tool: &str) -> ToolKind {
    match tool {
        "read" => ToolKind::Read,
        "write" | "edit" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "grep" | "glob" | "ls" => ToolKind::Search,
        "web_fetch" => ToolKind::Fetch,
        "todowrite" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

fn text<'a>(arguments: &'a Value, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(Value::as_str)
}

/// The first line of `command`, cut to a readable length.
fn one_line(command: &str) -> String {
    let first = command.lines().next().unwrap_or_default();
    let mut shown: String = first.chars().take(120).collect();
    if shown.len() < first.len() || command.lines().nth(1).is_some() {
        shown.push('…');
    }
    shown
}

/// A one-line title for a call, from its arguments.
pub fn title(tool: &str, arguments: &Value) -> String {
    let path = text(arguments, "path");
    match (tool, path) {
        ("read", Some(path)) => match arguments.get("offset").and_then(Value::as_u64) {
            Some(offset) => format!("Read {path}:{offset}"),
            None => format!("Read {path}"),
        },
        ("write", Some(path)) => format!("Write {path}"),
        ("edit", Some(path)) => format!("Edit {path}"),
        ("ls", path) => format!("List {}", path.unwrap_or(".")),
        ("bash", _) => match text(arguments, "command") {
            Some(command) => format!("Run `{}`", one_line(command)),
            None => "Run a command".into(),
        },
        ("grep", _) => match text(arguments, "pattern") {
            Some(pattern) => format!("Search `{}`", one_line(pattern)),
            None => "Search".into(),
        },
        ("glob", _) => match text(arguments, "pattern") {
            Some(pattern) => format!("Find `{}`", one_line(pattern)),
            None => "Find files".into(),
        },
        ("web_fetch", _) => match text(arguments, "url") {
            Some(url) => format!("Fetch {url}"),
            None => "Fetch a page".into(),
        },
        ("todowrite", _) => "Update the plan".into(),
        (other, _) => keel_runtime::notice::tool_title(other),
    }
}

/// The files a call touches, with the line it starts at where one is known.
pub fn locations(tool: &str, arguments: &Value, cwd: &Path) -> Vec<ToolCallLocation> {
    let Some(path) = text(arguments, "path") else {
        return Vec::new();
    };
    let absolute = absolute(path, cwd);
    let location = ToolCallLocation::new(absolute);
    match (tool, arguments.get("offset").and_then(Value::as_u64)) {
        ("read", Some(line)) => vec![location.line(u32::try_from(line).unwrap_or(u32::MAX))],
        _ => vec![location],
    }
}

fn absolute(path: &str, cwd: &Path) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// What a call would change, from its preview: the editor's own diff when the whole texts
/// came with it, else the unified diff as text; and where it changes.
pub fn preview(
    preview: &keel_protocol::ToolPreview,
) -> (Vec<ToolCallContent>, Vec<ToolCallLocation>) {
    let keel_protocol::ToolPreview::File {
        path,
        created,
        diff,
        truncated,
        old_text,
        new_text,
    } = preview;
    let content = match (old_text, new_text) {
        (Some(old), Some(new)) => {
            let diff = Diff::new(PathBuf::from(path), new.clone());
            let diff = if *created {
                diff
            } else {
                diff.old_text(old.clone())
            };
            ToolCallContent::Diff(diff)
        }
        _ => {
            let cut = if *truncated { "\n… (cut)" } else { "" };
            ToolCallContent::from(ContentBlock::Text(TextContent::new(format!(
                "```diff\n{}{cut}\n```",
                diff.replace("```", "` ` `")
            ))))
        }
    };
    (
        vec![content],
        vec![ToolCallLocation::new(PathBuf::from(path))],
    )
}

/// What an ended call shows: the edit's changes as diffs, a created or rewritten file as a
/// diff, anything else as its result text.
pub fn content(
    tool: &str,
    arguments: &Value,
    result: &str,
    failed: bool,
    cwd: &Path,
) -> Vec<ToolCallContent> {
    if !failed {
        match (tool, text(arguments, "path")) {
            ("edit", Some(path)) => {
                let path = absolute(path, cwd);
                let diffs: Vec<ToolCallContent> = arguments
                    .get("edits")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|edit| {
                        let old = edit.get("old_string")?.as_str()?;
                        let new = edit.get("new_string")?.as_str()?;
                        Some(ToolCallContent::Diff(
                            Diff::new(path.clone(), new).old_text(old.to_owned()),
                        ))
                    })
                    .collect();
                if !diffs.is_empty() {
                    return diffs;
                }
            }
            ("write", Some(path)) => {
                if let Some(new) = text(arguments, "content") {
                    // The old text of a rewritten file is not kept; a created file has none.
                    return vec![ToolCallContent::Diff(Diff::new(absolute(path, cwd), new))];
                }
            }
            _ => {}
        }
    }
    if result.is_empty() {
        return Vec::new();
    }
    let shown = match result.char_indices().nth(MAX_SHOWN_OUTPUT) {
        Some((cut, _)) => format!("{}\n… (output cut for display)", &result[..cut]),
        None => result.to_owned(),
    };
    vec![ToolCallContent::from(ContentBlock::Text(TextContent::new(
        shown,
    )))]
}

/// How much of a running call's newest output its content shows.
const LIVE_OUTPUT_LINES: usize = 40;
const LIVE_OUTPUT_BYTES: usize = 8 * 1024;

/// The newest part of a running call's output an editor shows: its last
/// [`LIVE_OUTPUT_LINES`] lines, at most [`LIVE_OUTPUT_BYTES`].
pub fn output_tail(output: &str) -> &str {
    let mut start = output.len().saturating_sub(LIVE_OUTPUT_BYTES);
    while !output.is_char_boundary(start) {
        start += 1;
    }
    let recent = &output[start..];
    let body = recent.trim_end_matches('\n');
    match body.rmatch_indices('\n').nth(LIVE_OUTPUT_LINES - 1) {
        Some((at, _)) => &recent[at + 1..],
        None => recent,
    }
}

/// What an ended call reported, for `rawOutput`: its text and its details.
pub fn raw_output(result: &str, details: Option<&Value>) -> Value {
    match details {
        Some(details) => serde_json::json!({"output": result, "details": details}),
        None => serde_json::json!({"output": result}),
    }
}

/// An ended call in full, as a `tool_call` (a replayed one, or one that ended without
/// having started).
pub fn ended_call(
    id: &str,
    tool: &str,
    arguments: &Value,
    result: &str,
    details: Option<&Value>,
    failed: bool,
    cwd: &Path,
) -> ToolCall {
    ToolCall::new(id.to_owned(), title(tool, arguments))
        .kind(kind(tool))
        .status(if failed {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        })
        .content(content(tool, arguments, result, failed, cwd))
        .locations(locations(tool, arguments, cwd))
        .raw_input(arguments.clone())
        .raw_output(raw_output(result, details))
}

/// The plan a `todowrite` call set, from its details (or its arguments when it failed to
/// report them).
pub fn plan(details: Option<&Value>, arguments: &Value) -> Option<Vec<PlanEntry>> {
    let todos = details
        .and_then(|d| d.get("todos"))
        .or_else(|| arguments.get("todos"))?
        .as_array()?;
    Some(
        todos
            .iter()
            .filter_map(|todo| {
                let content = todo.get("content")?.as_str()?;
                let status = match todo.get("status").and_then(Value::as_str) {
                    Some("completed") => PlanEntryStatus::Completed,
                    Some("in_progress") => PlanEntryStatus::InProgress,
                    _ => PlanEntryStatus::Pending,
                };
                Some(PlanEntry::new(content, PlanEntryPriority::Medium, status))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn titles_name_the_target() {
        assert_eq!(
            title("read", &json!({"path": "a.rs", "offset": 9})),
            "Read a.rs:9"
        );
        assert_eq!(
            title("bash", &json!({"command": "cargo test\necho done"})),
            "Run `cargo test…`"
        );
        assert_eq!(
            title("grep", &json!({"pattern": "fn main"})),
            "Search `fn main`"
        );
        assert_eq!(title("mystery", &json!({})), "mystery");
        assert_eq!(kind("bash"), ToolKind::Execute);
        assert_eq!(kind("edit"), ToolKind::Edit);
        assert_eq!(kind("mcp__x__y"), ToolKind::Other);
    }

    #[test]
    fn locations_are_absolute_with_the_line() {
        let cwd = Path::new("/work");
        let found = locations("read", &json!({"path": "src/a.rs", "offset": 12}), cwd);
        assert_eq!(
            found,
            vec![ToolCallLocation::new("/work/src/a.rs").line(12)]
        );
        assert!(locations("bash", &json!({"command": "ls"}), cwd).is_empty());
    }

    #[test]
    fn edits_become_diffs_and_failures_text() {
        let cwd = Path::new("/w");
        let args = json!({"path": "a.txt", "edits": [{"old_string": "x", "new_string": "y"}]});
        let shown = content("edit", &args, "Edited", false, cwd);
        assert_eq!(
            shown,
            vec![ToolCallContent::Diff(
                Diff::new("/w/a.txt", "y").old_text("x".to_owned())
            )]
        );
        let failed = content("edit", &args, "old_string was not found", true, cwd);
        assert!(matches!(&failed[..], [ToolCallContent::Content(_)]));
        let created = content(
            "write",
            &json!({"path": "/abs/n.txt", "content": "hi\n"}),
            "Created",
            false,
            cwd,
        );
        assert_eq!(
            created,
            vec![ToolCallContent::Diff(Diff::new("/abs/n.txt", "hi\n"))]
        );
    }

    #[test]
    fn todos_become_a_plan() {
        let details = json!({"todos": [
            {"content": "read", "status": "completed"},
            {"content": "fix", "status": "in_progress"},
            {"content": "test", "status": "pending"}
        ]});
        let plan = plan(Some(&details), &json!({})).unwrap();
        let statuses: Vec<PlanEntryStatus> = plan.iter().map(|e| e.status.clone()).collect();
        assert_eq!(
            statuses,
            vec![
                PlanEntryStatus::Completed,
                PlanEntryStatus::InProgress,
                PlanEntryStatus::Pending
            ]
        );
    }
}
