//! The Landlock rules of a sandboxed command.
//!
//! Writes: the null devices, the session's private temp folder, and in `workspace-write`
//! also the workspace roots and the system temp folders. Reads: everything when namespaces
//! hide the credential locations; otherwise (Landlock alone) every path except those
//! locations, granted branch by branch, since Landlock can only add rights and never carve
//! an exception out of a tree it allowed. Network: TCP connect and bind are refused when
//! the mode forbids network. Signals and abstract sockets stay inside the sandbox where
//! the kernel supports scoping (Landlock ABI 6).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::SandboxError;

/// The newest Landlock ABI keel asks for; older kernels are handled best effort.
const ABI_WANTED: ABI = ABI::V6;

/// Devices any command may write even when sandboxed. Not `/dev/tty`: a command shares
/// keel's session, so with write and ioctl rights on its terminal it could type into it
/// (`TIOCSTI`, run by the user's shell once keel ends) or draw over keel's output. Reading it
/// stays allowed (job control stops a command that tries), and Landlock refuses its ioctls
/// from ABI 5 (Linux 6.10) on.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// System temp folders, writable in `workspace-write` only.
const SYSTEM_TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Most branches granted one by one when reads are carved around credentials (a bound on
/// the work per command; a home folder with more entries than this fails closed).
const MAX_READ_RULES: usize = 4096;

/// Whether this kernel enforces Landlock, probed once on a throwaway thread (a restriction
/// binds only the thread that makes it).
pub(crate) fn probe() -> Result<(), String> {
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

/// What the rules allow.
pub(crate) struct Grants {
    /// The mode's name, for messages.
    pub mode: &'static str,
    /// Folders (and files) the command may change.
    pub writable: Vec<PathBuf>,
    /// Credential locations that reads must avoid; empty when namespaces hide them.
    pub hidden: Vec<PathBuf>,
    /// Refuse TCP connect and bind.
    pub block_network: bool,
}

/// Builds the ruleset, ready to apply in the child.
pub(crate) fn ruleset(access: &Grants) -> Result<RulesetCreated, SandboxError> {
    let rules = |e: landlock::RulesetError| SandboxError::Rules(e.to_string());
    // Writes and truncation (ABI 3, Linux 6.2) must be enforced, and so must the network
    // block when asked for (ABI 4, Linux 6.7): a kernel that cannot is refused, not
    // trusted. Newer rights are taken where the kernel has them.
    let unavailable = |e: landlock::RulesetError| SandboxError::Unavailable {
        mode: access.mode,
        detail: format!("a required Landlock right is missing ({e}); Linux 6.2 or newer is needed"),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .map_err(unavailable)?;
    if access.block_network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(unavailable)?;
    }
    let ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(rules)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(rules)?;
    let mut created = ruleset.create().map_err(rules)?;
    let read = AccessFs::from_read(ABI_WANTED);
    if access.hidden.is_empty() {
        created = created
            .add_rules(path_beneath_rules(["/"], read))
            .map_err(rules)?;
    } else {
        let branches = readable_branches(Path::new("/"), &access.hidden)?;
        created = created
            .add_rules(path_beneath_rules(&branches.whole, read))
            .map_err(rules)?
            .add_rules(path_beneath_rules(&branches.listed, AccessFs::ReadDir))
            .map_err(rules)?;
    }
    let mut writable: Vec<PathBuf> = WRITABLE_DEVICES.iter().map(PathBuf::from).collect();
    writable.extend(access.writable.iter().cloned());
    created
        .add_rules(path_beneath_rules(
            &writable,
            AccessFs::from_all(ABI_WANTED),
        ))
        .map_err(rules)
}

/// The system temp folders a `workspace-write` command may write.
pub(crate) fn system_temp() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_TEMP.iter().map(PathBuf::from).collect();
    let temp = std::env::temp_dir();
    if !out.contains(&temp) {
        out.push(temp);
    }
    out
}

/// What may be read when credentials must be avoided: subtrees readable as a whole, and
/// folders on the way to a credential location that may only be listed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Branches {
    /// Readable with everything below them.
    pub whole: Vec<PathBuf>,
    /// Listable only (their other entries appear in `whole`).
    pub listed: Vec<PathBuf>,
}

/// Splits the tree at `root` around the `hidden` locations (absolute, real paths).
pub(crate) fn readable_branches(root: &Path, hidden: &[PathBuf]) -> Result<Branches, SandboxError> {
    let mut out = Branches::default();
    walk(root, hidden, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, hidden: &[PathBuf], out: &mut Branches) -> Result<(), SandboxError> {
    if hidden.iter().any(|h| dir.starts_with(h)) {
        return Ok(());
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.whole.push(dir.to_path_buf());
        return check_size(out);
    }
    out.listed.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // A rule opened through a link would grant its target, which may be a credential
        // location; Landlock judges an access through a link by where it leads, and that
        // place has its own branch.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() {
            walk(&path, hidden, out)?;
        } else if !hidden.iter().any(|h| path.starts_with(h)) {
            out.whole.push(path);
            check_size(out)?;
        }
    }
    Ok(())
}

fn check_size(out: &Branches) -> Result<(), SandboxError> {
    if out.whole.len() + out.listed.len() > MAX_READ_RULES {
        return Err(SandboxError::Rules(format!(
            "more than {MAX_READ_RULES} folders to allow one by one around the credential locations"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn reads_are_carved_around_hidden_locations() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in [
            "home/.ssh",
            "home/.config/gcloud",
            "home/.config/other",
            "home/src",
            "etc",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("home/.netrc"), "x").unwrap();
        std::fs::write(root.join("home/notes.txt"), "x").unwrap();
        let hidden = [
            root.join("home/.ssh"),
            root.join("home/.config/gcloud"),
            root.join("home/.netrc"),
        ];
        let mut got = readable_branches(root, &hidden).unwrap();
        got.whole.sort();
        got.listed.sort();
        assert_eq!(
            got,
            Branches {
                whole: vec![
                    root.join("etc"),
                    root.join("home/.config/other"),
                    root.join("home/notes.txt"),
                    root.join("home/src"),
                ],
                listed: vec![
                    root.to_path_buf(),
                    root.join("home"),
                    root.join("home/.config"),
                ],
            }
        );
    }
}
