//! Which thread runs the store's SQLite work, chosen once at open.
//!
//! SQLite calls block: a commit's transaction, a wait of up to [`crate::BUSY_TIMEOUT`] for
//! another process's write lock, an fsync under [`Durability::Full`]. Where that blocking
//! happens is the caller's choice, because the right answer depends on the front end:
//!
//! - [`Execution::WriterThread`] (the default): one dedicated OS thread owns the connection.
//!   Each call sends its work over a bounded channel and awaits the answer on a oneshot, so the
//!   async side never blocks, whatever the runtime: an interactive front end's render loop keeps
//!   drawing while a commit waits for a lock or a disk. The price is two thread wake-ups per
//!   call (send, answer). The work runs in the order it was sent, and tokio's blocking pool is
//!   never used, so the store cannot starve or be starved by other blocking work.
//! - [`Execution::InPlace`]: the work runs on the calling thread, under a mutex. For a one-shot
//!   command on a current-thread runtime (`keel exec`), which waits for each result with
//!   nothing else to do, this saves the two wake-ups (a visible share of a commit); the price
//!   is that while a call blocks, that thread's timers, signals and other tasks wait too.
//!
//! Either way a panic in the work is reported as [`StoreError::Worker`] and leaves the
//! connection usable (an open transaction is rolled back as it unwinds). Dropping the last
//! [`crate::Store`] clone ends the writer thread: the work already sent finishes, then the
//! thread closes the connection and is joined.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Mutex;
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Result, StoreError};
use crate::schema::{self, Durability};

/// Which thread runs the SQLite work of a store (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Execution {
    /// On the calling thread: no thread hops, but the caller's thread blocks on SQLite. For
    /// one-shot commands on a current-thread runtime.
    InPlace,
    /// On one dedicated thread that owns the connection: the async side never blocks. For
    /// interactive front ends and servers.
    #[default]
    WriterThread,
}

/// How to open a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// How hard each commit is pushed to disk.
    pub durability: Durability,
    /// Which thread runs the SQLite work.
    pub execution: Execution,
}

/// Calls waiting for the writer thread; further callers wait for room. Every call is an
/// in-process caller awaiting its own answer, so this only bounds a burst.
const WRITER_QUEUE: usize = 256;

/// Name of the writer thread, as debuggers and `top -H` show it.
const WRITER_THREAD_NAME: &str = "keel-store-writer";

/// One unit of work for the writer thread; it sends its own answer.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Runs SQLite work as [`Execution`] says.
pub(crate) enum Executor {
    /// The connection, locked by each call on the caller's thread.
    InPlace(Mutex<Connection>),
    /// The writer thread that owns the connection.
    Writer(Writer),
}

/// The writer thread and the channel to it.
pub(crate) struct Writer {
    /// `None` only while dropping: closing the channel is what ends the thread.
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

fn panicked() -> StoreError {
    StoreError::Worker("the store work panicked".into())
}

/// Runs `work`, turning a panic into [`StoreError::Worker`].
fn guarded<R>(work: impl FnOnce() -> Result<R>) -> Result<R> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| Err(panicked()))
}

impl Executor {
    /// Opens (creating and migrating) the database at `path` on the thread `execution` names.
    pub(crate) async fn open(path: &Path, options: OpenOptions) -> Result<Self> {
        match options.execution {
            Execution::InPlace => {
                let conn = schema::open(path, options.durability)?;
                Ok(Self::InPlace(Mutex::new(conn)))
            }
            Execution::WriterThread => Writer::start(path, options.durability)
                .await
                .map(Self::Writer),
        }
    }

    /// Runs `work` with the connection and returns its answer.
    pub(crate) async fn run<R, F>(&self, work: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        match self {
            Self::InPlace(conn) => {
                let mut conn = conn
                    .lock()
                    .map_err(|error| StoreError::Worker(error.to_string()))?;
                // Caught inside the lock, so a panic never poisons the mutex.
                guarded(|| work(&mut conn))
            }
            Self::Writer(writer) => writer.run(work).await,
        }
    }
}

impl Writer {
    /// Starts the writer thread, which opens the database and then serves calls.
    async fn start(path: &Path, durability: Durability) -> Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>(WRITER_QUEUE);
        let (opened, open_result) = oneshot::channel::<Result<()>>();
        let path = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name(WRITER_THREAD_NAME.into())
            .spawn(move || {
                let conn = match guarded(|| schema::open(&path, durability)) {
                    Ok(conn) => conn,
                    Err(error) => {
                        let _ = opened.send(Err(error));
                        return;
                    }
                };
                let _ = opened.send(Ok(()));
                serve(conn, queue);
            })
            .map_err(|error| {
                StoreError::Worker(format!("cannot start the database writer thread: {error}"))
            })?;
        let writer = Self {
            jobs: Some(jobs),
            thread: Some(thread),
        };
        // On failure `writer` drops here, which joins the thread that has already returned.
        open_result.await.map_err(|_| {
            StoreError::Worker("the database writer thread failed to start".into())
        })??;
        Ok(writer)
    }

    async fn run<R, F>(&self, work: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let gone = || StoreError::Worker("the database writer thread has stopped".into());
        let jobs = self.jobs.as_ref().ok_or_else(gone)?;
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            // The caller may have stopped waiting; the work is done all the same.
            let _ = answer.send(guarded(|| work(conn)));
        });
        jobs.send(job).await.map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }
}

/// The writer thread's loop: runs calls in the order they were sent until every sender is
/// gone, then closes the connection.
fn serve(mut conn: Connection, mut queue: mpsc::Receiver<Job>) {
    while let Some(job) = queue.blocking_recv() {
        job(&mut conn);
    }
    drop(conn);
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel lets the thread finish what was sent and return.
        drop(self.jobs.take());
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Dropped by work running on the writer thread itself: joining would wait forever.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        if thread.join().is_err() {
            tracing::warn!("the database writer thread panicked while closing");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use futures::FutureExt as _;

    use super::*;
    use crate::store::Store;

    fn options(execution: Execution) -> OpenOptions {
        OpenOptions {
            execution,
            ..OpenOptions::default()
        }
    }

    #[test]
    fn the_default_is_the_writer_thread_with_normal_durability() {
        assert_eq!(
            OpenOptions::default(),
            OpenOptions {
                durability: Durability::Normal,
                execution: Execution::WriterThread,
            }
        );
    }

    /// The choice made at open decides the thread, whatever runtime calls: the store once
    /// guessed from the runtime's flavour instead.
    #[tokio::test]
    async fn work_runs_on_the_thread_the_execution_names() {
        let dir = tempfile::tempdir().unwrap();
        let caller = std::thread::current().id();
        for (execution, expect_caller, expect_name) in [
            (Execution::InPlace, true, std::thread::current().name()),
            (Execution::WriterThread, false, Some(WRITER_THREAD_NAME)),
        ] {
            let path = dir.path().join(format!("{execution:?}.db"));
            let executor = Executor::open(&path, options(execution)).await.unwrap();
            let (id, name) = executor
                .run(|_| {
                    let here = std::thread::current();
                    Ok((here.id(), here.name().map(str::to_owned)))
                })
                .await
                .unwrap();
            assert_eq!(id == caller, expect_caller, "{execution:?}");
            assert_eq!(name.as_deref(), expect_name, "{execution:?}");
        }
    }

    #[tokio::test]
    async fn a_panic_in_the_work_is_a_worker_error_and_the_connection_lives_on() {
        let dir = tempfile::tempdir().unwrap();
        for execution in [Execution::InPlace, Execution::WriterThread] {
            let path = dir.path().join(format!("{execution:?}.db"));
            let executor = Executor::open(&path, options(execution)).await.unwrap();
            let error = executor
                .run(|conn| -> Result<()> {
                    let tx = conn.transaction()?;
                    tx.execute_batch("CREATE TABLE half (x INTEGER)")?;
                    panic!("work failed midway");
                })
                .await
                .unwrap_err();
            assert_eq!(error.code(), "store_worker", "{execution:?}: {error}");
            // The transaction was rolled back as the panic unwound, and the next call works.
            let tables: i64 = executor
                .run(|conn| {
                    Ok(conn.query_row(
                        "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'half'",
                        [],
                        |row| row.get(0),
                    )?)
                })
                .await
                .unwrap();
            assert_eq!(tables, 0, "{execution:?}");
        }
    }

    #[tokio::test]
    async fn dropping_the_writer_finishes_the_work_already_sent() {
        let dir = tempfile::tempdir().unwrap();
        let executor = Executor::open(&dir.path().join("k.db"), OpenOptions::default())
            .await
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let marker = Arc::clone(&done);
        let sent = executor.run(move |_| {
            std::thread::sleep(Duration::from_millis(50));
            marker.store(true, Ordering::SeqCst);
            Ok(())
        });
        // Polled once, the work is on its way; then its caller stops waiting.
        assert!(sent.now_or_never().is_none());
        drop(executor);
        assert!(
            done.load(Ordering::SeqCst),
            "the drop returned before the work ran"
        );
    }

    /// Work that holds the last clone of a store drops it on the writer thread itself, where
    /// joining that thread would wait forever.
    #[tokio::test]
    async fn the_last_clone_dropped_on_the_writer_thread_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("k.db"), OpenOptions::default())
            .await
            .unwrap();
        let last = store.clone();
        let dropped = Arc::new(AtomicBool::new(false));
        let marker = Arc::clone(&dropped);
        let sent = store.call(move |_| {
            std::thread::sleep(Duration::from_millis(20));
            drop(last);
            marker.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(sent.now_or_never().is_none());
        drop(store);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dropped.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the writer thread hung");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
