//! The async face of the store: one [`Store`] handle (cheap to clone) over one SQLite
//! connection, whose work runs where [`crate::Execution`] says (see `execution.rs`). Commits to one
//! session go through that session's lane (an async mutex, see `history_writer.rs`), which
//! serialises check → write → re-read → projection → acknowledgement per session while other
//! sessions' lanes proceed; their SQL still takes turns on the one connection, which costs
//! little next to a commit and keeps SQLite's single-writer rule out of the picture.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use keel_protocol::{SessionId, TurnId, TurnOutcome, Usage};
use rusqlite::Connection;

use crate::error::{Result, StoreError};
use crate::execution::{Executor, OpenOptions};
use crate::files;
use crate::history_writer::{Observer, Unprojected};
use crate::model::{NewSession, SessionRecord, StoredEntry, TurnRecord, TurnSource};
use crate::replay::ReplayRegistry;
use crate::schema;
use crate::sql;
use crate::turns;

/// Lanes kept before idle ones are dropped from the map.
const LANE_MAP_PRUNE_AT: usize = 256;

/// A session's commit lane.
pub(crate) type Lane = Arc<tokio::sync::Mutex<()>>;

/// What every clone of a [`Store`] shares.
pub(crate) struct Inner {
    /// Runs the SQLite work; dropping it with the last clone ends the writer thread.
    executor: Executor,
    path: PathBuf,
    lanes: Mutex<HashMap<SessionId, Weak<tokio::sync::Mutex<()>>>>,
    pub(crate) replay: Mutex<ReplayRegistry>,
    pub(crate) observers: Mutex<Vec<Observer>>,
    /// Operations of this process between their write and their acknowledgement (or whose
    /// attempt failed or was dropped in between): a retry of one projects it before
    /// acknowledging, instead of returning the stored receipt.
    pub(crate) unprojected: Mutex<Unprojected>,
}

/// Durable sessions and canonical history on one SQLite file. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

pub(crate) fn worker_error<T>(error: std::sync::PoisonError<T>) -> StoreError {
    StoreError::Worker(error.to_string())
}

impl Store {
    /// Opens or creates the database at `path` and migrates it, with the durability and the
    /// execution (which thread runs SQLite) `options` give.
    pub async fn open(path: impl AsRef<Path>, options: OpenOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let executor = Executor::open(&path, options)
            .await
            .map_err(|error| error.at(&path))?;
        Ok(Self {
            inner: Arc::new(Inner {
                executor,
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

    /// Runs `work` with the connection where the store's [`crate::Execution`] says; a
    /// corrupt file is reported as [`StoreError::DatabaseCorrupt`] with its path, a panic in
    /// `work` as [`StoreError::Worker`].
    pub(crate) async fn call<R, F>(&self, work: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.inner
            .executor
            .run(work)
            .await
            .map_err(|error| error.at(&self.inner.path))
    }

    /// Flushes the write-ahead log to disk (one fsync of `<db>-wal`; nothing when there is
    /// none), so what was committed survives a power cut and not only a crash of this
    /// process. Closing does not checkpoint the log (that would copy the whole session on
    /// every run), so this is how a finished run makes its history durable under
    /// [`crate::Durability::Normal`]. It runs after every call sent before it.
    pub async fn sync(&self) -> Result<()> {
        let path = self.inner.path.clone();
        self.call(move |_| files::sync_wal(&path)).await
    }

    pub(crate) fn lane(&self, session: &SessionId) -> Result<Lane> {
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

    /// The most recently updated session of `cwd` that has a conversation and is not a
    /// task's child session.
    pub async fn latest_session(&self, cwd: String) -> Result<Option<SessionRecord>> {
        self.call(move |conn| sql::latest_top_session(conn, &cwd))
            .await
    }

    /// Sessions, newest first; only those in `cwd` when given.
    pub async fn list_sessions(
        &self,
        cwd: Option<String>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>> {
        self.call(move |conn| sql::list_sessions(conn, cwd.as_deref(), limit, false))
            .await
    }

    /// Sessions that have a conversation (history), newest first; only those in `cwd` when
    /// given: what people pick from to resume.
    pub async fn list_conversations(
        &self,
        cwd: Option<String>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>> {
        self.call(move |conn| sql::list_sessions(conn, cwd.as_deref(), limit, true))
            .await
    }

    /// Changes a session's title.
    pub async fn set_title(&self, id: &SessionId, title: String) -> Result<()> {
        let id = id.clone();
        self.call(move |conn| sql::set_title(conn, id.as_str(), &title))
            .await
    }

    /// Changes a session's model (`provider/model`).
    pub async fn set_model(&self, id: &SessionId, model: String) -> Result<()> {
        let id = id.clone();
        self.call(move |conn| sql::set_model(conn, id.as_str(), &model))
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

    /// Every revision of a session with the turn that committed it (`None` outside turns:
    /// rewinds, reconciliations, compactions), oldest first.
    pub async fn commit_turns(&self, session: &SessionId) -> Result<Vec<(u64, Option<TurnId>)>> {
        let session = session.clone();
        let rows = self
            .call(move |conn| sql::commit_turns(conn, session.as_str()))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(revision, turn)| (revision, turn.map(TurnId::from)))
            .collect())
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
