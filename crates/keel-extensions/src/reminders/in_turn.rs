//! Reminders added while a turn runs, from `before_llm_call` (DESIGN §4):
//! - the execution budget: with a deadline, the seconds left go on each request only, never
//!   into history;
//! - the todo cadence: after [`TODO_CADENCE_STEPS`] answers without a todo write or this
//!   reminder, one hidden message joins history.
//!
//! Both go through admission: a reminder that would push the request past the input limit
//! is dropped and reported. The budget is request-only and so runs before the cadence,
//! which appends (later hooks do not run after an append).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use keel_agent::HookError;
use keel_agent::runner::{BeforeLlmAction, BeforeLlmCallHook, LlmCallView};
use keel_protocol::{Message, UserMessage};
use keel_runtime::extension::{Criticality, TurnScope};
use keel_tools::todo::TodoStatus;
use serde_json::json;

use super::admission;
use crate::REMINDERS;
use crate::text::{TODO_TOOL, block, defuse, latest_todos};

/// Answers without a todo write or a cadence reminder before the cadence reminds (DESIGN §4).
pub const TODO_CADENCE_STEPS: usize = 15;

/// Opening words of the cadence reminder, by which it is found in history.
const CADENCE_MARK: &str = "Todo check:";

/// Drops `reminder` when it does not fit; reports the drop.
fn admitted(scope: &TurnScope, view: &LlmCallView<'_>, name: &str, reminder: &str) -> bool {
    let spec = &scope.spec;
    match admission::admit(
        view.messages,
        reminder,
        u64::from(spec.context_window),
        u64::from(spec.max_output),
    ) {
        Ok(()) => true,
        Err((estimate, limit)) => {
            scope.emit(
                REMINDERS,
                "reminder_dropped",
                json!({"reminder": name, "estimated_tokens": estimate, "input_limit": limit}),
            );
            false
        }
    }
}

/// The time a `--timeout` leaves, on every request of the turn.
pub struct ExecutionBudget {
    /// The turn.
    pub scope: TurnScope,
}

#[async_trait]
impl BeforeLlmCallHook for ExecutionBudget {
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        let Some(deadline) = self.scope.deadline else {
            return Ok(BeforeLlmAction::Continue);
        };
        if !self.scope.reminders.allows(Criticality::Optional) {
            return Ok(BeforeLlmAction::Continue);
        }
        let left = deadline.saturating_duration_since(Instant::now()).as_secs();
        let text = block(&format!(
            "This run has {left} s left before its time limit. If that is not enough for what \
             remains, stop starting new work and answer with what is done and what is left."
        ));
        if !admitted(&self.scope, view, "execution_budget", &text) {
            return Ok(BeforeLlmAction::Continue);
        }
        let mut messages = view.messages.to_vec();
        messages.push(Arc::new(Message::User(UserMessage::hidden_text(text))));
        Ok(BeforeLlmAction::ReplaceRequest(messages))
    }
}

/// A reminder of the todo list after a long stretch without one.
pub struct TodoCadence {
    /// The turn.
    pub scope: TurnScope,
}

#[async_trait]
impl BeforeLlmCallHook for TodoCadence {
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        if !self.scope.reminders.allows(Criticality::Optional)
            || answers_since_todo(view.messages) < TODO_CADENCE_STEPS
        {
            return Ok(BeforeLlmAction::Continue);
        }
        let body = match latest_todos(view.messages) {
            Some(todos) if todos.iter().any(|t| t.status != TodoStatus::Completed) => {
                let mut text = format!(
                    "{CADENCE_MARK} you have worked for {TODO_CADENCE_STEPS} steps without \
                     updating your todo list. Its open items:"
                );
                for todo in todos.iter().filter(|t| t.status != TodoStatus::Completed) {
                    text.push_str(&format!("\n- {}", defuse(&todo.content)));
                }
                text.push_str("\nUpdate it with todowrite so it shows where the work stands.");
                text
            }
            Some(_) => return Ok(BeforeLlmAction::Continue),
            None => format!(
                "{CADENCE_MARK} this work has taken {TODO_CADENCE_STEPS} steps. If more remain, \
                 keep a short plan with todowrite, one item in progress at a time."
            ),
        };
        let text = block(&body);
        if !admitted(&self.scope, view, "todo_cadence", &text) {
            return Ok(BeforeLlmAction::Continue);
        }
        self.scope.emit(
            REMINDERS,
            "todo_cadence",
            json!({"steps": TODO_CADENCE_STEPS}),
        );
        Ok(BeforeLlmAction::AppendMessage(Box::new(Message::User(
            UserMessage::hidden_text(text),
        ))))
    }
}

/// Assistant answers since the last todo write or cadence reminder (counting stops at the
/// cadence: only whether it was reached matters).
fn answers_since_todo(messages: &[Arc<Message>]) -> usize {
    let mut answers = 0;
    for message in messages.iter().rev() {
        match &**message {
            Message::Assistant(answer) => {
                if answer.tool_calls().any(|call| call.name == TODO_TOOL) {
                    return answers;
                }
                answers += 1;
                if answers >= TODO_CADENCE_STEPS {
                    return answers;
                }
            }
            Message::User(user) if user.hidden => {
                let text = crate::text::text_of(&user.content);
                if text.contains(CADENCE_MARK) {
                    return answers;
                }
            }
            _ => {}
        }
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, ContentBlock, ToolCall};

    fn answer(tool: Option<&str>) -> Arc<Message> {
        let mut message = AssistantMessage::from_text("step");
        if let Some(name) = tool {
            message.content.push(ContentBlock::ToolCall(ToolCall {
                id: "c".into(),
                name: name.into(),
                arguments: json!({}),
            }));
        }
        Arc::new(Message::Assistant(message))
    }

    #[test]
    fn the_cadence_counts_answers_since_the_last_todo_write_or_reminder() {
        let mut history: Vec<Arc<Message>> = vec![answer(Some(TODO_TOOL))];
        history.extend((0..14).map(|_| answer(Some("bash"))));
        assert_eq!(answers_since_todo(&history), 14);
        history.push(answer(Some("bash")));
        assert_eq!(answers_since_todo(&history), 15);
        history.push(Arc::new(Message::User(UserMessage::hidden_text(block(
            &format!("{CADENCE_MARK} …"),
        )))));
        assert_eq!(answers_since_todo(&history), 0);
        history.push(answer(None));
        assert_eq!(answers_since_todo(&history), 1);
    }
}
