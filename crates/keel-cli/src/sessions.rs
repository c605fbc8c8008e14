//! `keel sessions`: list, show, fork, rewind, export and delete stored sessions.
//!
//! Every command takes a session id or a unique prefix of it; `--json` prints one JSON value
//! for scripts, otherwise the output is for people. `list` shows a task's child session under
//! the session that started it, with the task's role and status, never as a row of its own.

use std::io::Write as _;

use anyhow::Context as _;
use keel_protocol::{Message, TaskInfo, ops};
use keel_runtime::ContractExt as _;
use keel_store::{SessionRecord, StoredEntry};
use serde_json::json;

use crate::errors::runtime_error;
use keel_tools::redact;

/// Sessions listed when `--limit` is not given.
const DEFAULT_LIST_LIMIT: usize = 50;

/// Arguments of `keel sessions`.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SessionsCommand {
    /// Stored sessions of this folder (or every folder with `--all`), newest first, each
    /// with its tasks' sessions under it.
    List {
        /// Sessions of this working folder instead of the current one.
        #[arg(long, value_name = "DIR", conflicts_with = "all")]
        cwd: Option<std::path::PathBuf>,
        /// Sessions of every folder.
        #[arg(long)]
        all: bool,
        /// At most this many sessions (not counting their tasks' sessions).
        #[arg(long, value_name = "N", default_value_t = DEFAULT_LIST_LIMIT)]
        limit: usize,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// A session's messages, each after the revision that added it.
    Show {
        /// Session id or unique prefix.
        id: String,
        /// Print the session and its messages as JSON.
        #[arg(long)]
        json: bool,
        /// Also show the notes keel added for the model (reminders, attached files).
        #[arg(long)]
        raw: bool,
    },
    /// Copy a session's history (at a revision, default the latest) into a new session.
    Fork {
        /// Session id or unique prefix.
        id: String,
        /// Revision to copy.
        #[arg(long, value_name = "REV")]
        at: Option<u64>,
        /// Print the new session as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set a session's history back to an earlier revision (undoable: rewind to the old head).
    Rewind {
        /// Session id or unique prefix.
        id: String,
        /// The revision to go back to.
        #[arg(long, value_name = "REV")]
        to: u64,
        /// Print the commit receipt as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a session as Markdown or JSON.
    Export {
        /// Session id or unique prefix.
        id: String,
        /// Output format.
        #[arg(long, value_enum, default_value = "markdown")]
        format: ExportFormat,
    },
    /// Print the request body a stored step sent to the model (rebuilt from the session
    /// report and the history), secrets masked as in `export`.
    ReplayRequest {
        /// Session id or unique prefix.
        id: String,
        /// The step (the session's model request number, from 1); default the last.
        #[arg(long, value_name = "N")]
        step: Option<u64>,
        /// Print it byte for byte, secrets included (to compare with what a provider got).
        #[arg(long)]
        exact: bool,
    },
    /// Compact a session's history into a checkpoint summary (undoable: rewind to the
    /// revision before it). Uses the session's model unless --model says otherwise.
    Compact {
        /// Session id or unique prefix.
        id: String,
        /// What the summary should keep or stress.
        #[arg(long, value_name = "TEXT")]
        instructions: Option<String>,
        /// Model as provider/model (default: the session's).
        #[arg(long)]
        model: Option<String>,
        /// Send the summary request to this base URL instead of the provider's.
        #[arg(long, value_name = "URL", value_parser = crate::exec::parse_base_url)]
        base_url: Option<String>,
        /// Print the revisions as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session, its history and its folder (artifacts, report).
    Delete {
        /// Session id or unique prefix.
        id: String,
        /// Print `{"deleted": ID}`.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// For people.
    Markdown,
    /// Everything, for tools.
    Json,
}

/// Runs `keel sessions …`.
pub async fn run(args: SessionsArgs) -> anyhow::Result<()> {
    let store = keel_runtime::storage::open(keel_store::OpenOptions {
        durability: keel_store::Durability::Normal,
        execution: keel_store::Execution::InPlace,
    })
    .await
    .map_err(runtime_error)?;
    let mut out = String::new();
    match args.command {
        SessionsCommand::List {
            cwd,
            all,
            limit,
            json,
        } => {
            let folder = if all {
                None
            } else {
                let dir = match cwd {
                    Some(dir) => dir,
                    None => std::env::current_dir().context("cannot read the current folder")?,
                };
                Some(
                    dir.canonicalize()
                        .with_context(|| format!("cannot use --cwd {}", dir.display()))?
                        .display()
                        .to_string(),
                )
            };
            let sessions = list_tree(&store, folder.clone(), limit).await?;
            if json {
                let rows: Vec<_> = sessions.iter().map(listed_json).collect();
                out = serde_json::to_string_pretty(&rows)?;
            } else {
                out = list_text(&sessions, folder.as_deref(), limit);
            }
        }
        SessionsCommand::Show { id, json, raw } => {
            let id = store.resolve_session(&id).await?;
            let record = store.session(&id).await?;
            let history = store.history(&id).await?;
            if json {
                out = serde_json::to_string_pretty(
                    &json!({"session": summary(&record), "revision": record.revision,
                            "messages": history}),
                )?;
            } else {
                out = show_text(&record, &history, raw);
            }
        }
        SessionsCommand::Fork { id, at, json } => {
            let id = store.resolve_session(&id).await?;
            let record = keeper(&store, &id)
                .await?
                .request(ops::ForkSession {
                    session_id: id,
                    revision: at,
                })
                .await
                .map_err(runtime_error)?;
            out = if json {
                serde_json::to_string_pretty(&record)?
            } else {
                record.id.to_string()
            };
        }
        SessionsCommand::Rewind { id, to, json } => {
            let id = store.resolve_session(&id).await?;
            // Through the runtime, which tells every extension (the session report drops
            // what the history no longer leads to).
            let keeper = keeper(&store, &id).await?;
            keeper
                .request(ops::RewindSession {
                    session_id: id.clone(),
                    revision: to,
                })
                .await
                .map_err(runtime_error)?;
            let record = keeper
                .request(ops::GetSession { session_id: id })
                .await
                .map_err(runtime_error)?;
            out = if json {
                serde_json::to_string_pretty(&json!({
                    "session_id": record.id, "rewound_to": to,
                    "revision": record.revision, "length": record.length,
                }))?
            } else {
                format!(
                    "{} rewound to revision {to} (now revision {}, {} messages)",
                    record.id, record.revision, record.length
                )
            };
        }
        SessionsCommand::Export { id, format } => {
            let id = store.resolve_session(&id).await?;
            let format = match format {
                ExportFormat::Markdown => keel_protocol::ExportFormat::Markdown,
                ExportFormat::Json => keel_protocol::ExportFormat::Json,
            };
            let home = keel_runtime::settings::keel_home();
            let redaction = keel_runtime::sessions::export(&store, &id, format, home.as_deref())
                .await
                .map_err(runtime_error)?;
            out.clone_from(&redaction.text);
            eprintln!(
                "keel: {}",
                redaction_note(redaction.masked, &redaction.kinds)
            );
        }
        SessionsCommand::ReplayRequest { id, step, exact } => {
            let id = store.resolve_session(&id).await?;
            let dir = keel_runtime::storage::session_dir(store.path(), &id);
            let found = keel_extensions::report::replay::find(&dir, id.as_str(), step)
                .map_err(replay_error)?;
            let history: Vec<Message> = match found.revision {
                Some(revision) => store.history_at(&id, revision).await?,
                None => store.history(&id).await?,
            }
            .into_iter()
            .map(|entry| entry.message)
            .collect();
            let mut body =
                keel_extensions::report::replay::rebuild(&found, &history).map_err(replay_error)?;
            if exact {
                eprintln!("keel: the request as sent, byte for byte: it may hold secrets");
            } else {
                let home = keel_runtime::settings::keel_home();
                let secrets = keel_runtime::credentials::redaction_secrets(home.as_deref());
                let done = match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(mut value) => {
                        let done = redact::redact_json(&mut value, &secrets);
                        body = serde_json::to_vec(&value)?;
                        done
                    }
                    Err(_) => {
                        let done = redact::redact(&String::from_utf8_lossy(&body), &secrets);
                        body = done.text.clone().into_bytes();
                        done
                    }
                };
                eprintln!(
                    "keel: {} (--exact prints it as sent)",
                    redaction_note(done.count, &done.kinds)
                );
            }
            let mut stdout = std::io::stdout().lock();
            return stdout
                .write_all(&body)
                .and_then(|()| stdout.flush())
                .context("cannot write to standard output");
        }
        SessionsCommand::Compact {
            id,
            instructions,
            model,
            base_url,
            json,
        } => {
            let id = store.resolve_session(&id).await?;
            let record = store.session(&id).await?;
            let revision = compact(&store, &record, instructions, model, base_url).await?;
            if json {
                out.push_str(&serde_json::to_string(&serde_json::json!({
                    "session_id": id, "before": record.revision, "revision": revision,
                }))?);
                out.push('\n');
            } else {
                match revision {
                    Some(revision) => out.push_str(&format!(
                        "compacted {id}: revision {revision} (rewind to {} to undo)\n",
                        record.revision
                    )),
                    None => out.push_str(&format!("{id} has nothing to compact\n")),
                }
            }
        }
        SessionsCommand::Delete { id, json } => {
            let id = store.resolve_session(&id).await?;
            keeper(&store, &id)
                .await?
                .request(ops::DeleteSession {
                    session_id: id.clone(),
                })
                .await
                .map_err(runtime_error)?;
            out = if json {
                json!({"deleted": id}).to_string()
            } else {
                format!("deleted {id}")
            };
        }
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    // Fork, rewind and delete wrote to the log; make that durable before saying it is done.
    store.sync().await?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write to standard output")
}

/// A step that is not there is a bad invocation (exit 2); a report that cannot give the
/// request back is a failed run (exit 4), named by its code.
fn replay_error(error: keel_extensions::report::replay::ReplayError) -> anyhow::Error {
    use keel_extensions::report::replay::ReplayError;
    match error {
        ReplayError::NoStep { .. } => anyhow::anyhow!("--step: {error}"),
        other => crate::errors::RunFailed(format!("{other} ({})", other.code())).into(),
    }
}

/// The line on stderr saying what the export masked.
fn redaction_note(count: usize, kinds: &std::collections::BTreeMap<String, usize>) -> String {
    if count == 0 {
        return "redacted 0 secrets from the export".to_owned();
    }
    let kinds: Vec<String> = kinds
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    let noun = if count == 1 { "secret" } else { "secrets" };
    format!(
        "redacted {count} {noun} from the export ({})",
        kinds.join(", ")
    )
}

/// A session's title for a list, or what stands for a missing one.
fn shown_title(s: &SessionRecord) -> &str {
    if s.title.is_empty() {
        "(untitled)"
    } else {
        &s.title
    }
}

/// What `list --json` and `show --json` show of a session.
fn summary(s: &SessionRecord) -> serde_json::Value {
    json!({
        "id": s.id,
        "title": s.title,
        "cwd": s.cwd,
        "model": s.model,
        "updated": s.updated_ms,
        "messages": s.length,
        "parent_id": s.parent_id,
        "first_prompt": s.first_prompt,
    })
}

/// How deep `list` follows child sessions (tasks do not start tasks; this only bounds a
/// damaged database's cycle).
const MAX_CHILD_DEPTH: usize = 4;

/// A listed session: its record, the task it works for (a child session), its children.
struct Listed {
    record: SessionRecord,
    task: Option<TaskInfo>,
    children: Vec<Listed>,
}

/// The `limit` newest sessions that are not a task's, each with its tasks' sessions under
/// it. Children count against no limit, so rows are read until `limit` top-level sessions
/// are found or none are left.
async fn list_tree(
    store: &keel_store::Store,
    cwd: Option<String>,
    limit: usize,
) -> anyhow::Result<Vec<Listed>> {
    let mut fetch = limit.max(1);
    let top = loop {
        let page = store.list_conversations(cwd.clone(), fetch).await?;
        let exhausted = page.len() < fetch;
        let top: Vec<SessionRecord> = page
            .into_iter()
            .filter(|s| s.parent_id.is_none())
            .take(limit)
            .collect();
        if top.len() >= limit || exhausted {
            break top;
        }
        fetch = fetch.saturating_mul(4);
    };
    let mut listed = Vec::with_capacity(top.len());
    for record in top {
        let children = children_of(store, &record.id, 1).await?;
        listed.push(Listed {
            record,
            task: None,
            children,
        });
    }
    Ok(listed)
}

/// [`children_of`]'s answer: boxed, as it calls itself for grandchildren.
type ChildrenFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<Vec<Listed>>> + Send + 'a>>;

/// The child sessions of `parent`, oldest first, each with the newest task it worked for.
fn children_of<'a>(
    store: &'a keel_store::Store,
    parent: &'a keel_protocol::SessionId,
    depth: usize,
) -> ChildrenFuture<'a> {
    Box::pin(async move {
        if depth > MAX_CHILD_DEPTH {
            return Ok(Vec::new());
        }
        let records = store.child_sessions(parent).await?;
        if records.is_empty() {
            return Ok(Vec::new());
        }
        // A task whose process died without settling it reads as `lost` now, not when its
        // session is next opened.
        let tasks = store.tasks_as_they_stand(parent).await?;
        let mut children = Vec::with_capacity(records.len());
        for record in records {
            let task = tasks
                .iter()
                .rev()
                .find(|t| t.child_session_id.as_ref() == Some(&record.id))
                .cloned();
            let grandchildren = children_of(store, &record.id, depth + 1).await?;
            children.push(Listed {
                record,
                task,
                children: grandchildren,
            });
        }
        Ok(children)
    })
}

/// A listed session as `list --json` shows it: its summary, its task, its children.
fn listed_json(listed: &Listed) -> serde_json::Value {
    let mut row = summary(&listed.record);
    if let Some(fields) = row.as_object_mut() {
        if let Some(task) = &listed.task {
            fields.insert(
                "task".into(),
                json!({"id": task.id, "agent": task.agent, "status": task.status,
                       "background": task.background, "error": task.error}),
            );
        }
        fields.insert(
            "children".into(),
            listed.children.iter().map(listed_json).collect(),
        );
    }
    row
}

/// Width of the UPDATED column ("59 min ago").
const UPDATED_WIDTH: usize = 10;
/// Width of the MESSAGES column.
const MESSAGES_WIDTH: usize = 8;

/// `list` for people: what is listed and how to see more, a header, then each session.
fn list_text(sessions: &[Listed], folder: Option<&str>, limit: usize) -> String {
    let mut out = String::new();
    let more = if sessions.len() >= limit {
        format!("; --limit {} shows more", limit.saturating_mul(2))
    } else {
        String::new()
    };
    match folder {
        Some(folder) if sessions.is_empty() => {
            out.push_str(&format!(
                "No sessions in {folder}. `keel sessions list --all` lists every folder's.\n"
            ));
            return out;
        }
        None if sessions.is_empty() => {
            out.push_str("No sessions yet.\n");
            return out;
        }
        Some(folder) => out.push_str(&format!(
            "Sessions in {folder}, newest first (--all lists every folder's{more}):\n"
        )),
        None => out.push_str(&format!("Sessions of every folder, newest first{more}:\n")),
    }
    let id_width = sessions
        .iter()
        .map(|l| l.record.id.as_str().chars().count())
        .max()
        .unwrap_or(0)
        .max("SESSION".len());
    out.push_str(&format!(
        "{:<UPDATED_WIDTH$} {:>MESSAGES_WIDTH$}  {:<id_width$}  TITLE\n",
        "UPDATED", "MESSAGES", "SESSION"
    ));
    for listed in sessions {
        listed_text(listed, 0, id_width, folder.is_none(), &mut out);
    }
    out
}

/// A listed session's line, its children indented under it.
fn listed_text(
    listed: &Listed,
    depth: usize,
    id_width: usize,
    every_folder: bool,
    out: &mut String,
) {
    let s = &listed.record;
    // A task's session sits under its parent's SESSION column.
    let indent = format!(
        "{}{}",
        " ".repeat(UPDATED_WIDTH + MESSAGES_WIDTH + 3),
        "  ".repeat(depth.saturating_sub(1))
    );
    match (&listed.task, depth) {
        (_, 0) => {
            out.push_str(&format!(
                "{:<UPDATED_WIDTH$} {:>MESSAGES_WIDTH$}  {:<id_width$}  {}\n",
                keel_runtime::sessions::age(s.updated_ms),
                s.length,
                s.id.as_str(),
                shown_title(s),
            ));
            let pad = " ".repeat(UPDATED_WIDTH + MESSAGES_WIDTH + 3);
            if let Some(first) = keel_runtime::sessions::first_prompt_line(s) {
                out.push_str(&format!("{pad}› {first}\n"));
            }
            if every_folder {
                out.push_str(&format!("{pad}in {}, {}\n", s.cwd, s.model));
            }
        }
        (Some(task), _) => {
            let mut line = format!(
                "{indent}└ {}  {}  {}  ({} {}: {}",
                s.id,
                keel_runtime::sessions::age(s.updated_ms),
                shown_title(s),
                task.agent,
                task.id,
                task.status
            );
            if let Some(error) = &task.error {
                let error: Vec<&str> = error.split_whitespace().collect();
                line.push_str(&format!(", {}", error.join(" ")));
            }
            out.push_str(&line);
            out.push_str(")\n");
        }
        (None, _) => out.push_str(&format!(
            "{indent}└ {}  {}  {}  ({})\n",
            s.id,
            keel_runtime::sessions::age(s.updated_ms),
            shown_title(s),
            s.model
        )),
    }
    for child in &listed.children {
        listed_text(child, depth + 1, id_width, every_folder, out);
    }
}

/// A session for people: each message after the revision that added it (what `rewind
/// --to` and `fork --at` take); keel's hidden notes to the model only with `raw`.
fn show_text(record: &SessionRecord, history: &[StoredEntry], raw: bool) -> String {
    let mut out = format!(
        "{}  {}\n{} · {} · revision {}\n\n",
        record.id, record.title, record.cwd, record.model, record.revision
    );
    let mut hidden = 0;
    for entry in history {
        if !raw && matches!(&entry.message, Message::User(user) if user.hidden) {
            hidden += 1;
            continue;
        }
        out.push_str(&format!("r{:<4} ", entry.revision));
        let line = match &entry.message {
            Message::User(user) if let Some(run) = &user.shell => format!(
                "user ran: !{}\n{}",
                run.command,
                user.shell_output().unwrap_or_default()
            ),
            Message::User(user) => format!(
                "{}: {}",
                if user.hidden { "keel's note" } else { "user" },
                user.content
                    .iter()
                    .filter_map(|b| match b {
                        keel_protocol::ContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            Message::Assistant(assistant) => {
                let mut text = format!("assistant: {}", assistant.text());
                for call in assistant.tool_calls() {
                    text.push_str(&format!(
                        "\n  tool call {} `{}` {}",
                        call.id, call.name, call.arguments
                    ));
                }
                text
            }
            Message::ToolResult(result) => format!(
                "tool result {}{}: {}",
                result.tool_call_id,
                if result.is_error { " (error)" } else { "" },
                result.text()
            ),
            other => format!("{}: …", other.role()),
        };
        out.push_str(&line);
        out.push('\n');
    }
    if hidden > 0 {
        out.push_str(&format!(
            "\n({hidden} note{} keel added for the model not shown: --raw shows them)\n",
            if hidden == 1 { "" } else { "s" }
        ));
    }
    out
}

/// A runtime of `session`'s working folder that keeps sessions and runs no turn: fork,
/// rewind and delete go through it, so they refuse a running turn, stop the session's tasks
/// and tell every extension, as in any front end. It needs no model or API key and starts
/// no MCP server.
async fn keeper(
    store: &keel_store::Store,
    session: &keel_protocol::SessionId,
) -> anyhow::Result<keel_runtime::Runtime> {
    use keel_runtime::{ModelChoice, RuntimeOptions};
    let record = store.session(session).await?;
    let options = RuntimeOptions::new(record.cwd.clone().into(), ModelChoice::None);
    let prepared = crate::assembly::prepare(options).map_err(runtime_error)?;
    for warning in &prepared.warnings {
        eprintln!("keel: warning: {warning}");
    }
    Ok(prepared.start(store.clone()))
}

/// Compacts `record`'s session through a runtime of its working folder.
async fn compact(
    store: &keel_store::Store,
    record: &SessionRecord,
    instructions: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
) -> anyhow::Result<Option<u64>> {
    use keel_runtime::{ModelChoice, RuntimeOptions};
    let cwd = std::path::PathBuf::from(&record.cwd);
    let mut options = RuntimeOptions::new(
        cwd.clone(),
        ModelChoice::Configured {
            model: model.or_else(|| Some(record.model.clone()).filter(|m| !m.is_empty())),
            base_url,
        },
    );
    options.settings.cwd = cwd;
    let prepared = crate::assembly::prepare(options).map_err(runtime_error)?;
    for warning in &prepared.warnings {
        eprintln!("keel: warning: {warning}");
    }
    let runtime = prepared.start(store.clone());
    runtime
        .request(keel_protocol::ops::Compact {
            session_id: record.id.clone(),
            instructions,
        })
        .await
        .map_err(runtime_error)
}
