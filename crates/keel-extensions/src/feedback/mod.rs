//! The feedback bundle (DESIGN §6): what a user can hand a maintainer about a session
//! without handing over their code.
//!
//! The bundle walks the session and its child sessions (and their folders, leaving out
//! inspector folders) and keeps only summaries: counts of messages, tool calls, errors by
//! family, turn outcomes by code, usage, and for each file its size and line count. File
//! and session names become opaque ids; no message text, argument, output or path is
//! copied. A file that cannot be read is listed in the manifest instead of failing the
//! bundle. Tool names are kept only for keel's own tools (a model may call a tool by any
//! name, a file's among them).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use keel_protocol::{Message, SessionId, Usage};
use keel_store::{SessionRecord, Store, StoredEntry, TurnRecord};
use serde::Serialize;

mod command;

pub use command::FeedbackCommand;

/// Writes `bundle` as JSON to `path`, created 0600 and never through a link, with every
/// secret this process knows masked (the bundle keeps counts and ids only; what leaves
/// still goes through redaction, so a secret can never ride out in a name or a code).
pub fn write(bundle: &Bundle, path: &Path) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let secrets = keel_tools::redact::process_secrets();
    let mut value = serde_json::to_value(bundle).map_err(std::io::Error::other)?;
    keel_tools::redact::redact_json(&mut value, &secrets);
    let json = serde_json::to_vec_pretty(&value).map_err(std::io::Error::other)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(&json)?;
    file.sync_all()
}

/// What the preview and the bundle say about their content.
pub const NOTICE: &str = "This bundle holds counts and states only: no message text, no tool \
arguments or output, no file contents and no file or folder names (files and sessions appear \
as opaque ids).";

/// Folders a bundle never walks.
const SKIPPED_FOLDERS: &[&str] = &["inspector"];

/// Tool names a bundle may show; any other appears as `other`.
const KNOWN_TOOLS: &[&str] = &[
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "glob",
    "ls",
    "todowrite",
    "web_fetch",
    "task",
    "task_append",
    "task_query",
    "task_output",
    "task_stop",
    "tool_search",
    "skill",
];

/// The bundle.
#[derive(Debug, Clone, Serialize)]
pub struct Bundle {
    /// Format version.
    pub format: u32,
    /// keel's version.
    pub keel_version: &'static str,
    /// When it was made, ms since the epoch.
    pub created_ms: i64,
    /// What is and is not in it.
    pub notice: &'static str,
    /// The session first, then its child sessions.
    pub sessions: Vec<SessionSummary>,
    /// Files that could not be read.
    pub manifest: Manifest,
}

/// One session, summarised.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionSummary {
    /// Opaque id (`session-1`, …).
    pub id: String,
    /// The parent's opaque id, for a child session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The model, as `provider/model`.
    pub model: String,
    /// Created and last changed, ms since the epoch.
    pub created_ms: i64,
    /// Last change.
    pub updated_ms: i64,
    /// Head revision of its history.
    pub revision: u64,
    /// Messages by role (`user`, `assistant`, `tool_result`, `host`, `hidden_user`).
    pub messages: BTreeMap<String, u64>,
    /// Tool calls by tool.
    pub tools: BTreeMap<String, ToolStats>,
    /// Assistant stop reasons.
    pub stop_reasons: BTreeMap<String, u64>,
    /// Turns by outcome.
    pub turns: BTreeMap<String, u64>,
    /// Failed turns by error code.
    pub turn_errors: BTreeMap<String, u64>,
    /// Tokens over all answers.
    pub usage: UsageTotals,
    /// Its files, by opaque id.
    pub files: Vec<FileSummary>,
}

/// Calls of one tool.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ToolStats {
    /// How many.
    pub calls: u64,
    /// How many failed.
    pub errors: u64,
    /// Failures by family (an error class, an error code, or `other`).
    pub error_families: BTreeMap<String, u64>,
}

/// Tokens summed.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct UsageTotals {
    /// Prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens read from cache.
    pub cache_read: u64,
    /// Prompt tokens written to cache.
    pub cache_write: u64,
}

/// One file, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// Opaque id (`file-1`, …).
    pub id: String,
    /// What keel keeps it for: `artifact`, `report`, or `other`.
    pub kind: &'static str,
    /// Its size.
    pub bytes: u64,
    /// Its lines.
    pub lines: u64,
}

/// What could not be collected.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Manifest {
    /// Unreadable files, by opaque id, with the kind of failure.
    pub unreadable: Vec<Unreadable>,
    /// Folders left out (inspector folders).
    pub skipped_folders: u64,
}

/// A file that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    /// Opaque id.
    pub id: String,
    /// `permission_denied`, `not_found`, `not_a_file` (a link, pipe or socket) or
    /// `io_error`.
    pub error: &'static str,
}

/// Why a bundle could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FeedbackError {
    /// The session store failed.
    #[error(transparent)]
    Store(#[from] keel_store::StoreError),
}

impl FeedbackError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Store(error) => error.code(),
        }
    }
}

/// Collects the bundle of `root` and its child sessions; `sessions_dir` holds the session
/// folders.
pub async fn collect(
    store: &Store,
    root: &SessionId,
    sessions_dir: &Path,
) -> Result<Bundle, FeedbackError> {
    let mut bundle = Bundle {
        format: 1,
        keel_version: env!("CARGO_PKG_VERSION"),
        created_ms: keel_protocol::now_ms(),
        notice: NOTICE,
        sessions: Vec::new(),
        manifest: Manifest::default(),
    };
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    let mut files = 0usize;
    let mut queue: Vec<SessionRecord> = vec![store.session(root).await?];
    while let Some(record) = queue.pop() {
        let number = ids.len() + 1;
        let id = ids
            .entry(record.id.to_string())
            .or_insert_with(|| format!("session-{number}"))
            .clone();
        let history = store.history(&record.id).await?;
        let turns = store.turns(&record.id).await?;
        let mut summary = summarise(&record, &history, &turns);
        summary.id = id;
        summary.parent = record
            .parent_id
            .as_ref()
            .and_then(|p| ids.get(p.as_str()).cloned());
        walk(
            &sessions_dir.join(record.id.as_str()),
            &mut summary.files,
            &mut bundle.manifest,
            &mut files,
        );
        bundle.sessions.push(summary);
        let mut children = store.child_sessions(&record.id).await?;
        children.reverse();
        queue.extend(children);
    }
    Ok(bundle)
}

fn summarise(
    record: &SessionRecord,
    history: &[StoredEntry],
    turns: &[TurnRecord],
) -> SessionSummary {
    let mut summary = SessionSummary {
        model: record.model.clone(),
        created_ms: record.created_ms,
        updated_ms: record.updated_ms,
        revision: record.revision,
        ..SessionSummary::default()
    };
    let mut calls: BTreeMap<String, String> = BTreeMap::new();
    for entry in history {
        let role = match &entry.message {
            Message::User(user) if user.hidden => "hidden_user",
            other => other.role(),
        };
        *summary.messages.entry(role.into()).or_default() += 1;
        match &entry.message {
            Message::Assistant(answer) => {
                let stop = serde_json::to_value(answer.stop_reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "other".into());
                *summary.stop_reasons.entry(stop).or_default() += 1;
                add_usage(&mut summary.usage, &answer.usage);
                for call in answer.tool_calls() {
                    let name = shown_tool(&call.name);
                    calls.insert(call.id.to_string(), name.clone());
                    summary.tools.entry(name).or_default().calls += 1;
                }
            }
            Message::ToolResult(result) if result.is_error => {
                let name = calls
                    .get(result.tool_call_id.as_str())
                    .cloned()
                    .unwrap_or_else(|| shown_tool(&result.tool_name));
                let family = error_family(result);
                let stats = summary.tools.entry(name).or_default();
                stats.errors += 1;
                *stats.error_families.entry(family).or_default() += 1;
            }
            _ => {}
        }
    }
    for turn in turns {
        let status = serde_json::to_value(turn.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "other".into());
        *summary.turns.entry(status).or_default() += 1;
        if let Some(code) = &turn.error_code {
            *summary.turn_errors.entry(safe_code(code)).or_default() += 1;
        }
    }
    summary
}

fn add_usage(totals: &mut UsageTotals, usage: &Usage) {
    totals.input += usage.input;
    totals.output += usage.output;
    totals.cache_read += usage.cache_read;
    totals.cache_write += usage.cache_write;
}

/// A tool's name if it is one of keel's, else `mcp` or `other`.
fn shown_tool(name: &str) -> String {
    if KNOWN_TOOLS.contains(&name) {
        name.to_owned()
    } else if name.starts_with("mcp__") {
        "mcp".into()
    } else {
        "other".into()
    }
}

/// A code as the bundle may show it: lowercase words and `:`, else `other`.
fn safe_code(code: &str) -> String {
    let ok = !code.is_empty()
        && code.len() <= 64
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':');
    if ok { code.to_owned() } else { "other".into() }
}

/// The family of a failed result: its code, its error class, or `other`.
fn error_family(result: &keel_protocol::ToolResultMessage) -> String {
    if let Some(code) = result
        .details
        .as_ref()
        .and_then(|d| d.get("error_code").or_else(|| d.get("code")))
        .and_then(|c| c.as_str())
    {
        return format!("code:{}", safe_code(code));
    }
    let text = result.text();
    match crate::guard::fingerprint::error_class(&text) {
        Some(class) => class.to_owned(),
        None => "other".into(),
    }
}

/// Summarises every file under `dir` (inspector folders left out). A folder that is a
/// link is never entered: the bundle would describe whatever tree it leads to.
fn walk(dir: &Path, out: &mut Vec<FileSummary>, manifest: &mut Manifest, files: &mut usize) {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if meta.is_dir() {
            if SKIPPED_FOLDERS.contains(&name) {
                manifest.skipped_folders += 1;
            } else {
                walk(&path, out, manifest, files);
            }
            continue;
        }
        *files += 1;
        let id = format!("file-{files}");
        if !meta.is_file() {
            // A link, a pipe or a socket is never followed or read.
            manifest.unreadable.push(Unreadable {
                id,
                error: "not_a_file",
            });
            continue;
        }
        let kind = if path.components().any(|c| c.as_os_str() == "artifacts") {
            "artifact"
        } else if path.components().any(|c| c.as_os_str() == "report") {
            "report"
        } else {
            "other"
        };
        match count_lines(&path) {
            Ok(lines) => out.push(FileSummary {
                id,
                kind,
                bytes: meta.len(),
                lines,
            }),
            Err(error) => manifest.unreadable.push(Unreadable {
                id,
                error: match error.kind() {
                    std::io::ErrorKind::PermissionDenied => "permission_denied",
                    std::io::ErrorKind::NotFound => "not_found",
                    _ => "io_error",
                },
            }),
        }
    }
}

/// Counts the lines of the regular file at `path`, opened without following a link or
/// waiting on a pipe (something swapped in after the walk looked is refused).
fn count_lines(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

/// What `--preview` shows: the bundle's content in a few lines, and the notice.
pub fn preview(bundle: &Bundle) -> String {
    let mut out = String::from("keel feedback bundle\n");
    for session in &bundle.sessions {
        let messages: u64 = session.messages.values().sum();
        let calls: u64 = session.tools.values().map(|t| t.calls).sum();
        let errors: u64 = session.tools.values().map(|t| t.errors).sum();
        out.push_str(&format!(
            "- {}{}: {} messages, {} tool calls ({} failed), {} turns, {} files, model {}\n",
            session.id,
            session
                .parent
                .as_ref()
                .map(|p| format!(" (child of {p})"))
                .unwrap_or_default(),
            messages,
            calls,
            errors,
            session.turns.values().sum::<u64>(),
            session.files.len(),
            session.model
        ));
    }
    if !bundle.manifest.unreadable.is_empty() {
        out.push_str(&format!(
            "- {} files could not be read (listed in the manifest by id)\n",
            bundle.manifest.unreadable.len()
        ));
    }
    out.push('\n');
    out.push_str(NOTICE);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_keels_own_are_hidden() {
        assert_eq!(shown_tool("bash"), "bash");
        assert_eq!(shown_tool("mcp__github__create_issue"), "mcp");
        assert_eq!(shown_tool("read_/home/u/secret.txt"), "other");
        assert_eq!(
            safe_code("after_llm_rejected:terminal_empty"),
            "after_llm_rejected:terminal_empty"
        );
        assert_eq!(safe_code("/home/u/secret"), "other");
    }
}
