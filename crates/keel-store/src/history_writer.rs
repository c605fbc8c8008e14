//! The committed-history writer (DESIGN §13): every change to a session's history runs the five
//! commit steps in that session's lane, and retries are recognised by operation id and a
//! fingerprint of the content.
//!
//! The lane is held from the replay check to the acknowledgement, so two commits of one
//! session never interleave, and the durable write comes before any observer sees it. A
//! commit whose attempt fails or is dropped after its write stays marked, so that a retry
//! projects it before acknowledging instead of answering from the stored receipt.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use keel_protocol::{SessionId, TurnId};

use crate::error::{Result, StoreError};
use crate::model::{CommitReceipt, CommitRequest, Entry, HistoryCommitted, HistoryOp};
use crate::replay::{Replay, fingerprint};
use crate::sql;
use crate::store::{Store, worker_error};

/// Longest wait for the `HistoryCommitted` observers of one commit before it reports
/// `projection_timeout` (the commit itself is durable by then).
pub const OBSERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// An async callback run for every commit before it is acknowledged. It must tolerate
/// seeing a commit again: a retry after a failed or dropped projection runs every observer
/// once more, and such a late projection can come after a later revision's.
pub type Observer = Arc<dyn Fn(Arc<HistoryCommitted>) -> BoxFuture<'static, ()> + Send + Sync>;

/// Most operations kept marked as written but not acknowledged. Marks of operations whose
/// callers gave up (and never retry under the same id) would otherwise pile up; past the
/// bound the oldest are forgotten, and a late retry of one is then acknowledged from the
/// stored commit without projecting it again.
const UNPROJECTED_MAX: usize = 4_096;

/// Operation marks in insertion order, bounded by [`UNPROJECTED_MAX`].
#[derive(Default)]
pub(crate) struct Unprojected {
    keys: HashSet<(SessionId, String)>,
    order: std::collections::VecDeque<(SessionId, String)>,
}

impl Unprojected {
    /// Marks `key`; `false` when it was marked already.
    fn insert(&mut self, key: (SessionId, String)) -> bool {
        if !self.keys.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        while self.keys.len() > UNPROJECTED_MAX {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.keys.remove(&oldest);
                }
                None => break,
            }
        }
        true
    }

    fn remove(&mut self, key: &(SessionId, String)) {
        if self.keys.remove(key) {
            self.order.retain(|marked| marked != key);
        }
    }
}

/// How one attempt at a commit ended on the connection.
enum Attempt {
    /// Written now by this attempt, and read back as written.
    Written(CommitReceipt),
    /// Already stored under this operation id with the same content, by an earlier attempt
    /// or process; nothing was written.
    Stored(CommitReceipt),
    /// Already stored under this operation id with different content; nothing was written.
    Conflict,
    /// Refused before writing anything (identity, revision, a malformed operation).
    Refused(StoreError),
}

impl Store {
    /// Commits one history operation through the session's lane (DESIGN §13):
    /// 1. the request, already owned here, is the semantic snapshot; the replay registry and
    ///    the commit records recognise retries; session, turn and revision are checked;
    /// 2. the write is one transaction, after which the history is re-read in the same lane;
    /// 3. the re-read is validated and gives the committed revision;
    /// 4. the registered `HistoryCommitted` observers are awaited (bounded);
    /// 5. the receipt is returned.
    pub async fn commit(&self, request: CommitRequest) -> Result<CommitReceipt> {
        let (fingerprint, bytes) = fingerprint(&request)?;
        let lane = self.lane(&request.session_id)?;
        let _lane = lane.lock().await;

        let session_text = request.session_id.to_string();
        let operation_text = request.operation_id.clone();
        let conflict = || StoreError::Conflict {
            session: session_text.clone(),
            operation: operation_text.clone(),
        };
        let seen = self.inner.replay.lock().map_err(worker_error)?.check(
            &request.session_id,
            &request.operation_id,
            &fingerprint,
        );
        match seen {
            Replay::Same(receipt) => return Ok(receipt),
            Replay::Different => return Err(conflict()),
            Replay::New => {}
        }

        let turn_id = request.turn_id.clone();
        let key = (request.session_id.clone(), request.operation_id.clone());
        // Marked before the write and cleared only once projected: if this call fails or is
        // dropped anywhere after the write (re-read, projection), a retry finds the mark and
        // projects before acknowledging. A mark already present means an earlier attempt of
        // this process did not finish.
        let was_pending = !self
            .inner
            .unprojected
            .lock()
            .map_err(worker_error)?
            .insert(key.clone());
        let request = Arc::new(request);
        let work = Arc::clone(&request);
        let print = fingerprint.clone();
        // An error returned from the work (rather than a refusal inside it) may follow a
        // write: the re-read failed, or the work never answered. It keeps the mark.
        let attempt = self
            .call(move |conn| {
                // `apply` is one transaction: when it fails, nothing was committed.
                let written = match sql::apply(conn, &work, &print) {
                    Ok(sql::Applied::Written(written)) => written,
                    Ok(sql::Applied::Earlier(earlier, receipt)) if earlier == print => {
                        return Ok(Attempt::Stored(receipt));
                    }
                    Ok(sql::Applied::Earlier(..)) => return Ok(Attempt::Conflict),
                    Err(error) => return Ok(Attempt::Refused(error)),
                };
                sql::verify(conn, &written)?;
                Ok(Attempt::Written(written.receipt))
            })
            .await?;
        let receipt = match attempt {
            Attempt::Refused(error) => {
                if !was_pending {
                    self.unmark(&key)?;
                }
                return Err(error.at(self.path()));
            }
            // Someone else's operation under this id: not ours to mark.
            Attempt::Conflict => {
                if !was_pending {
                    self.unmark(&key)?;
                }
                return Err(conflict());
            }
            // Stored and acknowledged by an earlier attempt (or an earlier process): only an
            // attempt of this process that never finished leaves step 4 to do.
            Attempt::Stored(receipt) if !was_pending => {
                self.unmark(&key)?;
                return Ok(receipt);
            }
            Attempt::Stored(receipt) => receipt,
            Attempt::Written(receipt) => {
                tracing::debug!(
                    session_id = %receipt.session_id,
                    revision = receipt.revision,
                    kind = receipt.kind.as_str(),
                    "history committed"
                );
                receipt
            }
        };
        self.project(receipt.clone(), turn_id).await?;
        self.unmark(&key)?;
        // Remembered only once acknowledged, so a retry after a failed projection is not
        // answered from the registry without being projected.
        self.inner.replay.lock().map_err(worker_error)?.remember(
            fingerprint,
            bytes,
            receipt.clone(),
        );
        Ok(receipt)
    }

    fn unmark(&self, key: &(SessionId, String)) -> Result<()> {
        self.inner
            .unprojected
            .lock()
            .map_err(worker_error)?
            .remove(key);
        Ok(())
    }

    pub(crate) async fn project(
        &self,
        receipt: CommitReceipt,
        turn_id: Option<TurnId>,
    ) -> Result<()> {
        let observers = self.inner.observers.lock().map_err(worker_error)?.clone();
        if observers.is_empty() {
            return Ok(());
        }
        let revision = receipt.revision;
        let event = Arc::new(HistoryCommitted { receipt, turn_id });
        let all = futures::future::join_all(
            observers
                .iter()
                .map(|observer| observer(Arc::clone(&event))),
        );
        tokio::time::timeout(OBSERVER_TIMEOUT, all)
            .await
            .map_err(|_| StoreError::ProjectionTimeout { revision })?;
        Ok(())
    }

    /// Appends messages outside any turn.
    pub async fn append(
        &self,
        session: &SessionId,
        operation_id: impl Into<String>,
        entries: Vec<Entry>,
    ) -> Result<CommitReceipt> {
        self.commit(CommitRequest::append(
            session.clone(),
            operation_id,
            entries,
        ))
        .await
    }

    /// Sets history back to what it was at `to_revision`. Recoverable: the rows after it stay
    /// readable with [`Store::history_at`], and rewinding to the old head brings them back.
    /// Refused with `session_busy` while a live process runs a turn of the session.
    pub async fn rewind(
        &self,
        session: &SessionId,
        to_revision: u64,
        operation_id: impl Into<String>,
    ) -> Result<CommitReceipt> {
        self.commit(CommitRequest {
            session_id: session.clone(),
            turn_id: None,
            operation_id: operation_id.into(),
            expected_revision: None,
            op: HistoryOp::Rewind { to_revision },
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use keel_protocol::Message;

    use super::*;
    use crate::execution::OpenOptions;
    use crate::model::{Entry, NewSession};

    fn marked(store: &Store) -> usize {
        store.inner.unprojected.lock().unwrap().keys.len()
    }

    #[tokio::test]
    async fn a_commit_refused_before_its_write_leaves_no_mark() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("k.db"), OpenOptions::default())
            .await
            .unwrap();
        let session = store
            .create_session(NewSession {
                cwd: "/w".into(),
                ..NewSession::default()
            })
            .await
            .unwrap();
        let entry = || vec![Entry::new(Message::user_text("a"))];
        let mut stale = CommitRequest::append(session.id.clone(), "op-stale", entry());
        stale.expected_revision = Some(7);
        for _ in 0..3 {
            let error = store.commit(stale.clone()).await.unwrap_err();
            assert_eq!(error.code(), "stale_revision");
        }
        assert_eq!(marked(&store), 0);
        store
            .commit(CommitRequest::append(session.id.clone(), "op-ok", entry()))
            .await
            .unwrap();
        assert_eq!(marked(&store), 0, "acknowledged commits are unmarked");
    }

    #[test]
    fn marks_are_bounded_oldest_first() {
        let mut marks = Unprojected::default();
        let key = |n: usize| (SessionId::from("s-1".to_owned()), format!("op-{n}"));
        for n in 0..UNPROJECTED_MAX + 10 {
            assert!(marks.insert(key(n)));
        }
        assert_eq!(marks.keys.len(), UNPROJECTED_MAX);
        assert!(!marks.keys.contains(&key(0)) && marks.keys.contains(&key(10)));
        assert!(!marks.insert(key(10)), "already marked");
        marks.remove(&key(10));
        assert!(!marks.keys.contains(&key(10)));
        assert_eq!(marks.order.len(), UNPROJECTED_MAX - 1);
    }
}
