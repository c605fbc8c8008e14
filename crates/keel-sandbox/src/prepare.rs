//! The Linux sandbox for the model's commands, prepared before the fork.
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

use std::ffi::CString;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use keel_protocol::SandboxMode;

use crate::child::{ChildPlan, ExecPlan};
use crate::mounts::Namespaces;
use crate::process::Program;
use crate::{Policy, SandboxError, masks, rules, support};

/// A command's sandbox, ready to apply.
pub(crate) enum Prepared {
    /// Landlock alone, applied in keel's forked child between fork and exec.
    Alone {
        /// What the child does.
        plan: ChildPlan,
        /// The read end of its diagnostics pipe (keel keeps it to explain a failure).
        diag: Option<OwnedFd>,
    },
    /// Namespaces and Landlock, laid by the command itself as the spawner starts it.
    Spawned {
        /// Its mounts.
        ns: Box<Namespaces>,
        /// What it executes.
        exec: ExecPlan,
        /// Its Landlock ruleset.
        ruleset: OwnedFd,
        /// The network namespace it joins.
        network: Option<crate::NetworkNamespace>,
    },
}

/// Explains a failed start from what the child wrote on the diagnostics pipe.
pub(crate) fn explain_failure(diag: Option<OwnedFd>, error: &std::io::Error) -> String {
    diagnostic(diag).unwrap_or_else(|| format!("cannot start the command: {error}"))
}

/// What a sandbox step that failed wrote, if anything: `STEP\0ERRNO` in words.
pub(crate) fn explain(bytes: &[u8]) -> Option<String> {
    crate::child::read_diagnostic(bytes)
        .map(|(step, cause)| format!("the sandbox could not {step}: {cause}"))
}

/// What a sandbox step that failed wrote on the diagnostics pipe, if anything. Call once
/// the child is gone or executed: every write end is closed by then.
pub(crate) fn diagnostic(diag: Option<OwnedFd>) -> Option<String> {
    let mut bytes = Vec::new();
    if let Some(fd) = diag {
        let _ = crate::sys::set_nonblocking(fd.as_fd());
        let mut file = std::fs::File::from(fd);
        let mut buf = [0u8; 512];
        while let Ok(n) = std::io::Read::read(&mut file, &mut buf) {
            if n == 0 || bytes.len() > 4096 {
                break;
            }
            bytes.extend_from_slice(buf.get(..n).unwrap_or(&[]));
        }
    }
    explain(&bytes)
}

/// The temp folder a sandboxed command should be told of (`TMPDIR`): `/tmp` where the
/// namespaces make it the session's own, else the private folder's own path.
pub fn command_tmp(mode: SandboxMode, roots: &[PathBuf], private: &Path) -> PathBuf {
    let own_tmp = mode != SandboxMode::DangerFullAccess
        && support().namespaces.is_ok()
        && masks::tmp_can_be_private(roots)
        && private.starts_with("/tmp");
    if own_tmp {
        PathBuf::from("/tmp")
    } else {
        private.to_path_buf()
    }
}

/// The sandbox for `program` under `policy`; `None` for full access.
pub(crate) fn prepare(
    policy: &Policy,
    program: &Program,
) -> Result<Option<Prepared>, SandboxError> {
    let mode = policy.mode;
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
    let block_network = policy.blocks_network();
    for root in &policy.roots {
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
    let credentials = masks::existing_credentials(&policy.credentials);
    for root in &policy.roots {
        if let Some(location) = credentials.iter().find(|c| root.starts_with(c)) {
            return Err(SandboxError::Workspace(format!(
                "the working folder {} lies in the credential location {}, which commands may not read",
                root.display(),
                location.display()
            )));
        }
    }
    let mut writable = vec![policy.tmp.clone()];
    if mode == SandboxMode::WorkspaceWrite {
        writable.extend(policy.roots.iter().cloned());
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
            if masks::tmp_can_be_private(&policy.roots) && policy.tmp.starts_with("/tmp") {
                // Inside, the private folder is /tmp.
                mounts_writable.retain(|w| *w != policy.tmp);
                if !mounts_writable.iter().any(|w| w == Path::new("/tmp")) {
                    mounts_writable.push(PathBuf::from("/tmp"));
                }
            }
            let mut planned = masks::namespaces(
                ns,
                block_network,
                &credentials,
                &mounts_writable,
                policy,
                program,
            )?;
            // keel writes saved outputs there; commands may read them but neither change nor
            // replace the folder.
            if std::fs::symlink_metadata(&policy.output_dir).is_ok_and(|m| m.is_dir()) {
                planned.read_only.push(c_path(&policy.output_dir)?);
            }
            // A root under /tmp is bound into the private /tmp, which is writable: outside
            // workspace-write it is made read-only again (Landlock alone would let writes
            // through, since the bind lies beneath the private folder it allows).
            if mode != SandboxMode::WorkspaceWrite {
                for root in policy.roots.iter().filter(|r| r.starts_with("/tmp")) {
                    if root.is_dir() {
                        planned.read_only.push(c_path(root)?);
                    }
                }
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
    Ok(Some(match namespaces {
        Some(ns) => Prepared::Spawned {
            network: policy.private_network.clone().filter(|_| ns.join_network),
            ns: Box::new(ns),
            exec: exec_plan(program)?,
            ruleset: ruleset_fd,
        },
        None => {
            let (diag_read, diag_write) = std::io::pipe()
                .map(|(r, w)| (OwnedFd::from(r), OwnedFd::from(w)))
                .map_err(|e| SandboxError::Rules(format!("cannot create a pipe: {e}")))?;
            Prepared::Alone {
                plan: ChildPlan {
                    parent: std::process::id().try_into().unwrap_or(0),
                    ruleset: ruleset_fd,
                    diag: Some(diag_write),
                },
                diag: Some(diag_read),
            }
        }
    }))
}

/// `program` as `execve` wants it: its path, its name and arguments, its environment.
fn exec_plan(program: &Program) -> Result<ExecPlan, SandboxError> {
    let nul = |_| SandboxError::Rules("a NUL byte in the command or its environment".to_owned());
    let name = CString::new(program.program.as_os_str().as_bytes()).map_err(nul)?;
    let mut args = vec![name.clone()];
    for arg in &program.args {
        args.push(CString::new(arg.as_bytes()).map_err(nul)?);
    }
    let mut vars = Vec::with_capacity(program.env.len());
    for (key, value) in &program.env {
        vars.push(CString::new(format!("{key}={value}")).map_err(nul)?);
    }
    Ok(ExecPlan::new(name, args, vars))
}

pub(crate) fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Rules(format!("a path holds a NUL byte: {}", path.display())))
}
