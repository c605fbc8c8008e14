//! `todowrite`: the model's task list, always sent whole.

use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::{self, NonEmpty};

/// The kind of the host message that marks a compaction; its data keeps the todo list the
/// compacted history held.
pub const COMPACTION_KIND: &str = "compaction";

/// Compactions the history went through, and the summaries' estimated tokens in all, as
/// its newest compaction marker counts them (a marker from before the count is one
/// compaction of unknown size).
pub fn compaction_tally(history: &[std::sync::Arc<keel_protocol::Message>]) -> (u64, u64) {
    use keel_protocol::Message;
    history
        .iter()
        .rev()
        .find_map(|message| match &**message {
            Message::Host(host) if host.kind == COMPACTION_KIND => Some((
                host.data
                    .get("compactions")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(1),
                host.data
                    .get("summary_tokens")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0),
            )),
            _ => None,
        })
        .unwrap_or((0, 0))
}

/// The latest todo list in `history`: the details of the last successful `todowrite`, or
/// the list a compaction kept, whichever is newer.
pub fn latest(history: &[std::sync::Arc<keel_protocol::Message>]) -> Option<Vec<Todo>> {
    use keel_protocol::{Message, ToolResultMessage};
    history.iter().rev().find_map(|message| match &**message {
        Message::ToolResult(ToolResultMessage {
            tool_name,
            details: Some(details),
            is_error: false,
            ..
        }) if tool_name == "todowrite" => {
            serde_json::from_value(details.get("todos")?.clone()).ok()
        }
        Message::Host(host) if host.kind == COMPACTION_KIND => {
            serde_json::from_value(host.data.get("todos")?.clone()).ok()
        }
        _ => None,
    })
}

/// State of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one).
    InProgress,
    /// Done.
    Completed,
}

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

// One item as the model sends it: a `Todo` whose content must not be empty. A line comment,
// because a doc comment would become the items' description.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TodoArg {
    /// What to do
    content: NonEmpty<String>,
    /// pending, in_progress (at most one item at a time) or completed
    status: TodoStatus,
}

/// The arguments of `todowrite`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    todos: Vec<TodoArg>,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "todowrite".into(),
    description:
        "Replace your task list with this full snapshot. Use it for work of several steps: mark \
        one item in_progress at a time and completed as soon as it is done."
            .into(),
    parameters: args::schema::<Args>(),
});

/// The `todowrite` tool; the latest list is kept for reminders and front ends.
pub struct TodoWrite {
    current: Arc<Mutex<Vec<Todo>>>,
}

impl Default for TodoWrite {
    fn default() -> Self {
        Self::new()
    }
}

impl TodoWrite {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            current: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The latest list.
    pub fn current(&self) -> Vec<Todo> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl AgentTool for TodoWrite {
    fn nature(&self) -> ToolNature {
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = args::arguments(arguments)?;
        let todos: Vec<Todo> = args
            .todos
            .into_iter()
            .map(|item| Todo {
                content: item.content.into_inner(),
                status: item.status,
            })
            .collect();
        let in_progress = todos
            .iter()
            .filter(|t| t.status == TodoStatus::InProgress)
            .count();
        if in_progress > 1 {
            return Err(ToolError::new(format!(
                "{in_progress} items are in_progress; at most one may be. Finish or pause the others first."
            )));
        }
        let mut text = String::new();
        for todo in &todos {
            let mark = match todo.status {
                TodoStatus::Pending => "[ ]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Completed => "[x]",
            };
            text.push_str(&format!("{mark} {}\n", todo.content));
        }
        let done = todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count();
        text.push_str(&format!("({done} of {} done)", todos.len()));
        let details = json!({"todos": todos});
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = todos;
        Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(details),
            ..ToolOutput::default()
        })
    }
}
