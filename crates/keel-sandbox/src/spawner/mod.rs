//! keel's side of the spawner: one small process per keel, started with the first
//! sandboxed command, that makes every sandboxed command.
//!
//! Building a command's sandbox from keel itself meant copying keel (tens of megabytes of
//! page tables) and creating a user namespace for every command. The spawner holds the
//! user namespace once; each command is a clone of a process of a few hundred kilobytes
//! into a pid and mount namespace of its own, where it lays its own mounts from the plan
//! keel sends with it, so everything that appeared since (a socket, a control file) is
//! covered and a policy change takes effect from the next command.
//!
//! The spawner is keel's own program started again under the name `keel-spawner` when
//! the program called [`spawner_entry`] first thing in `main` (a fresh, small process);
//! any other program (a test) forks itself into one. It shares nothing with commands:
//! they cannot see its pid (their `/proc` is their own), it cannot be dumped or traced,
//! and its socket is keel's alone. It ends when keel does, and a spawner that died (killed
//! from outside, out of memory) is replaced at the next command.
#![expect(
    unsafe_code,
    reason = "socketpair, fork and the descriptor handover to the spawner have no safe wrappers"
)]

mod serve;
mod wire;

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub(crate) use wire::encode;

/// The name the spawner is started under (its `argv[0]`).
const NAME: &str = "keel-spawner";
/// The variable that names the spawner's socket descriptor.
const SOCKET_VARIABLE: &str = "KEEL_SPAWNER_SOCKET";
/// How long keel waits for the spawner to answer before it counts it as dead.
const ANSWER_LIMIT: Duration = Duration::from_secs(20);

/// Whether this program serves as the spawner when started as one ([`spawner_entry`]).
static CAN_EXEC: AtomicBool = AtomicBool::new(false);
/// The spawner of this process, once started.
static SPAWNER: Mutex<Option<Spawner>> = Mutex::new(None);

/// Call first thing in `main`: when keel started this process as its spawner, it serves
/// and never returns; otherwise it notes that this program can be one (so keel starts
/// its spawner as a fresh process of this program rather than a copy of itself).
pub fn spawner_entry() {
    if std::env::args_os().next().is_some_and(|name| name == NAME)
        && let Some(fd) = std::env::var(SOCKET_VARIABLE)
            .ok()
            .and_then(|v| v.parse::<RawFd>().ok())
            .filter(|fd| *fd > 2)
    {
        serve::serve(fd)
    }
    CAN_EXEC.store(true, Ordering::Relaxed);
}

/// A command the spawner started.
pub(crate) struct Started {
    /// Its pid (pid 1 of its namespace, in keel's).
    pub pid: i32,
    /// A pidfd of it, to signal it without a pid reused.
    pub pidfd: OwnedFd,
}

/// Asks the spawner to start the command `request` describes (see [`encode`]) with
/// `fds` (its status pipe, its standard streams, its ruleset, its network). A dead spawner
/// is replaced and asked again; a command that could not start is `Err` with what failed.
pub(crate) fn start(request: &[u8], fds: &[RawFd]) -> Result<Started, String> {
    let (pid, mut received) = ask(request, fds)?;
    let pidfd = received
        .pop()
        .ok_or_else(|| "the sandbox's spawner sent no pidfd".to_owned())?;
    Ok(Started { pid, pidfd })
}

/// A network namespace of its own for a session's commands, with only a loopback (up),
/// and a socket listening on `127.0.0.1:port` inside it: keel's proxy serves it, and is
/// the commands' one way out. Commands join it through [`crate::Policy::private_network`].
pub fn private_network(
    port: u16,
) -> Result<(crate::NetworkNamespace, std::net::TcpListener), crate::SpawnError> {
    let fail =
        |why: String| crate::SpawnError::Start(format!("cannot make the commands' network: {why}"));
    if let Err(why) = &crate::support().namespaces {
        return Err(fail(format!("user namespaces are unavailable ({why})")));
    }
    let (_, received) = ask(&wire::encode_network(port), &[]).map_err(fail)?;
    let mut received = received.into_iter();
    let (Some(listener), Some(namespace)) = (received.next(), received.next()) else {
        return Err(fail("the spawner sent no socket".to_owned()));
    };
    Ok((
        crate::NetworkNamespace(std::sync::Arc::new(namespace)),
        std::net::TcpListener::from(listener),
    ))
}

/// Sends a request to the spawner (starting or replacing it as needed) and returns its
/// answer: the pid and descriptors it sent, or what failed.
fn ask(request: &[u8], fds: &[RawFd]) -> Result<(i32, Vec<OwnedFd>), String> {
    let mut slot = SPAWNER.lock().unwrap_or_else(PoisonError::into_inner);
    let mut last = String::new();
    for _ in 0..2 {
        if slot.is_none() {
            *slot = Some(Spawner::start()?);
        }
        let Some(spawner) = slot.as_ref() else {
            continue;
        };
        match spawner.ask(request, fds) {
            Ok(answer) => return answer,
            Err(error) => {
                tracing::warn!(%error, "the sandbox's spawner is gone; starting another");
                last = error.to_string();
                if let Some(dead) = slot.take() {
                    dead.end();
                }
            }
        }
    }
    Err(format!("the sandbox's spawner does not answer: {last}"))
}

/// The pid of this process's spawner, if one runs (for tests and diagnostics).
pub fn spawner_pid() -> Option<i32> {
    SPAWNER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(|s| s.pid)
}

/// A running spawner: keel's end of its socket and how to reap it.
struct Spawner {
    sock: UnixStream,
    pid: i32,
    /// The exec'd spawner's handle (a forked one is reaped by pid).
    process: Option<std::process::Child>,
}

impl Spawner {
    /// Starts a spawner and waits until it holds its namespace.
    fn start() -> Result<Self, String> {
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| format!("cannot create the spawner's socket: {e}"))?;
        let exec = CAN_EXEC
            .load(Ordering::Relaxed)
            .then(|| exec_spawner(&theirs))
            .and_then(|started| {
                // keel's program cannot be started again (no /proc, say): a copy of keel
                // serves instead, bigger but the same.
                started
                    .inspect_err(|error| {
                        tracing::warn!(%error, "cannot start the sandbox's spawner afresh; forking");
                    })
                    .ok()
            });
        let (pid, process) = match exec {
            Some(child) => (i32::try_from(child.id()).unwrap_or(0), Some(child)),
            None => (fork_spawner(&ours, theirs.as_raw_fd())?, None),
        };
        drop(theirs);
        let mut spawner = Self {
            sock: ours,
            pid,
            process,
        };
        // A spawner that does not answer (stopped, stuck) counts as dead.
        let _ = spawner.sock.set_read_timeout(Some(ANSWER_LIMIT));
        match wire::read_reply(spawner.sock.as_raw_fd()) {
            Ok(reply) if reply.errno == 0 => Ok(spawner),
            Ok(reply) => {
                spawner.end_in_place();
                Err(crate::prepare::explain(&reply.diag)
                    .unwrap_or_else(|| "the sandbox's spawner could not start".to_owned()))
            }
            Err(error) => {
                spawner.end_in_place();
                Err(format!("the sandbox's spawner did not start: {error}"))
            }
        }
    }

    /// Sends a request and reads its answer. `Err`: the spawner is gone.
    fn ask(
        &self,
        request: &[u8],
        fds: &[RawFd],
    ) -> io::Result<Result<(i32, Vec<OwnedFd>), String>> {
        wire::send(self.sock.as_raw_fd(), request, fds)?;
        let reply = wire::read_reply(self.sock.as_raw_fd())?;
        if reply.errno != 0 {
            return Ok(Err(crate::prepare::explain(&reply.diag).unwrap_or_else(
                || {
                    format!(
                        "the sandbox could not start the command: {}",
                        io::Error::from_raw_os_error(reply.errno)
                    )
                },
            )));
        }
        Ok(Ok((reply.pid, reply.fds)))
    }

    /// Kills and reaps the spawner (its commands die with it).
    fn end(mut self) {
        self.end_in_place();
    }

    fn end_in_place(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
        } else if self.pid > 0 {
            // SAFETY: killing and reaping keel's own forked child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(self.pid, &raw mut status, 0);
            }
        }
        self.pid = 0;
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner").field("pid", &self.pid).finish()
    }
}

/// Starts this program again as the spawner, its socket on descriptor 3 and nothing of
/// keel's environment.
fn exec_spawner(theirs: &UnixStream) -> io::Result<std::process::Child> {
    let fd = theirs.as_raw_fd();
    let mut command = std::process::Command::new("/proc/self/exe");
    command
        .arg0(NAME)
        .env_clear()
        .env(SOCKET_VARIABLE, "3")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: dup2 and fcntl only, on a descriptor that stays open until the exec.
    unsafe {
        command.pre_exec(move || {
            if fd == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) != 3 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

/// Forks this process into the spawner (for programs that did not call
/// [`spawner_entry`]): the copy serves on `theirs` and never returns.
fn fork_spawner(ours: &UnixStream, theirs: RawFd) -> Result<i32, String> {
    let ours = ours.as_raw_fd();
    // SAFETY: the child only closes descriptors and runs `serve`, which makes system calls
    // and allocates through the C allocator (made safe to use after fork by its own fork
    // handlers); it never returns into this program.
    match unsafe { libc::fork() } {
        pid if pid < 0 => Err(format!(
            "cannot start the sandbox's spawner: {}",
            io::Error::last_os_error()
        )),
        0 => {
            // SAFETY: this copy's descriptor of keel's end.
            unsafe { libc::close(ours) };
            serve::serve(theirs)
        }
        pid => Ok(pid),
    }
}
