//! The reminders extension (DESIGN §4): the providers of the host's reminder block at the
//! start of every turn, and the reminders added while a turn runs.
//!
//! Host block, in registration order: identity, reminders the session was left (critical),
//! unfinished todos (critical, at most every 5 rounds), a project without instructions, and
//! the credential-like variables commands can see (by name). During the turn: the time left
//! (request-only), then the todo cadence (into history).

mod admission;
mod in_turn;
mod providers;

use std::sync::Arc;

use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, TurnScope,
};

pub use admission::{input_limit, request_tokens, tokens_of};
pub use in_turn::TODO_CADENCE_STEPS;
pub use providers::TODO_EVERY_ROUNDS;

/// The reminders extension.
pub struct Reminders;

impl Extension for Reminders {
    fn id(&self) -> &str {
        crate::REMINDERS
    }

    fn description(&self) -> Option<&str> {
        Some("tells the model what it needs at the start of a turn and while it runs")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        api.register_system_reminder(Arc::new(providers::Identity))?;
        api.register_system_reminder(Arc::new(providers::PendingSessionReminders))?;
        api.register_system_reminder(Arc::new(providers::TodoCompletion))?;
        api.register_system_reminder(Arc::new(providers::ColdStart))?;
        api.register_system_reminder(Arc::new(providers::SecretEnvironment))?;
        // Request-only before appending: a hook after an append does not run.
        api.on_each_turn(
            ExtensionEvent::BeforeLlmCall,
            Arc::new(|scope: &TurnScope| {
                Hook::BeforeLlmCall(Arc::new(in_turn::ExecutionBudget {
                    scope: scope.clone(),
                }))
            }),
        )?;
        api.on_each_turn(
            ExtensionEvent::BeforeLlmCall,
            Arc::new(|scope: &TurnScope| {
                Hook::BeforeLlmCall(Arc::new(in_turn::TodoCadence {
                    scope: scope.clone(),
                }))
            }),
        )
    }
}
