//! Export of a session to JSON (everything, for tools) and Markdown (for people).

use std::fmt::Write as _;

use keel_protocol::{ContentBlock, Message, SessionId};

use crate::error::Result;
use crate::model::{SessionRecord, StoredEntry, TurnRecord};
use crate::store::Store;

/// Version of the exported JSON document.
pub const EXPORT_SCHEMA_VERSION: u32 = 1;

impl Store {
    /// The session, its turns and its canonical history as one JSON document.
    pub async fn export_json(&self, session: &SessionId) -> Result<serde_json::Value> {
        let (record, turns, history) = self.snapshot(session).await?;
        Ok(to_json(&record, &turns, &history)?)
    }

    /// The session's canonical history as Markdown.
    pub async fn export_markdown(&self, session: &SessionId) -> Result<String> {
        let (record, _, history) = self.snapshot(session).await?;
        Ok(to_markdown(&record, &history))
    }
}

fn to_json(
    record: &SessionRecord,
    turns: &[TurnRecord],
    history: &[StoredEntry],
) -> serde_json::Result<serde_json::Value> {
    Ok(serde_json::json!({
        "schema_version": EXPORT_SCHEMA_VERSION,
        "session": serde_json::to_value(record)?,
        "turns": serde_json::to_value(turns)?,
        "history": serde_json::to_value(history)?,
    }))
}

/// A fence longer than any backtick run in `text`, so content cannot close it.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

fn blocks(out: &mut String, content: &[ContentBlock]) {
    for block in content {
        match block {
            ContentBlock::Text(text) => {
                let _ = writeln!(out, "{}\n", text.text);
            }
            ContentBlock::Thinking(thinking) if !thinking.thinking.is_empty() => {
                for line in thinking.thinking.lines() {
                    let _ = writeln!(out, "> {line}");
                }
                out.push('\n');
            }
            ContentBlock::Thinking(_) => {}
            ContentBlock::Image(image) => {
                let _ = writeln!(
                    out,
                    "*[image: {}, {} bytes]*\n",
                    image.mime_type,
                    image.data.len()
                );
            }
            ContentBlock::ToolCall(call) => {
                let arguments = serde_json::to_string_pretty(&call.arguments).unwrap_or_default();
                let fence = fence(&arguments);
                let _ = writeln!(
                    out,
                    "**Tool call** `{}` ({})\n\n{fence}json\n{arguments}\n{fence}\n",
                    call.name, call.id
                );
            }
            _ => out.push_str("*[content this keel cannot show]*\n\n"),
        }
    }
}

/// A session's record and history as Markdown (what `export_markdown` returns), for a
/// front end that already holds the history.
pub fn to_markdown(record: &SessionRecord, history: &[StoredEntry]) -> String {
    let mut out = String::new();
    let title = if record.title.is_empty() {
        "Untitled session"
    } else {
        &record.title
    };
    let _ = writeln!(out, "# {title}\n");
    let _ = writeln!(
        out,
        "- session: `{}`\n- folder: `{}`\n- model: `{}`\n- revision: {}\n",
        record.id, record.cwd, record.model, record.revision
    );
    for entry in history {
        match &entry.message {
            Message::User(user) if user.shell.is_some() => {
                let command = user.shell.as_ref().map_or("", |run| run.command.as_str());
                let code = user
                    .shell
                    .as_ref()
                    .and_then(|run| run.exit_code)
                    .map_or_else(|| "no exit code".to_owned(), |c| format!("exit {c}"));
                let _ = writeln!(out, "## User ran `!` ({code})\n");
                let text = format!(
                    "$ {command}\n{}",
                    user.shell_output().unwrap_or_default().trim_end()
                );
                let fence = fence(&text);
                let _ = writeln!(out, "{fence}\n{text}\n{fence}\n");
            }
            // keel's own notes to the model (reminders, attached files) are not the
            // conversation: `sessions show --raw` and the JSON export hold them.
            Message::User(user) if user.hidden => {}
            Message::User(user) => {
                out.push_str("## User\n\n");
                blocks(&mut out, &user.content);
            }
            Message::Assistant(assistant) => {
                out.push_str("## Assistant\n\n");
                blocks(&mut out, &assistant.content);
            }
            Message::ToolResult(result) => {
                let status = if result.is_error { " (error)" } else { "" };
                let _ = writeln!(out, "## Tool result `{}`{status}\n", result.tool_name);
                let text = result.text();
                let fence = fence(&text);
                let _ = writeln!(out, "{fence}\n{text}\n{fence}\n");
            }
            Message::Host(host) => {
                let _ = writeln!(out, "*[host: {}]*\n", host.kind);
            }
            _ => out.push_str("*[message this keel cannot show]*\n\n"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_backticks_in_content() {
        assert_eq!(fence("plain"), "```");
        assert_eq!(fence("a ```` b"), "`````");
    }
}
