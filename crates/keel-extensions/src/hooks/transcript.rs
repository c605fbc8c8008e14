//! The transcript hooks read (`transcript_path`): the session's history as Claude Code
//! writes its own, one JSON object per line (`type` `user` or `assistant`, `message` in the
//! Messages API's shape, tool results as `tool_result` blocks of a user line), so scripts
//! written for Claude Code's transcripts work unchanged. keel's hidden notes and host
//! bookkeeping are left out. Written only while a hook is configured, 0600, in the
//! session's folder under `$KEEL_HOME`.

use std::io::Write as _;
use std::path::Path;

use keel_protocol::{ContentBlock, Message};
use serde_json::{Value, json};

use super::mapping::{claude_tool_name, to_claude_input};

/// The transcript's file name in the session's folder.
pub const FILE_NAME: &str = "transcript.jsonl";

/// The lines of `messages` of `session` run in `cwd`.
pub fn lines(messages: &[Message], session: &str, cwd: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let mut parent: Option<String> = None;
    for (index, message) in messages.iter().enumerate() {
        let (kind, body, timestamp) = match message {
            Message::User(user) if !user.hidden => {
                let text = user.joined_text();
                (
                    "user",
                    json!({"role": "user", "content": text}),
                    user.timestamp,
                )
            }
            Message::Assistant(answer) => {
                let content: Vec<Value> = answer
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text(text) => {
                            Some(json!({"type": "text", "text": text.text}))
                        }
                        ContentBlock::Thinking(thinking) if !thinking.redacted => {
                            Some(json!({"type": "thinking", "thinking": thinking.thinking}))
                        }
                        ContentBlock::ToolCall(call) => Some(json!({
                            "type": "tool_use",
                            "id": call.id,
                            "name": claude_tool_name(&call.name),
                            "input": to_claude_input(&call.name, &call.arguments),
                        })),
                        _ => None,
                    })
                    .collect();
                (
                    "assistant",
                    json!({"role": "assistant", "model": answer.model, "content": content}),
                    answer.timestamp,
                )
            }
            Message::ToolResult(result) => (
                "user",
                json!({"role": "user", "content": [{
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": result.text(),
                    "is_error": result.is_error,
                }]}),
                result.timestamp,
            ),
            _ => continue,
        };
        let uuid = format!("{session}-{index:06}");
        out.push(json!({
            "parentUuid": parent,
            "isSidechain": false,
            "userType": "external",
            "cwd": cwd,
            "sessionId": session,
            "version": concat!("keel ", env!("CARGO_PKG_VERSION")),
            "type": kind,
            "message": body,
            "uuid": uuid,
            "timestamp": keel_protocol::time::iso_utc(timestamp),
        }));
        parent = Some(uuid);
    }
    out
}

/// Writes the transcript of `messages` to `path` whole (a new file each time, readable by
/// the user alone, renamed into place so a hook never reads half of it).
pub fn write(path: &Path, messages: &[Message], session: &str, cwd: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the transcript has no folder"))?;
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)?;
    let temp = dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    let mut text = String::new();
    for line in lines(messages, session, cwd) {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    file.write_all(text.as_bytes())?;
    drop(file);
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, ToolCall, ToolCallId, ToolResultMessage, UserMessage};

    #[test]
    fn history_reads_as_claude_codes_transcript() {
        let mut hidden = UserMessage::text("a reminder");
        hidden.hidden = true;
        let answer = AssistantMessage {
            model: "claude-sonnet-4-5".into(),
            content: vec![
                ContentBlock::text("Looking."),
                ContentBlock::ToolCall(ToolCall {
                    id: ToolCallId::new("c1"),
                    name: "read".into(),
                    arguments: json!({"path": "a.rs"}),
                }),
            ],
            ..AssistantMessage::default()
        };
        let messages = vec![
            Message::user_text("fix a.rs"),
            Message::User(hidden),
            Message::Assistant(answer),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: ToolCallId::new("c1"),
                tool_name: "read".into(),
                content: vec![ContentBlock::text("fn main() {}")],
                details: None,
                is_error: false,
                timestamp: 0,
            }),
        ];
        let lines = lines(&messages, "s-1", Path::new("/w"));
        assert_eq!(lines.len(), 3, "the hidden note is left out");
        assert_eq!(lines[0]["type"], "user");
        assert_eq!(lines[0]["message"]["content"], "fix a.rs");
        assert_eq!(lines[0]["parentUuid"], Value::Null);
        assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
        let tool_use = &lines[1]["message"]["content"][1];
        assert_eq!(tool_use["type"], "tool_use");
        assert_eq!(tool_use["name"], "Read");
        assert_eq!(tool_use["input"]["file_path"], "a.rs");
        assert_eq!(lines[2]["message"]["content"][0]["type"], "tool_result");
        assert_eq!(lines[2]["message"]["content"][0]["tool_use_id"], "c1");
        assert_eq!(lines[2]["sessionId"], "s-1");
        assert!(
            lines[2]["timestamp"]
                .as_str()
                .unwrap()
                .starts_with("1970-01-01T")
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/transcript.jsonl");
        write(&path, &messages, "s-1", Path::new("/w")).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
    }
}
