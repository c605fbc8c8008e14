//! Session lifecycle and maintenance beyond opening: update, fork, rewind, delete, abort,
//! and the compaction hook point.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{Message, SessionEventBody, SessionId, ToolDefinition, TurnId, TurnSource};
use keel_protocol::{PermissionMode, ThinkingChoice, ThinkingLevel};
use keel_store::{CommitRequest, Entry, HistoryOp, SessionRecord, StoredEntry, new_id};

use crate::assembly::{ModelChoice, resolve_model};
use crate::error::RuntimeError;
use crate::extension::{ExtensionEvents, SessionChange, TurnScope};
use crate::runtime::{Admission, Runtime, Slot};
use crate::turn::TurnHandle;

/// What a compaction strategy is given for the `compact` operation.
pub struct CompactRequest {
    /// The session.
    pub session_id: SessionId,
    /// Its canonical history.
    pub history: Vec<Arc<Message>>,
    /// The user's instructions for the summary (untrusted text, to be quoted).
    pub instructions: Option<String>,
    /// The system prompt the session's next request carries.
    pub system_prompt: String,
    /// The tool definitions the session's next request carries.
    pub tools: Vec<ToolDefinition>,
    /// The `context` configuration.
    pub context: crate::settings::ContextConfig,
    /// The session's model, folder and event stream, as a turn of it would see them (no
    /// turn runs: its id is never stored and its history writer is absent).
    pub scope: TurnScope,
}

/// A compaction strategy (DESIGN §12); the runtime calls it for the `compact` operation,
/// and for the `context_report` operation's measuring.
#[async_trait]
pub trait Compactor: Send + Sync {
    /// The history that replaces the request's, or `None` when nothing can be saved.
    async fn compact(&self, request: CompactRequest) -> Result<Option<Vec<Message>>, RuntimeError>;

    /// What the request would carry, measured the way compaction measures it.
    fn measure(&self, request: &CompactRequest) -> keel_protocol::ContextReport {
        rough_report(request)
    }
}

/// How a context report sizes what a request carries, in tokens.
pub struct Sizes<'a> {
    /// The system prompt's.
    pub system_prompt: u64,
    /// The tool definitions'.
    pub tools: u64,
    /// One content block's.
    pub block: &'a dyn Fn(&keel_protocol::ContentBlock) -> u64,
    /// What each sent message costs beyond its blocks.
    pub framing: u64,
    /// The input limit compaction keeps requests under, when one is set.
    pub limit: Option<u64>,
    /// Whether these are a calibrated measurer's (`false`: a rough estimate).
    pub measured: bool,
}

/// `request`'s next request by part (system prompt, tools, your messages, answers,
/// reasoning, tool calls, tool results), sized by `sizes`: one shape of report whoever
/// measures.
pub fn context_report(request: &CompactRequest, sizes: &Sizes<'_>) -> keel_protocol::ContextReport {
    use keel_protocol::ContentBlock;
    let mut parts = [
        ("system prompt", sizes.system_prompt),
        ("tools", sizes.tools),
        ("your messages", 0),
        ("answers", 0),
        ("reasoning", 0),
        ("tool calls", 0),
        ("tool results", 0),
    ];
    for message in &request.history {
        let (home, blocks) = match &**message {
            Message::User(user) => (2, &user.content),
            Message::Assistant(answer) => (3, &answer.content),
            Message::ToolResult(result) => (6, &result.content),
            // Host bookkeeping is never sent.
            _ => continue,
        };
        parts[home].1 += sizes.framing;
        for block in blocks {
            let part = match (home, block) {
                (3, ContentBlock::Thinking(_)) => 4,
                (3, ContentBlock::ToolCall(_)) => 5,
                _ => home,
            };
            parts[part].1 += (sizes.block)(block);
        }
    }
    keel_protocol::ContextReport {
        window: request.scope.spec.context_window,
        limit: sizes.limit,
        parts: parts
            .into_iter()
            .map(|(label, tokens)| keel_protocol::ContextPart {
                label: label.to_owned(),
                tokens,
            })
            .collect(),
        measured: sizes.measured,
    }
}

/// A report from characters over four, for runtimes with no measurer installed.
pub fn rough_report(request: &CompactRequest) -> keel_protocol::ContextReport {
    use keel_protocol::ContentBlock;
    let tokens = |chars: usize| (chars / 4) as u64;
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    let block = |block: &ContentBlock| match block {
        ContentBlock::Text(t) => tokens(t.text.len()),
        ContentBlock::Thinking(t) => tokens(t.thinking.len()),
        ContentBlock::ToolCall(c) => tokens(c.name.len() + c.arguments.to_string().len()),
        // An image costs about a thousand tokens whatever its bytes.
        _ => 1_000,
    };
    context_report(
        request,
        &Sizes {
            system_prompt: tokens(request.system_prompt.len()),
            tools: tokens(tools),
            block: &block,
            framing: 0,
            limit: None,
            measured: false,
        },
    )
}

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

fn refuse_if_running(slot: &Slot) -> Result<(), RuntimeError> {
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

    /// Changes a session's title, model or permission mode. A running turn keeps what it
    /// started with; the next turn uses the change.
    pub(crate) async fn update_session(
        &self,
        session: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionRecord, RuntimeError> {
        let slot = self.slot_or_open(session).await?;
        let store = &self.inner.store;
        let mode = update.mode;
        let model = match &update.model {
            Some(name) => Some(self.resolve_named_model(name)?),
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
            let services =
                self.services(&slot.id, Some(&slot), &model, mode, slot.profile.as_deref())?;
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

    /// Copies a session's history up to `revision` (default: the head) into a new session.
    pub(crate) async fn fork_session(
        &self,
        session: &SessionId,
        revision: Option<u64>,
    ) -> Result<SessionRecord, RuntimeError> {
        self.in_this_folder(&self.inner.store.session(session).await?)?;
        Ok(self.inner.store.fork(session, revision, None).await?)
    }

    /// Moves a session's history back to `revision` (refused while a turn runs).
    pub(crate) async fn rewind_session(
        &self,
        session: &SessionId,
        revision: u64,
    ) -> Result<u64, RuntimeError> {
        if let Ok(slot) = self.slot(session) {
            refuse_if_running(&slot)?;
        }
        let receipt = self
            .inner
            .store
            .rewind(session, revision, new_id("op-"))
            .await?;
        if let Ok(slot) = self.slot(session) {
            let mut state = slot.lock();
            state.history = None;
            state.reconciled = false;
        }
        self.session_changed(
            session,
            SessionChange::Rewound {
                revision,
                length: receipt.length,
            },
        )
        .await;
        Ok(receipt.revision)
    }

    /// The last message the user typed (not a hidden host prompt), its index in `entries`
    /// and the revision history had just before it.
    fn last_typed(entries: &[StoredEntry]) -> Option<(usize, String, u64)> {
        let (index, text) =
            entries
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, e)| match &e.message {
                    Message::User(user) if !user.hidden => Some((i, user.joined_text())),
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
        let entries = self.inner.store.history(session).await?;
        let Some((_, text, before)) = Self::last_typed(&entries) else {
            return Err(RuntimeError::Usage("no message to ask again".into()));
        };
        self.rewind_session(session, before).await?;
        self.submit_with_images(
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
        let entries = self.inner.store.history(session).await?;
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

    /// Tells the extensions that keep files beside a session what happened to it.
    pub(crate) async fn session_changed(&self, session: &SessionId, change: SessionChange) {
        let dir = self.session_dir(session);
        for hook in self.inner.registry.session_hooks() {
            if let Err(error) = hook.session_changed(session, Some(&dir), &change).await {
                tracing::warn!(%session, error = %error.message, "a session change handler failed");
            }
        }
    }

    /// Deletes a session and its history (refused while a turn runs, here or elsewhere).
    pub(crate) async fn delete_session(&self, session: &SessionId) -> Result<(), RuntimeError> {
        if let Ok(slot) = self.slot(session) {
            refuse_if_running(&slot)?;
        }
        // Its tasks' records go with it: stop them first.
        self.tasks().stop_all(session).await;
        self.inner.store.delete_session(session).await?;
        self.inner
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(session);
        self.inner.registry.forget_session(session);
        self.session_changed(session, SessionChange::Deleted).await;
        // What the session's tools saw goes with it.
        crate::storage::remove_session_dir(self.inner.store.path(), session)
    }

    /// Aborts the session's running turn; `false` when none runs.
    pub(crate) fn abort(&self, session: &SessionId) -> Result<bool, RuntimeError> {
        let slot = self.slot(session)?;
        Ok(match slot.running() {
            Some(turn) => {
                turn.cancel.cancel();
                true
            }
            None => false,
        })
    }

    /// Installs the compaction strategy the `compact` operation uses.
    pub fn set_compactor(&self, compactor: Arc<dyn Compactor>) {
        *self
            .inner
            .compactor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(compactor);
    }

    /// Compacts a session's history with the installed strategy, following `instructions`;
    /// returns the new revision, or `None` when the strategy found nothing to save.
    pub(crate) async fn compact(
        &self,
        session: &SessionId,
        instructions: Option<String>,
    ) -> Result<Option<u64>, RuntimeError> {
        let compactor = self
            .inner
            .compactor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                RuntimeError::Unsupported("no compaction strategy is installed".into())
            })?;
        let slot = self.slot_or_open(session).await?;
        refuse_if_running(&slot)?;
        let store = &self.inner.store;
        let before = store.session(session).await?.revision;
        let history: Vec<Arc<Message>> = store
            .history(session)
            .await?
            .into_iter()
            .map(|e| Arc::new(e.message))
            .collect();
        self.session_changed(
            session,
            SessionChange::Compacting {
                manual: true,
                instructions: instructions.clone(),
            },
        )
        .await;
        let request = self.compact_request(&slot, history, instructions)?;
        let Some(replacement) = compactor.compact(request).await? else {
            return Ok(None);
        };
        let receipt = store
            .commit(CommitRequest {
                session_id: session.clone(),
                turn_id: None,
                operation_id: new_id("op-"),
                // A turn elsewhere that committed meanwhile wins; the summary is stale.
                expected_revision: Some(before),
                op: HistoryOp::Replace {
                    entries: replacement.into_iter().map(Entry::new).collect(),
                },
            })
            .await?;
        {
            let mut state = slot.lock();
            state.history = None;
            state.reconciled = false;
        }
        self.session_changed(
            session,
            SessionChange::Compacted {
                before,
                revision: receipt.revision,
            },
        )
        .await;
        Ok(Some(receipt.revision))
    }

    /// The request a compaction strategy gets: the session's history and what its next
    /// request would carry, assembled as for a turn.
    /// What fills `session`'s context window: its next request measured by part, by the
    /// installed compaction strategy's measurer when there is one.
    pub(crate) async fn context_report(
        &self,
        session: &SessionId,
    ) -> Result<keel_protocol::ContextReport, RuntimeError> {
        let slot = self.slot_or_open(session).await?;
        let history: Vec<Arc<Message>> = self
            .inner
            .store
            .history(session)
            .await?
            .into_iter()
            .map(|e| Arc::new(e.message))
            .collect();
        let request = self.compact_request(&slot, history, None)?;
        let compactor = self
            .inner
            .compactor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Ok(match compactor {
            Some(compactor) => compactor.measure(&request),
            None => rough_report(&request),
        })
    }

    fn compact_request(
        &self,
        slot: &Arc<Slot>,
        history: Vec<Arc<Message>>,
        instructions: Option<String>,
    ) -> Result<CompactRequest, RuntimeError> {
        // No turn runs: the scope's turn id is never stored, and its events name no turn.
        let (model, services) = {
            let state = slot.lock();
            (state.model.clone(), state.services.clone())
        };
        let mut scope = self.scope(
            slot,
            &model,
            services,
            TurnId::generate(),
            TurnSource::Api,
            None,
        );
        scope.events = ExtensionEvents::new(slot.hub.clone(), None);
        let caps = self.inner.registry.assemble_turn(&scope)?;
        let system_prompt = self.system_prompt(&caps.system_prompt);
        let tools = caps.tools.iter().map(|t| t.definition().clone()).collect();
        Ok(CompactRequest {
            session_id: slot.id.clone(),
            history,
            instructions,
            system_prompt,
            tools,
            context: self.inner.settings.loaded.config.context,
            scope,
        })
    }
}
