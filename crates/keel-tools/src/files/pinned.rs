//! Opening the file a call named, and no other.
//!
//! `read`, `write` and `edit` run in keel, outside the sandbox, so only the gate judges
//! where they reach. The gate resolves links before it judges; a command running in the
//! background could swap a link between that judgement and the tool's open. So a tool
//! resolves the path once more itself, refuses a path whose links lead somewhere its
//! words do not say (into a credential location, out of the workspace, onto a control
//! file), and then opens the resolved path without following any link at all
//! (`openat2` with `RESOLVE_NO_SYMLINKS`): if something was swapped in between, the open
//! fails instead of landing elsewhere. Writes go through the folder's descriptor.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{self, AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::env::{ToolEnv, normalize};
use crate::permission::real_path;
use crate::protect;

use super::refused::Refused;

/// The credential locations, as configured and as their links resolve.
pub(crate) struct CredentialLocations {
    named: Vec<PathBuf>,
    real: Vec<PathBuf>,
}

impl CredentialLocations {
    /// Those of `env`.
    pub(crate) fn of(env: &ToolEnv) -> Self {
        let named = env.credentials();
        let real = named.iter().map(|c| real_path(c)).collect();
        Self { named, real }
    }

    /// Whether `path` lies in one of them, by either spelling.
    pub(crate) fn hold(&self, path: &Path) -> bool {
        protect::credential(path, &self.named).is_some()
            || protect::credential(path, &self.real).is_some()
    }
}

/// The real path a tool may use for `lexical` (absolute, as the call named it), or why
/// not. `write` adds the write checks (control files, leaving the workspace).
pub(crate) fn resolve(env: &ToolEnv, lexical: &Path, write: bool) -> Result<PathBuf, Refused> {
    let lexical = normalize(lexical);
    let real = real_path(&lexical);
    if real != lexical {
        let credentials = CredentialLocations::of(env);
        let named = credentials.hold(&lexical);
        let reached = credentials.hold(&real);
        if reached && !named {
            return Err(Refused::IntoCredentials {
                path: lexical,
                real,
            });
        }
        if write {
            let roots: Vec<PathBuf> = env.roots.iter().map(|r| real_path(r)).collect();
            let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
            if inside(&lexical) && !inside(&real) {
                return Err(Refused::OutOfWorkspace {
                    path: lexical,
                    real,
                });
            }
        }
    }
    if write {
        if let Some(plan) = env.plan_target() {
            // Plan mode: the gate lets nothing else through; this holds even if it did.
            if real != plan {
                return Err(Refused::PlanOnly {
                    plan: env.plan_file.clone().unwrap_or(plan),
                    path: lexical,
                });
            }
            return Ok(real);
        }
        super::refuse_control(env, &real)?;
    }
    Ok(real)
}

/// Opens `path` with `flags` (and `mode` when creating), following no link anywhere in it.
fn open_no_links(path: &Path, flags: OFlags, mode: u32) -> std::io::Result<OwnedFd> {
    let how = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match fs::openat2(
        fs::CWD,
        path,
        flags | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
        how,
    ) {
        Ok(fd) => Ok(fd),
        Err(Errno::LOOP) => Err(std::io::Error::other(
            "a link appeared in the path after it was checked; it is refused",
        )),
        Err(error) => Err(error.into()),
    }
}

/// Opens the resolved `path` for reading. Non-blocking, so a FIFO swapped in cannot hang
/// the open; the caller checks the file's kind on the descriptor.
pub(crate) fn open_read(path: &Path) -> std::io::Result<File> {
    open_no_links(path, OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK, 0).map(File::from)
}

/// Writes `bytes` over the resolved `path` atomically: a temporary file created in the
/// same folder (through the folder's descriptor, exclusively, with the final mode), then
/// renamed over it. An existing file keeps its permissions and, where allowed, its owner; a
/// new one gets `new_mode`.
pub(crate) fn write(path: &Path, bytes: &[u8], new_mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the path has no parent folder"))?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let folder = open_no_links(dir, OFlags::PATH | OFlags::DIRECTORY, 0)?;
    let existing = match open_no_links(path, OFlags::PATH | OFlags::NOFOLLOW, 0) {
        Ok(fd) => {
            let meta = File::from(fd).metadata()?;
            if !meta.is_file() {
                return Err(std::io::Error::other("it is not a regular file"));
            }
            Some(meta)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let mode = existing
        .as_ref()
        .map_or(new_mode, |m| m.permissions().mode() & 0o7777);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp_name = format!(
        ".{}.keel-{}-{stamp}.tmp",
        name.to_string_lossy(),
        std::process::id()
    );
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = File::from(fs::openat(
        &folder,
        temp_name.as_str(),
        flags,
        Mode::from_raw_mode(mode),
    )?);
    let result = (|| {
        if let Some(meta) = &existing {
            // Keep the owner when we may (root, or the same user); otherwise keep ours.
            let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::renameat(&folder, temp_name.as_str(), &folder, name)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::unlinkat(&folder, temp_name.as_str(), AtFlags::empty());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_in(root: &Path, home: &Path) -> ToolEnv {
        let mut env = ToolEnv::new(root.to_path_buf());
        env.home = Some(home.to_path_buf());
        env.keel_home = Some(home.join(".keel"));
        env
    }

    #[test]
    fn links_that_lead_where_the_words_do_not_say_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, home, out) = (base.join("ws"), base.join("home"), base.join("out"));
        for d in [&ws, &home.join(".ssh"), &out] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join(".ssh/id_rsa"), "key").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("k")).unwrap();
        std::os::unix::fs::symlink(&out, ws.join("o")).unwrap();
        let env = env_in(&ws, &home);
        assert!(resolve(&env, &ws.join("k"), false).is_err());
        // Named outright, it is the gate's to judge (a user may allow it in ask mode).
        assert!(resolve(&env, &home.join(".ssh/id_rsa"), false).is_ok());
        assert!(resolve(&env, &ws.join("o/p"), true).is_err());
        assert!(resolve(&env, &ws.join("o/p"), false).is_ok());
        assert!(resolve(&env, &ws.join("plain.txt"), true).is_ok());
    }

    #[test]
    fn a_link_swapped_in_after_the_check_makes_the_open_fail() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("real")).unwrap();
        std::fs::write(base.join("real/f"), "x").unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        assert!(open_read(&base.join("real/f")).is_ok());
        let err = open_read(&base.join("link/f")).unwrap_err();
        assert!(err.to_string().contains("link"), "{err}");
        assert!(write(&base.join("link/g"), b"y", 0o644).is_err());
        assert!(!base.join("real/g").exists());
        write(&base.join("real/g"), b"y", 0o644).unwrap();
        assert_eq!(std::fs::read(base.join("real/g")).unwrap(), b"y");
    }
}
