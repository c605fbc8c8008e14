//! Trust in a project's own keel files.
//!
//! A repository can carry `.keel/config.yaml` and `.keel/permissions.yaml`, and whoever
//! wrote the repository is not the user: a README can steer the model, and a cloned project
//! can ship a config that turns the sandbox off. So a project file counts in full only when
//! the user trusted it, and trust is given to a file's exact content: the record is the
//! file's real path and the SHA-256 of its bytes, so any change (by a collaborator, or by
//! the model in `full` mode) needs trusting again. An untrusted file may still tighten
//! (a stricter permission mode or sandbox, more credential locations, deny and ask rules);
//! everything else in it is ignored, with a warning that names what and how to trust it.
//!
//! Records live in `$KEEL_HOME/trusted.json` (0600 in a 0700 folder), which sandboxed
//! commands can neither read nor write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The project folder and the file names keel reads from it.
pub const PROJECT_DIR: &str = ".keel";
/// The project's keel files that need trust to loosen anything.
pub const PROJECT_FILES: &[&str] = &["config.yaml", "permissions.yaml"];
/// The trust records in `$KEEL_HOME`.
pub const TRUST_FILE: &str = "trusted.json";

/// Why trust could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// No `$KEEL_HOME` to keep records in.
    #[error("no keel home folder: set HOME or KEEL_HOME")]
    NoHome,
    /// The records or a project file could not be read or written.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The records file is not what keel writes.
    #[error("{path} is not a trust record file ({reason}); remove it to start over")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
}

impl TrustError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoHome => "trust_no_home",
            Self::Io { .. } => "trust_io",
            Self::Corrupt { .. } => "trust_corrupt",
        }
    }
}

/// A project's keel folder and the keel files present in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeelFiles {
    /// The folder that holds `.keel`: the project's root ([`super::project`]).
    pub root: PathBuf,
    /// The files of [`PROJECT_FILES`] that exist and may be used, by their place in the
    /// project (see [`trust_key`]).
    pub files: Vec<PathBuf>,
    /// Those of them that are links (or lie in a `.keel` that is one): never trusted.
    pub linked: Vec<PathBuf>,
    /// Those keel ignores because another user owns them, each with the reason.
    pub refused: Vec<(PathBuf, super::project::RefusedFile)>,
}

/// The keel files of `project`'s root (only there: a `.keel` above the root is not the
/// project's), or `None` when it has no `.keel` folder.
pub fn keel_files(project: &super::project::Project) -> Option<KeelFiles> {
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    if !root.join(PROJECT_DIR).is_dir() {
        return None;
    }
    let (mut files, mut linked, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    for name in PROJECT_FILES {
        let path = root.join(PROJECT_DIR).join(name);
        if !path.is_file() {
            continue;
        }
        if is_linked(&path) {
            linked.push(path);
        } else if let Err(why) = project.admit(&project.root.join(PROJECT_DIR).join(name)) {
            refused.push((path, why));
        } else {
            files.push(path);
        }
    }
    Some(KeelFiles {
        root,
        files,
        linked,
        refused,
    })
}

/// The key a project file's trust is recorded under: its place in the project (the real
/// path of the folder holding `.keel`, then `.keel/NAME`), not where a link leads, so a
/// cloned repository cannot borrow the trust given to another project's file by linking
/// to it. `None` for a file that is a link or lies in a linked `.keel`: never trusted.
pub fn trust_key(file: &Path) -> Option<PathBuf> {
    if is_linked(file) {
        return None;
    }
    let keel_dir = file.parent()?;
    let root = keel_dir.parent()?;
    let root = std::fs::canonicalize(root).ok()?;
    Some(root.join(keel_dir.file_name()?).join(file.file_name()?))
}

/// Whether `file` or its `.keel` folder is a symbolic link.
fn is_linked(file: &Path) -> bool {
    let link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    link(file) || file.parent().is_some_and(link)
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Records {
    /// Real path → SHA-256 (hex) of the trusted content.
    files: BTreeMap<PathBuf, String>,
    /// Project folders (real paths) whose files count whoever owns them
    /// ([`super::project`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    folders: BTreeSet<PathBuf>,
}

/// The user's trust records.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    records: Records,
}

impl TrustStore {
    /// Reads the records of `keel_home` (none yet is an empty store).
    pub fn open(keel_home: Option<&Path>) -> Result<Self, TrustError> {
        let path = keel_home.ok_or(TrustError::NoHome)?.join(TRUST_FILE);
        let records = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| TrustError::Corrupt {
                path: path.clone(),
                reason: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Records::default(),
            Err(e) => {
                return Err(TrustError::Io {
                    path,
                    reason: e.to_string(),
                });
            }
        };
        Ok(Self { path, records })
    }

    /// Whether the project file `file` is trusted with its current content.
    pub fn is_trusted(&self, file: &Path) -> bool {
        let Some(key) = trust_key(file) else {
            return false;
        };
        match (self.records.files.get(&key), digest(&key)) {
            (Some(recorded), Ok(now)) => *recorded == now,
            _ => false,
        }
    }

    /// Records trust in the current content of `files` and saves the records.
    pub fn trust(&mut self, files: &[PathBuf]) -> Result<(), TrustError> {
        for file in files {
            let Some(key) = trust_key(file) else {
                continue;
            };
            let sum = digest(&key)?;
            self.records.files.insert(key, sum);
        }
        self.save()
    }

    /// Forgets every record of files under `root`, and the trust in the folder; returns how
    /// many files.
    pub fn revoke(&mut self, root: &Path) -> Result<usize, TrustError> {
        let before = self.records.files.len();
        self.records.files.retain(|path, _| !path.starts_with(root));
        let removed = before - self.records.files.len();
        self.records
            .folders
            .retain(|folder| !folder.starts_with(root));
        self.save()?;
        Ok(removed)
    }

    /// Trusts the project folder `root`: its files count whoever owns them.
    pub fn trust_folder(&mut self, root: &Path) -> Result<(), TrustError> {
        let real = std::fs::canonicalize(root).map_err(|e| TrustError::Io {
            path: root.to_path_buf(),
            reason: e.to_string(),
        })?;
        self.records.folders.insert(real);
        self.save()
    }

    /// Whether the project folder `root` is trusted ([`Self::trust_folder`]).
    pub fn folder_trusted(&self, root: &Path) -> bool {
        if self.records.folders.is_empty() {
            return false;
        }
        std::fs::canonicalize(root).is_ok_and(|real| self.records.folders.contains(&real))
    }

    fn save(&self) -> Result<(), TrustError> {
        let io = |e: std::io::Error| TrustError::Io {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        if let Some(dir) = self.path.parent() {
            private_dir(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(&self.records).map_err(|e| TrustError::Io {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        keel_tools::output::replace_private(&self.path, text.as_bytes()).map_err(io)
    }
}

/// The SHA-256 of a file's bytes, in hex.
pub fn digest(file: &Path) -> Result<String, TrustError> {
    let bytes = std::fs::read(file).map_err(|e| TrustError::Io {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    let sum = Sha256::digest(&bytes);
    Ok(sum.iter().map(|b| format!("{b:02x}")).collect())
}

/// Creates (or tightens) a folder only this user can enter.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_given_to_content_and_lost_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("keel-home");
        let project_dir = dir.path().join("proj");
        std::fs::create_dir_all(project_dir.join(".keel/..")).unwrap();
        std::fs::create_dir_all(project_dir.join(".keel")).unwrap();
        let config = project_dir.join(".keel/config.yaml");
        std::fs::write(&config, "sandbox: read-only\n").unwrap();
        std::fs::create_dir_all(project_dir.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(project_dir.join(".git")).unwrap();
        let found = keel_files(&super::super::project::Project::of(
            &project_dir.join("sub/deeper"),
            None,
        ))
        .unwrap();
        let config = std::fs::canonicalize(&config).unwrap();
        assert_eq!(found.files, vec![config.clone()]);

        let mut store = TrustStore::open(Some(&home)).unwrap();
        assert!(!store.is_trusted(&config));
        store.trust(&found.files).unwrap();
        let store = TrustStore::open(Some(&home)).unwrap();
        assert!(store.is_trusted(&config));
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&home.join(TRUST_FILE)), 0o600);
        assert_eq!(mode(&home), 0o700);

        std::fs::write(&config, "sandbox: danger-full-access\n").unwrap();
        assert!(!store.is_trusted(&config));

        let mut store = TrustStore::open(Some(&home)).unwrap();
        assert_eq!(
            store.revoke(&project_dir.canonicalize().unwrap()).unwrap(),
            1
        );
    }

    #[test]
    fn a_linked_project_file_never_borrows_trust() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("keel-home");
        let trusted = dir.path().join("trusted");
        std::fs::create_dir_all(trusted.join(".keel")).unwrap();
        std::fs::write(trusted.join(".keel/config.yaml"), "permission: full\n").unwrap();
        let mut store = TrustStore::open(Some(&home)).unwrap();
        let of = |dir: &Path| super::super::project::Project::of(dir, None);
        store
            .trust(&keel_files(&of(&trusted)).unwrap().files)
            .unwrap();
        assert!(store.is_trusted(&trusted.join(".keel/config.yaml")));

        // A cloned project links its config to the trusted one, or its whole .keel folder.
        let clone = dir.path().join("clone");
        std::fs::create_dir_all(clone.join(".keel")).unwrap();
        std::os::unix::fs::symlink(
            trusted.join(".keel/config.yaml"),
            clone.join(".keel/config.yaml"),
        )
        .unwrap();
        assert!(!store.is_trusted(&clone.join(".keel/config.yaml")));
        let found = keel_files(&of(&clone)).unwrap();
        assert!(found.files.is_empty());
        assert_eq!(found.linked.len(), 1);
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::os::unix::fs::symlink(trusted.join(".keel"), other.join(".keel")).unwrap();
        assert!(!store.is_trusted(&other.join(".keel/config.yaml")));
        // Trusting them refuses too.
        store.trust(&[clone.join(".keel/config.yaml")]).unwrap();
        assert!(!store.is_trusted(&clone.join(".keel/config.yaml")));
    }

    #[test]
    fn a_damaged_record_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TRUST_FILE), "{not json").unwrap();
        let err = TrustStore::open(Some(dir.path())).unwrap_err();
        assert_eq!(err.code(), "trust_corrupt");
        assert!(err.to_string().contains(TRUST_FILE), "{err}");
    }
}
