//! One ACP session: the keel session it is, the runtime of its folder, and the subscription
//! that turns its events into `session/update`s and its permission questions into
//! `session/request_permission` requests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandsUpdate, ConfigOptionUpdate, ContentBlock, ContentChunk,
    ElicitationCapabilities, RequestPermissionRequest, SessionNotification, SessionUpdate,
    StopReason, ToolCallContent,
};
use agent_client_protocol::{Client, Error, ErrorCode, RequestCancellationHandle};

use keel_protocol::ops;
use keel_protocol::{
    FailureCode, PermissionMode, PermissionRequest, SandboxMode, SessionEvent, SessionEventBody,
    SessionId, StopReason as KeelStop, ThinkingLevel, TurnOutcome, TurnSource, Usage,
};
use keel_runtime::{
    CommandOutcome, ContractExt, ConversationContract, Runtime, RuntimeError, SessionSink,
    Subscription,
};

use crate::prompt::Prompt;
use crate::translate::Translator;
use crate::{commands, modes, permission};

/// Sums the session's usage for `/usage` and `/context`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Tokens over the session's model calls seen here.
    pub usage: Usage,
    /// The last request's size and the model's window.
    pub context: Option<(u64, u32)>,
}

/// When the editor is offered the session's slash commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// At open: the editor holds no list for the session yet.
    Always,
    /// At each prompt: skills, command files and MCP prompts may have changed, and only a
    /// changed list is worth an update.
    IfChanged,
}

#[derive(Debug)]
struct State {
    mode: PermissionMode,
    model: String,
    thinking: Option<ThinkingLevel>,
    /// The thinking levels the model offers.
    levels: Vec<ThinkingLevel>,
    totals: Totals,
}

/// An open ACP session.
pub struct Session {
    /// keel's session id, which is also the ACP one.
    pub id: SessionId,
    /// Its folder's runtime.
    pub runtime: Runtime,
    /// The folder.
    pub cwd: PathBuf,
    /// The mode the folder's configuration starts sessions in (`default`).
    pub configured_mode: PermissionMode,
    /// The sandbox commands run in.
    pub sandbox: SandboxMode,
    /// Every model the registry knows, as provider/model.
    pub models: Vec<String>,
    state: Mutex<State>,
    translator: Mutex<Translator>,
    subscription: Mutex<Option<Subscription>>,
    /// The commands the editor was last offered, so a prompt re-offers them only when
    /// they changed.
    offered: Mutex<Option<Vec<AvailableCommand>>>,
    /// The editor terminal showing each call that has one, by call id.
    terminals: Mutex<HashMap<String, String>>,
    /// Questions the editor has not answered, by request id, to withdraw on cancel.
    asking: Mutex<HashMap<String, RequestCancellationHandle>>,
    /// The editor's own way to ask for input (forms, pages), if it has one.
    elicitation: std::sync::OnceLock<Option<ElicitationCapabilities>>,
    /// One prompt at a time.
    prompting: tokio::sync::Mutex<()>,
    /// Prompts received, and the last one a cancel was meant for.
    received: AtomicU64,
    cancelled: AtomicU64,
    /// Made by `session/new` and no turn of it completed yet: when one does, the model is
    /// asked for a title.
    pub untitled: std::sync::atomic::AtomicBool,
}

impl State {
    fn current(&self) -> modes::Current<'_> {
        modes::Current {
            mode: self.mode,
            model: &self.model,
            thinking: self.thinking,
            levels: &self.levels,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A runtime error as the JSON-RPC error the editor gets, with keel's code as data.
pub fn rpc_error(error: &RuntimeError) -> Error {
    let code = match error {
        RuntimeError::MissingKey { .. }
        | RuntimeError::Config(keel_runtime::settings::ConfigError::NoKey { .. }) => {
            ErrorCode::AUTH_REQUIRED
        }
        RuntimeError::Store(store) if keel_runtime::storage::is_usage_error(store) => {
            ErrorCode::RESOURCE_NOT_FOUND
        }
        RuntimeError::Usage(_)
        | RuntimeError::Config(_)
        | RuntimeError::HomeWorkspace(_)
        | RuntimeError::OtherFolder { .. }
        | RuntimeError::Command { .. }
        | RuntimeError::UnknownCommand(_) => ErrorCode::INVALID_PARAMS,
        RuntimeError::TurnRunning { .. } => ErrorCode::INVALID_REQUEST,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    Error::new(code, error.to_string()).data(serde_json::json!({"code": error.code()}))
}

impl Session {
    /// A session of `runtime` the editor will see as `id`.
    pub fn new(
        id: SessionId,
        runtime: Runtime,
        cwd: PathBuf,
        mode: PermissionMode,
        sandbox: SandboxMode,
        models: Vec<String>,
        notices: bool,
    ) -> Arc<Self> {
        let model = runtime.model_name().to_owned();
        let levels = runtime.thinking_levels(&model);
        let thinking = runtime.thinking();
        let mut translator = Translator::new(cwd.clone(), notices);
        translator.know("", mode);
        Arc::new(Self {
            id,
            runtime,
            cwd,
            configured_mode: mode,
            sandbox,
            models,
            state: Mutex::new(State {
                levels,
                mode,
                model,
                thinking,
                totals: Totals::default(),
            }),
            translator: Mutex::new(translator),
            subscription: Mutex::new(None),
            offered: Mutex::new(None),
            terminals: Mutex::new(HashMap::new()),
            asking: Mutex::new(HashMap::new()),
            elicitation: std::sync::OnceLock::new(),
            prompting: tokio::sync::Mutex::new(()),
            received: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            untitled: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Subscribes to the session's events; updates go to `connection`.
    pub async fn subscribe(
        self: &Arc<Self>,
        connection: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let sink = Arc::new(EventSink {
            session: Arc::downgrade(self),
            connection,
            tasks: tokio::runtime::Handle::current(),
        });
        let subscription = self
            .runtime
            .subscribe(&self.id, sink)
            .await
            .map_err(|e| rpc_error(&e))?;
        *lock(&self.subscription) = Some(subscription);
        Ok(())
    }

    /// Knows the title and stored cost the editor was shown at open.
    pub fn know(&self, title: &str, cost: f64, usage: Usage) {
        let mut translator = lock(&self.translator);
        let mode = lock(&self.state).mode;
        translator.know(title, mode);
        translator.add_cost(cost);
        lock(&self.state).totals.usage += usage;
    }

    /// Offers `commands` to the editor (`available_commands_update`); with
    /// [`Offer::IfChanged`], only when they differ from the last offer.
    pub fn offer_commands(
        &self,
        connection: &ConnectionTo<Client>,
        commands: Vec<AvailableCommand>,
        offer: Offer,
    ) {
        {
            let mut offered = lock(&self.offered);
            if offer == Offer::IfChanged && offered.as_ref() == Some(&commands) {
                return;
            }
            *offered = Some(commands.clone());
        }
        self.send(
            connection,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
        );
    }

    /// The current mode.
    pub fn mode(&self) -> PermissionMode {
        lock(&self.state).mode
    }

    /// The current model.
    pub fn model(&self) -> String {
        lock(&self.state).model.clone()
    }

    /// What the session used so far.
    pub fn totals(&self) -> Totals {
        lock(&self.state).totals
    }

    /// The session's config options as they are now.
    pub fn config_options(&self) -> Vec<agent_client_protocol::v1::schema::SessionConfigOption> {
        let state = lock(&self.state);
        modes::options(state.current(), &self.models)
    }

    /// Counts a prompt the editor sent; the number is what a cancel refers to.
    pub fn received(&self) -> u64 {
        self.received.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Runs one prompt as a turn (text for the model, or an extension's slash command) and
    /// says why it stopped. A command that answers with text ends the prompt with it.
    pub async fn prompt(
        self: &Arc<Self>,
        prompt: Prompt,
        number: u64,
        connection: &ConnectionTo<Client>,
    ) -> Result<StopReason, Error> {
        let Ok(_one) = self.prompting.try_lock() else {
            return Err(Error::new(
                ErrorCode::INVALID_REQUEST,
                "a prompt is already running in this session: cancel it first",
            ));
        };
        if self.cancelled.load(Ordering::SeqCst) >= number {
            return Ok(StopReason::Cancelled);
        }
        let shell = matches!(prompt, Prompt::Shell { .. });
        let started = match prompt {
            Prompt::Text(text, images) => self
                .runtime
                .request(ops::Submit {
                    session_id: self.id.clone(),
                    text,
                    images,
                    source: TurnSource::Api,
                    output_schema: None,
                    time_budget_ms: None,
                })
                .await
                .map(CommandOutcome::Turn),
            Prompt::Shell { command, remember } => self
                .runtime
                .request(ops::RunShell {
                    session_id: self.id.clone(),
                    command,
                    remember,
                })
                .await
                .map(CommandOutcome::Turn),
            Prompt::Command { name, args } => {
                self.runtime
                    .request(ops::RunCommand {
                        session_id: self.id.clone(),
                        name,
                        arguments: args,
                    })
                    .await
            }
        };
        let handle = match started {
            Ok(CommandOutcome::Turn(handle)) => handle,
            Ok(CommandOutcome::Text(text)) => {
                if self.cancelled.load(Ordering::SeqCst) >= number {
                    return Ok(StopReason::Cancelled);
                }
                commands::reply(self, connection, text);
                return Ok(StopReason::EndTurn);
            }
            Err(RuntimeError::UnknownCommand(name)) => {
                commands::reply(self, connection, commands::unknown(&name));
                return Ok(StopReason::EndTurn);
            }
            Err(error) => return Err(rpc_error(&error)),
        };
        // A cancel that arrived while the turn was being admitted.
        if self.cancelled.load(Ordering::SeqCst) >= number {
            let _ = self
                .runtime
                .request(ops::Abort {
                    session_id: self.id.clone(),
                })
                .await;
        }
        let report = handle.wait().await.map_err(|e| rpc_error(&e))?;
        match &report.outcome {
            TurnOutcome::Completed => {
                // A `!` command asks no model, and leaves the title to the first prompt.
                if !shell && self.untitled.swap(false, Ordering::SeqCst) {
                    // Off the turn's path: the title comes as a `session_info_update`.
                    let _ = self
                        .runtime
                        .request(ops::TitleSession {
                            session_id: self.id.clone(),
                        })
                        .await;
                }
                let cut = report
                    .messages
                    .iter()
                    .rev()
                    .find_map(|m| m.as_assistant())
                    .is_some_and(|a| a.stop_reason == KeelStop::Length);
                Ok(if cut {
                    StopReason::MaxTokens
                } else {
                    StopReason::EndTurn
                })
            }
            TurnOutcome::Aborted { .. } => Ok(StopReason::Cancelled),
            TurnOutcome::Failed { code, message } => match code {
                FailureCode::StepLimitExceeded => Ok(StopReason::MaxTurnRequests),
                FailureCode::ModelRefusal => Ok(StopReason::Refusal),
                _ => Err(Error::new(ErrorCode::INTERNAL_ERROR, message.clone())
                    .data(serde_json::json!({"code": code}))),
            },
            _ => Ok(StopReason::EndTurn),
        }
    }

    /// Stops the running prompt (and one that is still being admitted); withdraws the
    /// questions the editor has not answered.
    pub async fn cancel(&self) {
        self.cancelled
            .store(self.received.load(Ordering::SeqCst), Ordering::SeqCst);
        let _ = self
            .runtime
            .request(ops::Abort {
                session_id: self.id.clone(),
            })
            .await;
        for (_, question) in lock(&self.asking).drain() {
            let _ = question.cancel();
        }
    }

    /// Sends `update` to the editor. A call shown in a terminal keeps the terminal as its
    /// content (the editor shows its output live and after it ended).
    pub fn send(&self, connection: &ConnectionTo<Client>, update: SessionUpdate) {
        let update = match update {
            SessionUpdate::ToolCallUpdate(mut call) => {
                let terminal = lock(&self.terminals)
                    .get(call.tool_call_id.0.as_ref())
                    .cloned();
                // Live output is the terminal's to show: an update that carries only that
                // is not sent.
                let live_output = call.fields.status.is_none()
                    && call.fields.raw_output.is_none()
                    && call.fields.title.is_none()
                    && call.fields.content.as_ref().is_some_and(|content| {
                        !content
                            .iter()
                            .any(|c| matches!(c, ToolCallContent::Terminal(_)))
                    });
                if terminal.is_some() && live_output {
                    return;
                }
                if let Some(terminal) = terminal
                    && call.fields.content.is_some()
                {
                    call.fields.content = Some(vec![ToolCallContent::Terminal(
                        agent_client_protocol::v1::schema::Terminal::new(terminal),
                    )]);
                }
                SessionUpdate::ToolCallUpdate(call)
            }
            other => other,
        };
        let _ = connection.send_notification(SessionNotification::new(self.id.to_string(), update));
    }

    /// Records that call `call_id` is shown in the editor's terminal `terminal`.
    pub fn show_terminal(&self, call_id: &str, terminal: String) {
        lock(&self.terminals).insert(call_id.to_owned(), terminal);
    }

    fn observe(&self, body: &SessionEventBody) -> Option<SessionUpdate> {
        let mut state = lock(&self.state);
        match body {
            SessionEventBody::Usage {
                usage,
                context_window,
                ..
            } => {
                state.totals.usage += *usage;
                let used = usage.input + usage.cache_read + usage.cache_write + usage.output;
                state.totals.context = Some((used, *context_window));
                None
            }
            SessionEventBody::SessionUpdated {
                model,
                mode,
                thinking,
                ..
            } => {
                let mode = mode.unwrap_or(state.mode);
                if *model == state.model && mode == state.mode && *thinking == state.thinking {
                    return None;
                }
                if *model != state.model {
                    state.levels = self.runtime.thinking_levels(model);
                }
                state.model.clone_from(model);
                state.mode = mode;
                state.thinking = *thinking;
                Some(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                    modes::options(state.current(), &self.models),
                )))
            }
            _ => None,
        }
    }

    /// Asks the editor about one call and hands the answer to the runtime.
    fn ask(
        self: &Arc<Self>,
        connection: &ConnectionTo<Client>,
        tasks: &tokio::runtime::Handle,
        request: PermissionRequest,
    ) {
        let question = RequestPermissionRequest::new(
            self.id.to_string(),
            permission::tool_call(&request),
            permission::options(&request),
        );
        let sent = connection.send_request(question);
        lock(&self.asking).insert(request.id.clone(), sent.cancellation_handle());
        let session = self.clone();
        tasks.spawn(async move {
            let outcome = sent.block_task().await;
            let still_asked = lock(&session.asking).remove(&request.id).is_some();
            let answer = match outcome {
                Ok(response) => permission::answer(&request, &response.outcome),
                Err(error) => keel_protocol::PermissionAnswer::Deny {
                    reason: Some(format!("the editor could not answer: {}", error.message)),
                },
            };
            if still_asked {
                // Refused only when the turn no longer waits (cancelled meanwhile).
                if let Err(error) = session
                    .runtime
                    .request(ops::AnswerPermission {
                        session_id: session.id.clone(),
                        request_id: request.id.clone(),
                        answer,
                    })
                    .await
                {
                    tracing::debug!(%error, "permission answer not taken");
                }
            }
        });
    }

    /// Records how the editor asks for input (its `elicitation` capabilities), once.
    pub fn editor_asks(&self, capabilities: Option<ElicitationCapabilities>) {
        let _ = self.elicitation.set(capabilities);
    }

    /// Asks the editor an MCP server's question and hands the answer to the runtime; a
    /// question the editor cannot show is declined.
    fn ask_question(
        self: &Arc<Self>,
        connection: &ConnectionTo<Client>,
        tasks: &tokio::runtime::Handle,
        question: keel_protocol::Question,
    ) {
        use keel_protocol::QuestionAnswer;
        let capabilities = self.elicitation.get().and_then(Option::as_ref);
        let session = self.clone();
        let id = question.id.clone();
        // The editor's answer, once it comes; whatever way it was asked.
        let answer: futures::future::BoxFuture<'static, QuestionAnswer> = match crate::elicit::asked(
            &self.id.to_string(),
            &question,
            capabilities,
        ) {
            None => {
                tracing::info!(server = %question.server, "a server's form this editor cannot show was declined");
                self.send(
                        connection,
                        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(format!(
                            "The MCP server `{}` asked for a form this editor cannot show; keel declined it.",
                            question.server
                        )))),
                    );
                tasks.spawn(session.deliver(id, QuestionAnswer::Decline));
                return;
            }
            Some(crate::elicit::Asked::Elicitation(request)) => {
                let page = matches!(question.ask, keel_protocol::Ask::Url { .. });
                let sent = connection.send_request(request);
                lock(&self.asking).insert(id.clone(), sent.cancellation_handle());
                Box::pin(async move {
                    match sent.block_task().await {
                        Ok(response) => crate::elicit::answer_of(&response, page),
                        Err(_) => QuestionAnswer::Cancel,
                    }
                })
            }
            Some(crate::elicit::Asked::Options(card, options)) => {
                let sent = connection.send_request(RequestPermissionRequest::new(
                    self.id.to_string(),
                    card,
                    options,
                ));
                lock(&self.asking).insert(id.clone(), sent.cancellation_handle());
                Box::pin(async move {
                    match sent.block_task().await {
                        Ok(response) => {
                            crate::elicit::answer_of_option(&question, &response.outcome)
                        }
                        Err(_) => QuestionAnswer::Cancel,
                    }
                })
            }
        };
        tasks.spawn(async move {
            let answer = answer.await;
            // Withdrawn meanwhile (the question ended without the editor): nothing to hand.
            if lock(&session.asking).remove(&id).is_some() {
                session.deliver(id, answer).await;
            }
        });
    }

    /// Hands the answer to question `id` to the runtime (refused only when the question
    /// no longer waits).
    async fn deliver(self: Arc<Self>, id: String, answer: keel_protocol::QuestionAnswer) {
        let accepting = matches!(answer, keel_protocol::QuestionAnswer::Accept { .. });
        let answer_with = |answer| ops::AnswerQuestion {
            session_id: self.id.clone(),
            question_id: id.clone(),
            answer,
        };
        let Err(error) = self.runtime.request(answer_with(answer)).await else {
            return;
        };
        tracing::info!(%error, "the editor's answer to a server's question was refused");
        // Values the form does not allow never reach the server; the question still waits,
        // and the editor has answered, so it ends as dismissed.
        if accepting {
            let _ = self
                .runtime
                .request(answer_with(keel_protocol::QuestionAnswer::Cancel))
                .await;
        }
    }

    /// The question was settled without the editor (a cancel): withdraw it there.
    fn withdraw(&self, request_id: &str) {
        if let Some(question) = lock(&self.asking).remove(request_id) {
            let _ = question.cancel();
        }
    }
}

/// Receives a session's events (in order, from the runtime's hub) and sends them on.
struct EventSink {
    session: Weak<Session>,
    connection: ConnectionTo<Client>,
    tasks: tokio::runtime::Handle,
}

impl SessionSink for EventSink {
    fn on_event(&self, event: &SessionEvent) {
        let Some(session) = self.session.upgrade() else {
            return;
        };
        let updates = lock(&session.translator).apply(&event.body);
        for update in updates {
            session.send(&self.connection, update);
        }
        if let Some(update) = session.observe(&event.body) {
            session.send(&self.connection, update);
        }
        match &event.body {
            SessionEventBody::PermissionRequested { request, .. } => {
                session.ask(&self.connection, &self.tasks, request.clone());
            }
            SessionEventBody::PermissionResolved { request_id, .. } => {
                session.withdraw(request_id);
            }
            SessionEventBody::QuestionAsked { question, .. } => {
                session.ask_question(&self.connection, &self.tasks, question.clone());
            }
            SessionEventBody::QuestionResolved { question_id, .. } => {
                session.withdraw(question_id);
            }
            _ => {}
        }
    }
}
