//! The turn controller: admission (one running turn per session), assembly of the turn from
//! the leased capabilities, running it, and finishing it: the outcome recorded, unconsumed
//! inputs re-queued, open items completed, `turn_end` handlers called, and waiting
//! follow-ups started as the next turn.

mod history;
mod host;
mod mentions;
mod reminders;
mod report;
mod running;
mod shell;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tracing::Instrument as _;

use futures::FutureExt as _;
use keel_agent::runner::{TurnInput, TurnResult, TurnRunner, TurnStart};
use keel_protocol::{
    ContentBlock, Failure, FailureCode, InputKind, Message, SessionEventBody, TurnId, TurnOutcome,
    TurnSource, Usage, UserMessage,
};
use keel_store::{CommitRequest, HistoryOp, new_id};
use tokio::sync::oneshot;

use crate::assembly::ResolvedModel;
use crate::error::RuntimeError;
use crate::extension::table::HostHooks;
use crate::extension::{ExtensionEvents, Lease, ReminderMode, TurnScope};
use crate::queue;
use crate::runtime::{Admission, Runtime, Slot};
use crate::services::SessionServices;
use crate::sessions::{INTERRUPTED_CODE, close_interrupted};
use crate::settings::model_matches;
use crate::structured::OutputSchema;
use crate::view::TurnView;
use host::{CommitHistory, TurnHostImpl};
use reminders::{INTERRUPTED_SOURCE, interrupted_note};
pub use report::{TurnHandle, TurnOptions, TurnReport};
pub(crate) use running::RunningTurn;

/// What a turn starts from.
#[derive(Debug)]
pub(crate) enum Start {
    /// The user's input, with the images sent with it.
    Input(String, Vec<keel_protocol::ImageBlock>),
    /// The session's waiting inputs.
    Queue,
    /// A command the user typed (`!command`), and whether it joins history.
    Shell(String, bool),
}

/// What an admitted turn runs: the model's loop, or one command the user typed.
enum Work {
    Model(Box<PreparedTurn>),
    Shell(String, bool),
}

/// An admitted turn, assembled and ready to run.
struct PreparedTurn {
    input: TurnInput,
    host: Arc<TurnHostImpl>,
    host_hooks: HostHooks,
    schema: Option<OutputSchema>,
    scope: TurnScope,
    lease: Lease,
    /// What the lean request holds back, when that changed: told once the turn started.
    lean: Option<serde_json::Value>,
    /// The files and resources its prompt's `@` mentions attached: told once it started.
    attached: Vec<String>,
}

/// What a turn's requests start with, before [`crate::lean::fit`], and the history that
/// says what the session found behind `tool_search`.
pub(crate) struct Fixed<'a> {
    /// The system prompt.
    pub(crate) system_prompt: &'a str,
    /// The assembled tools.
    pub(crate) tools: Vec<keel_agent::ToolRef>,
    /// The session's history.
    pub(crate) history: &'a [Arc<Message>],
}

/// A turn's tools after [`crate::lean::fit`].
pub(crate) struct Lean {
    /// The tools to offer.
    pub(crate) tools: Vec<keel_agent::ToolRef>,
    /// A line for the end of the system prompt naming what is held back.
    pub(crate) note: Option<String>,
    /// What to tell of the lean request, when that changed for the session.
    pub(crate) tell: Option<serde_json::Value>,
}

/// Resets a slot's admission unless the turn got running.
struct AdmissionGuard<'a> {
    slot: &'a Slot,
    armed: bool,
}

impl Drop for AdmissionGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.slot.lock().admission = Admission::Idle;
        }
    }
}

/// What a crashed process's turn is recorded as when a later one finds it running.
fn abandoned() -> TurnOutcome {
    TurnOutcome::Failed {
        code: INTERRUPTED_CODE,
        message: "the process running this turn stopped before it ended".into(),
    }
}

impl Runtime {
    /// Admits and starts a turn of `slot`. Boxed with its `Send` bound spelled out: a turn's
    /// end may start the next turn, and that cycle hides the future's type from the compiler.
    pub(crate) fn start_turn(
        &self,
        slot: Arc<Slot>,
        start: Start,
        source: TurnSource,
        options: TurnOptions,
    ) -> futures::future::BoxFuture<'static, Result<TurnHandle, RuntimeError>> {
        let runtime = self.clone();
        Box::pin(async move { runtime.admit_turn(slot, start, source, options).await })
    }

    async fn admit_turn(
        &self,
        slot: Arc<Slot>,
        start: Start,
        source: TurnSource,
        options: TurnOptions,
    ) -> Result<TurnHandle, RuntimeError> {
        {
            let mut state = slot.lock();
            match &state.admission {
                Admission::Idle => state.admission = Admission::Starting,
                Admission::Starting => {
                    return Err(RuntimeError::TurnRunning {
                        session: slot.id.clone(),
                        turn: "(starting)".into(),
                    });
                }
                Admission::Running(turn) => {
                    return Err(RuntimeError::TurnRunning {
                        session: slot.id.clone(),
                        turn: turn.turn_id.to_string(),
                    });
                }
            }
            if matches!(start, Start::Queue) && state.queue.is_empty() {
                state.admission = Admission::Idle;
                return Err(RuntimeError::QueueEmpty(slot.id.clone()));
            }
        }
        let mut guard = AdmissionGuard {
            slot: &slot,
            armed: true,
        };
        let store = &self.inner.store;
        let first = first_turn();
        if first {
            start_up_is_over();
        }
        let (begin_span, prepare_span) = startup_spans(first);
        // From here this process owns the session's running turn: another process stops at
        // this check (`session_busy`) before touching its history.
        let (closed, record) = store
            .begin_turn(&slot.id, source.clone(), abandoned())
            .instrument(begin_span)
            .await?;
        let turn_id = record.id.clone();
        if !closed.is_empty()
            && let Err(error) = store
                .add_session_reminder(
                    &slot.id,
                    INTERRUPTED_SOURCE,
                    &interrupted_note(Some("the process running it stopped")),
                )
                .await
        {
            tracing::warn!(%turn_id, %error, "cannot leave a reminder of the interruption");
        }
        let running = Arc::new(RunningTurn::new(turn_id.clone()));
        let prepared = match start {
            Start::Shell(command, remember) => Ok(Work::Shell(command, remember)),
            start => self
                .prepare_turn(&slot, &running, start, &source, options)
                .instrument(prepare_span)
                .await
                .map(|prepared| Work::Model(Box::new(prepared))),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(error) => {
                let failed = TurnOutcome::Failed {
                    code: error.failure_code(),
                    message: error.to_string(),
                };
                if let Err(finish) = store.finish_turn(&turn_id, failed, None).await {
                    tracing::warn!(%turn_id, %finish, "cannot record the refused turn");
                }
                let _ = store.release_turn_claims(&turn_id).await;
                queue::refresh(&slot, store).await;
                return Err(error);
            }
        };
        slot.lock().admission = Admission::Running(running.clone());
        guard.armed = false;
        drop(guard);
        slot.emit(SessionEventBody::TurnStarted {
            turn_id: turn_id.clone(),
            source: source.clone(),
        });
        let (tx, rx) = oneshot::channel();
        let runtime = self.clone();
        let task_slot = slot.clone();
        tokio::spawn(async move {
            let run = async {
                match prepared {
                    Work::Model(prepared) => {
                        runtime
                            .run_turn(
                                task_slot.clone(),
                                running.clone(),
                                *prepared,
                                source.clone(),
                            )
                            .await
                    }
                    Work::Shell(command, remember) => {
                        runtime
                            .run_shell(&task_slot, &running, command, remember, source.clone())
                            .await
                    }
                }
            };
            let report = match AssertUnwindSafe(run).catch_unwind().await {
                Ok(report) => report,
                // keel's own bug: the turn still ends, recorded as failed, and the session
                // stays usable.
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "the turn's task panicked".into());
                    tracing::error!(turn = %running.turn_id, %message, "turn task panicked");
                    runtime
                        .abandon_turn(&task_slot, &running, source, message)
                        .await
                }
            };
            let _ = tx.send(report);
        });
        Ok(TurnHandle {
            turn_id,
            report: rx,
        })
    }

    /// Ends a turn whose task panicked: recorded as failed, its claimed inputs back in the
    /// queue, its items closed as far as the view knows, and the session free again.
    async fn abandon_turn(
        &self,
        slot: &Arc<Slot>,
        running: &Arc<RunningTurn>,
        source: TurnSource,
        message: String,
    ) -> TurnReport {
        let store = &self.inner.store;
        let turn_id = running.turn_id.clone();
        let outcome = TurnOutcome::Failed {
            code: FailureCode::InternalError,
            message: format!("keel failed inside the turn: {message}"),
        };
        let finish_failure = store
            .finish_turn(&turn_id, outcome.clone(), None)
            .await
            .err()
            .map(|e| format!("cannot record the end of turn {turn_id}: {e}"));
        let _ = store.release_turn_claims(&turn_id).await;
        queue::refresh(slot, store).await;
        slot.emit(SessionEventBody::TurnEnded {
            turn_id: turn_id.clone(),
            outcome: outcome.clone(),
            usage: Usage::default(),
            failure: Some(Failure::new(FailureCode::InternalError, message)),
        });
        slot.hub.drained();
        {
            let mut state = slot.lock();
            state.history = None;
            state.reconciled = false;
            state.admission = Admission::Idle;
        }
        running.ended.send_replace(true);
        self.check_quiet(slot);
        TurnReport {
            turn_id,
            source,
            outcome: outcome.clone(),
            recorded: outcome,
            messages: Vec::new(),
            usage: Usage::default(),
            structured_output: None,
            output_failure: None,
            commit_failure: running.commit_failure().take(),
            finish_failure,
            duration: std::time::Duration::ZERO,
        }
    }

    /// Reconciles, assembles and builds the runner's input for an admitted turn.
    async fn prepare_turn(
        &self,
        slot: &Arc<Slot>,
        running: &Arc<RunningTurn>,
        start: Start,
        source: &TurnSource,
        options: TurnOptions,
    ) -> Result<PreparedTurn, RuntimeError> {
        let store = &self.inner.store;
        let turn_id = running.turn_id.clone();
        let history = self.turn_history(slot).await?;
        let (model, services) = {
            let state = slot.lock();
            (state.model.clone(), state.services.clone())
        };
        let mut scope = self.scope(
            slot,
            &model,
            services,
            turn_id.clone(),
            source.clone(),
            options.deadline,
        );
        scope.history = Some(Arc::new(history::TurnHistory {
            runtime: self.clone(),
            slot: slot.clone(),
            running: running.clone(),
        }));
        scope.prompt = match &start {
            Start::Input(text, _) => Some(text.clone()),
            Start::Queue | Start::Shell(..) => None,
        };
        // Files a prompt a person sent names with `@` go with it, where the session may read,
        // and the MCP resources it names (`@server:uri`).
        let may_read = slot.profile.as_ref().is_none_or(|p| p.allows("read"));
        let (attached_blocks, attached) = match (&start, &scope.host) {
            (Start::Input(text, _), Some(services)) if options.typed && may_read => {
                mentions::attach(services, &self.inner.registry, &slot.id, text).await
            }
            _ => (Vec::new(), Vec::new()),
        };
        let mut caps = self.inner.registry.assemble_turn(&scope)?;
        // A task's child gets no more than its role allows.
        if let Some(profile) = &slot.profile {
            caps.tools
                .retain(|tool| profile.allows(&tool.definition().name));
        }
        // The prompt: the user's input, or every waiting input (claimed now, acknowledged
        // once committed).
        let mut prompt: Vec<Message> = match start {
            Start::Input(text, images) => {
                let mut message = keel_protocol::UserMessage::text(text);
                message
                    .content
                    .extend(images.into_iter().map(keel_protocol::ContentBlock::Image));
                vec![Message::User(message)]
            }
            Start::Shell(..) => {
                return Err(RuntimeError::Internal(
                    "a shell command is not a model turn".into(),
                ));
            }
            Start::Queue => {
                let kinds = [InputKind::Steer, InputKind::FollowUp];
                let Some(claim) = store.claim_inputs(&slot.id, &turn_id, &kinds).await? else {
                    return Err(RuntimeError::QueueEmpty(slot.id.clone()));
                };
                let mut delivered = running
                    .delivered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                claim
                    .inputs
                    .iter()
                    .map(|input| {
                        delivered.insert(input.id.clone(), claim.id.clone());
                        queue::message_of(input)
                    })
                    .collect()
            }
        };
        queue::refresh(slot, store).await;
        if scope.prompt.is_none() {
            let texts: Vec<String> = prompt
                .iter()
                .filter_map(|message| match message {
                    Message::User(user) => Some(
                        user.content
                            .iter()
                            .filter_map(ContentBlock::as_text)
                            .collect::<String>(),
                    ),
                    _ => None,
                })
                .collect();
            scope.prompt = Some(texts.join("\n\n"));
        }
        let reminders = self
            .reminder_round(&caps, &scope, &history, running)
            .await?;
        let unread_tasks = self.task_reminder(slot).await;
        let extra: Vec<String> = caps
            .user_prefixes
            .iter()
            .cloned()
            .chain(reminders.blocks)
            .chain(Some(reminders.host_block).filter(|block| !block.is_empty()))
            .chain(unread_tasks)
            .chain(attached_blocks)
            .collect();
        if !extra.is_empty() {
            // Extension prefixes and reminders come first, in a hidden message of the same
            // batch, so the user's own input stays marked as the genuine query.
            let batch = match prompt.first() {
                Some(Message::User(UserMessage {
                    batch_id: Some(batch),
                    ..
                })) => batch.clone(),
                _ => {
                    let batch = new_id("b-");
                    for message in &mut prompt {
                        if let Message::User(user) = message {
                            user.batch_id = Some(batch.clone());
                        }
                    }
                    batch
                }
            };
            let mut hidden = UserMessage::hidden_text(extra.join("\n\n"));
            hidden.content = extra.into_iter().map(ContentBlock::text).collect();
            if !reminders.delivered.is_empty() {
                *running
                    .reminder_batch
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(batch.clone());
            }
            hidden.batch_id = Some(batch);
            prompt.insert(0, Message::User(hidden));
        }
        let mut system_prompt = self.system_prompt(&caps.system_prompt);
        if let Some(instructions) = slot.profile.as_ref().and_then(|p| p.instructions.as_ref()) {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(instructions);
        }
        if let Some(schema) = &options.output_schema {
            system_prompt.push_str(&schema.instruction());
        }
        let Lean {
            tools,
            note,
            tell: lean,
        } = self.lean_tools(
            &scope,
            Fixed {
                system_prompt: &system_prompt,
                tools: caps.tools,
                history: &history,
            },
            slot,
            &model,
            true,
        )?;
        if let Some(note) = note {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(&note);
        }
        let mut hooks = caps.hooks;
        // Persistence first: extensions observe history that is already stored.
        hooks.on_history_changed.insert(
            0,
            Arc::new(CommitHistory {
                store: store.clone(),
                turn_id: turn_id.clone(),
                turn: running.clone(),
            }),
        );
        let host = Arc::new(TurnHostImpl {
            slot: slot.clone(),
            turn: running.clone(),
            store: store.clone(),
            view: Mutex::new(TurnView::new(
                turn_id.clone(),
                crate::view::WindowLimits::of(
                    &model.spec,
                    &self.inner.settings.loaded.config.context,
                ),
            )),
        });
        let input = TurnInput {
            session_id: slot.id.clone(),
            turn_id,
            model: model.spec.clone(),
            stream_fn: model.stream.clone(),
            system_prompt,
            tools,
            // Late tools (MCP servers') join only where the ceiling is "all but".
            tool_additions: match slot.profile.as_ref().map(|p| &p.ceiling) {
                Some(crate::tasks::Ceiling::Only(_)) => None,
                _ => Some(scope.tools.clone()),
            },
            history,
            start: TurnStart::Prompt(prompt),
            hooks,
            host: host.clone(),
            cancel: running.cancel.clone(),
            // The session id is the prompt-cache key of providers that take one (OpenAI's
            // `prompt_cache_key`): every request of the session shares its cached prefix.
            request_options: keel_llm::RequestOptions {
                session_id: Some(slot.id.to_string()),
                thinking: slot.lock().thinking,
                ..keel_llm::RequestOptions::default()
            },
            api_keys: None,
        };
        Ok(PreparedTurn {
            input,
            host,
            host_hooks: caps.host,
            schema: options.output_schema,
            scope,
            lease: caps.lease,
            lean,
            attached,
        })
    }

    /// The scope a turn of `slot` with `model` and `services` (or the `compact` operation,
    /// with a turn id never stored) is assembled for; the history writer is the caller's to
    /// add.
    pub(crate) fn scope(
        &self,
        slot: &Arc<Slot>,
        model: &ResolvedModel,
        services: Arc<SessionServices>,
        turn_id: TurnId,
        source: TurnSource,
        deadline: Option<Instant>,
    ) -> TurnScope {
        let disabled = &self
            .inner
            .settings
            .loaded
            .config
            .disable_system_reminder_models;
        let tools = keel_agent::ToolAdditions::default();
        TurnScope {
            session_id: slot.id.clone(),
            turn_id: turn_id.clone(),
            source,
            model: model.name.clone(),
            cwd: self.inner.settings.cwd.clone(),
            host: Some(services),
            spec: Arc::new(model.spec.clone()),
            entry: model.entry.clone(),
            deadline,
            reminders: if model_matches(disabled, &model.name) {
                ReminderMode::CriticalOnly
            } else {
                ReminderMode::All
            },
            session_dir: Some(self.session_dir(&slot.id)),
            events: ExtensionEvents::new(slot.hub.clone(), Some(turn_id)),
            // With the runner's wrappers (timeouts, retries, headers, output ceiling), as the
            // turn's own requests have them.
            stream: Some(keel_llm::compose_stream_fn(
                model.stream.clone(),
                &self.inner.runner.stream,
            )),
            history: None,
            prompt: None,
            deferred: Arc::new(crate::deferred::Deferred::new(
                self.inner.settings.loaded.config.mcp.disclosure.top,
                tools.clone(),
            )),
            tools,
        }
    }

    /// The turn's tools fitted beside `system_prompt` into a quarter of the model's window
    /// (see [`crate::lean`]): the tools, a line to end the system prompt with when tools are
    /// held back, and, for a turn (`turn`), what to tell of it when that changed for the
    /// session.
    pub(crate) fn lean_tools(
        &self,
        scope: &TurnScope,
        fixed: Fixed<'_>,
        slot: &Arc<Slot>,
        model: &ResolvedModel,
        turn: bool,
    ) -> Result<Lean, RuntimeError> {
        let Fixed {
            system_prompt,
            tools,
            history,
        } = fixed;
        let found = scope
            .host
            .as_ref()
            .map(|h| h.found.clone())
            .unwrap_or_default();
        let config = &self.inner.settings.loaded.config;
        // What the session found, in this process (MCP's finds too) or by a `tool_search`
        // the history still holds (a session resumed by another process). Read only in a
        // small window: a large one never holds anything back.
        let known = || {
            let mut known = found.lock().unwrap_or_else(PoisonError::into_inner).clone();
            known.extend(crate::deferred::found_in(history));
            known
        };
        // What was found and what the user keeps exposed stay offered while anything else
        // can wait.
        let keep = || {
            let mut keep = known();
            keep.extend(config.mcp.disclosure.always_expose.iter().cloned());
            keep
        };
        let remember_in = found.clone();
        // A task limited to a fixed list cannot take tools in later.
        let growable = !matches!(
            slot.profile.as_ref().map(|p| &p.ceiling),
            Some(crate::tasks::Ceiling::Only(_))
        );
        let window = u64::from(model.spec.context_window);
        let fitted = crate::lean::fit(
            system_prompt,
            tools,
            window,
            crate::lean::Limits::of(&model.spec, &config.context),
            crate::lean::Room {
                deferred: growable.then_some(&scope.deferred),
                keep: &keep,
                remember: Arc::new(move |name: &str| {
                    remember_in
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(name.to_owned());
                }),
            },
        )
        .map_err(|error| error.for_provider(&model.spec.provider))?;
        let now = fitted.shortened.then(|| {
            serde_json::json!({
                "window": window,
                "fixed_tokens": fitted.fixed,
                "fixed_limit": crate::lean::fixed_limit(window),
                "held": fitted.held,
            })
        });
        let mut tell = None;
        if let Some(host) = scope.host.as_ref().filter(|_| turn) {
            let mut last = host
                .lean_told
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let changed = match (&*last, &now) {
                (Some(a), Some(b)) => a["held"] != b["held"],
                (None, None) => false,
                _ => true,
            };
            if changed {
                tell.clone_from(&now);
                *last = now;
            }
        }
        let mut tools = fitted.tools;
        if fitted.shortened {
            // A tool found behind `tool_search` joined the end of the list in the turn that
            // found it; keeping found tools last keeps that turn's prefix for the next.
            let known = known();
            let (rest, found): (Vec<_>, Vec<_>) = tools
                .into_iter()
                .partition(|t| !known.contains(&t.definition().name));
            tools = rest.into_iter().chain(found).collect();
        }
        Ok(Lean {
            tools,
            note: fitted.note,
            tell,
        })
    }

    /// keel's system prompt followed by the extensions' `parts`.
    pub(crate) fn system_prompt(&self, parts: &[String]) -> String {
        let mut prompt = self.inner.system_prompt.clone();
        for part in parts {
            prompt.push_str("\n\n");
            prompt.push_str(part);
        }
        prompt
    }

    /// The session's history for the next request, every tool call answered: a resumed
    /// session's calls left open by a stopped process are answered "interrupted" (and
    /// committed) at its first turn in this runtime.
    async fn turn_history(&self, slot: &Arc<Slot>) -> Result<Vec<Arc<Message>>, RuntimeError> {
        let (cached, reconciled) = {
            let state = slot.lock();
            (state.history.clone(), state.reconciled)
        };
        if let (Some(history), true) = (cached, reconciled) {
            return Ok(history);
        }
        let store = &self.inner.store;
        let stored = store.history(&slot.id).await?;
        let history: Vec<Arc<Message>> = match close_interrupted(&stored) {
            Some(entries) => {
                let request = CommitRequest {
                    session_id: slot.id.clone(),
                    turn_id: None,
                    operation_id: new_id("op-"),
                    expected_revision: None,
                    op: HistoryOp::Reconcile {
                        entries: entries.clone(),
                    },
                };
                store.commit(request).await.map_err(|error| {
                    RuntimeError::Resume(format!("cannot close interrupted tool calls: {error}"))
                })?;
                entries.into_iter().map(|e| Arc::new(e.message)).collect()
            }
            None => stored.into_iter().map(|e| Arc::new(e.message)).collect(),
        };
        let mut state = slot.lock();
        state.reconciled = true;
        state.history = Some(history.clone());
        Ok(history)
    }

    async fn run_turn(
        &self,
        slot: Arc<Slot>,
        running: Arc<RunningTurn>,
        prepared: PreparedTurn,
        source: TurnSource,
    ) -> TurnReport {
        let PreparedTurn {
            input,
            host,
            host_hooks,
            schema,
            scope,
            lease,
            lean,
            attached,
        } = prepared;
        if let Some(details) = lean {
            scope.emit(crate::lean::LEAN, "lean_request", details);
        }
        if !attached.is_empty() {
            slot.emit(mentions::attached_event(&running.turn_id, &attached));
        }
        let started = Instant::now();
        let store = self.inner.store.clone();
        let turn_id = running.turn_id.clone();
        let history_before = input.history.clone();
        let mut refused = None;
        for hook in &host_hooks.turn_start {
            // A handler that fails or panics refuses the turn before anything runs.
            match AssertUnwindSafe(hook.turn_start(&scope))
                .catch_unwind()
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    refused = Some(error.message);
                    break;
                }
                Err(_) => {
                    refused = Some("a turn_start handler panicked".into());
                    break;
                }
            }
        }
        let result = match refused {
            None => {
                let runner = TurnRunner::new(self.inner.runner.clone());
                runner.run_turn(input).await
            }
            Some(message) => TurnResult {
                outcome: TurnOutcome::Failed {
                    code: FailureCode::TurnStartFailed,
                    message,
                },
                messages: Vec::new(),
                usage: Usage::default(),
                degradations: 0,
                unconsumed: Vec::new(),
            },
        };
        // The capabilities are released with the turn.
        drop(lease);
        let mut report = TurnReport {
            turn_id: turn_id.clone(),
            source,
            recorded: result.outcome.clone(),
            outcome: result.outcome,
            messages: result.messages,
            usage: result.usage,
            structured_output: None,
            output_failure: None,
            commit_failure: running.commit_failure().take(),
            finish_failure: None,
            duration: started.elapsed(),
        };
        if let (TurnOutcome::Completed, Some(schema)) = (&report.outcome, &schema) {
            match schema.check(&report.final_text()) {
                Ok(value) => report.structured_output = Some(value),
                Err(failure) => {
                    report.recorded = TurnOutcome::Failed {
                        code: failure.code,
                        message: failure.message.clone(),
                    };
                    report.output_failure = Some(failure);
                }
            }
        }
        if let Err(failure) = store
            .finish_turn(&turn_id, report.recorded.clone(), Some(report.usage))
            .await
        {
            report.finish_failure = Some(format!(
                "cannot record the end of turn {turn_id}: {failure}"
            ));
        }
        self.confirm_task_reads(&slot, &turn_id, &report).await;
        // Session reminders the turn claimed but never committed wait for the next turn; an
        // interrupted turn leaves one of its own, so the next turn knows.
        if let Err(error) = store.release_session_reminders(&turn_id).await {
            tracing::warn!(%turn_id, %error, "cannot release session reminders");
        }
        if let TurnOutcome::Aborted { reason } = &report.recorded
            && let Err(error) = store
                .add_session_reminder(
                    &slot.id,
                    INTERRUPTED_SOURCE,
                    &interrupted_note(reason.as_deref()),
                )
                .await
        {
            tracing::warn!(%turn_id, %error, "cannot leave a reminder of the interruption");
        }
        // Delivered input the turn ended without committing goes back to the queue.
        match store.release_turn_claims(&turn_id).await {
            Ok(0) => {}
            Ok(_) => queue::refresh(&slot, &store).await,
            Err(error) => slot.emit(SessionEventBody::Failure {
                turn_id: Some(turn_id.clone()),
                failure: Failure::new(
                    FailureCode::QueueFailed,
                    format!("cannot return undelivered input to the queue: {error}"),
                ),
            }),
        }
        host.close_view();
        for hook in &host_hooks.turn_end {
            // The outcome is recorded already: a failing handler is only logged.
            match AssertUnwindSafe(hook.turn_end(&scope, &report.recorded))
                .catch_unwind()
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%turn_id, error = %error.message, "turn_end handler failed");
                }
                Err(_) => tracing::warn!(%turn_id, "turn_end handler panicked"),
            }
        }
        if let Some(message) = &report.commit_failure {
            slot.emit(SessionEventBody::Failure {
                turn_id: Some(turn_id.clone()),
                failure: Failure::new(FailureCode::HistoryCommitFailed, message.clone()),
            });
        }
        let failure = match &report.recorded {
            TurnOutcome::Failed { code, message } => Some(Failure::new(*code, message.clone())),
            _ => None,
        };
        slot.emit(SessionEventBody::TurnEnded {
            turn_id: turn_id.clone(),
            outcome: report.recorded.clone(),
            usage: report.usage,
            failure,
        });
        slot.hub.drained();
        let history = report.commit_failure.is_none().then_some(history_before);
        self.settle(
            &slot,
            &running,
            history,
            report.outcome == TurnOutcome::Completed,
        );
        report
    }

    /// Frees the session after a turn ended: its history as the turn left it (`None`: read
    /// again from the store), then waiting input (follow-ups, steering that came as the answer
    /// ended, a goal's next turn) becomes the next turn, started by whoever queued the first
    /// of it, when the turn completed.
    fn settle(
        &self,
        slot: &Arc<Slot>,
        running: &Arc<RunningTurn>,
        history_before: Option<Vec<Arc<Message>>>,
        completed: bool,
    ) {
        let follow_up = {
            let mut state = slot.lock();
            state.history = history_before.map(|history_before| {
                let base = running
                    .base
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                let mut history = base.unwrap_or(history_before);
                history.extend(
                    running
                        .committed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .drain(..),
                );
                history
            });
            state.admission = Admission::Idle;
            let follow_up = completed
                .then(|| state.queue.first().map(|first| first.source.clone()))
                .flatten();
            if follow_up.is_some() {
                state.starting += 1;
            }
            follow_up
        };
        running.ended.send_replace(true);
        match follow_up {
            Some(source) => {
                let runtime = self.clone();
                let slot = slot.clone();
                tokio::spawn(async move {
                    let started = runtime
                        .start_turn(slot.clone(), Start::Queue, source, TurnOptions::default())
                        .await;
                    slot.start_settled();
                    if let Err(error) = started {
                        tracing::warn!(%error, "cannot start the queued follow-up");
                        runtime.check_quiet(&slot);
                    }
                });
            }
            None => self.check_quiet(slot),
        }
    }
}

/// Whether this is the process's first turn (true once).
fn first_turn() -> bool {
    static FIRST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    FIRST.swap(false, std::sync::atomic::Ordering::Relaxed)
}

/// The spans of a turn's admission and preparation: for the process's first turn, spans
/// start-up's timing dump shows (`KEEL_TRACE`); disabled spans for every later turn.
fn startup_spans(first: bool) -> (tracing::Span, tracing::Span) {
    if first {
        (
            tracing::info_span!(target: "keel_startup", "turn admission"),
            tracing::info_span!(target: "keel_startup", "turn preparation"),
        )
    } else {
        (tracing::Span::none(), tracing::Span::none())
    }
}

/// At the process's first turn: the code and data only start-up used stop counting in
/// keel's resident size (given back beside the turn, on a thread of its own).
fn start_up_is_over() {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        drop(handle.spawn_blocking(keel_sandbox::release_clean_pages));
    }
}
