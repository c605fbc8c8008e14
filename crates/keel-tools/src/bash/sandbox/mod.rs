//! The Linux sandbox for `bash`.
//!
//! Two layers, both applied to the command and its descendants only:
//! - **Namespaces** (where unprivileged user namespaces work): a new user, mount and pid
//!   namespace, and a new network namespace when the mode forbids network. Credential
//!   locations are hidden under empty mounts, keel's control files are mounted read-only,
//!   a private `/proc` hides keel, and the command is pid 1 of its namespace, so nothing it
//!   starts outlives it or keel.
//! - **Landlock**: writes only to the workspace (in `workspace-write`), the private temp
//!   folder and the null devices; TCP refused when network is forbidden; no signals or
//!   abstract sockets out of the sandbox; no mounts.
//!
//! Without namespaces, Landlock alone still keeps credential locations unreadable (reads
//! are granted branch by branch around them) and writes in place, and the loss is reported
//! once; `read-only` refuses to run there, since it could keep neither network nor
//! processes in. Without Landlock a sandboxed command never runs. `danger-full-access`
//! applies nothing.

mod child;
mod rules;

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use rules::probe;

use crate::env::{SandboxMode, ToolEnv};
use crate::protect::ControlSet;
use child::{ChildPlan, ExecPlan, Namespaces, STACK_SIZE};

/// The variable that turns the namespace layer off (`off`), for machines where it
/// misbehaves; the default is `auto`. Turning it off never loosens `read-only`, which then
/// refuses to run.
pub const NAMESPACES_VARIABLE: &str = "KEEL_SANDBOX_NAMESPACES";

/// Local sockets of the user's session that would let a command act outside the sandbox
/// (D-Bus can start programs through systemd; a container engine is root; an X server
/// takes keystrokes for any window). `/run/user/UID` (D-Bus, Wayland, agents) is added.
const SESSION_SOCKETS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/tmp/.X11-unix",
];

/// Why a sandboxed command cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel cannot enforce Landlock.
    #[error(
        "the {mode} sandbox cannot be enforced here (Landlock is not available in this kernel: {detail}); \
         the command was not run. Choose sandbox mode danger-full-access to run commands unrestricted."
    )]
    Unavailable {
        /// The mode asked for.
        mode: &'static str,
        /// What the kernel said.
        detail: String,
    },
    /// The mode needs namespaces, which this system does not allow.
    #[error(
        "the {mode} sandbox cannot be enforced here: {detail}. Without namespaces a command could reach the \
         network and outlive keel, so it was not run. Allow unprivileged user namespaces (on Ubuntu: \
         sysctl kernel.apparmor_restrict_unprivileged_userns=0), or leave plan and read-only mode."
    )]
    NamespacesUnavailable {
        /// The mode asked for.
        mode: &'static str,
        /// What is missing and why.
        detail: String,
    },
    /// The working folder cannot be sandboxed as asked.
    #[error("{0}; the command was not run")]
    Workspace(String),
    /// Building the rules failed.
    #[error("cannot build the sandbox rules: {0}")]
    Rules(String),
    /// A configuration value is not understood.
    #[error("{0}")]
    Setting(String),
}

impl SandboxError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "sandbox_unavailable",
            Self::NamespacesUnavailable { .. } => "sandbox_namespaces_unavailable",
            Self::Workspace(_) => "sandbox_workspace",
            Self::Rules(_) => "sandbox_rules",
            Self::Setting(_) => "sandbox_setting",
        }
    }
}

/// What the namespace layer can do on this system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceSupport {
    /// A network namespace can be made (needed for `read-only`).
    pub network: bool,
    /// A `/proc` of the command's own pid namespace can be mounted.
    pub private_proc: bool,
}

/// What the sandbox can enforce here, probed once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Landlock works, or why not.
    pub landlock: Result<(), String>,
    /// The namespace layer works, or why not.
    pub namespaces: Result<NamespaceSupport, String>,
}

impl Support {
    /// What is weaker than the full sandbox, for a mode that runs anyway; `None` when
    /// nothing is.
    pub fn degraded(&self, mode: SandboxMode) -> Option<String> {
        if mode == SandboxMode::DangerFullAccess || self.landlock.is_err() {
            return None;
        }
        match &self.namespaces {
            Err(why) => Some(format!(
                "keel's sandbox is running on Landlock alone here ({why}). Credential locations stay \
                 unreadable and writes stay in the workspace, but: keel's control files are guarded only \
                 by the permission gate and a check after each command; a process that leaves the \
                 command's process group can outlive keel; and commands can see other processes and \
                 reach the local sockets of your session."
            )),
            Ok(ns) if !ns.private_proc => Some(
                "this system does not let keel mount a private /proc for commands, so they can list \
                 other processes (not read their memory or environment)."
                    .to_owned(),
            ),
            Ok(_) => None,
        }
    }
}

/// Makes this process undumpable: its `/proc` entries (environment, memory, open files)
/// then belong to root and only a process with `CAP_SYS_PTRACE` in keel's own user
/// namespace can read them, which a sandboxed command never has. Called once at start by
/// the binary; returns whether it took effect.
#[expect(unsafe_code, reason = "prctl has no safe wrapper in std")]
pub fn make_undumpable() -> bool {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 }
}

static SUPPORT: OnceLock<Support> = OnceLock::new();

/// What the sandbox can enforce, if a sandboxed command already asked (no probe).
pub fn probed() -> Option<&'static Support> {
    SUPPORT.get()
}

/// What this system's sandbox can enforce (probed on first use).
pub fn support() -> &'static Support {
    SUPPORT.get_or_init(|| {
        let landlock = probe();
        let namespaces = match namespaces_setting() {
            Ok(false) => Err(format!("{NAMESPACES_VARIABLE}=off")),
            Ok(true) => probe_namespaces(),
            Err(e) => Err(e.to_string()),
        };
        Support {
            landlock,
            namespaces,
        }
    })
}

/// Whether `KEEL_SANDBOX_NAMESPACES` allows namespaces; an unknown value is an error.
pub fn namespaces_setting() -> Result<bool, SandboxError> {
    match std::env::var(NAMESPACES_VARIABLE) {
        Err(_) => Ok(true),
        Ok(value) => match value.trim() {
            "" | "auto" | "on" => Ok(true),
            "off" => Ok(false),
            other => Err(SandboxError::Setting(format!(
                "{NAMESPACES_VARIABLE}={other} is not understood (use auto or off)"
            ))),
        },
    }
}

/// A command's sandbox, ready to apply in its process between fork and exec.
pub(crate) struct Prepared {
    plan: ChildPlan,
    diag: Option<OwnedFd>,
}

impl Prepared {
    /// Applies the sandbox in the child (between fork and exec).
    pub(crate) fn apply(&mut self) -> std::io::Result<()> {
        self.plan.run()
    }

    /// Takes the read end of the diagnostics pipe (keel keeps it to explain a failure).
    pub(crate) fn take_diagnostics(&mut self) -> Option<OwnedFd> {
        self.diag.take()
    }
}

/// Explains a failed start from what the child wrote on the diagnostics pipe.
pub(crate) fn explain_failure(diag: Option<OwnedFd>, error: &std::io::Error) -> String {
    diagnostic(diag).unwrap_or_else(|| format!("cannot start bash: {error}"))
}

/// What a sandbox step that failed after the start wrote (pid 1 exits 127 then), if any.
/// Call once the command ended: every write end is closed by then.
pub(crate) fn diagnostic(diag: Option<OwnedFd>) -> Option<String> {
    let mut bytes = Vec::new();
    if let Some(fd) = diag {
        // Without blocking: a keeper of another command started at the same moment may
        // hold a copy of the write end; what failed here was written before it exited.
        let _ = set_nonblocking(&fd);
        let mut file = std::fs::File::from(fd);
        let mut buf = [0u8; 512];
        while let Ok(n) = std::io::Read::read(&mut file, &mut buf) {
            if n == 0 || bytes.len() > 4096 {
                break;
            }
            bytes.extend_from_slice(buf.get(..n).unwrap_or(&[]));
        }
    }
    child::read_diagnostic(&bytes)
        .map(|(step, cause)| format!("the sandbox could not {step}: {cause}"))
}

/// What a command's sandbox needs to know beyond the tool environment.
pub(crate) struct Request<'a> {
    /// The shell that runs the command.
    pub program: &'a Path,
    /// The command line (`bash -c COMMAND`).
    pub command: &'a str,
    /// The session's private temp folder (`TMPDIR`).
    pub tmp: &'a Path,
    /// The control files to protect, when they are protected.
    pub control: Option<&'a ControlSet>,
    /// The command's environment (for `SSH_AUTH_SOCK`).
    pub vars: &'a [(String, String)],
}

/// The sandbox for a command in `env`; `None` for full access.
pub(crate) fn prepare(
    env: &ToolEnv,
    request: &Request<'_>,
) -> Result<Option<Prepared>, SandboxError> {
    let mode = env.sandbox;
    if mode == SandboxMode::DangerFullAccess {
        return Ok(None);
    }
    let support = support();
    support
        .landlock
        .clone()
        .map_err(|detail| SandboxError::Unavailable {
            mode: mode.name(),
            detail,
        })?;
    let block_network = mode == SandboxMode::ReadOnly || env.sandbox_blocks_network;
    let credentials = existing_credentials(env);
    for root in &env.roots {
        if let Some(location) = credentials.iter().find(|c| root.starts_with(c)) {
            return Err(SandboxError::Workspace(format!(
                "the working folder {} lies in the credential location {}, which commands may not read",
                root.display(),
                location.display()
            )));
        }
    }
    let mut writable = vec![request.tmp.to_path_buf()];
    if mode == SandboxMode::WorkspaceWrite {
        writable.extend(env.roots.iter().cloned());
        writable.extend(rules::system_temp());
    }
    let namespaces = match &support.namespaces {
        Ok(ns) => {
            if block_network && !ns.network {
                return Err(SandboxError::NamespacesUnavailable {
                    mode: mode.name(),
                    detail: "this system does not allow network namespaces".to_owned(),
                });
            }
            Some(namespaces(ns, block_network, &credentials, request)?)
        }
        Err(why) if mode == SandboxMode::ReadOnly => {
            return Err(SandboxError::NamespacesUnavailable {
                mode: mode.name(),
                detail: format!("user namespaces are unavailable ({why})"),
            });
        }
        Err(_) => {
            if let Some(location) = credentials
                .iter()
                .find(|c| writable.iter().any(|w| c.starts_with(w)))
            {
                return Err(SandboxError::Workspace(format!(
                    "without namespaces keel cannot hide {} inside a folder commands may write",
                    location.display()
                )));
            }
            None
        }
    };
    let hidden = if namespaces.is_some() {
        Vec::new()
    } else {
        credentials.clone()
    };
    let ruleset = rules::ruleset(&rules::Grants {
        mode: mode.name(),
        writable,
        hidden,
        block_network,
    })?;
    let (diag_read, diag_write) = std::io::pipe()
        .map(|(r, w)| (OwnedFd::from(r), OwnedFd::from(w)))
        .map_err(|e| SandboxError::Rules(format!("cannot create a pipe: {e}")))?;
    let (exec, stack) = if namespaces.is_some() {
        let program = request.program.as_os_str().as_bytes();
        let exec = ExecPlan::new(
            program,
            &[program, b"-c", request.command.as_bytes()],
            request.vars,
        )
        .map_err(|e| SandboxError::Rules(e.to_string()))?;
        (exec, vec![0u8; STACK_SIZE])
    } else {
        (ExecPlan::none(), Vec::new())
    };
    Ok(Some(Prepared {
        plan: ChildPlan {
            parent: std::process::id().try_into().unwrap_or(0),
            namespaces,
            ruleset: Some(ruleset),
            diag: Some(diag_write),
            exec,
            stack,
        },
        diag: Some(diag_read),
    }))
}

/// The credential locations that exist, as real paths (and as written, when a link leads
/// elsewhere: a mount over the link's path hides its target).
fn existing_credentials(env: &ToolEnv) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for location in env.credentials() {
        let Ok(real) = std::fs::canonicalize(&location) else {
            continue;
        };
        for path in [real, location] {
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

fn namespaces(
    support: &NamespaceSupport,
    network: bool,
    credentials: &[PathBuf],
    request: &Request<'_>,
) -> Result<Namespaces, SandboxError> {
    let mut mask_dirs = Vec::new();
    let mut mask_files = Vec::new();
    let mut hide = |path: &Path| -> Result<(), SandboxError> {
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(());
        };
        let c = c_path(path)?;
        if meta.is_dir() {
            if !mask_dirs.contains(&c) {
                mask_dirs.push(c);
            }
        } else if !mask_files.contains(&c) {
            mask_files.push(c);
        }
        Ok(())
    };
    for location in credentials {
        hide(location)?;
    }
    let uid = uid();
    hide(&PathBuf::from(format!("/run/user/{uid}")))?;
    for socket in SESSION_SOCKETS {
        hide(Path::new(socket))?;
    }
    if network
        && let Some((_, agent)) = request.vars.iter().find(|(k, _)| k == "SSH_AUTH_SOCK")
        && Path::new(agent).is_absolute()
    {
        hide(Path::new(agent))?;
    }
    let (mut pinned, mut read_only) = (Vec::new(), Vec::new());
    if let Some(control) = request.control {
        for path in &control.pinned {
            pinned.push(c_path(path)?);
        }
        for path in &control.read_only {
            read_only.push(c_path(path)?);
        }
    }
    let gid = gid();
    Ok(Namespaces {
        network,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        mask_dirs,
        mask_files,
        pinned,
        read_only,
        private_proc: support.private_proc,
    })
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Rules(format!("a path holds a NUL byte: {}", path.display())))
}

#[expect(unsafe_code, reason = "fcntl has no safe wrapper in std")]
fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: fcntl on a descriptor this function borrows.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[expect(unsafe_code, reason = "getuid has no safe wrapper in std")]
fn uid() -> u32 {
    // SAFETY: getuid takes no arguments and cannot fail.
    unsafe { libc::getuid() }
}

#[expect(unsafe_code, reason = "getgid has no safe wrapper in std")]
fn gid() -> u32 {
    // SAFETY: getgid takes no arguments and cannot fail.
    unsafe { libc::getgid() }
}

/// Tries the namespace layer with a throwaway command: first with a network namespace and
/// a private `/proc`, then without whichever step failed.
fn probe_namespaces() -> Result<NamespaceSupport, String> {
    let mut support = NamespaceSupport {
        network: true,
        private_proc: true,
    };
    for _ in 0..3 {
        match try_namespaces(support) {
            Ok(()) => return Ok(support),
            Err((step, why)) if step.contains("/proc") && support.private_proc => {
                tracing::debug!(%why, "no private /proc for sandboxed commands");
                support.private_proc = false;
            }
            Err((step, why)) if step.contains("namespaces") && support.network => {
                tracing::debug!(%why, "no network namespace for sandboxed commands");
                support.network = false;
            }
            Err((step, why)) => return Err(format!("{step}: {why}")),
        }
    }
    Err("the namespace probe did not settle".to_owned())
}

fn try_namespaces(support: NamespaceSupport) -> Result<(), (String, String)> {
    let program = ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .ok_or_else(|| ("find true".to_owned(), "no /usr/bin/true".to_owned()))?;
    let scratch = tempfile::tempdir().map_err(|e| ("create a folder".to_owned(), e.to_string()))?;
    let masked = c_path(scratch.path()).map_err(|e| ("probe".to_owned(), e.to_string()))?;
    let (uid, gid) = (uid(), gid());
    let (diag_read, diag_write) = std::io::pipe()
        .map(|(r, w)| (OwnedFd::from(r), OwnedFd::from(w)))
        .map_err(|e| ("create a pipe".to_owned(), e.to_string()))?;
    let mut plan = ChildPlan {
        parent: std::process::id().try_into().unwrap_or(0),
        namespaces: Some(Namespaces {
            network: support.network,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            mask_dirs: vec![masked],
            mask_files: Vec::new(),
            pinned: Vec::new(),
            read_only: Vec::new(),
            private_proc: support.private_proc,
        }),
        ruleset: None,
        diag: Some(diag_write),
        exec: ExecPlan::new(program.as_bytes(), &[program.as_bytes()], &[])
            .map_err(|e| ("probe".to_owned(), e.to_string()))?,
        stack: vec![0u8; STACK_SIZE],
    };
    let mut command = std::process::Command::new(program);
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[expect(
        unsafe_code,
        reason = "the probe runs the sandbox's own pre-exec steps"
    )]
    // SAFETY: the plan only makes system calls on data built before the fork.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || plan.run());
    }
    let outcome = command.status();
    drop(command);
    let failure = |error: &std::io::Error| {
        let text = explain_failure(Some(diag_read), error);
        let step = text
            .strip_prefix("the sandbox could not ")
            .and_then(|rest| rest.split_once(": "))
            .map_or_else(|| "start".to_owned(), |(step, _)| step.to_owned());
        (step, text)
    };
    match outcome {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(failure(&std::io::Error::other(format!(
            "the probe exited with {status}"
        )))),
        Err(error) => Err(failure(&error)),
    }
}
