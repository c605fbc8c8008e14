//! `todowrite`: the model's task list, always sent whole.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// State of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Deserialize)]
struct Args {
    todos: Vec<Todo>,
}

/// The `todowrite` tool; the latest list is kept for reminders and front ends.
pub struct TodoWrite {
    definition: ToolDefinition,
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
        let definition = ToolDefinition {
            name: "todowrite".into(),
            description:
                "Replace your task list with this full snapshot. Use it for work of several steps: \
                          mark one item in_progress at a time and completed as soon as it is done."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
        };
        Self {
            definition,
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
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = serde_json::from_value(arguments)
            .map_err(|e| ToolError::new(format!("Invalid arguments: {e}")))?;
        let in_progress = args
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::InProgress)
            .count();
        if in_progress > 1 {
            return Err(ToolError::new(format!(
                "{in_progress} items are in_progress; at most one may be. Finish or pause the others first."
            )));
        }
        let mut text = String::new();
        for todo in &args.todos {
            let mark = match todo.status {
                TodoStatus::Pending => "[ ]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Completed => "[x]",
            };
            text.push_str(&format!("{mark} {}\n", todo.content));
        }
        let done = args
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count();
        text.push_str(&format!("({done} of {} done)", args.todos.len()));
        let details = json!({"todos": args.todos});
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = args.todos;
        Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(details),
            ..ToolOutput::default()
        })
    }
}
