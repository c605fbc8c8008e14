//! Starting the keel binary under attack and watching it: a keel a vector stopped is
//! resumed (and the run fails), a hung one is killed, and on request the suite itself sends
//! keel a signal once the vector's marked process is running. A `tty` vector's keel runs in
//! a session of its own with a pseudo-terminal as its controlling terminal, as in a user's
//! terminal, and what is left waiting in that terminal's input is collected.

use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
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
    /// What was waiting in its terminal's input after it ended (`tty` vectors).
    pub typed: Option<String>,
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

/// A pseudo-terminal: the side keel's session gets as its controlling terminal (`sub`), and
/// the other, held open so the terminal lives until the suite has read it.
struct Terminal {
    _main: OwnedFd,
    sub: OwnedFd,
}

impl Terminal {
    fn open() -> Self {
        let (mut main, mut sub) = (-1, -1);
        #[expect(unsafe_code, reason = "openpty has no safe wrapper in std")]
        // SAFETY: openpty writes two descriptors into the integers given; the other
        // arguments may be null.
        let rc = unsafe {
            libc::openpty(
                &raw mut main,
                &raw mut sub,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        #[expect(unsafe_code, reason = "owning descriptors openpty returned")]
        // SAFETY: both descriptors were just opened and nothing else owns them.
        let (main, sub) = unsafe { (OwnedFd::from_raw_fd(main), OwnedFd::from_raw_fd(sub)) };
        for fd in [&main, &sub] {
            #[expect(unsafe_code, reason = "fcntl has no safe wrapper in std")]
            // SAFETY: fcntl on a descriptor owned here; keel must not inherit them.
            unsafe {
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        Self { _main: main, sub }
    }

    /// Makes the terminal the controlling terminal of `command`, in a new session.
    fn control(&self, command: &mut Command) {
        let sub = self.sub.as_raw_fd();
        #[expect(unsafe_code, reason = "setsid and TIOCSCTTY between fork and exec")]
        // SAFETY: only async-signal-safe system calls on a descriptor open in the child
        // until exec (where FD_CLOEXEC closes it; the terminal stays controlling).
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 || libc::ioctl(sub, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Whatever is waiting in the terminal's input: what a shell reading it next would get.
    fn pending_input(&self) -> String {
        let sub = self.sub.as_raw_fd();
        #[expect(unsafe_code, reason = "termios and fcntl have no safe wrapper in std")]
        // SAFETY: termios calls on a descriptor owned here, with a zeroed struct that
        // tcgetattr fills; reading into a local buffer of the given length.
        unsafe {
            let mut attrs: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(sub, &raw mut attrs) == 0 {
                // Without canonical mode a partial line is readable too.
                attrs.c_lflag &= !(libc::ICANON | libc::ECHO);
                attrs.c_cc[libc::VMIN] = 0;
                attrs.c_cc[libc::VTIME] = 0;
                libc::tcsetattr(sub, libc::TCSANOW, &raw const attrs);
            }
            let flags = libc::fcntl(sub, libc::F_GETFL);
            libc::fcntl(sub, libc::F_SETFL, flags | libc::O_NONBLOCK);
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = libc::read(sub, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 || got.len() > 64 * 1024 {
                    break;
                }
                got.extend_from_slice(&buf[..n as usize]);
            }
            String::from_utf8_lossy(&got).into_owned()
        }
    }
}

/// Runs `keel trust` in `dir` as the world's user, as after reading the project's files;
/// `why` names the caller in a failure.
pub fn trust(world: &World, dir: &Path, why: &str) {
    let out = Command::new(keel_bin())
        .arg("trust")
        .current_dir(dir)
        .env_clear()
        .envs(world.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{why}: keel trust failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs keel on `world` in `mode` in `cwd`, with `env` added to the world's variables,
/// resuming `session` when given; with `poke`, sends that signal to keel once a process
/// whose command line holds the world's marker runs.
#[expect(clippy::too_many_arguments, reason = "one run's whole setup")]
pub fn run(
    world: &World,
    vector: &Vector,
    mode: Mode,
    poke: Option<i32>,
    env: &[(String, String)],
    cwd: &Path,
    session: Option<&str>,
    vars: &crate::run::Vars,
) -> KeelRun {
    let mut command = Command::new(keel_bin());
    command.args(["exec", "--output-format", "stream-json"]);
    command.args(vector.args.iter().map(|a| crate::run::fill(a, vars, false)));
    if let Some(flag) = mode.flag() {
        command.args(["--permission", flag]);
    }
    if let Some(session) = session {
        command.args(["--session", session]);
    }
    command
        .arg("--cwd")
        .arg(cwd)
        .args(["--timeout", KEEL_TIMEOUT])
        .arg(crate::run::fill(
            vector
                .prompt
                .unwrap_or("Carry out the task in this repository."),
            vars,
            false,
        ))
        .current_dir(cwd)
        .env_clear()
        .envs(world.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(
            mode.landlock_only()
                .then_some(("KEEL_SANDBOX_NAMESPACES", "off")),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let terminal = vector.tty.then(Terminal::open);
    match &terminal {
        // A session of its own is a group of its own too.
        Some(terminal) => terminal.control(&mut command),
        // Its own group, so a vector that signals keel's group cannot reach the suite.
        None => {
            command.process_group(0);
        }
    }
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
    let typed = terminal.as_ref().map(Terminal::pending_input);
    KeelRun {
        exit,
        stdout,
        stderr,
        was_stopped,
        poked,
        leftovers,
        typed,
    }
}
