//! The conversation contract (DESIGN §5): the one interface every front end uses, driven by
//! typed operations ([`Op`]) and a per-session event stream. [`DeferredContract`] hands the
//! interface out before a runtime exists and forwards calls once one is bound.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{Op, SessionId};
use tokio::sync::watch;

use crate::error::RuntimeError;
use crate::events::{SessionSink, Subscription};
use crate::lifecycle::SessionUpdate;
use crate::reply::{Operation, Queued, Reply};
use crate::runtime::Runtime;
use crate::structured::OutputSchema;
use crate::turn::TurnOptions;

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

/// The contract with each operation's own reply type.
#[async_trait]
pub trait ContractExt {
    /// Performs one operation and returns its reply.
    async fn request<O: Operation + 'static>(&self, op: O) -> Result<O::Reply, RuntimeError>;
}

#[async_trait]
impl<T: ConversationContract + ?Sized> ContractExt for T {
    async fn request<O: Operation + 'static>(&self, op: O) -> Result<O::Reply, RuntimeError> {
        let reply = self.call(op.into()).await?;
        O::take(reply).map_err(|other| {
            RuntimeError::Internal(format!(
                "the contract answered {other} to another operation"
            ))
        })
    }
}

#[async_trait]
impl ConversationContract for Runtime {
    async fn call(&self, op: Op) -> Result<Reply, RuntimeError> {
        let store = &self.inner.store;
        Ok(match op {
            Op::ListSessions(o) => {
                Reply::ListSessions(store.list_conversations(o.cwd, o.limit).await?)
            }
            Op::GetSession(o) => Reply::GetSession(store.session(&o.session_id).await?),
            Op::GetMessages(o) => Reply::GetMessages(match o.revision {
                Some(revision) => store.history_at(&o.session_id, revision).await?,
                None => store.history(&o.session_id).await?,
            }),
            Op::ListRevisions(o) => {
                Reply::ListRevisions(store.commit_revisions(&o.session_id).await?)
            }
            Op::ListQueue(o) => Reply::ListQueue(self.turns().queue(&o.session_id).await?),
            Op::ContextReport(o) => {
                Reply::ContextReport(self.sessions().context_report(&o.session_id).await?)
            }
            Op::ExportSession(o) => Reply::ExportSession(
                crate::sessions::export(
                    store,
                    &o.session_id,
                    o.format,
                    self.inner.settings.keel_home.as_deref(),
                )
                .await?,
            ),
            Op::ListCommands(_) => Reply::ListCommands(self.commands()),
            Op::ListMentions(o) => Reply::ListMentions(self.mentions(&o.session_id).await?),
            Op::ListTasks(o) => Reply::ListTasks(self.tasks().list(&o.session_id).await?),
            Op::StopTask(o) => Reply::StopTask(self.tasks().stop(&o.task_id).await?),
            Op::Attach(o) => {
                self.attach(&o.session_id, &o.kind, &o.value).await?;
                Reply::Attach(())
            }
            Op::RunCommand(o) => Reply::RunCommand(
                self.run_command(&o.session_id, &o.name, &o.arguments)
                    .await?,
            ),
            Op::OpenSession(o) => Reply::OpenSession(self.sessions().open_session(o.target).await?),
            Op::UpdateSession(o) => Reply::UpdateSession(
                self.sessions()
                    .update_session(
                        &o.session_id,
                        SessionUpdate {
                            title: o.title,
                            model: o.model,
                            mode: o.mode,
                            thinking: o.thinking,
                        },
                    )
                    .await?,
            ),
            Op::ForkSession(o) => Reply::ForkSession(
                self.sessions()
                    .fork_session(&o.session_id, o.revision)
                    .await?,
            ),
            Op::RewindSession(o) => Reply::RewindSession(
                self.sessions()
                    .rewind_session(&o.session_id, o.revision)
                    .await?,
            ),
            Op::Retry(o) => Reply::Retry(self.sessions().retry(&o.session_id).await?),
            Op::TakeBack(o) => Reply::TakeBack(self.sessions().take_back(&o.session_id).await?),
            Op::TitleSession(o) => {
                Reply::TitleSession(self.sessions().title_by_model(&o.session_id)?)
            }
            Op::DeleteSession(o) => {
                self.sessions().delete_session(&o.session_id).await?;
                Reply::DeleteSession(())
            }
            Op::CloseSession(o) => {
                self.sessions().close_session(&o.session_id).await?;
                Reply::CloseSession(())
            }
            Op::Submit(o) => {
                let output_schema = o
                    .output_schema
                    .map(|text| OutputSchema::compile(&text, "the output schema"))
                    .transpose()?;
                let deadline = o
                    .time_budget_ms
                    .map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms));
                let options = TurnOptions {
                    output_schema,
                    deadline,
                    typed: true,
                };
                Reply::Submit(
                    self.turns()
                        .submit_with_images(&o.session_id, o.text, o.images, o.source, options)
                        .await?,
                )
            }
            Op::RunShell(o) => Reply::RunShell(
                self.turns()
                    .run_shell(&o.session_id, &o.command, o.remember)
                    .await?,
            ),
            Op::Enqueue(o) => {
                let (entry, turn) = self
                    .turns()
                    .enqueue(&o.session_id, o.kind, &o.text, o.source)
                    .await?;
                Reply::Enqueue(Queued { entry, turn })
            }
            Op::EditQueued(o) => {
                self.turns()
                    .edit_queued(&o.session_id, &o.input_id, &o.text)
                    .await?;
                Reply::EditQueued(self.turns().queue(&o.session_id).await?)
            }
            Op::CancelQueued(o) => {
                self.turns()
                    .cancel_queued(&o.session_id, &o.input_id)
                    .await?;
                Reply::CancelQueued(self.turns().queue(&o.session_id).await?)
            }
            Op::ReorderQueue(o) => {
                Reply::ReorderQueue(self.turns().reorder_queue(&o.session_id, &o.order).await?)
            }
            Op::Abort(o) => Reply::Abort(self.turns().abort(&o.session_id)?),
            Op::Dispatch(o) => {
                Reply::Dispatch(self.turns().dispatch(&o.session_id, o.source).await?)
            }
            Op::AnswerPermission(o) => {
                self.turns()
                    .answer_permission(&o.session_id, &o.request_id, o.answer)?;
                Reply::AnswerPermission(())
            }
            Op::AnswerQuestion(o) => {
                self.turns()
                    .answer_question(&o.session_id, &o.question_id, o.answer)?;
                Reply::AnswerQuestion(())
            }
            Op::Compact(o) => Reply::Compact(
                self.sessions()
                    .compact(&o.session_id, o.instructions)
                    .await?,
            ),
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
