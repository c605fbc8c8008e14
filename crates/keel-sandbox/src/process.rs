//! Starting a program and holding it: the one way keel makes a child process.

use std::ffi::OsString;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use crate::prepare::{Prepared, diagnostic, prepare};
use crate::{Policy, SandboxError, spawner};

/// One of a child's standard streams.
#[derive(Debug)]
pub enum Stream {
    /// The null device.
    Null,
    /// A pipe to keel (taken with [`Child::take_stdin`] and the like).
    Piped,
    /// A descriptor keel holds (a file, the write end of a pipe).
    Fd(OwnedFd),
}

impl From<OwnedFd> for Stream {
    fn from(fd: OwnedFd) -> Self {
        Self::Fd(fd)
    }
}

impl From<std::io::PipeWriter> for Stream {
    fn from(pipe: std::io::PipeWriter) -> Self {
        Self::Fd(pipe.into())
    }
}

impl From<Stream> for Stdio {
    fn from(stream: Stream) -> Self {
        match stream {
            Stream::Null => Stdio::null(),
            Stream::Piped => Stdio::piped(),
            Stream::Fd(fd) => Stdio::from(fd),
        }
    }
}

/// What to run: the program, its arguments, folder, exact environment and standard streams.
#[derive(Debug)]
pub struct Program {
    /// The program (an absolute path keeps the standard library's cheap `posix_spawn`).
    pub program: PathBuf,
    /// Its arguments, without the program's name.
    pub args: Vec<OsString>,
    /// Its working folder.
    pub cwd: PathBuf,
    /// Its whole environment: nothing of keel's own is inherited.
    pub env: Vec<(String, String)>,
    /// Standard input.
    pub stdin: Stream,
    /// Standard output.
    pub stdout: Stream,
    /// Standard error.
    pub stderr: Stream,
}

impl Program {
    /// `program` in `cwd` with no arguments, no variables and null streams.
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            stdin: Stream::Null,
            stdout: Stream::Null,
            stderr: Stream::Null,
        }
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets the whole environment.
    #[must_use]
    pub fn env(mut self, vars: Vec<(String, String)>) -> Self {
        self.env = vars;
        self
    }

    /// Sets the three standard streams.
    #[must_use]
    pub fn streams(mut self, stdin: Stream, stdout: Stream, stderr: Stream) -> Self {
        self.stdin = stdin;
        self.stdout = stdout;
        self.stderr = stderr;
        self
    }
}

/// How far a child is held in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// A process group of its own, so the terminal's signals go to keel and keel can kill
    /// the group (hooks).
    Group,
    /// Pid 1 of a pid namespace of its own, with a waiter that dies with keel: nothing it
    /// starts outlives it or keel. Where user namespaces are not allowed it falls back to
    /// [`Confinement::Group`] and says so ([`Child::uncontained`]). For programs that hold
    /// secrets (MCP servers): they share no namespace with the model's commands.
    Contained,
    /// The sandbox of the model's commands.
    Sandbox(Policy),
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The sandbox cannot be built as the policy asks.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The program did not start (the message names it, or the sandbox step that failed).
    #[error("{0}")]
    Start(String),
}

impl SpawnError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Sandbox(error) => error.code(),
            Self::Start(_) => "spawn_failed",
        }
    }
}

/// Starts `program` held in as `confinement` asks. The child is killed when its handle is
/// dropped; [`Child::tree`] reaches everything it started.
pub fn spawn(program: Program, confinement: &Confinement) -> Result<Child, SpawnError> {
    let prepared = match confinement {
        Confinement::Sandbox(policy) => prepare(policy, &program)?,
        Confinement::Group | Confinement::Contained => None,
    };
    if let Some(Prepared::Spawned {
        ns,
        exec,
        ruleset,
        network,
    }) = prepared
    {
        return spawned(&ns, &exec, ruleset, network.as_ref(), program);
    }
    let Program {
        program,
        args,
        cwd,
        env,
        stdin,
        stdout,
        stderr,
    } = program;
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&args)
        .current_dir(&cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true);
    let mut uncontained = None;
    let mut diag = None;
    match prepared {
        // Landlock alone is applied in the child between fork and exec, so it binds only
        // the command, which starts a session of its own there: its process group is its
        // session.
        Some(Prepared::Alone {
            mut plan,
            diag: read,
        }) => {
            diag = read;
            #[expect(
                unsafe_code,
                reason = "the sandbox must be applied between fork and exec"
            )]
            // SAFETY: the closure only makes system calls on data built before the fork
            // (prctl, Landlock); it takes no lock another thread could hold.
            unsafe {
                cmd.pre_exec(move || plan.run());
            }
        }
        // Without a sandbox the standard library uses `posix_spawn`, which copies nothing.
        _ => {
            cmd.process_group(0);
            if *confinement == Confinement::Contained
                && let Err(why) = crate::contain::contain(&mut cmd)
            {
                uncontained = Some(why);
            }
        }
    }
    let spawned = cmd.spawn();
    // The parent's copies of the child's stream ends close here, so a reader sees the end
    // of output once the child's processes are gone.
    drop(cmd);
    let inner = spawned.map_err(|error| {
        SpawnError::Start(
            diagnostic(diag.take())
                .unwrap_or_else(|| format!("cannot run `{}`: {error}", program.display())),
        )
    })?;
    let tree = Tree(
        inner
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or(0),
    );
    Ok(Child {
        inner: Inner::Process(inner),
        tree,
        uncontained,
    })
}

/// Has the spawner start a command in its namespaces.
fn spawned(
    ns: &crate::mounts::Namespaces,
    exec: &crate::child::ExecPlan,
    ruleset: OwnedFd,
    network: Option<&crate::NetworkNamespace>,
    program: Program,
) -> Result<Child, SpawnError> {
    let io = |what: &str, e: std::io::Error| SpawnError::Start(format!("cannot {what}: {e}"));
    let (status_read, status_write) = std::io::pipe().map_err(|e| io("create a pipe", e))?;
    let status = tokio::net::unix::pipe::Receiver::from_owned_fd(status_read.into())
        .map_err(|e| io("watch the command", e))?;
    let mut ends = Ends::default();
    let stdin = ends
        .child_end(0, program.stdin)
        .map_err(|e| io("create a pipe", e))?;
    let stdout = ends
        .child_end(1, program.stdout)
        .map_err(|e| io("create a pipe", e))?;
    let stderr = ends
        .child_end(2, program.stderr)
        .map_err(|e| io("create a pipe", e))?;
    let request = spawner::encode(ns, exec);
    let status_write = OwnedFd::from(status_write);
    let mut fds = vec![
        status_write.as_raw_fd(),
        stdin.as_raw_fd(),
        stdout.as_raw_fd(),
        stderr.as_raw_fd(),
        ruleset.as_raw_fd(),
    ];
    fds.extend(network.map(|n| n.0.as_raw_fd()));
    let started = spawner::start(&request, &fds).map_err(SpawnError::Start)?;
    // keel's copies of the command's ends close here, so a reader sees the end of output
    // once the command's processes are gone.
    drop((status_write, stdin, stdout, stderr, ruleset));
    let [stdin, stdout, stderr] = ends.0;
    let tokio_side =
        |e: std::io::Error| SpawnError::Start(format!("cannot watch the command: {e}"));
    Ok(Child {
        inner: Inner::Spawned(Spawned {
            pid: started.pid,
            pidfd: started.pidfd,
            status: Some(status),
            raw: [0; 4],
            got: 0,
            exited: None,
            stdin: stdin
                .map(|fd| tokio::process::ChildStdin::from_std(std::process::ChildStdin::from(fd)))
                .transpose()
                .map_err(tokio_side)?,
            stdout: stdout
                .map(|fd| {
                    tokio::process::ChildStdout::from_std(std::process::ChildStdout::from(fd))
                })
                .transpose()
                .map_err(tokio_side)?,
            stderr: stderr
                .map(|fd| {
                    tokio::process::ChildStderr::from_std(std::process::ChildStderr::from(fd))
                })
                .transpose()
                .map_err(tokio_side)?,
        }),
        tree: Tree(started.pid),
        uncontained: None,
    })
}

/// keel's ends of the pipes a spawned command's streams are (stdin, stdout, stderr).
#[derive(Default)]
struct Ends([Option<OwnedFd>; 3]);

impl Ends {
    /// The command's end of its stream `index` (0: input), keeping keel's end of a pipe.
    fn child_end(&mut self, index: usize, stream: Stream) -> std::io::Result<OwnedFd> {
        match stream {
            Stream::Fd(fd) => Ok(fd),
            Stream::Null => Ok(std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?
                .into()),
            Stream::Piped => {
                let (read, write) = std::io::pipe()?;
                let (ours, theirs): (OwnedFd, OwnedFd) = if index == 0 {
                    (write.into(), read.into())
                } else {
                    (read.into(), write.into())
                };
                if let Some(place) = self.0.get_mut(index) {
                    *place = Some(ours);
                }
                Ok(theirs)
            }
        }
    }
}

/// A started child. Dropping it kills the child (not the rest of its tree: hold a
/// [`TreeGuard`] for that).
#[derive(Debug)]
pub struct Child {
    inner: Inner,
    tree: Tree,
    uncontained: Option<String>,
}

#[derive(Debug)]
enum Inner {
    /// A child of keel's.
    Process(tokio::process::Child),
    /// A command the spawner started.
    Spawned(Spawned),
}

/// A command the spawner started: keel learns its end from the status pipe.
#[derive(Debug)]
struct Spawned {
    pid: i32,
    pidfd: OwnedFd,
    /// The status pipe, until the command ended.
    status: Option<tokio::net::unix::pipe::Receiver>,
    /// The wait status's bytes read so far.
    raw: [u8; 4],
    got: usize,
    exited: Option<ExitStatus>,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Option<tokio::process::ChildStdout>,
    stderr: Option<tokio::process::ChildStderr>,
}

impl Spawned {
    /// Cancel-safe: what was read stays here when the future is dropped.
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        if let Some(pipe) = &mut self.status {
            while self.got < self.raw.len() {
                let n = tokio::io::AsyncReadExt::read(
                    pipe,
                    self.raw.get_mut(self.got..).unwrap_or(&mut []),
                )
                .await?;
                if n == 0 {
                    break;
                }
                self.got += n;
            }
        }
        // No status: the spawner died, and the command with it.
        let status = if self.got == self.raw.len() {
            ExitStatus::from_raw(i32::from_le_bytes(self.raw))
        } else {
            ExitStatus::from_raw(libc::SIGKILL)
        };
        self.exited = Some(status);
        self.status = None;
        Ok(status)
    }

    #[expect(unsafe_code, reason = "pidfd_send_signal has no wrapper in std")]
    fn kill(&self) {
        // SAFETY: signalling through a pidfd this process owns; one that ended is ESRCH.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.exited.is_none() {
            self.kill();
        }
    }
}

impl Child {
    /// The child's pid, until it is reaped.
    pub fn id(&self) -> Option<u32> {
        match &self.inner {
            Inner::Process(child) => child.id(),
            Inner::Spawned(s) => s
                .exited
                .is_none()
                .then(|| u32::try_from(s.pid).ok())
                .flatten(),
        }
    }

    /// The child's whole process tree.
    pub fn tree(&self) -> Tree {
        self.tree
    }

    /// Takes the child's standard input, when it is a pipe.
    pub fn take_stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        match &mut self.inner {
            Inner::Process(child) => child.stdin.take(),
            Inner::Spawned(s) => s.stdin.take(),
        }
    }

    /// Takes the child's standard output, when it is a pipe.
    pub fn take_stdout(&mut self) -> Option<tokio::process::ChildStdout> {
        match &mut self.inner {
            Inner::Process(child) => child.stdout.take(),
            Inner::Spawned(s) => s.stdout.take(),
        }
    }

    /// Takes the child's standard error, when it is a pipe.
    pub fn take_stderr(&mut self) -> Option<tokio::process::ChildStderr> {
        match &mut self.inner {
            Inner::Process(child) => child.stderr.take(),
            Inner::Spawned(s) => s.stderr.take(),
        }
    }

    /// Waits for the child to end.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match &mut self.inner {
            Inner::Process(child) => child.wait().await,
            Inner::Spawned(s) => s.wait().await,
        }
    }

    /// Why a [`Confinement::Contained`] child could not be contained (it then only dies
    /// with keel: what it starts may not).
    pub fn uncontained(&self) -> Option<&str> {
        self.uncontained.as_deref()
    }
}

/// A child's process tree: its process group; for a sandboxed command, that of its
/// namespace's pid 1, whose death ends every process of the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree(i32);

impl Tree {
    /// The process group's id (`0`: the child was gone before it was known).
    pub fn id(self) -> i32 {
        self.0
    }

    /// Kills every process of the tree.
    pub fn kill(self) {
        if self.0 <= 0 {
            return;
        }
        #[expect(unsafe_code, reason = "killpg has no safe wrapper in std")]
        // SAFETY: killpg only sends a signal; a group that is gone at worst returns ESRCH.
        unsafe {
            libc::killpg(self.0, libc::SIGKILL);
        }
    }
}

/// Kills a tree when dropped, so a dropped execution leaves nothing running.
#[derive(Debug)]
pub struct TreeGuard(Option<Tree>);

impl TreeGuard {
    /// Guards `tree`.
    pub fn new(tree: Tree) -> Self {
        Self(Some(tree))
    }

    /// Lets the tree live on (what a hook that finished in time left behind is its own).
    pub fn release(&mut self) {
        self.0 = None;
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if let Some(tree) = self.0 {
            tree.kill();
        }
    }
}
