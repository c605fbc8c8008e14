//! What skills and custom commands share: the roots they are looked for in, how a directory
//! is listed and a Markdown file read without trusting the folder, and how a broken file or
//! an override is reported.
//!
//! The project and the model are untrusted: a cloned repository can plant a skill or a
//! command. So a project root follows no symbolic link at all (a link is reported, never
//! read), a user root only links whose target stays inside it; a file is opened without
//! following a link and must be a regular file of at most [`MAX_FILE_BYTES`]; a directory
//! listing stops after [`MAX_ENTRIES`] entries. The trade-off: a project that keeps its
//! `.claude` folder as a link into another checkout has to copy it instead.
//!
//! A project root counts only at the project's root and only when its files and folders
//! belong to the user or to root, or the user trusted the folder
//! ([`keel_runtime::settings::project`]); another user's file is reported, never read. Names
//! of keel's own commands ([`keel_runtime::RESERVED_COMMANDS`]) cannot be taken, and keel's
//! own tags in the text are defused: what these files hold is data, not keel's word.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, FileType};
use std::io;
use std::path::{Path, PathBuf};

use keel_runtime::settings::Project;

mod defect;
pub(crate) mod frontmatter;
mod read;

pub(crate) use defect::Defect;
pub(crate) use read::read_text;

/// Largest skill or command file read (256 KiB): far above any real one, small enough that
/// a planted file cannot fill memory or the prompt.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Most entries read from one directory (hidden ones included); the rest are skipped, and
/// discovery reports it.
pub const MAX_ENTRIES: usize = 2_000;

/// Why a link in a project root is not followed.
/// Who put a root there, which decides how far its links are trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Under `$KEEL_HOME`: the user's own files; a link that stays inside the root is followed.
    User,
    /// Under the project: possibly planted by a cloned repository; no link is followed.
    Project,
}

impl Scope {
    /// `user` or `project`, for front ends and tool details.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
        }
    }
}

/// A folder skills or commands are looked for in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The folder (`…/skills` or `…/commands`).
    pub dir: PathBuf,
    /// Whose it is.
    pub scope: Scope,
    /// For a project's root, the project: which of its files count.
    pub project: Option<Project>,
}

/// Why a skill or command of name `name` is not mounted, if it is not: it would take the
/// name of one of keel's own commands.
pub(crate) fn reserved(name: &str, what: &str) -> Option<String> {
    keel_runtime::is_reserved(name).then(|| {
        format!(
            "names the {what} `/{name}`, one of keel's own commands, which no {what} may take; \
             it is not loaded (rename it)"
        )
    })
}

/// A file or folder that could not be loaded, and why; the rest still load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file or folder at fault.
    pub path: PathBuf,
    /// What is wrong with it, for the user.
    pub reason: String,
}

impl Problem {
    pub(crate) fn new(path: &Path, reason: impl fmt::Display) -> Self {
        Self {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Something the user should know that is not a fault: a later root's skill or command
/// replacing an earlier one of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The file that won.
    pub path: PathBuf,
    /// What happened.
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// The roots for `leaf` (`skills`, `commands`, `agents`), in override order (a later root's
/// file of a name replaces an earlier one's): the project's `.claude/` (Claude Code's, so
/// existing files work unchanged), the project's `.keel/`, then the user's: Claude Code's
/// `~/.claude/` and keel's `keel_home`. The user's win because the model can write the
/// project's files: a project never takes the name of a user's command, skill or agent. A
/// project root that is a user root (keel run in the home folder) counts as the user's.
pub(crate) fn roots_in(
    keel_home: Option<&Path>,
    claude_home: Option<&Path>,
    project: Option<&Project>,
    leaf: &str,
) -> Vec<Root> {
    let user: Vec<Root> = [claude_home, keel_home]
        .into_iter()
        .flatten()
        .map(|dir| Root {
            dir: dir.join(leaf),
            scope: Scope::User,
            project: None,
        })
        .collect();
    let mut roots = Vec::new();
    if let Some(project) = project {
        for dot in [".claude", ".keel"] {
            let dir = project.root.join(dot).join(leaf);
            if !user.iter().any(|root| root.dir == dir) {
                roots.push(Root {
                    dir,
                    scope: Scope::Project,
                    project: Some(project.clone()),
                });
            }
        }
    }
    for root in user {
        if !roots.iter().any(|r: &Root| r.dir == root.dir) {
            roots.push(root);
        }
    }
    roots
}

/// Claude Code's folder of the user (`~/.claude`), whose commands, skills, agents and
/// `CLAUDE.md` keel reads as the user's own.
pub fn claude_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".claude"))
}

/// What a [`Note`] says when `name` of `this` replaces `earlier`'s.
pub(crate) fn replaced(
    what: &str,
    name: &str,
    this: Scope,
    earlier: &Path,
    earlier_scope: Scope,
) -> String {
    match (this, earlier_scope) {
        (Scope::User, Scope::Project) => format!(
            "your {what} `{name}` is used; the project's of that name in {} is not",
            earlier.display()
        ),
        _ => format!("{what} `{name}` replaces the one in {}", earlier.display()),
    }
}

/// How far links under a root are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Links {
    /// None is (project roots).
    Refuse,
    /// One whose target stays inside the root is (user roots).
    WithinRoot,
}

/// A root that exists and may be read.
#[derive(Debug)]
pub(crate) struct OpenRoot {
    /// The root's folder made absolute (links not resolved), where listing starts.
    pub(crate) dir: PathBuf,
    /// Whose it is.
    pub(crate) scope: Scope,
    /// The folder with links resolved: what a followed link must stay inside.
    canonical: PathBuf,
    links: Links,
    /// For a project's root, whose files count.
    project: Option<Project>,
}

/// What opening a root found.
#[derive(Debug)]
pub(crate) enum Opened {
    /// Nothing there: not a problem, most roots do not exist.
    Missing,
    /// There but unusable.
    Broken(Problem),
    /// Ready to list.
    Ready(OpenRoot),
}

/// Opens `root`: checks it is a folder and, for a project root, that neither it nor the
/// dot folder holding it (`.claude`, `.keel`) is a link.
pub(crate) fn open(root: &Root) -> Opened {
    let dir = match std::path::absolute(&root.dir) {
        Ok(dir) => dir,
        Err(error) => return Opened::Broken(Problem::new(&root.dir, Defect::from(&error))),
    };
    let links = match root.scope {
        Scope::User => Links::WithinRoot,
        Scope::Project => Links::Refuse,
    };
    if let Some(project) = &root.project
        && std::fs::symlink_metadata(&dir).is_ok()
        && let Err(why) = project.admit(&dir)
    {
        return Opened::Broken(Problem::new(&dir, why.to_string()));
    }
    if links == Links::Refuse {
        for path in [dir.parent(), Some(dir.as_path())].into_iter().flatten() {
            match fs::symlink_metadata(path) {
                Ok(meta) if meta.is_symlink() => {
                    return Opened::Broken(Problem::new(path, Defect::Link));
                }
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => return Opened::Missing,
                Err(error) => return Opened::Broken(Problem::new(path, Defect::from(&error))),
            }
        }
    }
    // Follows a link: the user's own root may be one (into a dotfiles checkout, say).
    match fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Opened::Broken(Problem::new(&dir, "is not a folder")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Opened::Missing,
        Err(error) => return Opened::Broken(Problem::new(&dir, Defect::from(&error))),
    }
    match fs::canonicalize(&dir) {
        Ok(canonical) => Opened::Ready(OpenRoot {
            dir,
            scope: root.scope,
            canonical,
            links,
            project: root.project.clone(),
        }),
        Err(error) => Opened::Broken(Problem::new(&dir, Defect::from(&error))),
    }
}

/// What kind of thing a path is, once its link (if any) is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A folder.
    Dir,
    /// A regular file.
    File,
    /// Anything else (a device, a FIFO, a socket): never read.
    Other,
}

fn kind_of(file_type: FileType) -> Kind {
    if file_type.is_dir() {
        Kind::Dir
    } else if file_type.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

/// A path that may be used, and what is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The path itself, or a followed link's target.
    pub(crate) path: PathBuf,
    /// What is there.
    pub(crate) kind: Kind,
}

impl OpenRoot {
    /// `path`, something under this root, with its link followed as far as the root's
    /// scope allows; `None` when nothing is there, an error (for the user) when it is a link
    /// that may not be followed or cannot be inspected.
    pub(crate) fn follow(&self, path: &Path) -> Result<Option<Resolved>, Defect> {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Defect::from(&error)),
        };
        if let Some(project) = &self.project
            && !project.folder_trusted
            && !keel_runtime::settings::project::owner_ok(&meta)
        {
            return Err(Defect::Foreign);
        }
        if !meta.is_symlink() {
            return Ok(Some(Resolved {
                path: path.to_owned(),
                kind: kind_of(meta.file_type()),
            }));
        }
        match self.links {
            Links::Refuse => Err(Defect::Link),
            Links::WithinRoot => {
                let target = match fs::canonicalize(path) {
                    Ok(target) => target,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        return Err(Defect::DanglingLink);
                    }
                    Err(error) => return Err(Defect::from(&error)),
                };
                if !target.starts_with(&self.canonical) {
                    return Err(Defect::LinkOutside {
                        target,
                        root: self.dir.clone(),
                    });
                }
                let meta = fs::metadata(&target).map_err(|error| Defect::from(&error))?;
                Ok(Some(Resolved {
                    path: target,
                    kind: kind_of(meta.file_type()),
                }))
            }
        }
    }
}

/// One visible entry of a directory.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Its file name.
    pub(crate) name: OsString,
    /// Its full path.
    pub(crate) path: PathBuf,
    /// Its type, links not followed (`None` when the system could not tell).
    pub(crate) file_type: Option<FileType>,
}

/// A directory's visible entries.
#[derive(Debug)]
pub(crate) struct Listing {
    /// Sorted by name, hidden ones (`.git`, `.DS_Store`) left out.
    pub(crate) entries: Vec<Entry>,
    /// The directory held more than [`MAX_ENTRIES`] entries and the rest were not read.
    pub(crate) truncated: bool,
}

/// The entries of `dir`, at most [`MAX_ENTRIES`] read (hidden ones count, so a folder
/// stuffed with hidden files cannot make a listing unbounded).
pub(crate) fn list(dir: &Path) -> Result<Listing, Defect> {
    let read = fs::read_dir(dir).map_err(|error| Defect::from(&error))?;
    let mut entries = Vec::new();
    let mut truncated = false;
    for (index, entry) in read.enumerate() {
        if index == MAX_ENTRIES {
            truncated = true;
            break;
        }
        // An entry that vanished while listing is simply not there.
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        entries.push(Entry {
            path: entry.path(),
            file_type: entry.file_type().ok(),
            name,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Listing { entries, truncated })
}

/// The problem for a directory whose listing stopped at [`MAX_ENTRIES`].
pub(crate) fn truncated(dir: &Path) -> Problem {
    Problem::new(
        dir,
        format!("holds more than {MAX_ENTRIES} entries; only the first {MAX_ENTRIES} were read"),
    )
}

/// `body` without its leading blank lines and trailing white space: the part of a file
/// after its frontmatter, as it is shown.
pub(crate) fn trim_body(body: &str) -> String {
    let mut rest = body;
    while let Some((line, after)) = rest.split_once('\n') {
        if !line.trim().is_empty() {
            break;
        }
        rest = after;
    }
    if rest.trim().is_empty() {
        return String::new();
    }
    rest.trim_end().to_owned()
}

/// A project rooted at `dir`, for the roots' tests.
#[cfg(test)]
pub(crate) fn at(dir: &str) -> Project {
    Project {
        root: PathBuf::from(dir),
        folder_trusted: false,
    }
}

/// Roots as (folder, scope), what the roots' order tests compare.
#[cfg(test)]
pub(crate) fn shape(roots: Vec<Root>) -> Vec<Root> {
    roots
        .into_iter()
        .map(|r| Root { project: None, ..r })
        .collect()
}

#[cfg(test)]
mod tests;
