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
mod contain;
mod masks;
mod rules;
mod support;

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

pub use contain::contain;
pub use rules::probe;
pub use support::{
    NamespaceSupport, Support, make_undumpable, namespaces_setting, probed, support,
};

use crate::env::{SandboxMode, ToolEnv};
use crate::protect::ControlSet;
use child::{ChildPlan, ExecPlan, STACK_SIZE};

/// The variable that turns the namespace layer off (`off`), for machines where it
/// misbehaves; the default is `auto`. Turning it off never loosens `read-only`, which then
/// refuses to run.
pub const NAMESPACES_VARIABLE: &str = "KEEL_SANDBOX_NAMESPACES";

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

/// The temp folder a sandboxed command should be told of (`TMPDIR`): `/tmp` where the
/// namespaces make it the session's own, else the private folder's own path.
pub(crate) fn command_tmp(env: &ToolEnv, private: &Path) -> PathBuf {
    let own_tmp = env.sandbox != SandboxMode::DangerFullAccess
        && support().namespaces.is_ok()
        && masks::tmp_can_be_private(&env.roots)
        && private.starts_with("/tmp");
    if own_tmp {
        PathBuf::from("/tmp")
    } else {
        private.to_path_buf()
    }
}

/// What a command's sandbox needs to know beyond the tool environment.
pub(crate) struct Request<'a> {
    /// The shell that runs the command.
    pub program: &'a Path,
    /// The command line (`bash -c COMMAND`).
    pub command: &'a str,
    /// The session's private temp folder (`TMPDIR`).
    pub tmp: &'a Path,
    /// The workspace roots (their sockets are the command's own).
    pub roots: &'a [PathBuf],
    /// The command's working folder.
    pub cwd: &'a Path,
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
    for root in &env.roots {
        // Inside `.git` (say) the read-only mounts of the root's control files would not
        // apply to what the command reaches relative to its folder.
        if let Some(folder) = root.ancestors().find(|dir| {
            dir.file_name()
                .is_some_and(|n| n == ".git" || n == ".keel" || n == ".claude")
        }) {
            return Err(SandboxError::Workspace(format!(
                "the working folder {} lies inside the control folder {}; run keel from the project folder",
                root.display(),
                folder.display()
            )));
        }
    }
    let credentials = masks::existing_credentials(env);
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
            let mut mounts_writable = writable.clone();
            if masks::tmp_can_be_private(&env.roots) && request.tmp.starts_with("/tmp") {
                // Inside, the private folder is /tmp.
                mounts_writable.retain(|w| w != request.tmp);
                if !mounts_writable.iter().any(|w| w == Path::new("/tmp")) {
                    mounts_writable.push(PathBuf::from("/tmp"));
                }
            }
            let mut planned = masks::namespaces(
                ns,
                block_network,
                &credentials,
                &mounts_writable,
                &env.output_dir,
                request,
            )?;
            // keel writes saved outputs there; commands may read them but neither change nor
            // replace the folder.
            if std::fs::symlink_metadata(&env.output_dir).is_ok_and(|m| m.is_dir()) {
                planned.read_only.push(c_path(&env.output_dir)?);
            }
            Some(planned)
        }
        Err(why) if block_network => {
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
        // Without a terminal file system of its own, the user's terminals are carved out
        // of what a command may read too (keystrokes).
        let mut hidden = credentials.clone();
        hidden.push(PathBuf::from("/dev/pts"));
        hidden
    };
    let ruleset = rules::ruleset(&rules::Grants {
        mode: mode.name(),
        writable,
        hidden,
        block_network,
    })?;
    let ruleset_fd: Option<OwnedFd> = ruleset.into();
    let ruleset_fd = ruleset_fd.ok_or_else(|| SandboxError::Unavailable {
        mode: mode.name(),
        detail: "the kernel created no Landlock ruleset".to_owned(),
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
            ruleset: Some(ruleset_fd),
            diag: Some(diag_write),
            exec,
            stack,
        },
        diag: Some(diag_read),
    }))
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

#[expect(unsafe_code, reason = "getgid has no safe wrapper in std")]
fn gid() -> u32 {
    // SAFETY: getgid takes no arguments and cannot fail.
    unsafe { libc::getgid() }
}
