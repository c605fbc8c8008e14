//! The turns service: starting a turn, steering and queueing input, answering permission
//! requests and stopping a turn. The queue's operations are in [`crate::queue`], the turn
//! engine in [`crate::turn`].

use keel_protocol::{ImageBlock, SessionId, TurnSource};

use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::turn::{Start, TurnHandle, TurnOptions};

/// The turns service.
#[derive(Clone)]
pub(crate) struct Turns {
    pub(crate) runtime: Runtime,
}

impl Runtime {
    /// The turns service.
    pub(crate) fn turns(&self) -> Turns {
        Turns {
            runtime: self.clone(),
        }
    }
}

impl Turns {
    /// Starts a turn with the user's input and images; refused while one runs, and when
    /// the session's model does not take images.
    pub(crate) async fn submit_with_images(
        &self,
        session: &SessionId,
        text: String,
        images: Vec<ImageBlock>,
        source: TurnSource,
        options: TurnOptions,
    ) -> Result<TurnHandle, RuntimeError> {
        let slot = self.runtime.slot_or_open(session).await?;
        if !images.is_empty() {
            let model = slot.lock().model.clone();
            if model
                .entry
                .as_ref()
                .is_some_and(|entry| !entry.capabilities.images)
            {
                return Err(RuntimeError::Usage(format!(
                    "{} does not take images; send text, or switch to a model that does",
                    model.name
                )));
            }
        }
        self.runtime
            .sessions()
            .title_from_prompt(&slot, &text)
            .await;
        self.runtime
            .start_turn(slot, Start::Input(text, images), source, options)
            .await
    }

    /// Runs a command the user typed (`!command`) as a turn of one call; refused while a
    /// turn runs.
    pub(crate) async fn run_shell(
        &self,
        session: &SessionId,
        command: &str,
        remember: bool,
    ) -> Result<TurnHandle, RuntimeError> {
        let command = command.trim();
        if command.is_empty() {
            return Err(RuntimeError::Usage(
                "no command after `!`: type one, as in `!git status`".into(),
            ));
        }
        let slot = self.runtime.slot_or_open(session).await?;
        self.runtime
            .start_turn(
                slot,
                Start::Shell(command.to_owned(), remember),
                TurnSource::Api,
                TurnOptions::default(),
            )
            .await
    }

    /// Aborts the session's running turn; `false` when none runs.
    pub(crate) fn abort(&self, session: &SessionId) -> Result<bool, RuntimeError> {
        let slot = self.runtime.slot(session)?;
        Ok(match slot.running() {
            Some(turn) => {
                turn.cancel.cancel();
                true
            }
            None => false,
        })
    }
}
