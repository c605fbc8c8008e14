//! A task's output: progress lines gathered from its child session's items as they end (each
//! tool call on a line, interim text before it), the final answer kept apart, and reads of it
//! by byte offset with an automatic cursor.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use keel_protocol::{
    ItemBody, ItemEvent, SessionEvent, SessionEventBody, TaskInfo, ToolCallStatus, TurnId,
};

use super::{LiveTask, Tasks};
use crate::error::RuntimeError;
use crate::events::SessionSink;

/// Most bytes one read returns; the cursor moves on from where it stopped.
pub const MAX_READ_BYTES: usize = 32 * 1024;

/// Longest a call's arguments are shown on its progress line.
const ARGUMENTS_SHOWN: usize = 120;

/// What a task has produced so far.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub(crate) output: String,
    /// The newest answer text, written out once a tool call follows it (an answer no call
    /// follows is the final one, kept only as the result).
    pending: Option<String>,
}

impl Progress {
    fn tool_line(&mut self, tool: &str, arguments: &serde_json::Value, failed: bool) {
        if let Some(text) = self.pending.take().filter(|t| !t.trim().is_empty()) {
            self.output.push_str(text.trim());
            self.output.push('\n');
        }
        let shown = match arguments {
            serde_json::Value::Object(map) => ["command", "path", "pattern", "url", "query"]
                .iter()
                .find_map(|key| map.get(*key).and_then(|v| v.as_str()))
                .map_or_else(|| arguments.to_string(), str::to_owned),
            other => other.to_string(),
        };
        let shown: String = shown
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(ARGUMENTS_SHOWN)
            .collect();
        let mark = if failed { " (failed)" } else { "" };
        self.output.push_str(&format!("→ {tool} {shown}{mark}\n"));
    }
}

/// Feeds a child session's events into its task's progress.
pub(crate) struct ProgressSink(pub(crate) Arc<LiveTask>);

impl SessionSink for ProgressSink {
    fn on_event(&self, event: &SessionEvent) {
        let SessionEventBody::Item {
            event: ItemEvent::Completed { item },
            ..
        } = &event.body
        else {
            return;
        };
        {
            let mut progress = self
                .0
                .progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match &item.body {
                ItemBody::AgentMessage { text } => progress.pending = Some(text.clone()),
                ItemBody::ToolCall {
                    tool_name,
                    arguments,
                    status,
                    ..
                } => progress.tool_line(tool_name, arguments, *status == ToolCallStatus::Failed),
                _ => return,
            }
        }
        self.0.bump(false);
    }
}

/// One read of a task's output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRead {
    /// The task as it is now.
    pub task: TaskInfo,
    /// The progress from `offset`.
    pub text: String,
    /// Where the read started.
    pub offset: u64,
    /// Where the next read starts.
    pub next_offset: u64,
    /// Bytes of progress in all.
    pub total: u64,
    /// The final answer, when the task has ended and this read reached the end.
    pub result: Option<String>,
}

/// The largest char boundary of `text` not above `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

pub(super) async fn read(
    tasks: &Tasks,
    id: &str,
    offset: Option<u64>,
    wait: Duration,
    reader: Option<&TurnId>,
) -> Result<OutputRead, RuntimeError> {
    let table = tasks.table();
    let cursor = table
        .cursors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(id)
        .copied();
    let start = offset.or(cursor).unwrap_or(0);
    let live = table.live(id);
    if let Some(live) = &live
        && !wait.is_zero()
    {
        let _waiting = super::Waiting::new(live);
        let mut changed = live.changed.subscribe();
        let news = |live: &LiveTask| {
            let len = live
                .progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .output
                .len();
            len as u64 > start
        };
        let _ = tokio::time::timeout(wait, async {
            loop {
                if changed.borrow_and_update().1 || news(live) {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }
    // The store is written before a task leaves the live table, so an ended task's status
    // and output are there by the time the live copy says it ended.
    let task = tasks.get(id).await?;
    let (output, final_text) = match &live {
        Some(live) if !task.status.is_terminal() => (
            live.progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .output
                .clone(),
            String::new(),
        ),
        _ => {
            let stored = tasks.runtime.store().task_output(id).await?;
            (stored.output, stored.final_text)
        }
    };
    let from = floor_boundary(&output, usize::try_from(start).unwrap_or(usize::MAX));
    let to = floor_boundary(&output, from.saturating_add(MAX_READ_BYTES));
    let text = output[from..to].to_owned();
    let next_offset = to as u64;
    table
        .cursors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id.to_owned(), next_offset);
    let reached_end = to == output.len();
    let result = (task.status.is_terminal() && reached_end).then_some(final_text);
    if result.is_some()
        && let Some(turn) = reader
    {
        table.candidate(turn, id);
    }
    Ok(OutputRead {
        task,
        text,
        offset: from as u64,
        next_offset,
        total: output.len() as u64,
        result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_writes_text_before_the_call_that_follows_it_and_keeps_the_last_apart() {
        let mut progress = Progress {
            pending: Some("Looking at the parser.".into()),
            ..Progress::default()
        };
        progress.tool_line("read", &json!({"path": "src/lib.rs"}), false);
        progress.tool_line("bash", &json!({"command": "cargo\ntest"}), true);
        progress.pending = Some("The parser is fine.".into());
        assert_eq!(
            progress.output,
            "Looking at the parser.\n→ read src/lib.rs\n→ bash cargo test (failed)\n"
        );
    }

    #[test]
    fn offsets_fall_on_char_boundaries() {
        let text = "aé→b";
        assert_eq!(floor_boundary(text, 2), 1);
        assert_eq!(floor_boundary(text, 3), 3);
        assert_eq!(floor_boundary(text, 99), text.len());
    }
}
