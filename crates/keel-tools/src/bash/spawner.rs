//! Starting sandboxed commands from one thread that is itself inside the sandbox.
//!
//! Landlock binds the thread that enforces it and everything that thread starts. Confining
//! a dedicated thread once and starting every command from it lets each command inherit the
//! sandbox through the standard library's `posix_spawn` path, instead of a fork of the whole
//! keel process with the rules applied between fork and exec: no copy of keel's page tables,
//! no copy-on-write faults afterwards, and no unsafe code between fork and exec. The thread
//! only ever starts processes; it never touches the workspace itself.

use std::sync::mpsc;

use landlock::RulesetCreated;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use super::sandbox;

/// One command to start, the runtime its child registers with, and where the answer goes.
struct Job {
    command: Command,
    runtime: tokio::runtime::Handle,
    reply: oneshot::Sender<std::io::Result<Child>>,
}

/// A thread confined by one ruleset that starts commands on request.
#[derive(Clone)]
pub(crate) struct Spawner {
    jobs: mpsc::Sender<Job>,
}

impl Spawner {
    /// Starts the thread and confines it; the error says why the sandbox could not be
    /// enforced. The thread ends when the last `Spawner` clone is dropped.
    pub(crate) fn start(ruleset: RulesetCreated) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, confined) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("keel-sandbox-spawner".into())
            .spawn(move || {
                let enforced = sandbox::enforce(ruleset);
                let ok = enforced.is_ok();
                let _ = ready.send(enforced);
                if !ok {
                    return;
                }
                while let Ok(job) = queue.recv() {
                    let Job {
                        mut command,
                        runtime,
                        reply,
                    } = job;
                    let _entered = runtime.enter();
                    let started = command.spawn();
                    // The command holds the write ends of the output pipe; dropping it here,
                    // before answering, lets the reader see the end of output once the
                    // command's processes are gone.
                    drop(command);
                    let _ = reply.send(started);
                }
            })?;
        confined
            .recv()
            .map_err(|_| std::io::Error::other("the sandbox thread ended before it was ready"))??;
        Ok(Self { jobs })
    }

    /// Starts `command` inside the sandbox.
    pub(crate) async fn spawn(&self, command: Command) -> std::io::Result<Child> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            command,
            runtime: tokio::runtime::Handle::current(),
            reply,
        };
        self.jobs
            .send(job)
            .map_err(|_| std::io::Error::other("the sandbox thread is gone"))?;
        answer
            .await
            .map_err(|_| std::io::Error::other("the sandbox thread is gone"))?
    }
}
