//! Reminders (DESIGN §4): what the host adds to a turn's prompt for the model, and the rules
//! every reminder obeys.
//!
//! Two kinds of provider feed a turn:
//! - extension reminders ([`super::ExtensionApi::register_reminder_provider`]): each gives
//!   one complete `<system-reminder>` block, and a turn's are ordered by priority;
//! - the host's reminder block ([`super::ExtensionApi::register_system_reminder`]): its
//!   providers give text in registration order, which the host joins into exactly one block.
//!
//! Every build is one round of the session: the host counts it, gathers what providers need
//! ([`ReminderData`]) and runs them. A critical provider runs for every model; the others
//! are skipped for models in `disable_system_reminder_models`. Anything that is not one
//! complete block where one is required is an error, never sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use keel_protocol::Message;
use keel_store::SessionReminder;

use super::{ExtensionError, ReminderMode, TurnScope, is_reminder_block};
use super::{REMINDER_CLOSE, REMINDER_OPEN};

/// Whether a reminder still goes to models that have reminders switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Criticality {
    /// Skipped for models in `disable_system_reminder_models`.
    #[default]
    Optional,
    /// Sent to every model: leaving it out would lose something the session depends on
    /// (unfinished todos, a reminder the session was left).
    Critical,
}

/// Produces reminder text for a turn; `None` when it has nothing, or incomplete data.
pub trait ReminderProvider: Send + Sync {
    /// Stable name within its extension; the host remembers when it last fired under it.
    fn id(&self) -> &str;
    /// Whether it is critical.
    fn criticality(&self) -> Criticality {
        Criticality::Optional
    }
    /// The reminder: one complete block for an extension reminder, plain text for the
    /// host's block.
    fn reminder(&self, data: &ReminderData<'_>) -> Option<String>;
}

/// What the host gathered for one round of reminders.
pub struct ReminderData<'a> {
    /// The turn.
    pub scope: &'a TurnScope,
    /// This round's number in the session, from 1.
    pub round: u64,
    /// The session's history before the turn.
    pub history: &'a [Arc<Message>],
    /// Reminders left for the session's next turn, oldest first.
    pub pending: &'a [SessionReminder],
    /// When each provider (`extension/id`) last fired.
    pub last_fired: &'a BTreeMap<String, u64>,
    delivered: Mutex<Vec<String>>,
    current: Mutex<String>,
    /// Providers that asked when they last fired: only theirs is worth remembering.
    consulted: Mutex<Vec<String>>,
}

impl<'a> ReminderData<'a> {
    /// Data for round `round` of `scope`'s session.
    pub fn new(
        scope: &'a TurnScope,
        round: u64,
        history: &'a [Arc<Message>],
        pending: &'a [SessionReminder],
        last_fired: &'a BTreeMap<String, u64>,
    ) -> Self {
        Self {
            scope,
            round,
            history,
            pending,
            last_fired,
            delivered: Mutex::new(Vec::new()),
            current: Mutex::new(String::new()),
            consulted: Mutex::new(Vec::new()),
        }
    }

    /// The round in which the provider being run last fired. A provider that asks has the
    /// round it fires in remembered; the others' are not kept.
    pub fn last_fired(&self) -> Option<u64> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        self.consulted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(current.clone());
        self.last_fired.get(current.as_str()).copied()
    }

    /// Marks a pending session reminder as carried by this round's text: the turn claims
    /// it, and acknowledges it once the prompt is committed.
    pub fn deliver(&self, reminder_id: &str) {
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(reminder_id.to_owned());
    }

    fn running(&self, key: &str) {
        key.clone_into(&mut self.current.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// A reminder provider as registered, with the extension that registered it.
#[derive(Clone)]
pub struct RegisteredReminder {
    /// The extension.
    pub extension: String,
    /// Its priority (extension reminders only).
    pub priority: i32,
    /// The provider.
    pub provider: Arc<dyn ReminderProvider>,
}

impl RegisteredReminder {
    fn key(&self) -> String {
        format!("{}/{}", self.extension, self.provider.id())
    }
}

/// One round's reminders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Extension reminders, highest priority first, each one complete block.
    pub blocks: Vec<String>,
    /// The host's block: empty, or exactly one complete block.
    pub host_block: String,
    /// Providers (`extension/id`) that gave something this round.
    pub fired: Vec<String>,
    /// Of those, the ones that asked when they last fired: the host remembers this round
    /// for them.
    pub remember: Vec<String>,
    /// Pending session reminders the text carries.
    pub delivered: Vec<String>,
}

/// Runs one round: the extension reminders (`blocks`, priority order) and the host block's
/// providers (`host`, registration order), skipping optional ones when `mode` says so.
pub fn render(
    blocks: &[RegisteredReminder],
    host: &[RegisteredReminder],
    data: &ReminderData<'_>,
    mode: ReminderMode,
) -> Result<Rendered, ExtensionError> {
    let mut out = Rendered::default();
    for registered in blocks {
        if !mode.allows(registered.provider.criticality()) {
            continue;
        }
        let key = registered.key();
        data.running(&key);
        let Some(text) = registered
            .provider
            .reminder(data)
            .filter(|t| !t.trim().is_empty())
        else {
            continue;
        };
        if !is_reminder_block(&text) {
            return Err(ExtensionError::Invalid {
                extension: registered.extension.clone(),
                reason: "a reminder must be exactly one complete <system-reminder> block".into(),
            });
        }
        out.blocks.push(text);
        out.fired.push(key);
    }
    let mut parts = Vec::new();
    for registered in host {
        if !mode.allows(registered.provider.criticality()) {
            continue;
        }
        let key = registered.key();
        data.running(&key);
        if let Some(text) = registered.provider.reminder(data) {
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            // Tags of its own would make the host's block more than one block.
            if text.contains(REMINDER_OPEN) || text.contains(REMINDER_CLOSE) {
                return Err(ExtensionError::Invalid {
                    extension: registered.extension.clone(),
                    reason: "text for the host's reminder block must not hold reminder tags".into(),
                });
            }
            parts.push(text.to_owned());
            out.fired.push(key);
        }
    }
    if !parts.is_empty() {
        let block = format!("{REMINDER_OPEN}\n{}\n{REMINDER_CLOSE}", parts.join("\n\n"));
        if !is_reminder_block(&block) {
            return Err(ExtensionError::Invalid {
                extension: "host".into(),
                reason: "the host's reminders did not make exactly one block".into(),
            });
        }
        out.host_block = block;
    }
    out.delivered = std::mem::take(
        &mut *data
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    let consulted = data
        .consulted
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    out.remember = out
        .fired
        .iter()
        .filter(|key| consulted.contains(key))
        .cloned()
        .collect();
    Ok(out)
}
