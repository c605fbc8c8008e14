//! What the sandbox can enforce on this system, probed once per process, and what is
//! weaker than the full sandbox where something is missing.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::OnceLock;

use keel_protocol::SandboxMode;

use crate::child::probe_steps;
use crate::mounts::{Namespaces, id_maps};
use crate::prepare::{c_path, explain_failure};
use crate::{NAMESPACES_VARIABLE, SandboxError};

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
    /// The kernel's Landlock ABI version (0 without Landlock).
    pub landlock_abi: i64,
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
        let mut notes = Vec::new();
        if self.landlock_abi < 6 {
            // Scoping of abstract sockets and signals came with ABI 6 (Linux 6.12), and
            // control of device ioctls with ABI 5 (Linux 6.10).
            notes.push(format!(
                "this kernel's Landlock (ABI {}) cannot keep commands from abstract sockets (an X \
                 server, a D-Bus bus) or from signalling keel{}; Linux 6.12 or newer closes that.",
                self.landlock_abi,
                if self.landlock_abi < 5 {
                    ", nor from device ioctls"
                } else {
                    ""
                }
            ));
        }
        let namespaces = match &self.namespaces {
            Err(why) => Some(format!(
                "keel's sandbox is running on Landlock alone here ({why}). Credential locations stay \
                 unreadable and writes stay in the workspace, but: keel's control files are guarded only \
                 by the permission gate and a check after each command; a process that leaves the \
                 command's process group can outlive keel; commands can see other processes and \
                 reach the local sockets of your session; and they reach any host, not only the \
                 allowed ones."
            )),
            Ok(ns) if !ns.private_proc => Some(
                "this system does not let keel mount a private /proc for commands, so they can list \
                 other processes (not read their memory or environment)."
                    .to_owned(),
            ),
            Ok(_) => None,
        };
        notes.extend(namespaces);
        if mode == SandboxMode::WorkspaceWrite
            && self.namespaces.as_ref().is_ok_and(|ns| !ns.network)
        {
            notes.push(
                "this system does not let keel give commands a network of their own, so they reach \
                 any host, not only the allowed ones."
                    .to_owned(),
            );
        }
        (!notes.is_empty()).then(|| notes.join(" "))
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
        let landlock = crate::rules::probe();
        let landlock_abi = landlock_abi();
        let namespaces = match namespaces_setting() {
            Ok(false) => Err(format!("{NAMESPACES_VARIABLE}=off")),
            Ok(true) => probe_namespaces(),
            Err(e) => Err(e.to_string()),
        };
        Support {
            landlock,
            landlock_abi,
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

/// The kernel's Landlock ABI version, or 0.
#[expect(unsafe_code, reason = "the version query has no wrapper")]
fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the version query takes no attribute and creates nothing.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    version.max(0)
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
    // Every kind of mount a command's sandbox makes: an empty mask, a pinned folder and a
    // read-only bind, so a system that refuses one of them falls back to Landlock alone
    // instead of refusing every command.
    let scratch = tempfile::tempdir().map_err(|e| ("create a folder".to_owned(), e.to_string()))?;
    for sub in ["masked", "pinned", "pinned/read-only"] {
        std::fs::create_dir_all(scratch.path().join(sub))
            .map_err(|e| ("create a folder".to_owned(), e.to_string()))?;
    }
    let path = |sub: &str| {
        c_path(&scratch.path().join(sub)).map_err(|e| ("probe".to_owned(), e.to_string()))
    };
    let (diag_read, diag_write) = std::io::pipe()
        .map(|(r, w)| (OwnedFd::from(r), OwnedFd::from(w)))
        .map_err(|e| ("create a pipe".to_owned(), e.to_string()))?;
    let ns = Namespaces {
        network: support.network,
        join_network: false,
        mask_dirs: vec![path("masked")?],
        mask_files: Vec::new(),
        pinned: vec![path("pinned")?],
        read_only: vec![path("pinned/read-only")?],
        writable: vec![path("pinned")?],
        cwd: path("pinned")?,
        private_tmp: None,
        private_proc: support.private_proc,
        private_pts: true,
    };
    let maps = id_maps();
    let parent = std::process::id().try_into().unwrap_or(0);
    let mut command = std::process::Command::new(program);
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[expect(
        unsafe_code,
        reason = "the probe runs the sandbox's own pre-exec steps"
    )]
    // SAFETY: the steps only make system calls on data built before the fork.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            probe_steps(
                parent,
                &maps,
                &ns,
                std::os::fd::AsRawFd::as_raw_fd(&diag_write),
            )
        });
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
