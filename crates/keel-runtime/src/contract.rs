//! The conversation contract (DESIGN §5): the one interface every front end uses, driven by
//! typed operations ([`Op`]) and a per-session event stream. [`DeferredContract`] hands the
//! interface out before a runtime exists and forwards calls once one is bound.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{ImageBlock, Op, QueueEntry, SessionId, TurnSource};
use keel_store::{SessionRecord, StoredEntry};
use tokio::sync::watch;

use crate::error::RuntimeError;
use crate::events::{SessionSink, Subscription};
use crate::lifecycle::SessionUpdate;
use crate::runtime::{Opened, Runtime};
use crate::structured::OutputSchema;
use crate::turn::{Start, TurnHandle, TurnOptions};

/// What an operation returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum Reply {
    /// Sessions, newest first.
    Sessions(Vec<SessionRecord>),
    /// One session.
    Session(SessionRecord),
    /// An opened session.
    Opened(Opened),
    /// History.
    Messages(Vec<StoredEntry>),
    /// Committed revisions.
    Revisions(Vec<u64>),
    /// The input queue.
    Queue(Vec<QueueEntry>),
    /// A queued input, and the turn it started when none was running.
    Queued {
        /// The input.
        entry: QueueEntry,
        /// The turn started for it.
        turn: Option<TurnHandle>,
    },
    /// A started turn.
    Turn(TurnHandle),
    /// A new committed revision (rewind, compaction); `None` when nothing changed.
    Revision(Option<u64>),
    /// Whether the operation changed anything (abort: whether a turn was running).
    Done(bool),
    /// The slash commands extensions offer.
    Commands(Vec<keel_protocol::CommandInfo>),
    /// A command's answer for the user (no turn started).
    Text(String),
    /// A session's tasks, oldest first.
    Tasks(Vec<keel_protocol::TaskInfo>),
    /// A session's transcript, secrets masked.
    Export(keel_protocol::SessionExport),
    /// What fills a session's context window.
    Context(keel_protocol::ContextReport),
    /// The text of a message taken back; `None` when there was nothing to take back.
    TakenBack(Option<String>),
}

/// The interface front ends use.
#[async_trait]
pub trait ConversationContract: Send + Sync {
    /// Performs one operation.
    async fn call(&self, op: Op) -> Result<Reply, RuntimeError>;
    /// Delivers an open session's events to `sink` until the subscription is dropped.
    async fn subscribe(
        &self,
        session: &SessionId,
        sink: Arc<dyn SessionSink>,
    ) -> Result<Subscription, RuntimeError>;
}

#[async_trait]
impl ConversationContract for Runtime {
    async fn call(&self, op: Op) -> Result<Reply, RuntimeError> {
        let store = &self.inner.store;
        Ok(match op {
            Op::ListSessions { cwd, limit } => {
                Reply::Sessions(store.list_sessions(cwd, limit).await?)
            }
            Op::GetSession { session_id } => Reply::Session(store.session(&session_id).await?),
            Op::GetMessages {
                session_id,
                revision,
            } => Reply::Messages(match revision {
                Some(revision) => store.history_at(&session_id, revision).await?,
                None => store.history(&session_id).await?,
            }),
            Op::ListRevisions { session_id } => {
                Reply::Revisions(store.commit_revisions(&session_id).await?)
            }
            Op::ListQueue { session_id } => Reply::Queue(self.queue(&session_id).await?),
            Op::ContextReport { session_id } => {
                Reply::Context(self.context_report(&session_id).await?)
            }
            Op::ExportSession { session_id, format } => {
                Reply::Export(crate::sessions::export(store, &session_id, format).await?)
            }
            Op::ListCommands => Reply::Commands(self.commands()),
            Op::ListTasks { session_id } => Reply::Tasks(self.tasks().list(&session_id).await?),
            Op::StopTask { task_id } => Reply::Done(self.tasks().stop(&task_id).await?),
            Op::Attach {
                session_id,
                kind,
                value,
            } => {
                self.attach(&session_id, &kind, &value).await?;
                Reply::Done(true)
            }
            Op::RunCommand {
                session_id,
                name,
                arguments,
            } => self.run_command(&session_id, &name, &arguments).await?,
            Op::OpenSession { target } => Reply::Opened(self.open_session(target).await?),
            Op::UpdateSession {
                session_id,
                title,
                model,
                mode,
                thinking,
            } => Reply::Session(
                self.update_session(
                    &session_id,
                    SessionUpdate {
                        title,
                        model,
                        mode,
                        thinking,
                    },
                )
                .await?,
            ),
            Op::ForkSession {
                session_id,
                revision,
            } => Reply::Session(self.fork_session(&session_id, revision).await?),
            Op::RewindSession {
                session_id,
                revision,
            } => Reply::Revision(Some(self.rewind_session(&session_id, revision).await?)),
            Op::Retry { session_id } => Reply::Turn(self.retry(&session_id).await?),
            Op::TakeBack { session_id } => Reply::TakenBack(self.take_back(&session_id).await?),
            Op::DeleteSession { session_id } => {
                self.delete_session(&session_id).await?;
                Reply::Done(true)
            }
            Op::CloseSession { session_id } => {
                self.close_session(&session_id).await?;
                Reply::Done(true)
            }
            Op::Submit {
                session_id,
                text,
                images,
                source,
                output_schema,
                time_budget_ms,
            } => {
                let output_schema = output_schema
                    .map(|text| OutputSchema::compile(&text, "the output schema"))
                    .transpose()?;
                let deadline = time_budget_ms
                    .map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms));
                let options = TurnOptions {
                    output_schema,
                    deadline,
                };
                Reply::Turn(
                    self.submit_with_images(&session_id, text, images, source, options)
                        .await?,
                )
            }
            Op::Enqueue {
                session_id,
                kind,
                text,
                source,
            } => {
                let (entry, turn) = self.enqueue(&session_id, kind, &text, source).await?;
                Reply::Queued { entry, turn }
            }
            Op::EditQueued {
                session_id,
                input_id,
                text,
            } => {
                self.edit_queued(&session_id, &input_id, &text).await?;
                Reply::Queue(self.queue(&session_id).await?)
            }
            Op::CancelQueued {
                session_id,
                input_id,
            } => {
                self.cancel_queued(&session_id, &input_id).await?;
                Reply::Queue(self.queue(&session_id).await?)
            }
            Op::ReorderQueue { session_id, order } => {
                Reply::Queue(self.reorder_queue(&session_id, &order).await?)
            }
            Op::Abort { session_id } => Reply::Done(self.abort(&session_id)?),
            Op::Dispatch { session_id, source } => {
                Reply::Turn(self.dispatch(&session_id, source).await?)
            }
            Op::AnswerPermission {
                session_id,
                request_id,
                answer,
            } => {
                self.answer_permission(&session_id, &request_id, answer)?;
                Reply::Done(true)
            }
            Op::Compact {
                session_id,
                instructions,
            } => Reply::Revision(self.compact(&session_id, instructions).await?),
            other => {
                return Err(RuntimeError::Unsupported(format!(
                    "operation {:?} is not supported by this runtime",
                    other.group()
                )));
            }
        })
    }

    async fn subscribe(
        &self,
        session: &SessionId,
        sink: Arc<dyn SessionSink>,
    ) -> Result<Subscription, RuntimeError> {
        let slot = self.slot_or_open(session).await?;
        Ok(slot.hub.subscribe(sink))
    }
}

impl Runtime {
    /// Starts a turn with the user's input; refused while one runs.
    pub async fn submit(
        &self,
        session: &SessionId,
        text: String,
        source: TurnSource,
        options: TurnOptions,
    ) -> Result<TurnHandle, RuntimeError> {
        self.submit_with_images(session, text, Vec::new(), source, options)
            .await
    }

    /// Starts a turn with the user's input and images; refused while one runs, and when
    /// the session's model does not take images.
    pub async fn submit_with_images(
        &self,
        session: &SessionId,
        text: String,
        images: Vec<ImageBlock>,
        source: TurnSource,
        options: TurnOptions,
    ) -> Result<TurnHandle, RuntimeError> {
        let slot = self.slot_or_open(session).await?;
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
        self.start_turn(slot, Start::Input(text, images), source, options)
            .await
    }
}

/// The contract before a runtime exists: calls wait until one is bound, then go to it.
#[derive(Clone)]
pub struct DeferredContract {
    bound: watch::Sender<Option<Arc<dyn ConversationContract>>>,
}

impl Default for DeferredContract {
    fn default() -> Self {
        Self::new()
    }
}

impl DeferredContract {
    /// An unbound contract.
    pub fn new() -> Self {
        Self {
            bound: watch::channel(None).0,
        }
    }

    /// Binds the real contract; waiting and later calls go to it. Binding twice is an
    /// error: a front end must not swap the runtime under a session.
    pub fn bind(&self, contract: Arc<dyn ConversationContract>) -> Result<(), RuntimeError> {
        let mut already = false;
        self.bound.send_modify(|slot| {
            if slot.is_some() {
                already = true;
            } else {
                *slot = Some(contract);
            }
        });
        if already {
            return Err(RuntimeError::Unsupported(
                "the contract is bound to a runtime already".into(),
            ));
        }
        Ok(())
    }

    /// Whether a runtime is bound.
    pub fn is_bound(&self) -> bool {
        self.bound.borrow().is_some()
    }

    async fn target(&self) -> Result<Arc<dyn ConversationContract>, RuntimeError> {
        let mut rx = self.bound.subscribe();
        let bound = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| RuntimeError::NotBound)?;
        bound.clone().ok_or(RuntimeError::NotBound)
    }
}

#[async_trait]
impl ConversationContract for DeferredContract {
    async fn call(&self, op: Op) -> Result<Reply, RuntimeError> {
        self.target().await?.call(op).await
    }

    async fn subscribe(
        &self,
        session: &SessionId,
        sink: Arc<dyn SessionSink>,
    ) -> Result<Subscription, RuntimeError> {
        self.target().await?.subscribe(session, sink).await
    }
}
