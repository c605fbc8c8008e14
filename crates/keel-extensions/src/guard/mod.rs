//! The runaway guard (DESIGN §7): notices the model going round in circles within a turn
//! and, at most once per turn, reminds it to change course. It never blocks a tool and
//! never ends a turn.
//!
//! At each step's end the step's calls are fingerprinted ([`fingerprint`]) under a key
//! drawn for the turn and counted ([`state`]). A signal at 2 is reported as an observation;
//! the first reminding signal to reach the threshold (`runaway_guard.threshold`, at least
//! 3) is reminded of through the steering queue, before the next model request.

pub mod fingerprint;
pub mod replay;
pub mod state;

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::{StepEndHook, StepQueue};
use keel_agent::{HookError, StepSummary, TurnContext};
use keel_protocol::{Message, ToolResultMessage, UserMessage};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, TurnScope,
};
use serde_json::json;

use crate::RUNAWAY_GUARD;
use crate::text::block;
use fingerprint::{CallPrint, Key, print_call};
use state::{Count, GuardState, Signal, Verdict};

/// The runaway guard extension; `runaway_guard.enabled: false` leaves it without hooks.
pub struct RunawayGuard;

impl Extension for RunawayGuard {
    fn id(&self) -> &str {
        RUNAWAY_GUARD
    }

    fn description(&self) -> Option<&str> {
        Some("reminds the model once when it repeats itself without progress")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        // Read once, at creation (DESIGN §7).
        let config = api.config().runaway_guard;
        if !config.enabled {
            return Ok(());
        }
        let threshold = config.effective_threshold();
        api.on_each_turn(
            ExtensionEvent::OnStepEnd,
            Arc::new(move |scope: &TurnScope| {
                Hook::OnStepEnd(Arc::new(TurnGuard::new(scope.clone(), threshold)))
            }),
        )
    }
}

/// Fingerprints a step: its calls, each with its result, in call order, and the batch.
pub fn print_step(key: &Key, step: &StepSummary) -> (Vec<CallPrint>, fingerprint::Print) {
    let Some(message) = step.message.as_deref().and_then(Message::as_assistant) else {
        return (Vec::new(), key.print("batch", &[]));
    };
    let results: Vec<&ToolResultMessage> = step
        .tool_results
        .iter()
        .filter_map(|m| m.as_tool_result())
        .collect();
    let calls: Vec<CallPrint> = message
        .tool_calls()
        .map(|call| {
            let result = results.iter().find(|r| r.tool_call_id == call.id).copied();
            print_call(key, call, result)
        })
        .collect();
    let batch = {
        let mut actions: Vec<&[u8]> = calls.iter().map(|c| c.action.as_slice()).collect();
        actions.sort_unstable();
        key.print("batch", &actions)
    };
    (calls, batch)
}

/// The guard of one turn.
struct TurnGuard {
    scope: TurnScope,
    key: Option<Key>,
    state: Mutex<GuardState>,
    step: Mutex<u32>,
}

impl TurnGuard {
    fn new(scope: TurnScope, threshold: u32) -> Self {
        let key = Key::random();
        if key.is_none() {
            tracing::warn!("no randomness for the runaway guard's key; it sits this turn out");
        }
        Self {
            scope,
            key,
            state: Mutex::new(GuardState::new(threshold)),
            step: Mutex::new(0),
        }
    }

    fn report(&self, step: u32, verdict: &Verdict) {
        for count in &verdict.observed {
            self.scope.emit(
                RUNAWAY_GUARD,
                "observation",
                json!({"signal": count.signal.name(), "count": count.count, "step": step,
                       "key": count.key}),
            );
        }
    }
}

#[async_trait]
impl StepEndHook for TurnGuard {
    async fn on_step_end(
        &self,
        _turn: &TurnContext,
        step: &StepSummary,
        queue: &StepQueue,
    ) -> Result<(), HookError> {
        let Some(key) = &self.key else {
            return Ok(());
        };
        let (calls, batch) = print_step(key, step);
        // A step without calls is the answer: nothing follows it to remind.
        if calls.is_empty() {
            return Ok(());
        }
        let number = {
            let mut n = self.step.lock().unwrap_or_else(PoisonError::into_inner);
            *n += 1;
            *n
        };
        let verdict = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .step(&calls, batch);
        self.report(number, &verdict);
        if let Some(count) = &verdict.remind {
            queue.steer(Message::User(UserMessage::hidden_text(reminder_text(
                count,
            ))));
            self.scope.emit(
                RUNAWAY_GUARD,
                "reminder",
                json!({"signal": count.signal.name(), "count": count.count, "step": number,
                       "key": count.key}),
            );
        }
        Ok(())
    }
}

/// The reminder for `count`'s signal.
pub fn reminder_text(count: &Count) -> String {
    let n = count.count;
    let what = match count.signal {
        Signal::NoProgress => format!(
            "The same action has now failed the same way {n} times, with other steps in between: \
             what you changed did not affect it."
        ),
        Signal::SameErrorFamily => {
            format!("Your last {n} tool calls failed with the same kind of error.")
        }
        Signal::RepeatedAction => {
            format!("You have made the same tool call {n} times in a row.")
        }
        Signal::Alternation => format!(
            "You are alternating between the same two steps ({n} repeats) without getting further."
        ),
        Signal::PollingWithoutChange => {
            format!("You have checked the same thing {n} times in a row and nothing changed.")
        }
        Signal::RepeatedResult => format!("Your last {n} tool calls returned the same result."),
    };
    block(&format!(
        "Runaway check (temporary: it applies to this turn only; do not save it to memory or \
         skills). {what} Do not repeat the call unchanged. Inspect the results you already \
         have, then either change strategy, saying what change of state you expect from your \
         next step, or stop and report what blocks you."
    ))
}
