//! The read-only search tools: `grep`, `glob` and `ls` (issue 4).
//!
//! `grep` and `glob` walk with the ripgrep crates (`ignore` for a parallel walk that honours
//! `.gitignore` and `.ignore`, `grep-searcher` for the search itself), so they see the same
//! files as `rg` and run about as fast. Two choices differ from `rg`'s defaults, on purpose:
//! hidden files are searched (an agent needs `.github/` and `.cargo/`) while version-control
//! folders never are, and `.gitignore` is honoured even outside a git repository. Results are
//! collected in full and sorted before a page is cut, so `offset` and `limit` page stably
//! across calls; the price is memory in proportion to the number of matching files.

mod glob;
mod grep;
mod ls;

use std::io;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ignore::{DirEntry, WalkBuilder};
use keel_agent::ToolError;
use tokio_util::sync::CancellationToken;

use crate::env::ToolEnv;

pub use glob::{GLOB_DEFAULT_LIMIT, GLOB_MAX_LIMIT, GlobTool};
pub use grep::{
    GREP_DEFAULT_FILE_LIMIT, GREP_DEFAULT_LINE_LIMIT, GREP_MAX_CONTEXT, GREP_MAX_LIMIT, GrepTool,
    MAX_LINE_CHARS, OutputMode,
};
pub use ls::{LS_MAX_ENTRIES, LsTool};

#[cfg(test)]
pub(crate) use {glob::GlobArgs, grep::GrepArgs, ls::LsArgs};

/// How long a walk may run before it stops and reports partial results.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest text a search tool sends back (about 8k tokens); a longer page is cut at an
/// entry boundary and the result says where to continue.
pub const SEARCH_MAX_BYTES: usize = 32 * 1024;

/// Version-control folders, never walked by `grep` or `glob`.
const VCS_FOLDERS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", ".pijul"];

/// The most walker threads (ripgrep's own cap: more threads stop paying off).
const MAX_THREADS: usize = 12;

/// How many unreadable paths a result names before it only counts them.
const MAX_NAMED_UNREADABLE: usize = 3;

/// Why a search tool could not run; each variant has a stable [`code`](Self::code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The arguments did not fit the tool's schema.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The path does not exist.
    #[error("path does not exist: {0}")]
    NotFound(String),
    /// The path exists but may not be read.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// A file was given where a folder is needed.
    #[error("{0} is a file, not a folder; give its folder, or use `read` to see the file")]
    NotAFolder(String),
    /// A device, socket or FIFO, which could block a search forever.
    #[error(
        "{0} is not a regular file or folder (a device, socket or FIFO) and cannot be searched"
    )]
    NotSearchable(String),
    /// The regex does not compile.
    #[error("invalid regex `{pattern}`: {message}")]
    InvalidRegex {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// A glob does not parse.
    #[error("invalid glob `{glob}`: {message}")]
    InvalidGlob {
        /// The glob as given.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
    /// The file type filter names no known type.
    #[error(
        "unknown file type `{0}`; use a ripgrep type name such as rust, py, js, ts, go, java, c, cpp, md, json, yaml or toml, or use `glob` instead"
    )]
    UnknownFileType(String),
    /// Another I/O failure on the given path.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The path, as shown to the model.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The call was aborted.
    #[error("{0} was cancelled")]
    Cancelled(&'static str),
    /// The search task died (a bug).
    #[error("the search task failed: {0}")]
    Internal(String),
}

impl SearchError {
    /// A stable code for front ends and logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidArguments(_) => "invalid_arguments",
            Self::NotFound(_) => "not_found",
            Self::PermissionDenied(_) => "permission_denied",
            Self::NotAFolder(_) => "not_a_folder",
            Self::NotSearchable(_) => "not_searchable",
            Self::InvalidRegex { .. } => "invalid_regex",
            Self::InvalidGlob { .. } => "invalid_glob",
            Self::UnknownFileType(_) => "unknown_file_type",
            Self::Io { .. } => "io",
            Self::Cancelled(_) => "cancelled",
            Self::Internal(_) => "internal",
        }
    }

    /// An I/O error on `shown`, classified.
    fn io(err: &io::Error, shown: &str) -> Self {
        match err.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => {
                Self::NotFound(shown.to_owned())
            }
            io::ErrorKind::PermissionDenied => Self::PermissionDenied(shown.to_owned()),
            _ => Self::Io {
                path: shown.to_owned(),
                message: err.to_string(),
            },
        }
    }
}

impl From<SearchError> for ToolError {
    fn from(err: SearchError) -> Self {
        ToolError::new(err.to_string())
    }
}

/// Arguments parsed into `T`, or an error naming the problem.
fn parse_args<T: serde::de::DeserializeOwned>(
    arguments: serde_json::Value,
) -> Result<T, SearchError> {
    crate::args::parse(arguments).map_err(|e| SearchError::InvalidArguments(e.to_string()))
}

/// What a path given to a tool turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathKind {
    /// A regular file (or a link to one).
    File,
    /// A folder (or a link to one).
    Folder,
}

/// Classifies `path` (following links), with a clear error for anything else.
async fn inspect(path: &Path, shown: &str) -> Result<PathKind, SearchError> {
    match tokio::fs::metadata(path).await {
        Ok(meta) if meta.is_dir() => Ok(PathKind::Folder),
        Ok(meta) if meta.is_file() => Ok(PathKind::File),
        Ok(_) => Err(SearchError::NotSearchable(shown.to_owned())),
        Err(err) => Err(SearchError::io(&err, shown)),
    }
}

/// A path as the model should see it: relative to the cwd when inside it, else absolute;
/// the flag says whether the name was not UTF-8 and was shown with replacement characters.
fn display_path(env: &ToolEnv, path: &Path) -> (String, bool) {
    let shown = match path.strip_prefix(&env.cwd) {
        Ok(rest) if rest.as_os_str().is_empty() => Path::new("."),
        Ok(rest) => rest,
        Err(_) => path,
    };
    match shown.to_str() {
        Some(text) => (text.to_owned(), false),
        None => (shown.to_string_lossy().into_owned(), true),
    }
}

/// How many walker threads to use.
fn walk_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, NonZeroUsize::get)
        .min(MAX_THREADS)
}

/// A walker over `root` with keel's filters: ignore files honoured (also outside git),
/// hidden files included, version-control folders skipped, links not followed, and the
/// credential locations below `root` never entered (keel's own tools never read them for
/// the model, so searching a folder that holds `~/.ssh` searches around it).
fn walker(cwd: &Path, root: &Path, hidden: Arc<[PathBuf]>) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .current_dir(cwd)
        .threads(walk_threads())
        .filter_entry(move |entry| {
            !is_vcs_folder(entry) && !hidden.iter().any(|h| entry.path().starts_with(h))
        });
    builder
}

/// A search tool's credential locations, as configured and with links resolved: resolved
/// once per tool (that is dozens of paths), not at every call.
#[derive(Debug, Default)]
struct Hidden(std::sync::OnceLock<Vec<PathBuf>>);

impl Hidden {
    /// The credential locations that lie below `root`, as the walk will name them: every
    /// entry it lists is `root` as given joined with names (links are not followed below
    /// it), and `root` may lead elsewhere through a link (`hl -> ~`, `/proc/self/root/…`),
    /// so a location below the root's real path is named through `root`. Only these are
    /// checked at each entry: a walk of the project checks none. A location `root` itself
    /// lies in is the gate's to have judged (the session's artifacts).
    fn below(&self, env: &ToolEnv, root: &Path) -> Arc<[PathBuf]> {
        let locations = self.0.get_or_init(|| {
            let mut all = Vec::new();
            for location in env.credentials() {
                for path in [crate::permission::real_path(&location), location] {
                    if !all.contains(&path) {
                        all.push(path);
                    }
                }
            }
            all
        });
        let real_root = crate::permission::real_path(root);
        let mut out: Vec<PathBuf> = Vec::new();
        for path in locations {
            if root.starts_with(path) || real_root.starts_with(path) {
                continue;
            }
            if let Ok(rest) = path.strip_prefix(&real_root) {
                out.push(root.join(rest));
            }
            if path.starts_with(root) && !out.contains(path) {
                out.push(path.clone());
            }
        }
        out.into()
    }
}

/// Whether `entry` is a version-control folder below the walk root.
fn is_vcs_folder(entry: &DirEntry) -> bool {
    entry.depth() > 0
        && entry.file_type().is_some_and(|kind| kind.is_dir())
        && entry
            .file_name()
            .to_str()
            .is_some_and(|name| VCS_FOLDERS.contains(&name))
}

/// Tells a blocking walk when to stop: on abort, when the tool's future was dropped, or
/// at the deadline (which it records, so the result can say it is partial).
#[derive(Debug, Clone)]
struct Stop {
    cancel: CancellationToken,
    dropped: Arc<AtomicBool>,
    timed_out: Arc<AtomicBool>,
    deadline: Instant,
}

impl Stop {
    /// A stop signal for a walk that may run for `timeout`, and the guard that fires it
    /// when the caller goes away.
    fn new(cancel: &CancellationToken, timeout: Duration) -> (Self, StopOnDrop) {
        let dropped = Arc::new(AtomicBool::new(false));
        let now = Instant::now();
        let stop = Self {
            cancel: cancel.clone(),
            dropped: Arc::clone(&dropped),
            timed_out: Arc::new(AtomicBool::new(false)),
            deadline: now.checked_add(timeout).unwrap_or(now),
        };
        (stop, StopOnDrop(dropped))
    }

    /// Whether the walk should end now.
    fn should_stop(&self) -> bool {
        if self.cancel.is_cancelled() || self.dropped.load(Ordering::Relaxed) {
            return true;
        }
        if Instant::now() >= self.deadline {
            self.timed_out.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Whether the walk ended at the deadline.
    fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }
}

/// Stops an abandoned walk: dropped with the tool's future.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs a blocking walk on the blocking pool; an abort becomes [`SearchError::Cancelled`].
async fn run_walk<T, F>(
    tool: &'static str,
    cancel: &CancellationToken,
    timeout: Duration,
    work: F,
) -> Result<(T, bool), SearchError>
where
    T: Send + 'static,
    F: FnOnce(&Stop) -> T + Send + 'static,
{
    let (stop, _guard) = Stop::new(cancel, timeout);
    let handle = tokio::task::spawn_blocking(move || {
        let out = work(&stop);
        (out, stop.timed_out())
    });
    let result = handle
        .await
        .map_err(|err| SearchError::Internal(err.to_string()))?;
    if cancel.is_cancelled() {
        return Err(SearchError::Cancelled(tool));
    }
    Ok(result)
}

/// Paths a walk could not read: counted, and the first few named.
#[derive(Debug, Default)]
struct Unreadable {
    count: u64,
    named: Vec<String>,
}

impl Unreadable {
    /// Records one failure.
    fn note(&mut self, message: impl FnOnce() -> String) {
        self.count += 1;
        if self.named.len() < MAX_NAMED_UNREADABLE {
            self.named.push(message());
        }
    }

    /// Folds another thread's failures in.
    fn merge(&mut self, other: Self) {
        self.count += other.count;
        for message in other.named {
            if self.named.len() < MAX_NAMED_UNREADABLE {
                self.named.push(message);
            }
        }
    }

    /// A note for the model, when anything failed.
    fn note_line(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let more = self.count.saturating_sub(self.named.len() as u64);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "{} could not be read and were skipped: {}{tail}.",
            counted(self.count, "path", "paths"),
            self.named.join("; ")
        ))
    }
}

/// The note added when some names were not UTF-8.
const LOSSY_NAMES_NOTE: &str =
    "Some names are not valid UTF-8 and are shown with U+FFFD replacement characters.";

/// The note added when a walk hit its deadline.
fn timeout_note(timeout: Duration) -> String {
    format!(
        "The search stopped after {} s, so these results are partial; narrow the path or pattern.",
        timeout.as_secs()
    )
}

/// `n` followed by the singular or plural noun.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod hidden_tests {
    use super::*;

    #[test]
    fn only_locations_below_the_root_are_checked_named_through_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let home = base.join("home");
        let ws = base.join("ws");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::os::unix::fs::symlink(&home, ws.join("hl")).unwrap();
        let mut env = ToolEnv::new(&ws);
        env.home = Some(home.clone());
        env.extra_credentials = vec![ws.join("secrets")];
        let hidden = Hidden::default();
        // A walk of the project checks only the location configured inside it.
        assert_eq!(&*hidden.below(&env, &ws), &[ws.join("secrets")]);
        // Through a link to the home folder, the home's locations are named as the walk
        // names them.
        let through = hidden.below(&env, &ws.join("hl"));
        assert!(through.contains(&ws.join("hl/.ssh")), "{through:?}");
        assert!(!through.contains(&ws.join("secrets")), "{through:?}");
        // A search inside a location is the gate's to have judged.
        assert!(hidden.below(&env, &home.join(".ssh")).is_empty());
    }
}
