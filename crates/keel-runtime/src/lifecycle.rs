//! The sessions service: update, fork, rewind, retry, take back and delete (compaction is
//! in [`crate::compaction`]).

use std::sync::{Arc, PoisonError};

use keel_protocol::{Message, SessionEventBody, SessionId, SessionTarget, TurnSource};
use keel_protocol::{PermissionMode, ThinkingChoice, ThinkingLevel};
use keel_store::{NewSession, SessionRecord, StoredEntry, new_id};

use crate::assembly::{ModelChoice, resolve_model};
use crate::compaction::Compactor;
use crate::error::RuntimeError;
use crate::extension::SessionChange;
use crate::runtime::{Admission, Opened, Runtime, SessionStart, Slot};
use crate::turn::TurnHandle;

/// Changes to a session.
#[derive(Debug, Clone, Default)]
pub struct SessionUpdate {
    /// New title.
    pub title: Option<String>,
    /// New model as provider/model.
    pub model: Option<String>,
    /// New permission mode.
    pub mode: Option<PermissionMode>,
    /// New thinking level, or the model's own.
    pub thinking: Option<ThinkingChoice>,
}

/// Whether `model` accepts `level` (a scripted model accepts any; `off` needs no support).
pub(crate) fn offers(model: &crate::assembly::ResolvedModel, level: ThinkingLevel) -> bool {
    match &model.entry {
        None => true,
        Some(entry) => {
            level == ThinkingLevel::Off || entry.capabilities.thinking_levels.contains(&level)
        }
    }
}

pub(crate) fn refuse_if_running(slot: &Slot) -> Result<(), RuntimeError> {
    match &slot.lock().admission {
        Admission::Idle => Ok(()),
        Admission::Starting => Err(RuntimeError::TurnRunning {
            session: slot.id.clone(),
            turn: "(starting)".into(),
        }),
        Admission::Running(turn) => Err(RuntimeError::TurnRunning {
            session: slot.id.clone(),
            turn: turn.turn_id.to_string(),
        }),
    }
}

/// The sessions service: changes to a session's record and history (update, fork, rewind,
/// retry, take back, delete, compact), each refused under a running turn where it must be
/// and told to every extension.
#[derive(Clone)]
pub(crate) struct Sessions {
    pub(crate) runtime: Runtime,
}

impl Runtime {
    /// The sessions service.
    pub(crate) fn sessions(&self) -> Sessions {
        Sessions {
            runtime: self.clone(),
        }
    }
}

impl Sessions {
    /// Opens a session: a new one, one by id or prefix, or the newest of the working folder.
    /// Opening reads; a resumed session's interrupted tool calls are closed at its first turn,
    /// once this process owns it, so another process's running turn is never touched.
    pub(crate) async fn open_session(&self, target: SessionTarget) -> Result<Opened, RuntimeError> {
        let store = &self.runtime.inner.store;
        let cwd = self.runtime.inner.settings.cwd.display().to_string();
        let (record, start) = match target {
            SessionTarget::New { title } => {
                let record = store
                    .create_session(NewSession {
                        title: title.unwrap_or_default(),
                        cwd,
                        model: self.runtime.model()?.name.clone(),
                        parent_id: None,
                    })
                    .await?;
                (record, SessionStart::New)
            }
            SessionTarget::Id { id } => {
                let id = store.resolve_session(&id).await?;
                (store.session(&id).await?, SessionStart::Resumed)
            }
            SessionTarget::Exact { id } => {
                let record = store.session(&SessionId::from(id.as_str())).await?;
                self.runtime.in_this_folder(&record)?;
                (record, SessionStart::Resumed)
            }
            // A task's child session is resumed through its parent, never as "the latest".
            SessionTarget::Latest => match store.latest_session(cwd.clone()).await? {
                Some(record) => (record, SessionStart::Resumed),
                None => return Err(RuntimeError::NoSessionIn(cwd)),
            },
        };
        let known = self
            .runtime
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&record.id);
        let slot = self.runtime.slot_or_open(&record.id).await?;
        let record = slot.lock().record.clone();
        if !known && start == SessionStart::Resumed {
            // Tasks a stopped process left running are lost; the next turn is told.
            self.runtime.settle_lost(&record.id).await;
            if matches!(self.runtime.inner.store.tasks(&record.id).await, Ok(tasks) if !tasks.is_empty())
            {
                slot.lock().tasks_seen = true;
            }
        }
        if !known {
            self.runtime
                .session_changed(
                    &record.id,
                    crate::extension::SessionChange::Opened {
                        resumed: start == SessionStart::Resumed,
                    },
                )
                .await;
        }
        Ok(Opened { record, start })
    }

    /// Closes a session in this runtime (its slot and subscriptions); a running turn is
    /// aborted first and its unconsumed inputs go back to the queue.
    pub(crate) async fn close_session(&self, session: &SessionId) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(session)?;
        // Its tasks go with it: nothing would hear of their ends.
        self.runtime.tasks().stop_all(session).await;
        if let Some(turn) = slot.running() {
            turn.cancel.cancel();
            turn.ended().await;
        }
        let removed = self
            .runtime
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
        if removed.is_some() {
            self.runtime
                .session_changed(session, crate::extension::SessionChange::Closed)
                .await;
            self.forget_if_empty(session).await;
        }
        Ok(())
    }

    /// Changes a session's title, model or permission mode. A running turn keeps what it
    /// started with; the next turn uses the change.
    pub(crate) async fn update_session(
        &self,
        session: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionRecord, RuntimeError> {
        let slot = self.runtime.slot_or_open(session).await?;
        let store = &self.runtime.inner.store;
        let mode = update.mode;
        let model = match &update.model {
            Some(name) => Some(self.runtime.resolve_named_model(name)?),
            None => None,
        };
        let thinking = update.thinking.map(ThinkingChoice::level);
        if let Some(Some(level)) = thinking {
            let current = slot.lock().model.clone();
            let model = model.as_ref().unwrap_or(&current);
            if !offers(model, level) {
                return Err(RuntimeError::Usage(format!(
                    "{} does not offer the thinking level `{level}`",
                    model.name,
                )));
            }
        }
        if let Some(title) = &update.title {
            store.set_title(session, title.clone()).await?;
        }
        if let Some(model) = &model {
            store.set_model(session, model.name.clone()).await?;
        }
        if model.is_some() || mode.is_some() {
            let (current_model, current_mode, old_rules) = {
                let state = slot.lock();
                (
                    state.model.clone(),
                    state.mode,
                    state.services.gate.session_rules(),
                )
            };
            let model = model.unwrap_or(current_model);
            let mode = mode.unwrap_or(current_mode);
            let services = self.runtime.services(
                &slot.id,
                Some(&slot),
                &model,
                mode,
                slot.profile.as_deref(),
            )?;
            // "Always allow" answers hold for the rest of the session, whatever changes.
            for rule in old_rules {
                services.gate.add_session_rule(rule);
            }
            let mut state = slot.lock();
            state.model = model;
            state.mode = mode;
            state.services = services;
        }
        let record = store.session(session).await?;
        let (mode, thinking) = {
            let mut state = slot.lock();
            state.record = record.clone();
            if let Some(level) = thinking {
                state.thinking = level;
            }
            // A level the new model does not take goes back to the model's own.
            if let Some(level) = state.thinking
                && !offers(&state.model, level)
            {
                state.thinking = None;
            }
            (state.mode, state.thinking)
        };
        slot.emit(SessionEventBody::SessionUpdated {
            title: record.title.clone(),
            model: record.model.clone(),
            mode: Some(mode),
            thinking,
        });
        Ok(record)
    }

    /// Copies a session's history up to `revision` (default: the head) into a new session,
    /// titled "Fork of <title>".
    pub(crate) async fn fork_session(
        &self,
        session: &SessionId,
        revision: Option<u64>,
    ) -> Result<SessionRecord, RuntimeError> {
        let store = &self.runtime.inner.store;
        let source = store.session(session).await?;
        self.runtime.in_this_folder(&source)?;
        let mut forked = store.fork(session, revision, None).await?;
        let title = if source.title.is_empty() {
            "Fork".to_owned()
        } else {
            format!("Fork of {}", source.title)
        };
        store.set_title(&forked.id, title.clone()).await?;
        forked.title = title;
        Ok(forked)
    }

    /// A session without a title takes one from the first prompt it is sent, at once (a
    /// model-written one may replace it when its first turn ends).
    pub(crate) async fn title_from_prompt(&self, slot: &Arc<Slot>, prompt: &str) {
        if !slot.lock().record.title.is_empty() {
            return;
        }
        let title = crate::sessions::title_of(prompt);
        if title.is_empty() {
            return;
        }
        let update = SessionUpdate {
            title: Some(title),
            ..SessionUpdate::default()
        };
        if let Err(error) = self.update_session(&slot.id, update).await {
            tracing::warn!(session = %slot.id, %error, "cannot title the session");
        }
    }

    /// Deletes a session nobody wrote in (no history, no turn, nothing queued, no task):
    /// opening one and leaving it leaves nothing behind.
    pub(crate) async fn forget_if_empty(&self, session: &SessionId) {
        let store = &self.runtime.inner.store;
        let Ok(record) = store.session(session).await else {
            return;
        };
        if record.length > 0 || record.parent_id.is_some() {
            return;
        }
        let untouched = matches!(store.turns(session).await, Ok(t) if t.is_empty())
            && matches!(store.queued_inputs(session).await, Ok(q) if q.is_empty())
            && matches!(store.tasks(session).await, Ok(t) if t.is_empty());
        if untouched && let Err(error) = store.delete_session(session).await {
            tracing::warn!(%session, %error, "cannot delete an empty session");
        }
    }

    /// Moves a session's history back to `revision` (refused while a turn runs).
    pub(crate) async fn rewind_session(
        &self,
        session: &SessionId,
        revision: u64,
    ) -> Result<u64, RuntimeError> {
        if let Ok(slot) = self.runtime.slot(session) {
            refuse_if_running(&slot)?;
        }
        let receipt = self
            .runtime
            .inner
            .store
            .rewind(session, revision, new_id("op-"))
            .await?;
        if let Ok(slot) = self.runtime.slot(session) {
            slot.history_changed();
        }
        self.runtime
            .session_changed(
                session,
                SessionChange::Rewound {
                    revision,
                    length: receipt.length,
                },
            )
            .await;
        Ok(receipt.revision)
    }

    /// The last message the user typed (not a hidden host prompt nor a `!` command), its index in `entries`
    /// and the revision history had just before it.
    fn last_typed(entries: &[StoredEntry]) -> Option<(usize, String, u64)> {
        let (index, text) =
            entries
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, e)| match &e.message {
                    Message::User(user) if !user.hidden && user.shell.is_none() => {
                        Some((i, user.joined_text()))
                    }
                    _ => None,
                })?;
        let before = entries[..index]
            .iter()
            .map(|e| e.revision)
            .max()
            .unwrap_or(0);
        Some((index, text, before))
    }

    /// Goes back to just before the last typed message and asks it again as a new turn.
    pub(crate) async fn retry(&self, session: &SessionId) -> Result<TurnHandle, RuntimeError> {
        let entries = self.runtime.inner.store.history(session).await?;
        let Some((_, text, before)) = Self::last_typed(&entries) else {
            return Err(RuntimeError::Usage("no message to ask again".into()));
        };
        self.rewind_session(session, before).await?;
        self.runtime
            .turns()
            .submit_with_images(
                session,
                text,
                Vec::new(),
                TurnSource::Api,
                crate::turn::TurnOptions::default(),
            )
            .await
    }

    /// Takes back the last typed message when nothing answered it: its text, or `None` when
    /// it was answered (or there is none).
    pub(crate) async fn take_back(
        &self,
        session: &SessionId,
    ) -> Result<Option<String>, RuntimeError> {
        let entries = self.runtime.inner.store.history(session).await?;
        let Some((index, text, before)) = Self::last_typed(&entries) else {
            return Ok(None);
        };
        // An interrupted turn may leave an empty assistant message: that is no answer.
        let answered = entries[index + 1..].iter().any(|e| {
            e.message.as_assistant().is_some_and(|a| {
                a.content.iter().any(|block| match block {
                    keel_protocol::ContentBlock::Text(text) => !text.text.trim().is_empty(),
                    keel_protocol::ContentBlock::Thinking(_) => false,
                    _ => true,
                })
            })
        });
        if answered || before == 0 {
            return Ok(None);
        }
        self.rewind_session(session, before).await?;
        Ok(Some(text))
    }

    /// Deletes a session and its history (refused while a turn runs, here or elsewhere).
    pub(crate) async fn delete_session(&self, session: &SessionId) -> Result<(), RuntimeError> {
        if let Ok(slot) = self.runtime.slot(session) {
            refuse_if_running(&slot)?;
        }
        // Its tasks' records go with it: stop them first.
        self.runtime.tasks().stop_all(session).await;
        self.runtime.inner.store.delete_session(session).await?;
        self.runtime
            .inner
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(session);
        self.runtime.inner.registry.forget_session(session);
        self.runtime
            .session_changed(session, SessionChange::Deleted)
            .await;
        // What the session's tools saw goes with it.
        crate::storage::remove_session_dir(self.runtime.inner.store.path(), session)
    }
}

impl Runtime {
    /// A model by `provider/model` name, for a session or a task; refused when the runtime
    /// answers with a fixed model (a script).
    pub(crate) fn resolve_named_model(
        &self,
        name: &str,
    ) -> Result<crate::assembly::ResolvedModel, RuntimeError> {
        if matches!(self.inner.choice, ModelChoice::Fixed { .. }) {
            return Err(RuntimeError::Unsupported(format!(
                "this runtime answers with a fixed model; it cannot use `{name}`"
            )));
        }
        let mut warnings = Vec::new();
        let resolved = resolve_model(
            &self.inner.settings,
            &self.inner.choice,
            Some(name),
            &mut warnings,
        )?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        Ok(resolved)
    }

    /// Tells the extensions that keep files beside a session what happened to it.
    pub(crate) async fn session_changed(&self, session: &SessionId, change: SessionChange) {
        let dir = self.session_dir(session);
        for hook in self.inner.registry.session_hooks() {
            if let Err(error) = hook.session_changed(session, Some(&dir), &change).await {
                tracing::warn!(%session, error = %error.message, "a session change handler failed");
            }
        }
    }

    /// Installs the compaction strategy the `compact` operation uses.
    pub fn set_compactor(&self, compactor: Arc<dyn Compactor>) {
        *self
            .inner
            .compactor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(compactor);
    }
}
