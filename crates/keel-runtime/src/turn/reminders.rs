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

/// Session state key of the reminder round counter.
const ROUND_KEY: &str = "reminders.round";
/// Session state key of when each reminder provider last fired.
const FIRED_KEY: &str = "reminders.fired";

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
        let round = store.bump_session_counter(session, ROUND_KEY).await?;
        let mut fired: BTreeMap<String, u64> = store
            .session_state(session, FIRED_KEY)
            .await?
            .and_then(|value| serde_json::from_value(value).ok())
            .unwrap_or_default();
        let pending = store.session_reminders(session).await?;
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
        if !rendered.fired.is_empty() {
            for key in &rendered.fired {
                fired.insert(key.clone(), round);
            }
            let value = serde_json::to_value(&fired).unwrap_or_default();
            store.set_session_state(session, FIRED_KEY, value).await?;
        }
        Ok(rendered)
    }
}
