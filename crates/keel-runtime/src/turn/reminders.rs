//! A turn's reminders (DESIGN §4): the round built when the turn is prepared, and the
//! reminder an interrupted turn leaves for the next one.

use std::collections::BTreeMap;
use std::sync::Arc;

use keel_protocol::Message;

use super::RunningTurn;
use crate::error::RuntimeError;
use crate::extension::reminders::Rendered;
use crate::extension::{ReminderData, TurnCapabilities, TurnScope};
use crate::runtime::Runtime;

/// Session state key of the reminders' round counter and of when providers last fired.
const STATE_KEY: &str = "reminders";

/// What a session remembers of its reminders.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct RoundState {
    /// Rounds built so far.
    round: u64,
    /// When each provider that asks (`extension/id`) last fired.
    #[serde(default)]
    fired: BTreeMap<String, u64>,
}

fn read_state(value: Option<serde_json::Value>) -> Result<RoundState, serde_json::Error> {
    value
        .map(serde_json::from_value)
        .transpose()
        .map(Option::unwrap_or_default)
}

/// Who leaves the reminder of an interrupted turn.
pub(super) const INTERRUPTED_SOURCE: &str = "runtime";

/// What the next turn is told about an interrupted one.
pub(super) fn interrupted_note(reason: Option<&str>) -> String {
    let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
    format!(
        "Your previous turn in this session was interrupted before it finished{why}. Tool \
         calls that had not run were not executed and an answer may be cut short: check the \
         current state before you continue, and do not assume an interrupted action completed."
    )
}

impl Runtime {
    /// One round of the session's reminders for this turn (DESIGN §4): the round counted,
    /// what providers need gathered, the providers run, the pending session reminders the
    /// text carries claimed for the turn, and when each provider fired remembered.
    pub(super) async fn reminder_round(
        &self,
        caps: &TurnCapabilities,
        scope: &TurnScope,
        history: &[Arc<Message>],
        running: &RunningTurn,
    ) -> Result<Rendered, RuntimeError> {
        if caps.reminders.is_empty() && caps.system_reminders.is_empty() {
            return Ok(Rendered::default());
        }
        let store = &self.inner.store;
        let session = &scope.session_id;
        // The round is counted, the state and the waiting reminders read, in one transaction.
        let (state, pending) = store
            .reminder_round(session, STATE_KEY, |current| {
                let mut state = read_state(current)?;
                state.round += 1;
                serde_json::to_value(&state).map_err(Into::into)
            })
            .await?;
        let RoundState { round, fired } = read_state(Some(state)).unwrap_or_default();
        let rendered = {
            let data = ReminderData::new(scope, round, history, &pending, &fired);
            caps.render_reminders(&data, scope.reminders)?
        };
        if !rendered.delivered.is_empty() {
            let claimed = store
                .claim_session_reminders(session, &running.turn_id, &rendered.delivered)
                .await?;
            if claimed.len() < rendered.delivered.len() {
                tracing::warn!(
                    turn = %running.turn_id,
                    "a session reminder was claimed elsewhere; it may be shown twice"
                );
            }
        }
        if !rendered.remember.is_empty() {
            let remember = rendered.remember.clone();
            store
                .update_session_state(session, STATE_KEY, move |current| {
                    let mut state = read_state(current)?;
                    for key in remember {
                        state.fired.insert(key, round);
                    }
                    serde_json::to_value(&state).map_err(Into::into)
                })
                .await?;
        }
        Ok(rendered)
    }
}
