//! A turn while it runs: its cancellation, the inputs it delivered, its pending permission
//! requests, what it committed, and the signal that it ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use keel_protocol::{Message, TurnId};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use keel_store::{CommitReceipt, CommitRequest, Store};

use crate::extension::HistoryError;
use crate::permission;

/// What a commit that never finished (timed out or dropped) leaves as the failure.
const UNFINISHED: &str = "a history commit did not finish (it timed out or was dropped)";

/// A turn that is running.
pub(crate) struct RunningTurn {
    pub(crate) turn_id: TurnId,
    pub(crate) cancel: CancellationToken,
    /// Inputs handed to the runner and not yet acknowledged: input id → claim id.
    pub(crate) delivered: Mutex<HashMap<String, String>>,
    /// Permission requests waiting for an answer.
    pub(crate) permissions: Mutex<HashMap<String, permission::Pending>>,
    /// Questions for the user waiting for an answer.
    pub(crate) questions: Mutex<HashMap<String, crate::question::Pending>>,
    commit_failure: Mutex<Option<String>>,
    pub(crate) committed: Mutex<Vec<Arc<Message>>>,
    /// The history a replacement made during the turn (archive, compaction): the turn's
    /// committed messages follow it instead of the history the turn started with.
    pub(crate) base: Mutex<Option<Vec<Arc<Message>>>>,
    pub(crate) ended: watch::Sender<bool>,
    /// The batch of the hidden prompt message that carries claimed session reminders: they
    /// are acknowledged once it is committed.
    pub(crate) reminder_batch: Mutex<Option<String>>,
}

impl RunningTurn {
    pub(crate) fn new(turn_id: TurnId) -> Self {
        Self {
            turn_id,
            cancel: CancellationToken::new(),
            delivered: Mutex::new(HashMap::new()),
            permissions: Mutex::new(HashMap::new()),
            questions: Mutex::new(HashMap::new()),
            commit_failure: Mutex::new(None),
            committed: Mutex::new(Vec::new()),
            base: Mutex::new(None),
            ended: watch::channel(false).0,
            reminder_batch: Mutex::new(None),
        }
    }

    pub(crate) fn commit_failure(&self) -> MutexGuard<'_, Option<String>> {
        self.commit_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes one of the turn's history commits. Marked before the await: if a hook's time
    /// limit drops the commit after the store wrote it, the turn must not report success
    /// (nor keep a cached history the store may no longer have); a failure is recorded with
    /// `what` it tried.
    pub(crate) async fn commit(
        &self,
        store: &Store,
        request: CommitRequest,
        what: &str,
    ) -> Result<CommitReceipt, HistoryError> {
        let marked = {
            let mut failure = self.commit_failure();
            failure
                .is_none()
                .then(|| *failure = Some(UNFINISHED.to_owned()))
                .is_some()
        };
        let result = store.commit(request).await;
        let mut failure = self.commit_failure();
        match result {
            Ok(receipt) => {
                if marked {
                    *failure = None;
                }
                Ok(receipt)
            }
            Err(source) => {
                let error = HistoryError {
                    what: what.to_owned(),
                    source,
                };
                if marked || failure.is_none() {
                    *failure = Some(error.to_string());
                }
                Err(error)
            }
        }
    }

    pub(crate) fn committed(&self, messages: &[Arc<Message>]) {
        self.committed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(messages.iter().cloned());
    }

    /// The history was replaced by `messages`: what the turn commits from now on follows
    /// them.
    pub(crate) fn replaced(&self, messages: &[Arc<Message>]) {
        let mut committed = self
            .committed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        committed.clear();
        *self.base.lock().unwrap_or_else(PoisonError::into_inner) = Some(messages.to_vec());
    }

    /// Waits until the turn finished (its outcome recorded, its slot idle again).
    pub(crate) async fn ended(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|ended| *ended).await;
    }
}
