//! What a front end gets for a turn: options in, a handle while it runs, a report at its end.

use std::sync::Arc;

use keel_protocol::{Failure, Message, TurnId, TurnOutcome, TurnSource, Usage};
use tokio::sync::oneshot;

use crate::error::RuntimeError;
use crate::structured::OutputSchema;

/// Per-turn requests beyond the input.
#[derive(Debug, Default)]
pub struct TurnOptions {
    /// The final answer must be JSON valid against this schema.
    pub output_schema: Option<OutputSchema>,
    /// When the turn must be done (`--timeout`); extensions tell the model what is left.
    pub deadline: Option<std::time::Instant>,
    /// The input is what a person sent (`Submit`): the files it names with `@` go with it.
    /// Never set for a command's, a skill's or a task's prompt.
    pub typed: bool,
}

/// How a turn went, for the front end that started it.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// The turn.
    pub turn_id: TurnId,
    /// Who started it.
    pub source: TurnSource,
    /// The runner's outcome.
    pub outcome: TurnOutcome,
    /// The outcome recorded for the turn (a failed output check makes it `failed`).
    pub recorded: TurnOutcome,
    /// Messages the turn added.
    pub messages: Vec<Arc<Message>>,
    /// Tokens over its model calls.
    pub usage: Usage,
    /// The answer parsed by the output schema, when one was given and matched.
    pub structured_output: Option<serde_json::Value>,
    /// Why the output check failed.
    pub output_failure: Option<Failure>,
    /// History the turn produced that could not be stored.
    pub commit_failure: Option<String>,
    /// Why the turn's end could not be recorded.
    pub finish_failure: Option<String>,
    /// Wall time of the turn.
    pub duration: std::time::Duration,
}

impl TurnReport {
    /// The last assistant message's text.
    pub fn final_text(&self) -> String {
        if let Some(answer) = self.messages.iter().rev().find_map(|m| m.as_assistant()) {
            return answer.text();
        }
        // A turn with no answer at all ran a `!` command: its output is what it says.
        self.messages
            .iter()
            .rev()
            .find_map(|m| m.as_tool_result())
            .map(keel_protocol::ToolResultMessage::text)
            .unwrap_or_default()
    }
}

/// A started turn; wait for its report.
pub struct TurnHandle {
    /// The turn.
    pub turn_id: TurnId,
    pub(crate) report: oneshot::Receiver<TurnReport>,
}

impl std::fmt::Debug for TurnHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnHandle")
            .field("turn_id", &self.turn_id)
            .finish_non_exhaustive()
    }
}

impl TurnHandle {
    /// Waits for the turn to end.
    pub async fn wait(self) -> Result<TurnReport, RuntimeError> {
        self.report
            .await
            .map_err(|_| RuntimeError::TurnLost(self.turn_id))
    }
}
