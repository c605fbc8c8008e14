//! `session/load`: a stored conversation replayed as the updates a live turn would have
//! sent: the user's messages, answers, reasoning, and each tool call with its result (a call
//! a stopped process never answered shows as failed, interrupted).

use std::collections::HashMap;
use std::path::Path;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, ImageContent, Plan, SessionUpdate, TextContent,
};
use keel_protocol::{ItemKind, Message};
use keel_runtime::StoredEntry;
use serde_json::Value;

use crate::tools;
use crate::translate::text_update;

/// The updates that show `entries`, oldest first.
pub fn updates(entries: &[StoredEntry], cwd: &Path) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    // Calls asked for and not yet answered, in the order they were asked.
    let mut open: Vec<(String, String, Value)> = Vec::new();
    let mut names: HashMap<String, (String, Value)> = HashMap::new();
    for entry in entries {
        match &entry.message {
            Message::User(user) if user.shell.is_some() => {
                let Some(run) = &user.shell else { continue };
                out.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
                    ContentBlock::Text(TextContent::new(format!("!{}", run.command))),
                )));
                out.push(SessionUpdate::ToolCall(tools::ended_call(
                    &entry.id.to_string(),
                    "bash",
                    &serde_json::json!({ "command": run.command }),
                    user.shell_output().unwrap_or_default(),
                    Some(&serde_json::json!({ "exit_code": run.exit_code })),
                    run.exit_code != Some(0),
                    cwd,
                )));
            }
            Message::User(user) if !user.hidden => {
                let text = user.joined_text();
                if !text.is_empty() {
                    out.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
                        ContentBlock::Text(TextContent::new(text)),
                    )));
                }
                for block in &user.content {
                    if let keel_protocol::ContentBlock::Image(image) = block {
                        use base64::Engine as _;
                        let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
                        out.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
                            ContentBlock::Image(ImageContent::new(data, image.mime_type.clone())),
                        )));
                    }
                }
            }
            Message::Assistant(answer) => {
                let thinking = answer.thinking();
                if !thinking.trim().is_empty() {
                    out.push(text_update(ItemKind::Reasoning, &thinking));
                }
                let text = answer.text();
                if !text.trim().is_empty() {
                    out.push(text_update(ItemKind::AgentMessage, &text));
                }
                for call in answer.tool_calls() {
                    let id = call.id.to_string();
                    names.insert(id.clone(), (call.name.clone(), call.arguments.clone()));
                    open.push((id, call.name.clone(), call.arguments.clone()));
                }
            }
            Message::ToolResult(result) => {
                let id = result.tool_call_id.to_string();
                open.retain(|(open_id, _, _)| *open_id != id);
                let (name, arguments) = names
                    .remove(&id)
                    .unwrap_or_else(|| (result.tool_name.clone(), Value::Null));
                out.push(SessionUpdate::ToolCall(tools::ended_call(
                    &id,
                    &name,
                    &arguments,
                    &result.text(),
                    result.details.as_ref(),
                    result.is_error,
                    cwd,
                )));
                if name == "todowrite"
                    && !result.is_error
                    && let Some(entries) = tools::plan(result.details.as_ref(), &arguments)
                {
                    out.push(SessionUpdate::Plan(Plan::new(entries)));
                }
            }
            Message::Host(host) if host.kind == keel_runtime::sessions::COMPACTION_KIND => {
                out.push(text_update(
                    ItemKind::Reasoning,
                    "[keel] the earlier conversation was compacted into a summary\n",
                ));
            }
            _ => {}
        }
    }
    for (id, name, arguments) in open {
        out.push(SessionUpdate::ToolCall(tools::ended_call(
            &id,
            &name,
            &arguments,
            keel_runtime::view::INTERRUPTED_ITEM,
            None,
            true,
            cwd,
        )));
    }
    out
}
