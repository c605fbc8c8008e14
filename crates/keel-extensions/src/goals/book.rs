//! Where goals are kept: the store's per-session state is the truth (a goal survives a
//! restart), and every change is one transaction there. A copy per open session is kept
//! in memory because reminders are built synchronously, before any handler of the turn can
//! read the store; it is refreshed when a session opens, at every turn start and after
//! every change this extension makes.
//!
//! Every change reaches front ends as a typed `goal` event: with its turn when a turn made
//! it, with none when a command made it between turns (`/goal pause`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use keel_protocol::{GoalInfo, SessionId};
use keel_runtime::HostControl;
use keel_runtime::extension::ExtensionEvents;
use keel_store::Store;
use serde_json::Value;

use super::GoalError;
use super::state::{Goal, Limits, STATE_KEY, cleared};

/// What a change made of a goal, with what the change said, or why it made nothing.
type Changed<T> = Result<(Option<Goal>, T), GoalError>;

/// The goals of one runtime's sessions.
pub(crate) struct Book {
    control: HostControl,
    /// What a goal may spend when nobody says (`goals:` in the configuration).
    defaults: Limits,
    /// The last known goal of each open session (`None`: none).
    cache: Mutex<HashMap<SessionId, Option<Goal>>>,
    /// Sessions whose next turn `/goal` started for the goal.
    starting: Mutex<HashSet<SessionId>>,
}

impl Book {
    pub(crate) fn new(control: HostControl, defaults: Limits) -> Self {
        Self {
            control,
            defaults,
            cache: Mutex::default(),
            starting: Mutex::default(),
        }
    }

    /// The configured limits of a goal.
    pub(crate) fn defaults(&self) -> Limits {
        self.defaults
    }

    /// Marks `session`'s next turn as started for its goal: it counts toward the goal even
    /// if the goal is paused before the turn's first handler runs.
    pub(crate) fn starting(&self, session: &SessionId) {
        self.starting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.clone());
    }

    /// Whether `session`'s turn was marked by [`Self::starting`]; clears the mark.
    pub(crate) fn take_starting(&self, session: &SessionId) -> bool {
        self.starting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session)
    }

    /// Whether `session` has a turn running or being admitted.
    pub(crate) fn is_busy(&self, session: &SessionId) -> bool {
        self.control.is_busy(session)
    }

    /// The runtime, while it runs (for verifier tasks).
    pub(crate) fn runtime(&self) -> Option<keel_runtime::Runtime> {
        self.control.runtime()
    }

    /// The runtime's handle, for starting turns.
    pub(crate) fn control(&self) -> &HostControl {
        &self.control
    }

    fn store(&self) -> Result<Store, GoalError> {
        self.control
            .runtime()
            .map(|runtime| runtime.store().clone())
            .ok_or(GoalError::NoRuntime)
    }

    /// The cached goal of `session` (nothing when it was never read here).
    pub(crate) fn cached(&self, session: &SessionId) -> Option<Goal> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .cloned()
            .flatten()
    }

    fn remember(&self, session: &SessionId, goal: Option<Goal>) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.clone(), goal);
    }

    /// Forgets a session that closed or went away.
    pub(crate) fn forget(&self, session: &SessionId) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
    }

    /// The goal of `session` as stored.
    pub(crate) async fn load(&self, session: &SessionId) -> Result<Option<Goal>, GoalError> {
        let stored = self.store()?.session_state(session, STATE_KEY).await?;
        let goal = Goal::from_stored(stored)?;
        self.remember(session, goal.clone());
        Ok(goal)
    }

    /// Replaces `session`'s goal with what `change` makes of it, in one transaction, and
    /// returns it with what `change` said. An error from `change` changes nothing.
    pub(crate) async fn update<T, F>(&self, session: &SessionId, change: F) -> Changed<T>
    where
        T: Send + 'static,
        F: FnOnce(Option<Goal>) -> Changed<T> + Send + 'static,
    {
        // The store keeps the error behind a trait object; the typed outcome comes back
        // beside it.
        let outcome: Arc<Mutex<Option<Changed<T>>>> = Arc::default();
        let slot = outcome.clone();
        let written = self
            .store()?
            .update_session_state(session, STATE_KEY, move |stored| {
                let result = Goal::from_stored(stored).and_then(change);
                let next = match &result {
                    Ok((goal, _)) => Ok(goal.as_ref().map_or(Value::Null, Goal::to_value)),
                    Err(error) => Err(Box::new(error.clone()).into()),
                };
                *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
                next
            })
            .await;
        let result = outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match (written, result) {
            (Ok(_), Some(Ok(done))) => {
                self.remember(session, done.0.clone());
                Ok(done)
            }
            (_, Some(Err(error))) => Err(error),
            (Err(error), _) => Err(error.into()),
            (Ok(_), None) => Err(GoalError::Store("the goal was not updated".into())),
        }
    }

    /// Tells front ends about `goal` through the turn's `events`, or outside any turn.
    pub(crate) fn announce(
        &self,
        session: &SessionId,
        events: Option<&ExtensionEvents>,
        goal: &Goal,
    ) {
        self.emit(session, events, goal.info());
    }

    /// Tells front ends that `session`'s goal was cleared.
    pub(crate) fn announce_cleared(&self, session: &SessionId, objective: &str) {
        self.emit(session, None, cleared(objective));
    }

    fn emit(&self, session: &SessionId, events: Option<&ExtensionEvents>, goal: GoalInfo) {
        match events {
            Some(events) => events.goal(goal),
            None => {
                if let Some(events) = self.control().events(session) {
                    events.goal(goal);
                }
            }
        }
    }
}
