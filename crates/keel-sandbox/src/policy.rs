//! What a sandboxed command may do, as plain data the caller fills in.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use keel_protocol::SandboxMode;

/// A command's sandbox: the mode and everything it needs to know about the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The mode; `danger-full-access` applies nothing.
    pub mode: SandboxMode,
    /// Refuse the network even in a mode that allows it (`read-only` always does).
    pub block_network: bool,
    /// The workspace roots (writable in `workspace-write`; their sockets are the command's).
    pub roots: Vec<PathBuf>,
    /// The session's private temp folder (`TMPDIR`).
    pub tmp: PathBuf,
    /// Credential locations commands may not read (those that do not exist are skipped).
    pub credentials: Vec<PathBuf>,
    /// keel's folder of saved outputs: commands may read it, never change it.
    pub output_dir: PathBuf,
    /// Folders bound onto themselves so they can be neither renamed nor removed.
    pub pinned: Vec<PathBuf>,
    /// Files and folders made read-only (keel's control files).
    pub read_only: Vec<PathBuf>,
    /// The session's own network namespace ([`crate::private_network`]), which commands
    /// join in a mode that allows network: its only way out is keel's proxy. `None`: the
    /// host's network (where the mode allows any).
    pub private_network: Option<NetworkNamespace>,
}

/// A network namespace keel holds for a session's commands.
#[derive(Debug, Clone)]
pub struct NetworkNamespace(pub(crate) Arc<OwnedFd>);

impl PartialEq for NetworkNamespace {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_raw_fd() == other.0.as_raw_fd()
    }
}

impl Eq for NetworkNamespace {}

impl Policy {
    /// Whether the network is refused under this policy.
    pub fn blocks_network(&self) -> bool {
        self.mode == SandboxMode::ReadOnly || self.block_network
    }
}

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
