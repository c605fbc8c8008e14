//! What [`HostControl`] does: it is declared with the extension interface, which must not
//! name the runtime, and bound here to the runtime's state, held weakly so an extension
//! that keeps it never keeps the runtime alive.

use std::any::Any;
use std::sync::Arc;

use keel_protocol::SessionId;

use crate::contract::ContractExt;
use crate::error::RuntimeError;
use crate::extension::HostControl;
use crate::reply::Operation;
use crate::runtime::{Inner, Runtime};

impl HostControl {
    pub(crate) fn bind(&self, inner: &Arc<Inner>) {
        let erased: Arc<dyn Any + Send + Sync> = inner.clone();
        self.bind_erased(Arc::downgrade(&erased));
    }

    /// The runtime, while it runs.
    pub fn runtime(&self) -> Option<Runtime> {
        let inner = self.bound()?.downcast::<Inner>().ok()?;
        Some(Runtime { inner })
    }

    fn live(&self) -> Result<Runtime, RuntimeError> {
        self.runtime().ok_or(RuntimeError::NotBound)
    }

    /// Performs one operation of the conversation contract, as a front end would.
    pub async fn request<O: Operation + 'static>(&self, op: O) -> Result<O::Reply, RuntimeError> {
        self.live()?.request(op).await
    }

    /// The runtime's background tasks (the task tools' service), while it runs.
    pub fn tasks(&self) -> Option<crate::tasks::Tasks> {
        self.runtime().map(|runtime| runtime.tasks())
    }

    /// Events for `session` that belong to no turn (a change a command made between turns),
    /// while it is open here.
    pub fn events(&self, session: &SessionId) -> Option<crate::extension::ExtensionEvents> {
        let slot = self.runtime()?.slot(session).ok()?;
        Some(crate::extension::ExtensionEvents::new(
            slot.hub.clone(),
            None,
        ))
    }

    /// Asks `session`'s user `question` during its running turn and waits for the answer;
    /// refused where no one can answer (see [`crate::NoOneToAsk`]).
    pub async fn ask(
        &self,
        session: &SessionId,
        question: keel_protocol::Question,
    ) -> Result<keel_protocol::QuestionAnswer, crate::NoOneToAsk> {
        let runtime = self
            .runtime()
            .ok_or_else(|| crate::NoOneToAsk("the runtime has stopped".into()))?;
        runtime.ask(session, question).await
    }

    /// Whether `session` is open here with a turn running (or being admitted).
    pub fn is_busy(&self, session: &SessionId) -> bool {
        self.runtime()
            .and_then(|runtime| runtime.slot(session).ok())
            .is_some_and(|slot| !slot.is_idle())
    }

    /// The permission mode `session` runs in (`ask`, `auto`, `full`, `plan`), when open here.
    pub fn mode(&self, session: &SessionId) -> Option<keel_tools::permission::Mode> {
        let runtime = self.runtime()?;
        let slot = runtime.slot(session).ok()?;
        let mode = slot.lock().mode;
        Some(mode)
    }
}
