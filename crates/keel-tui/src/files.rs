//! `@` completion: the working folder's files and folders (gitignore respected), listed
//! once in a background thread on first use, matched fuzzily.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nucleo_matcher::pattern::{AtomKind, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32String};

/// Paths listed at most; a bigger tree is cut off (and says so).
pub const MAX_PATHS: usize = 400_000;

#[derive(Default)]
struct State {
    paths: Vec<(Utf32String, bool)>,
    done: bool,
    truncated: bool,
}

/// The folder's paths, filled in the background.
#[derive(Clone)]
pub struct FileIndex {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FileIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileIndex")
    }
}

impl FileIndex {
    /// Starts listing `root`; `ready` is called once when the list is complete.
    pub fn start(root: PathBuf, ready: impl FnOnce() + Send + 'static) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let filling = state.clone();
        let spawned = std::thread::Builder::new()
            .name("keel-files".into())
            .spawn(move || {
                let (paths, truncated) = list(&root);
                {
                    let mut s = filling.lock().unwrap_or_else(PoisonError::into_inner);
                    s.paths = paths;
                    s.truncated = truncated;
                    s.done = true;
                }
                ready();
            });
        if spawned.is_err() {
            state.lock().unwrap_or_else(PoisonError::into_inner).done = true;
        }
        Self { state }
    }

    /// An index over given paths (tests).
    pub fn of(paths: &[(&str, bool)]) -> Self {
        let state = State {
            paths: ordered(
                paths
                    .iter()
                    .map(|(p, dir)| ((*p).to_owned(), *dir))
                    .collect(),
            ),
            done: true,
            truncated: false,
        };
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Whether listing finished.
    pub fn ready(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .done
    }

    /// The best `limit` matches for `query`: (path, is a folder). Folders end in `/`.
    /// Paths are kept shallowest first, so an empty query and equal scores favour what a
    /// user most likely means.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(String, bool)> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let pick = |i: usize| (state.paths[i].0.to_string(), state.paths[i].1);
        if query.is_empty() {
            return (0..limit.min(state.paths.len())).map(pick).collect();
        }
        let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
        let pattern = Pattern::new(
            query,
            CaseMatching::Smart,
            Normalization::Smart,
            AtomKind::Fuzzy,
        );
        let mut scored: Vec<(u32, usize)> = state
            .paths
            .iter()
            .enumerate()
            .filter_map(|(i, (path, _))| {
                pattern.score(path.slice(..), &mut matcher).map(|s| (s, i))
            })
            .collect();
        // Best score first, then the earlier (shallower) path.
        let order = |a: &(u32, usize), b: &(u32, usize)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        let take = limit.min(scored.len());
        if take == 0 {
            return Vec::new();
        }
        scored.select_nth_unstable_by(take - 1, order);
        scored.truncate(take);
        scored.sort_by(order);
        scored.into_iter().map(|(_, i)| pick(i)).collect()
    }

    /// Whether the tree had more paths than are listed.
    pub fn truncated(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .truncated
    }
}

fn list(root: &Path) -> (Vec<(Utf32String, bool)>, bool) {
    let mut out: Vec<(String, bool)> = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .require_git(false)
        .build();
    for entry in walker.flatten() {
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let mut text = relative.to_string_lossy().into_owned();
        if is_dir {
            text.push('/');
        }
        out.push((text, is_dir));
        if out.len() >= MAX_PATHS {
            return (ordered(out), true);
        }
    }
    (ordered(out), false)
}

/// Shallowest and shortest first, once, so searches need not sort the whole list.
fn ordered(mut paths: Vec<(String, bool)>) -> Vec<(Utf32String, bool)> {
    paths.sort_by_cached_key(|(p, _)| {
        (
            p.matches('/').count() - usize::from(p.ends_with('/')),
            p.len(),
        )
    });
    paths
        .into_iter()
        .map(|(p, dir)| (Utf32String::from(p), dir))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn lists_the_tree_without_ignored_files_and_matches_fuzzily() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::write(dir.path().join("src/bin/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("target/junk.rs"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let index = FileIndex::start(dir.path().to_path_buf(), move || {
            let _ = tx.send(());
        });
        rx.recv().unwrap();
        assert!(index.ready());
        let hits = index.search("smain", 5);
        assert_eq!(hits[0], ("src/bin/main.rs".to_owned(), false));
        assert!(index.search("junk", 5).is_empty(), "gitignored");
        assert!(index.search("", 10).iter().any(|(p, d)| p == "src/" && *d));
    }
}
