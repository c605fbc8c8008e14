//! Starting a program and holding it: the one way keel makes a child process.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use crate::prepare::{diagnostic, prepare};
use crate::{Policy, SandboxError};

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
    pub stdin: Stdio,
    /// Standard output.
    pub stdout: Stdio,
    /// Standard error.
    pub stderr: Stdio,
}

impl Program {
    /// `program` in `cwd` with no arguments, no variables and null streams.
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            stdin: Stdio::null(),
            stdout: Stdio::null(),
            stderr: Stdio::null(),
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
    pub fn streams(mut self, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Self {
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
    let mut prepared = match confinement {
        Confinement::Sandbox(policy) => prepare(policy, &program)?,
        Confinement::Group | Confinement::Contained => None,
    };
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
    match prepared.take() {
        // The sandbox is applied in the child between fork and exec, so it binds only the
        // command. (Confining a keel thread that starts the commands instead would be
        // faster, but a command could then reach keel's memory through that thread, which
        // shares it.) A sandboxed command starts a session of its own there: its process
        // group is its session.
        Some(mut prepared) => {
            diag = prepared.take_diagnostics();
            #[expect(
                unsafe_code,
                reason = "the sandbox must be applied between fork and exec"
            )]
            // SAFETY: the closure only makes system calls on data built before the fork
            // (namespaces, mounts, prctl, Landlock); it takes no lock another thread could
            // hold.
            unsafe {
                cmd.pre_exec(move || prepared.apply());
            }
        }
        // Without a sandbox the standard library uses `posix_spawn`, which copies nothing.
        None => {
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
        inner,
        tree,
        diag,
        uncontained,
    })
}

/// A started child. Dropping it kills the child (not the rest of its tree: hold a
/// [`TreeGuard`] for that).
#[derive(Debug)]
pub struct Child {
    inner: tokio::process::Child,
    tree: Tree,
    diag: Option<OwnedFd>,
    uncontained: Option<String>,
}

impl Child {
    /// The child's pid, until it is reaped.
    pub fn id(&self) -> Option<u32> {
        self.inner.id()
    }

    /// The child's whole process tree.
    pub fn tree(&self) -> Tree {
        self.tree
    }

    /// Takes the child's standard input, when it is a pipe.
    pub fn take_stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        self.inner.stdin.take()
    }

    /// Takes the child's standard output, when it is a pipe.
    pub fn take_stdout(&mut self) -> Option<tokio::process::ChildStdout> {
        self.inner.stdout.take()
    }

    /// Takes the child's standard error, when it is a pipe.
    pub fn take_stderr(&mut self) -> Option<tokio::process::ChildStderr> {
        self.inner.stderr.take()
    }

    /// Waits for the child to end.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.inner.wait().await
    }

    /// Which sandbox step failed, for a sandboxed child that ended with 127 (the code its
    /// pid 1 exits with when a step after the start fails); `None` otherwise. Asks once.
    pub fn sandbox_failure(&mut self) -> Option<String> {
        diagnostic(self.diag.take())
    }

    /// Why a [`Confinement::Contained`] child could not be contained (it then only dies
    /// with keel: what it starts may not).
    pub fn uncontained(&self) -> Option<&str> {
        self.uncontained.as_deref()
    }
}

/// A child's process tree: its process group, which for a sandboxed command also holds
/// the keeper and its namespace's pid 1, whose death ends every process of the namespace.
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
