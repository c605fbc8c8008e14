//! The async face of the store and the committed-history writer (SPEC §13).
//!
//! One SQLite connection lives behind a mutex and is only touched on tokio's blocking pool, so the
//! async runtime never waits on disk. Commits to one session go through that session's lane (an
//! async mutex), which serialises check → write → re-read → projection → acknowledgement per
//! session while other sessions' lanes proceed; their SQL still takes turns on the one
//! connection, which costs little next to a commit's fsync-free WAL append and keeps SQLite's
//! single-writer rule out of the picture.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_protocol::{SessionId, TurnId, TurnOutcome, Usage};
use rusqlite::Connection;
use tokio::runtime::RuntimeFlavor;

use crate::error::{Result, StoreError};
use crate::model::{
    Claim, CommitReceipt, CommitRequest, Entry, HistoryCommitted, HistoryOp, NewSession,
    QueuedInput, SessionRecord, StoredEntry, TurnRecord, TurnSource,
};
use crate::replay::{Replay, ReplayRegistry, fingerprint};
use crate::schema::{self, Durability};
use crate::sql;
use crate::turns;

/// Longest wait for the `HistoryCommitted` observers of one commit before it reports
/// `projection_timeout` (the commit itself is durable by then).
pub const OBSERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// Lanes kept before idle ones are dropped from the map.
const LANE_MAP_PRUNE_AT: usize = 256;

/// An async callback run for every commit before it is acknowledged. It must tolerate
/// seeing a commit again: a retry after a failed or dropped projection runs every observer
/// once more, and such a late projection can come after a later revision's.
pub type Observer = Arc<dyn Fn(Arc<HistoryCommitted>) -> BoxFuture<'static, ()> + Send + Sync>;

type Lane = Arc<tokio::sync::Mutex<()>>;

struct Inner {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    lanes: Mutex<HashMap<SessionId, Weak<tokio::sync::Mutex<()>>>>,
    replay: Mutex<ReplayRegistry>,
    observers: Mutex<Vec<Observer>>,
    /// Operations of this process between their write and their acknowledgement (or whose
    /// attempt failed or was dropped in between): a retry of one projects it before
    /// acknowledging, instead of returning the stored receipt.
    unprojected: Mutex<Unprojected>,
}

/// Most operations kept marked as written but not acknowledged. Marks of operations whose
/// callers gave up (and never retry under the same id) would otherwise pile up; past the
/// bound the oldest are forgotten, and a late retry of one is then acknowledged from the
/// stored commit without projecting it again.
const UNPROJECTED_MAX: usize = 4_096;

/// Operation marks in insertion order, bounded by [`UNPROJECTED_MAX`].
#[derive(Default)]
struct Unprojected {
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

/// Durable sessions and canonical history on one SQLite file. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

fn worker_error<T>(error: std::sync::PoisonError<T>) -> StoreError {
    StoreError::Worker(error.to_string())
}

impl Store {
    /// Opens or creates the database at `path` and migrates it.
    pub async fn open(path: impl AsRef<Path>, durability: Durability) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let open_path = path.clone();
        let conn = tokio::task::spawn_blocking(move || schema::open(&open_path, durability))
            .await
            .map_err(|error| StoreError::Worker(error.to_string()))?
            .map_err(|error| error.at(&path))?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn: Arc::new(Mutex::new(conn)),
                path,
                lanes: Mutex::new(HashMap::new()),
                replay: Mutex::new(ReplayRegistry::default()),
                observers: Mutex::new(Vec::new()),
                unprojected: Mutex::new(Unprojected::default()),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `work` with the connection (see [`Store::call_raw`]); a corrupt file is reported
    /// as [`StoreError::DatabaseCorrupt`] with its path.
    async fn call<R, F>(&self, work: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.call_raw(work)
            .await
            .map_err(|error| error.at(&self.inner.path))
    }

    /// Runs `work` with the connection: on the blocking pool, or in place on a
    /// current-thread runtime.
    ///
    /// A current-thread runtime (`keel exec`) waits for the result with nothing else to run,
    /// so handing the work to a pool thread only adds two thread wake-ups per call (a visible
    /// share of a commit); in place it blocks the runtime for the same time it would idle.
    /// The price: while a call waits for another process's write lock (at most
    /// [`crate::BUSY_TIMEOUT`]) or syncs under [`Durability::Full`], that runtime's timers
    /// and signal handling wait too. A panic in `work` is a [`StoreError::Worker`] either way.
    async fn call_raw<R, F>(&self, work: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let conn = Arc::clone(&self.inner.conn);
        if tokio::runtime::Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread)
        {
            let mut conn = conn.lock().map_err(worker_error)?;
            return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut conn)))
                .unwrap_or_else(|_| Err(StoreError::Worker("the store work panicked".into())));
        }
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().map_err(worker_error)?;
            work(&mut conn)
        })
        .await
        .map_err(|error| StoreError::Worker(error.to_string()))?
    }

    fn lane(&self, session: &SessionId) -> Result<Lane> {
        let mut lanes = self.inner.lanes.lock().map_err(worker_error)?;
        if let Some(lane) = lanes.get(session).and_then(Weak::upgrade) {
            return Ok(lane);
        }
        if lanes.len() >= LANE_MAP_PRUNE_AT {
            lanes.retain(|_, lane| lane.strong_count() > 0);
        }
        let lane = Arc::new(tokio::sync::Mutex::new(()));
        lanes.insert(session.clone(), Arc::downgrade(&lane));
        Ok(lane)
    }

    /// Registers an observer that every later commit waits for before it is acknowledged.
    pub fn add_observer(&self, observer: Observer) -> Result<()> {
        self.inner
            .observers
            .lock()
            .map_err(worker_error)?
            .push(observer);
        Ok(())
    }

    /// `PRAGMA integrity_check`: `ok` when sound.
    pub async fn integrity_check(&self) -> Result<String> {
        self.call(|conn| schema::integrity_check(conn)).await
    }

    /// Creates a session.
    pub async fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.call(move |conn| sql::create_session(conn, &new, None))
            .await
    }

    /// The session with exactly this id.
    pub async fn session(&self, id: &SessionId) -> Result<SessionRecord> {
        let id = id.clone();
        self.call(move |conn| sql::get_session(conn, id.as_str()))
            .await
    }

    /// Resolves what a user typed (a full id or a unique prefix of at least 4 characters).
    pub async fn resolve_session(&self, typed: &str) -> Result<SessionId> {
        let typed = typed.to_owned();
        self.call(move |conn| sql::resolve_session(conn, &typed))
            .await
    }

    /// Sessions, newest first; only those in `cwd` when given.
    pub async fn list_sessions(
        &self,
        cwd: Option<String>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>> {
        self.call(move |conn| sql::list_sessions(conn, cwd.as_deref(), limit))
            .await
    }

    /// Changes a session's title.
    pub async fn set_title(&self, id: &SessionId, title: String) -> Result<()> {
        let id = id.clone();
        self.call(move |conn| sql::set_title(conn, id.as_str(), &title))
            .await
    }

    /// Deletes a session, waiting for its lane so no commit is cut in half; refused with
    /// `session_busy` while a live process runs one of its turns.
    pub async fn delete_session(&self, id: &SessionId) -> Result<()> {
        let lane = self.lane(id)?;
        let _turn = lane.lock().await;
        let id = id.clone();
        self.call(move |conn| sql::delete_session(conn, id.as_str()))
            .await
    }

    /// Starts a turn.
    pub async fn start_turn(&self, session: &SessionId, source: TurnSource) -> Result<TurnRecord> {
        let session = session.clone();
        self.call(move |conn| turns::create_turn(conn, session.as_str(), &source))
            .await
    }

    /// Ends a turn; refused while it has claimed inputs in flight (acknowledge or release
    /// them first).
    pub async fn finish_turn(
        &self,
        turn: &TurnId,
        outcome: TurnOutcome,
        usage: Option<Usage>,
    ) -> Result<TurnRecord> {
        let turn = turn.clone();
        self.call(move |conn| turns::finish_turn(conn, turn.as_str(), &outcome, usage.as_ref()))
            .await
    }

    /// Starts a turn of this process in `session`, closing first (with `abandoned`) the turns
    /// dead processes left running; fails with `session_busy`, changing nothing, while a live
    /// process runs one. Checking and starting are one transaction, so two processes resuming
    /// the same session cannot both get a turn. Returns the closed turns and the new one.
    pub async fn begin_turn(
        &self,
        session: &SessionId,
        source: TurnSource,
        abandoned: TurnOutcome,
    ) -> Result<(Vec<TurnRecord>, TurnRecord)> {
        let session = session.clone();
        self.call(move |conn| turns::begin_turn(conn, session.as_str(), &source, &abandoned))
            .await
    }

    /// The turn with this id.
    pub async fn turn(&self, turn: &TurnId) -> Result<TurnRecord> {
        let turn = turn.clone();
        self.call(move |conn| turns::get_turn(conn, turn.as_str()))
            .await
    }

    /// The turns of a session, oldest first.
    pub async fn turns(&self, session: &SessionId) -> Result<Vec<TurnRecord>> {
        let session = session.clone();
        self.call(move |conn| turns::list_turns(conn, session.as_str()))
            .await
    }

    /// Canonical history at the head revision.
    pub async fn history(&self, session: &SessionId) -> Result<Vec<StoredEntry>> {
        let session = session.clone();
        self.call(move |conn| sql::read_history(conn, session.as_str(), None))
            .await
    }

    /// Canonical history as it was at `revision`.
    pub async fn history_at(&self, session: &SessionId, revision: u64) -> Result<Vec<StoredEntry>> {
        let session = session.clone();
        self.call(move |conn| sql::read_history(conn, session.as_str(), Some(revision)))
            .await
    }

    /// Revisions committed for a session, in order.
    pub async fn commit_revisions(&self, session: &SessionId) -> Result<Vec<u64>> {
        let session = session.clone();
        self.call(move |conn| sql::commit_revisions(conn, session.as_str()))
            .await
    }

    /// Commits one history operation through the session's lane (SPEC §13):
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
        // Errors before the write (inside `Ok`) leave nothing stored; errors after it (the
        // re-read) and worker failures may follow a write, so they keep the mark.
        let attempt = self
            .call(move |conn| {
                // `apply` is one transaction: when it fails, nothing was committed.
                let written = match sql::apply(conn, &work, &print) {
                    Ok(sql::Applied::Written(written)) => written,
                    Ok(sql::Applied::Earlier(earlier, receipt)) => {
                        return Ok(Ok((earlier == print, receipt, false)));
                    }
                    Err(error) => return Ok(Err(error)),
                };
                sql::verify(conn, &written)?;
                Ok(Ok((true, written.receipt, true)))
            })
            .await?;
        let outcome = match attempt {
            Ok(outcome) => outcome,
            Err(unwritten) => {
                if !was_pending {
                    self.unmark(&key)?;
                }
                return Err(unwritten.at(&self.inner.path));
            }
        };
        let receipt = match outcome {
            // Someone else's operation under this id: not ours to mark.
            (false, _, _) => {
                if !was_pending {
                    self.unmark(&key)?;
                }
                return Err(conflict());
            }
            // Stored and acknowledged by an earlier attempt (or an earlier process): only an
            // attempt of this process that never finished leaves step 4 to do.
            (true, receipt, false) if !was_pending => {
                self.unmark(&key)?;
                return Ok(receipt);
            }
            (true, receipt, written) => {
                if written {
                    tracing::debug!(
                        session_id = %receipt.session_id,
                        revision = receipt.revision,
                        kind = receipt.kind.as_str(),
                        "history committed"
                    );
                }
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

    async fn project(&self, receipt: CommitReceipt, turn_id: Option<TurnId>) -> Result<()> {
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

    /// Copies history at `at` (the head when `None`) into a new session linked by `forked_from`.
    pub async fn fork(
        &self,
        session: &SessionId,
        at: Option<u64>,
        title: Option<String>,
    ) -> Result<SessionRecord> {
        let source = session.clone();
        let (record, receipt) = self
            .call(move |conn| sql::fork(conn, source.as_str(), at, title.as_deref()))
            .await?;
        self.project(receipt, None).await?;
        Ok(record)
    }

    /// Queues an input carried beside tool results (steering, machine input).
    pub async fn enqueue_input(
        &self,
        session: &SessionId,
        payload: serde_json::Value,
    ) -> Result<String> {
        let session = session.clone();
        self.call(move |conn| sql::enqueue_input(conn, session.as_str(), &payload))
            .await
    }

    /// Claims all queued inputs of the session for a running turn.
    pub async fn claim_inputs(&self, session: &SessionId, turn: &TurnId) -> Result<Option<Claim>> {
        let session = session.clone();
        let turn = turn.clone();
        self.call(move |conn| sql::claim_inputs(conn, session.as_str(), &turn))
            .await
    }

    /// Acknowledges a claim once the commit carrying its inputs is acknowledged.
    pub async fn acknowledge_claim(&self, claim: &str, revision: u64) -> Result<usize> {
        let claim = claim.to_owned();
        self.call(move |conn| sql::acknowledge_claim(conn, &claim, revision))
            .await
    }

    /// Re-queues an unacknowledged claim.
    pub async fn release_claim(&self, claim: &str) -> Result<usize> {
        let claim = claim.to_owned();
        self.call(move |conn| sql::release_claim(conn, &claim))
            .await
    }

    /// Inputs waiting to be claimed.
    pub async fn queued_inputs(&self, session: &SessionId) -> Result<Vec<QueuedInput>> {
        let session = session.clone();
        self.call(move |conn| sql::queued_inputs(conn, session.as_str()))
            .await
    }

    /// The session, its turns and its history, for export.
    pub(crate) async fn snapshot(
        &self,
        session: &SessionId,
    ) -> Result<(SessionRecord, Vec<TurnRecord>, Vec<StoredEntry>)> {
        let session = session.clone();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let record = sql::get_session(&tx, session.as_str())?;
            let turns = turns::list_turns(&tx, session.as_str())?;
            let history = sql::read_history(&tx, session.as_str(), None)?;
            tx.commit()?;
            Ok((record, turns, history))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use keel_protocol::Message;

    use super::*;
    use crate::model::{Entry, NewSession};

    fn marked(store: &Store) -> usize {
        store.inner.unprojected.lock().unwrap().keys.len()
    }

    #[tokio::test]
    async fn a_commit_refused_before_its_write_leaves_no_mark() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("k.db"), Durability::Normal)
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
