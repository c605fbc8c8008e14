//! Session helpers: titles, and closing the tool calls a stopped process left without a
//! result when a session is resumed.

use std::collections::HashSet;

use keel_protocol::{Message, ToolResultMessage};
use keel_store::{Entry, StoredEntry};

/// The kind of the host message that marks a compaction in history.
pub use keel_tools::todo::COMPACTION_KIND;

/// Longest session title taken from the prompt's first line, in characters.
pub const TITLE_MAX_CHARS: usize = 80;

/// What a tool call left without a result says once a resumed session closes it.
pub const INTERRUPTED_RESULT: &str =
    "interrupted: keel stopped before this tool call finished; it may or may not have run";

/// Error code recorded on turns a crashed process left running.
pub const INTERRUPTED_CODE: keel_protocol::FailureCode = keel_protocol::FailureCode::Interrupted;

/// `session`'s transcript in `format`, with every secret keel can recognise masked (the
/// values of this process's secret variables, the keys and tokens stored in `keel_home`'s
/// credential store, and token-shaped strings): what front ends write to files and what
/// `keel sessions export` prints.
pub async fn export(
    store: &keel_store::Store,
    session: &keel_protocol::SessionId,
    format: keel_protocol::ExportFormat,
    keel_home: Option<&std::path::Path>,
) -> Result<keel_protocol::SessionExport, crate::RuntimeError> {
    use keel_tools::redact;
    let secrets = crate::credentials::redaction_secrets(keel_home);
    let (text, done) = match format {
        keel_protocol::ExportFormat::Markdown => {
            let done = redact::redact(&store.export_markdown(session).await?, &secrets);
            (done.text.clone(), done)
        }
        keel_protocol::ExportFormat::Json => {
            let mut document = store.export_json(session).await?;
            let done = redact::redact_json(&mut document, &secrets);
            if let Some(fields) = document.as_object_mut() {
                fields.insert(
                    "redactions".into(),
                    serde_json::json!({"count": done.count, "kinds": done.kinds}),
                );
            }
            let text = serde_json::to_string_pretty(&document).map_err(|e| {
                crate::RuntimeError::Internal(format!("cannot write the export: {e}"))
            })?;
            (text, done)
        }
    };
    Ok(keel_protocol::SessionExport {
        text,
        masked: done.count,
        kinds: done.kinds,
    })
}

/// How long ago `ms` (Unix milliseconds) was, in words: "just now", "5 min ago", "3 h ago",
/// "2 d ago".
pub fn age(ms: i64) -> String {
    let secs = (keel_protocol::now_ms() - ms).max(0) / 1000;
    match secs {
        0..60 => "just now".into(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86400 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86400),
    }
}

/// What a listing shows of a session's first prompt: its first line, cleaned as a title is,
/// when it says more than the title (the model renamed the session, or the user did);
/// `None` when it is the title or there is none.
pub fn first_prompt_line(record: &keel_store::SessionRecord) -> Option<String> {
    let line = title_of(record.first_prompt.as_deref()?);
    (!line.is_empty() && line != record.title).then_some(line)
}

/// Whether `c` may stand in a title: titles are printed as they are (`keel sessions
/// list`) and shown by every front end, so no control character, escape or bidirectional
/// override gets in, whoever wrote the title.
pub fn titled(c: char) -> bool {
    !c.is_control()
        && !matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The session's title: the prompt's first non-empty line, shortened, with only characters
/// a title may hold.
pub fn title_of(prompt: &str) -> String {
    let line: String = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .chars()
        .filter(|c| titled(*c))
        .collect();
    let mut title: String = line.chars().take(TITLE_MAX_CHARS).collect();
    if line.chars().count() > TITLE_MAX_CHARS {
        title.push('…');
    }
    title
}

/// History with an "interrupted" error result after every tool call that has none, placed
/// right after the results of its own batch; `None` when every call has its result.
pub fn close_interrupted(stored: &[StoredEntry]) -> Option<Vec<Entry>> {
    let mut out = Vec::with_capacity(stored.len());
    let mut changed = false;
    let mut at = 0;
    while let Some(entry) = stored.get(at) {
        out.push(Entry {
            id: entry.id.clone(),
            message: entry.message.clone(),
        });
        at += 1;
        let Some(assistant) = entry.message.as_assistant() else {
            continue;
        };
        // A call is answered only by a result in its own batch (the results right after
        // it): providers reuse ids such as `call_0` from turn to turn.
        let mut answered: HashSet<&str> = HashSet::new();
        while let Some(result) = stored.get(at).and_then(|e| e.message.as_tool_result()) {
            answered.insert(result.tool_call_id.as_str());
            out.push(Entry {
                id: stored[at].id.clone(),
                message: stored[at].message.clone(),
            });
            at += 1;
        }
        for call in assistant.tool_calls() {
            if !answered.contains(call.id.as_str()) {
                changed = true;
                out.push(Entry::new(Message::ToolResult(ToolResultMessage::error(
                    call.id.clone(),
                    call.name.clone(),
                    INTERRUPTED_RESULT,
                ))));
            }
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use keel_protocol::{AssistantMessage, ContentBlock, MessageId, ToolCall};

    use super::*;

    fn stored(message: Message) -> StoredEntry {
        StoredEntry {
            id: MessageId::generate(),
            message,
            revision: 1,
            created_ms: 0,
        }
    }

    fn calls(ids: &[&str]) -> Message {
        let mut assistant = AssistantMessage::from_text("");
        assistant.content = ids
            .iter()
            .map(|id| {
                ContentBlock::ToolCall(ToolCall {
                    id: (*id).into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({}),
                })
            })
            .collect();
        Message::Assistant(assistant)
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage::error(id.into(), "bash", "done"))
    }

    /// `(role, tool call id or text)` of each entry.
    fn shape(entries: &[Entry]) -> Vec<(String, String)> {
        entries
            .iter()
            .map(|e| {
                let what = match &e.message {
                    Message::ToolResult(r) => format!("{} {}", r.tool_call_id, r.text()),
                    Message::Assistant(a) => a
                        .tool_calls()
                        .map(|c| c.id.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => String::new(),
                };
                (e.message.role().to_owned(), what)
            })
            .collect()
    }

    #[test]
    fn answered_history_is_left_alone() {
        let history = [
            stored(Message::user_text("go")),
            stored(calls(&["a"])),
            stored(result("a")),
        ];
        assert!(close_interrupted(&history).is_none());
    }

    #[test]
    fn missing_results_follow_their_own_batch() {
        let history = [
            stored(Message::user_text("go")),
            stored(calls(&["a", "b"])),
            stored(result("a")),
            stored(Message::user_text("more")),
            stored(calls(&["c"])),
        ];
        let fixed = close_interrupted(&history).unwrap();
        let interrupted = INTERRUPTED_RESULT;
        pretty_assertions::assert_eq!(
            shape(&fixed),
            vec![
                ("user".to_owned(), String::new()),
                ("assistant".to_owned(), "a,b".to_owned()),
                ("tool_result".to_owned(), "a done".to_owned()),
                ("tool_result".to_owned(), format!("b {interrupted}")),
                ("user".to_owned(), String::new()),
                ("assistant".to_owned(), "c".to_owned()),
                ("tool_result".to_owned(), format!("c {interrupted}")),
            ]
        );
        // Existing messages keep their ids, so the commit keeps the common prefix.
        assert_eq!(fixed[2].id, history[2].id);
    }

    #[test]
    fn a_reused_call_id_does_not_hide_a_missing_result() {
        let history = [
            stored(calls(&["call_0"])),
            stored(result("call_0")),
            stored(Message::user_text("again")),
            stored(calls(&["call_0"])),
        ];
        let fixed = close_interrupted(&history).unwrap();
        let last = fixed.last().unwrap().message.as_tool_result().unwrap();
        assert_eq!(
            (last.tool_call_id.as_str(), last.text().as_str()),
            ("call_0", INTERRUPTED_RESULT)
        );
        assert_eq!(fixed.len(), 5);
    }

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_of("\n  Fix it  \nmore"), "Fix it");
        let long = "x".repeat(TITLE_MAX_CHARS + 5);
        assert_eq!(title_of(&long).chars().count(), TITLE_MAX_CHARS + 1);
        assert_eq!(title_of("a\u{1b}[2Jb\u{202E}c\u{7}"), "a[2Jbc");
    }
}
