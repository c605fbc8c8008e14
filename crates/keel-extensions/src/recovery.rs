//! Terminal response recovery (DESIGN §8): when every tool of the last step succeeded and
//! the model then answers with neither a tool call nor visible text, it is asked once for a
//! short final answer; a second empty answer fails the turn with `terminal_empty`.
//!
//! (The runner already fails a turn whose first and only response is empty, as
//! `empty_response`; this covers the empty answer that follows work.)

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::{AfterLlmCallHook, StepEndHook, StepQueue};
use keel_agent::{HookError, ResponseDecision, StepSummary, TurnContext};
use keel_protocol::{AssistantMessage, ContentBlock, StopReason};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, TurnScope,
};
use serde_json::json;

use crate::TERMINAL_RECOVERY;
use crate::per_turn::PerTurn;

/// The code a second empty answer fails the turn with.
pub const TERMINAL_EMPTY: keel_protocol::FailureCode = keel_protocol::FailureCode::TerminalEmpty;

/// What the model is asked after an empty final answer.
pub const RECOVERY_PROMPT: &str = "Your last reply was empty. The tools you ran succeeded: \
reply now with a concise final answer that sums up what was done and the result.";

/// The terminal recovery extension.
pub struct TerminalRecovery;

impl Extension for TerminalRecovery {
    fn id(&self) -> &str {
        TERMINAL_RECOVERY
    }

    fn description(&self) -> Option<&str> {
        Some("asks once for a final answer when the model goes silent after its tools")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        // One state per turn, shared by its two handlers.
        let turns: Arc<PerTurn<Recovery>> = Arc::default();
        let state_for = move |scope: &TurnScope| {
            turns.get(&scope.turn_id, || Recovery {
                scope: scope.clone(),
                state: Mutex::new(State::default()),
            })
        };
        let for_steps = state_for.clone();
        api.on_each_turn(
            ExtensionEvent::OnStepEnd,
            Arc::new(move |scope: &TurnScope| Hook::OnStepEnd(for_steps(scope))),
        )?;
        api.on_each_turn(
            ExtensionEvent::AfterLlmCall,
            Arc::new(move |scope: &TurnScope| Hook::AfterLlmCall(state_for(scope))),
        )
    }
}

#[derive(Default)]
struct State {
    /// The last step ran tools and every one succeeded.
    tools_succeeded: bool,
    /// The model was asked once already.
    retried: bool,
}

struct Recovery {
    scope: TurnScope,
    state: Mutex<State>,
}

/// Whether an answer shows nothing: no tool call, no visible text, no image.
fn shows_nothing(message: &AssistantMessage) -> bool {
    !message.content.iter().any(|block| match block {
        ContentBlock::Text(text) => !text.text.trim().is_empty(),
        ContentBlock::Thinking(_) => false,
        _ => true,
    })
}

#[async_trait]
impl StepEndHook for Recovery {
    async fn on_step_end(
        &self,
        _turn: &TurnContext,
        step: &StepSummary,
        _queue: &StepQueue,
    ) -> Result<(), HookError> {
        let ran = !step.tool_results.is_empty();
        let ok = step
            .tool_results
            .iter()
            .all(|m| m.as_tool_result().is_some_and(|r| !r.is_error));
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tools_succeeded = ran && ok;
        Ok(())
    }
}

#[async_trait]
impl AfterLlmCallHook for Recovery {
    async fn after_llm_call(
        &self,
        _turn: &TurnContext,
        message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError> {
        if matches!(message.stop_reason, StopReason::Error | StopReason::Aborted)
            || !shows_nothing(message)
        {
            return Ok(ResponseDecision::Accept);
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.retried {
            self.scope
                .emit(TERMINAL_RECOVERY, "failed", json!({"code": TERMINAL_EMPTY}));
            return Ok(ResponseDecision::Fail {
                code: TERMINAL_EMPTY,
                message: "the model gave an empty final answer twice after its tools succeeded"
                    .into(),
            });
        }
        if !state.tools_succeeded {
            return Ok(ResponseDecision::Accept);
        }
        state.retried = true;
        self.scope.emit(
            TERMINAL_RECOVERY,
            "retry",
            json!({"reason": "empty_final_answer"}),
        );
        Ok(ResponseDecision::Retry {
            prompt: RECOVERY_PROMPT.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_alone_shows_nothing_and_text_does() {
        let mut message = AssistantMessage::from_text("  \n");
        assert!(shows_nothing(&message));
        message
            .content
            .push(ContentBlock::Thinking(Default::default()));
        assert!(shows_nothing(&message));
        message.content.push(ContentBlock::text("Done."));
        assert!(!shows_nothing(&message));
    }
}
