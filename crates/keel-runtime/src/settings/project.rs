//! The project a runtime works in, and which of its files keel may use.
//!
//! A project's files steer keel: instructions (`AGENTS.md`), settings and rules (`.keel/`),
//! MCP servers (`.mcp.json`), hooks, skills, commands and agents. Whoever can write them
//! can steer the model, and some run programs. So they count only:
//! - inside the project root: the git root (the nearest folder at or above the working
//!   folder holding `.git`), else the working folder itself; never a folder above it (a
//!   shared folder such as `/tmp` is not a project because a `.mcp.json` lies in it);
//! - when owned by the current user or by root, as is every folder between the root and
//!   them; a file of another user (in a shared sticky folder, a colleague's checkout) is
//!   ignored with a warning that names it, unless the user trusted the folder with
//!   `keel trust`.
//!
//! The same rule decides whose `.git` makes a root: a repository another user owns above
//! the working folder does not, as git itself refuses one ("dubious ownership").
//!
//! Also here: whether a working folder is the home folder, one above it, or `/`, which a
//! front end must not take as a workspace without the user saying so.

use std::os::unix::fs::MetadataExt as _;

/// Why keel ignores a project file; the text names the file and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefusedFile {
    /// Something other than a regular file is there (a folder, a pipe).
    #[error("{} is not a regular file; keel ignores it", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// It lies outside the project root.
    #[error("{} lies outside the project {}; keel ignores it", path.display(), root.display())]
    Outside {
        /// The file.
        path: PathBuf,
        /// The project root.
        root: PathBuf,
    },
    /// It, or a folder between the root and it, belongs to another user.
    #[error(
        "{} belongs to another user (uid {uid}), so keel ignores {}; `keel trust {}` trusts the \
         folder's files whoever owns them",
        owned.display(),
        path.display(),
        root.display()
    )]
    Foreign {
        /// What another user owns.
        owned: PathBuf,
        /// Its owner.
        uid: u32,
        /// The file.
        path: PathBuf,
        /// The project root.
        root: PathBuf,
    },
}
use std::path::{Path, PathBuf};

use super::trust::TrustStore;

/// The project of a working folder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Project {
    /// Its root: the git root, else the working folder (as given, made absolute).
    pub root: PathBuf,
    /// The user trusted the folder with `keel trust`: files of other users count.
    pub folder_trusted: bool,
}

impl Project {
    /// The project of `cwd` (absolute), with warnings for what was passed over; the trust
    /// records of `keel_home` say whether a folder is trusted.
    pub fn find(cwd: &Path, keel_home: Option<&Path>) -> (Self, Vec<String>) {
        let store = TrustStore::open(keel_home).ok();
        let trusted = |dir: &Path| store.as_ref().is_some_and(|s| s.folder_trusted(dir));
        let mut warnings = Vec::new();
        let found = cwd
            .ancestors()
            .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok());
        let root = match found {
            Some(dir) if owned(&dir.join(".git")) || trusted(dir) => dir.to_path_buf(),
            Some(dir) => {
                warnings.push(format!(
                    "{} belongs to another user, so keel does not take {} as the project; only {} is \
                     (`keel trust {}` trusts that folder)",
                    dir.join(".git").display(),
                    dir.display(),
                    cwd.display(),
                    dir.display()
                ));
                cwd.to_path_buf()
            }
            None => cwd.to_path_buf(),
        };
        let folder_trusted = trusted(&root);
        (
            Self {
                root,
                folder_trusted,
            },
            warnings,
        )
    }

    /// The project of `cwd` for a caller that reports nothing (tests, tools).
    pub fn of(cwd: &Path, keel_home: Option<&Path>) -> Self {
        Self::find(cwd, keel_home).0
    }

    /// The file `name` (relative) of the project's root, if keel may use it: a regular file
    /// (a named pipe would hang whoever reads it), admitted by [`Self::admit`]. `Ok(None)`:
    /// there is none.
    pub fn file(&self, name: &str) -> Result<Option<PathBuf>, RefusedFile> {
        let path = self.root.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            return Ok(None);
        };
        if !meta.is_file() {
            return Err(RefusedFile::NotAFile { path });
        }
        self.admit(&path).map(|()| Some(path))
    }

    /// Whether keel may use `path`, a project file: it lies inside the root, and it and
    /// every folder between the root and it belong to the user or to root (or the folder
    /// is trusted). The reason names the file and what to do.
    pub fn admit(&self, path: &Path) -> Result<(), RefusedFile> {
        let Ok(rest) = path.strip_prefix(&self.root) else {
            return Err(RefusedFile::Outside {
                path: path.to_path_buf(),
                root: self.root.clone(),
            });
        };
        if self.folder_trusted {
            return Ok(());
        }
        let mut at = self.root.clone();
        for part in rest.components() {
            at.push(part);
            if let Some(uid) = foreign_owner(&at) {
                return Err(RefusedFile::Foreign {
                    owned: at,
                    uid,
                    path: path.to_path_buf(),
                    root: self.root.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The owner of `path` (not following a link) when it is neither the user nor root.
fn foreign_owner(path: &Path) -> Option<u32> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    (!owner_ok(&meta)).then_some(meta.uid())
}

/// Whether `path` belongs to the user or to root.
fn owned(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| owner_ok(&meta))
}

/// Whether `path`'s owner (not following a link) is the user or root: what a project's
/// file must be to count (for callers that open the file themselves and hold its metadata).
pub fn owner_ok(meta: &std::fs::Metadata) -> bool {
    meta.uid() == 0 || meta.uid() == keel_tools::env::own_uid()
}

/// Why `cwd` must not be a workspace without the user's word, if so: it is `/`, the home
/// folder, or a folder above it, where the model's writes would reach every file of the
/// user, start-up files included.
pub fn home_workspace(cwd: &Path, home: Option<&Path>) -> Option<String> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let cwd = real(cwd);
    if cwd == Path::new("/") {
        return Some("/ (the whole machine)".to_owned());
    }
    let home = real(home?);
    if cwd == home {
        return Some(format!("{} (your home folder)", cwd.display()));
    }
    home.starts_with(&cwd)
        .then(|| format!("{} (a folder that holds your home folder)", cwd.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_git_root_else_the_working_folder() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("a/b")).unwrap();
        assert_eq!(Project::of(&repo.join("a/b"), None).root, repo);
        let plain = dir.path().join("plain/sub");
        std::fs::create_dir_all(&plain).unwrap();
        // A `.keel` or `.mcp.json` above makes no project: only `.git` does.
        std::fs::create_dir_all(dir.path().join("plain/.keel")).unwrap();
        std::fs::write(dir.path().join("plain/.mcp.json"), "{}").unwrap();
        assert_eq!(Project::of(&plain, None).root, plain);
    }

    #[test]
    fn files_outside_the_root_are_not_admitted() {
        let dir = tempfile::tempdir().unwrap();
        let project = Project::of(dir.path(), None);
        assert!(project.admit(&dir.path().join("AGENTS.md")).is_ok());
        let above = dir.path().parent().unwrap().join("AGENTS.md");
        assert!(matches!(
            project.admit(&above),
            Err(RefusedFile::Outside { .. })
        ));
        std::fs::write(dir.path().join(".mcp.json"), "{}").unwrap();
        assert_eq!(
            project.file(".mcp.json"),
            Ok(Some(dir.path().join(".mcp.json")))
        );
        assert_eq!(project.file("missing"), Ok(None));
        // A named pipe is never opened: reading it would wait for a writer forever.
        let fifo = dir.path().join(".claude-settings");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let why = project.file(".claude-settings").unwrap_err();
            assert!(matches!(why, RefusedFile::NotAFile { .. }), "{why}");
        }
    }

    #[test]
    fn files_of_root_count_as_the_users() {
        // Whatever runs the tests, /etc/hostname and / belong to root.
        let project = Project {
            root: PathBuf::from("/"),
            folder_trusted: false,
        };
        if std::fs::symlink_metadata("/etc/hostname").is_ok() {
            assert!(project.admit(Path::new("/etc/hostname")).is_ok());
        }
    }

    #[test]
    fn files_of_another_user_are_ignored_unless_the_folder_is_trusted() {
        use std::os::unix::fs::chown;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".claude/skills")).unwrap();
        let planted = root.join(".claude/skills/SKILL.md");
        std::fs::write(&planted, "x").unwrap();
        // Only root can give a file away; elsewhere there is nothing to plant.
        if chown(&planted, Some(65534), None).is_err() {
            return;
        }
        let project = Project {
            root: root.clone(),
            folder_trusted: false,
        };
        let why = project.admit(&planted).unwrap_err().to_string();
        assert!(
            why.contains("another user") && why.contains("SKILL.md"),
            "{why}"
        );
        chown(&planted, Some(keel_tools::env::own_uid()), None).unwrap();
        chown(root.join(".claude"), Some(65534), None).unwrap();
        assert!(
            project.admit(&planted).is_err(),
            "a folder on the way counts"
        );
        let trusted = Project {
            folder_trusted: true,
            ..project
        };
        assert!(trusted.admit(&planted).is_ok());
        // A repository of another user's above the working folder makes no project.
        let work = root.join("work");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        chown(root.join(".git"), Some(65534), None).unwrap();
        let (found, warnings) = Project::find(&work, None);
        assert_eq!(found.root, work);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn home_and_above_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home/u");
        std::fs::create_dir_all(home.join("src")).unwrap();
        assert!(home_workspace(&home, Some(&home)).is_some());
        assert!(home_workspace(&dir.path().join("home"), Some(&home)).is_some());
        assert!(home_workspace(Path::new("/"), Some(&home)).is_some());
        assert_eq!(home_workspace(&home.join("src"), Some(&home)), None);
    }
}
