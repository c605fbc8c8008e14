//! The Linux sandbox for `bash`: Landlock limits where a command may write.
//!
//! `read-only` lets a command write only to temp folders and the null devices;
//! `workspace-write` adds the workspace roots; `danger-full-access` applies nothing. Where
//! the kernel cannot enforce Landlock, a restricted mode fails closed: the command does
//! not run, and the error says how to proceed. The ruleset is built in the parent (opening
//! the folders) and applied in the child between fork and exec, so it binds only the
//! command and its descendants.

use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};

use crate::env::{SandboxMode, ToolEnv};

/// The newest Landlock ABI keel asks for; older kernels are handled best effort.
const ABI_WANTED: ABI = ABI::V5;

/// Files and folders any command may write even when sandboxed.
const ALWAYS_WRITABLE: &[&str] = &[
    "/tmp",
    "/var/tmp",
    "/dev/null",
    "/dev/zero",
    "/dev/tty",
    "/dev/full",
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
    /// Building the rules failed.
    #[error("cannot build the sandbox rules: {0}")]
    Rules(String),
}

impl SandboxError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "sandbox_unavailable",
            Self::Rules(_) => "sandbox_rules",
        }
    }
}

/// Whether this kernel enforces Landlock, probed once on a throwaway thread (a restriction
/// binds only the thread that makes it).
pub fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            std::thread::spawn(|| {
                let status = Ruleset::default()
                    .handle_access(AccessFs::from_all(ABI::V1))
                    .and_then(|r| r.create())
                    .and_then(|r| r.restrict_self())
                    .map_err(|e| e.to_string())?;
                match status.ruleset {
                    RulesetStatus::NotEnforced => Err("the ruleset was not enforced".to_owned()),
                    _ => Ok(()),
                }
            })
            .join()
            .unwrap_or_else(|_| Err("the probe thread failed".to_owned()))
        })
        .clone()
}

/// The ruleset for `env`'s sandbox mode, ready to apply in a child; `None` for full access.
pub fn ruleset(env: &ToolEnv) -> Result<Option<RulesetCreated>, SandboxError> {
    if env.sandbox == SandboxMode::DangerFullAccess {
        return Ok(None);
    }
    probe().map_err(|detail| SandboxError::Unavailable {
        mode: env.sandbox.name(),
        detail,
    })?;
    let mut writable: Vec<PathBuf> = ALWAYS_WRITABLE.iter().map(PathBuf::from).collect();
    writable.push(std::env::temp_dir());
    if env.sandbox == SandboxMode::WorkspaceWrite {
        writable.extend(env.roots.iter().cloned());
    }
    let rules = |e: landlock::RulesetError| SandboxError::Rules(e.to_string());
    // Writes and truncation (ABI 3, Linux 6.2) must be enforced, and so must the network
    // block when asked for (ABI 4, Linux 6.7): a kernel that cannot is refused, not
    // trusted. Newer rights are taken where the kernel has them.
    let unavailable = |e: landlock::RulesetError| SandboxError::Unavailable {
        mode: env.sandbox.name(),
        detail: format!("a required Landlock right is missing ({e}); Linux 6.2 or newer is needed"),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .map_err(unavailable)?;
    if env.sandbox_blocks_network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(unavailable)?;
    }
    let ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(rules)?;
    let created = ruleset
        .create()
        .map_err(rules)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_WANTED)))
        .map_err(rules)?
        .add_rules(path_beneath_rules(
            &writable,
            AccessFs::from_all(ABI_WANTED),
        ))
        .map_err(rules)?;
    Ok(Some(created))
}

/// Applies a ruleset to the calling process; called in the child before exec.
pub(crate) fn enforce(ruleset: RulesetCreated) -> std::io::Result<()> {
    let status = ruleset.restrict_self().map_err(std::io::Error::other)?;
    match status.ruleset {
        RulesetStatus::NotEnforced => Err(std::io::Error::other(
            "the Landlock sandbox could not be enforced",
        )),
        _ => Ok(()),
    }
}
