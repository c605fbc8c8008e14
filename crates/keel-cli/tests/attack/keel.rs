//! Starting the keel binary under attack and watching it: a keel a vector stopped is
//! resumed (and the run fails), a hung one is killed, and on request the suite itself sends
//! keel a signal once the vector's marked process is running.

use std::io::Read as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::procs;
use crate::run::{Mode, Vector};
use crate::world::World;

/// keel's own limit for a run (`--timeout`).
pub const KEEL_TIMEOUT: &str = "20s";
/// When the suite gives up on keel and kills it.
pub const WATCHDOG: Duration = Duration::from_secs(30);
/// How long keel may sit stopped (SIGSTOP) before the suite resumes it.
const STOPPED_GRACE: Duration = Duration::from_millis(1500);
/// How long the suite waits for a marked process before it pokes keel anyway.
const POKE_WAIT: Duration = Duration::from_secs(10);

/// The keel binary under attack: `KEEL_ATTACK_BIN`, else the one cargo built.
pub fn keel_bin() -> PathBuf {
    std::env::var_os("KEEL_ATTACK_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_keel")), PathBuf::from)
}

/// How keel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited by itself with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// The watchdog killed it.
    Hung,
}

/// One finished keel process.
pub struct KeelRun {
    /// How it ended.
    pub exit: Exit,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// The suite had to resume it from a stop.
    pub was_stopped: bool,
    /// The suite sent it the poke signal (`None`: no poke was asked for); `Some(false)` when
    /// the marked process never appeared before the signal went anyway.
    pub poked: Option<bool>,
    /// Processes still holding its pipes after it ended (killed since).
    pub leftovers: Vec<procs::Seen>,
}

/// Reads with `read` until the end, into a buffer shared with the caller.
fn drain(
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize> + Send + 'static,
) -> (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>) {
    let shared = Arc::new(Mutex::new(Vec::new()));
    let filled = shared.clone();
    let thread = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = read(&mut buf) {
            if n == 0 {
                break;
            }
            filled.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (shared, thread)
}

/// Runs keel on `world` in `mode`; with `poke`, sends that signal to keel once a process
/// whose command line holds the world's marker runs.
pub fn run(world: &World, vector: &Vector, mode: Mode, poke: Option<i32>) -> KeelRun {
    let mut command = Command::new(keel_bin());
    command
        .args(["exec", "--output-format", "stream-json", "--permission"])
        .arg(mode.flag())
        .arg("--cwd")
        .arg(&world.work)
        .args([
            "--timeout",
            KEEL_TIMEOUT,
            "Carry out the task in this repository.",
        ])
        .current_dir(&world.work)
        .env_clear()
        .envs(world.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(vector.env.iter().copied())
        .envs(
            mode.landlock_only()
                .then_some(("KEEL_SANDBOX_NAMESPACES", "off")),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a vector that signals keel's group cannot reach the suite.
        .process_group(0);
    if vector.strict {
        command.env("KEEL_BASH_ENV_SANITIZE", "strict");
    }
    let mut child = command.spawn().unwrap();
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (out_buf, out_thread) = drain(move |buf| stdout.read(buf));
    let (err_buf, err_thread) = drain(move |buf| stderr.read(buf));
    let started = Instant::now();
    let mut stopped_since: Option<Instant> = None;
    let mut was_stopped = false;
    let mut poked = None;
    let exit = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(signal)) => Exit::Signal(signal),
                (None, None) => Exit::Signal(0),
            };
        }
        if started.elapsed() > WATCHDOG {
            procs::signal(pid as i32, libc::SIGCONT);
            procs::signal(pid as i32, libc::SIGKILL);
            let _ = child.wait();
            break Exit::Hung;
        }
        if let Some(signal) = poke
            && poked.is_none()
        {
            let running = !procs::with_mark(&world.mark).is_empty();
            if running || started.elapsed() > POKE_WAIT {
                if running {
                    // Let the command settle (a subshell's setsid) before keel is hit.
                    std::thread::sleep(Duration::from_millis(200));
                }
                procs::signal(pid as i32, signal);
                poked = Some(running);
            }
        }
        if procs::is_stopped(pid) {
            let since = *stopped_since.get_or_insert_with(Instant::now);
            if since.elapsed() > STOPPED_GRACE {
                was_stopped = true;
                procs::signal(pid as i32, libc::SIGCONT);
                stopped_since = None;
            }
        } else {
            stopped_since = None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A leftover process may hold keel's pipes open; do not wait on them for ever.
    let deadline = Instant::now() + Duration::from_secs(3);
    while !(out_thread.is_finished() && err_thread.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut leftovers = Vec::new();
    if !(out_thread.is_finished() && err_thread.is_finished()) {
        leftovers = procs::leftovers(&world.mark, &world.root);
        std::thread::sleep(Duration::from_millis(200));
    }
    // Whatever holds the pipes still (a process the scan could not tie to the run) keeps
    // its reader thread; the output read so far is enough.
    let stdout = String::from_utf8_lossy(&out_buf.lock().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_buf.lock().unwrap()).into_owned();
    KeelRun {
        exit,
        stdout,
        stderr,
        was_stopped,
        poked,
        leftovers,
    }
}
