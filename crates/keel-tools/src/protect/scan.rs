//! The control files of the workspace roots as they are on disk, for the sandbox: what it
//! mounts read-only, pins against renames, and checks after a command for files that must
//! not have appeared; and the git files that say where git looks for more.

use std::path::{Path, PathBuf};

use super::{Protection, home, is_claude_settings};

/// The control files of the workspace roots as they are now: what the sandbox mounts
/// read-only, and what it checks after a command for files that must not have appeared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlSet {
    /// Existing files and folders to make read-only.
    pub read_only: Vec<PathBuf>,
    /// Existing folders bound onto themselves so they cannot be renamed or removed
    /// (`.git`, `.claude`), while what they hold stays writable.
    pub pinned: Vec<PathBuf>,
    /// Control paths that do not exist yet; a command must not create them.
    pub absent: Vec<PathBuf>,
    /// The `.claude` folders of the roots, where any new `settings*.json` counts.
    pub claude: Vec<PathBuf>,
    /// The workspace roots scanned: nothing outside them is ever moved aside.
    pub roots: Vec<PathBuf>,
    /// The repositories the roots' repositories record inside them (their `.git`); a
    /// command must not record a new one unseen.
    pub nested: Vec<PathBuf>,
}

impl ControlSet {
    /// Looks at each root's control files, and at the user's start-up files and the files
    /// trusted commands run where they lie inside a root (elsewhere the sandbox leaves
    /// nothing writable anyway).
    pub fn scan(protection: &Protection) -> Self {
        let roots = &protection.roots;
        let mut set = Self {
            roots: roots.clone(),
            ..Self::default()
        };
        for root in roots {
            set.scan_root(root);
        }
        let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r) && p != r.as_path());
        let mut extra: Vec<PathBuf> = protection
            .trusted
            .iter()
            .map(|t| t.path.clone())
            .filter(|p| inside(p))
            .collect();
        for home in &protection.homes {
            if roots.iter().any(|r| home.starts_with(r)) {
                extra.extend(home::entries(home));
            }
        }
        for path in extra {
            set.add_extra(&path);
        }
        set
    }

    /// Protects one more path: read-only when it exists (unless a folder already mounted
    /// read-only holds it), watched when it does not; the folders on the way to it inside
    /// its root are pinned, so that renaming one cannot put another file in its place.
    fn add_extra(&mut self, path: &Path) {
        if self.read_only.iter().any(|r| path.starts_with(r))
            || self.absent.iter().any(|a| a == path)
        {
            return;
        }
        self.watch(path.to_path_buf());
        let Some(root) = self.roots.iter().find(|r| path.starts_with(r)).cloned() else {
            return;
        };
        let mut dir = path.parent();
        while let Some(folder) = dir {
            if folder == root || !folder.starts_with(&root) {
                break;
            }
            if folder.is_dir() && !self.pinned.iter().any(|p| p == folder) {
                self.pinned.push(folder.to_path_buf());
            }
            dir = folder.parent();
        }
    }

    /// A control path: mounted read-only when it exists, watched for when it does not.
    fn watch(&mut self, path: PathBuf) {
        if std::fs::symlink_metadata(&path).is_ok() {
            self.read_only.push(path);
        } else {
            self.absent.push(path);
        }
    }

    fn scan_root(&mut self, root: &Path) {
        for name in [".keel", ".mcp.json"] {
            self.watch(root.join(name));
        }
        let claude = root.join(".claude");
        self.claude.push(claude.clone());
        if claude.is_dir() {
            self.pinned.push(claude.clone());
            if let Ok(entries) = std::fs::read_dir(&claude) {
                for entry in entries.flatten() {
                    // Everything but the prompt files (skills, commands): settings, hook
                    // scripts, agents.
                    let name = entry.file_name();
                    if name != "skills" && name != "commands" {
                        self.read_only.push(entry.path());
                    }
                }
            }
            let hooks = claude.join("hooks");
            if !self.read_only.contains(&hooks) {
                self.absent.push(hooks);
            }
            for name in ["settings.json", "settings.local.json"] {
                let path = claude.join(name);
                if !self.read_only.contains(&path) {
                    self.absent.push(path);
                }
            }
        } else {
            self.absent.push(claude.join("settings.json"));
            self.absent.push(claude.join("settings.local.json"));
        }
        let dot_git = root.join(".git");
        if !self.scan_repository(&dot_git, root) {
            self.absent.push(dot_git);
        }
        // Repositories the workspace's repository records inside it run their own
        // configuration too, in the user's git commands in the outer one.
        for nested in recorded_repositories(root) {
            self.scan_repository(&nested, root);
            self.nested.push(nested);
        }
    }

    /// Protects the repository `dot_git` stands for; false when there is none.
    fn scan_repository(&mut self, dot_git: &Path, root: &Path) -> bool {
        let Some(dir) = git_dir(dot_git) else {
            return false;
        };
        if dot_git.is_dir() {
            self.pinned.push(dot_git.to_path_buf());
        } else {
            // A `gitdir:` pointer file: the file itself decides where git looks.
            self.read_only.push(dot_git.to_path_buf());
        }
        self.scan_git_dir(&dir, 0);
        // Where the configuration sends git for hooks or more configuration, when that is
        // a file of the workspace (husky's hooks, a shared settings file).
        let worktree = dot_git.parent().unwrap_or(root);
        for config in [dir.join("config"), dir.join("config.worktree")] {
            let Ok(text) = std::fs::read_to_string(&config) else {
                continue;
            };
            for (key, value) in config_values(&text) {
                let base = if key == "core.hookspath" {
                    worktree
                } else {
                    dir.as_path()
                };
                let Some(path) = local_path(&value, base) else {
                    continue;
                };
                if self.roots.iter().any(|r| path.starts_with(r)) && !path.starts_with(&dir) {
                    self.watch(path);
                }
            }
        }
        true
    }

    fn scan_git_dir(&mut self, dir: &Path, depth: usize) {
        // What git reads besides objects and refs: its configuration (also per worktree),
        // its hooks, and where the shared part of a linked worktree is.
        for name in ["config", "hooks", "config.worktree", "commondir"] {
            self.watch(dir.join(name));
        }
        // A linked worktree's folder names the repository it shares configuration and
        // hooks with.
        if depth < 3
            && let Ok(text) = std::fs::read_to_string(dir.join("commondir"))
        {
            let common = dir.join(text.trim());
            if common.is_dir() && !self.read_only.contains(&common.join("config")) {
                self.scan_git_dir(&common, depth + 1);
            }
        }
        // Submodules keep their own config and hooks; nesting is bounded.
        if depth < 3
            && let Ok(entries) = std::fs::read_dir(dir.join("modules"))
        {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    self.scan_git_dir(&path, depth + 1);
                }
            }
        }
    }

    /// The control paths that were absent at scan time and exist now.
    pub fn appeared(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .absent
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .cloned()
            .collect();
        for root in &self.roots {
            for nested in recorded_repositories(root) {
                if !self.nested.contains(&nested) && !out.contains(&nested) {
                    out.push(nested);
                }
            }
        }
        for claude in &self.claude {
            let Ok(entries) = std::fs::read_dir(claude) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if is_claude_settings(&entry.file_name())
                    && !self.read_only.contains(&path)
                    && !out.contains(&path)
                {
                    out.push(path);
                }
            }
        }
        out
    }
}

#[cfg(test)]
impl ControlSet {
    /// The scan of `root`'s control patterns alone, for tests that know no session.
    pub(crate) fn of_root(root: &Path) -> Self {
        Self::scan(&Protection {
            roots: vec![root.to_path_buf()],
            ..Protection::default()
        })
    }
}

/// The `.git` entries of the repositories the root's repository records inside it (see
/// [`crate::gitlinks`]).
pub fn recorded_repositories(root: &Path) -> Vec<PathBuf> {
    let Some(dir) = git_dir(&root.join(".git")) else {
        return Vec::new();
    };
    crate::gitlinks::recorded(&dir, root)
        .into_iter()
        .map(|path| root.join(path).join(".git"))
        .filter(|dot_git| std::fs::symlink_metadata(dot_git).is_ok())
        .collect()
}

/// The values of the configuration keys that send git elsewhere for hooks or more
/// configuration: `(key, value)`, keys lower case.
fn config_values(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(header) = line.strip_prefix('[') {
            let inner = header.split(']').next().unwrap_or("");
            section = inner
                .split(|c: char| c == '"' || c.is_whitespace() || c == '.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        let key = format!("{section}.{name}");
        if matches!(
            key.as_str(),
            "core.hookspath" | "include.path" | "includeif.path"
        ) {
            out.push((key, value.trim().trim_matches('"').to_owned()));
        }
    }
    out
}

/// `value` as a path of this machine, relative ones against `base`; `~` is the user's and
/// never the workspace's.
fn local_path(value: &str, base: &Path) -> Option<PathBuf> {
    if value.is_empty() || value.starts_with('~') {
        return None;
    }
    let path = Path::new(value);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    Some(crate::env::normalize(&joined))
}

/// The git folder `dot_git` stands for: itself, or where its `gitdir:` line points.
pub fn git_dir(dot_git: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(dot_git).ok()?;
    if meta.is_dir() {
        return Some(dot_git.to_path_buf());
    }
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let target = Path::new(target);
    let dir = if target.is_absolute() {
        target.to_path_buf()
    } else {
        dot_git.parent()?.join(target)
    };
    dir.is_dir().then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_scan_finds_existing_control_files_and_lists_absent_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::write(root.join(".claude/settings.json"), "{}").unwrap();
        std::fs::create_dir_all(root.join(".claude/hooks")).unwrap();
        std::fs::create_dir_all(root.join(".claude/skills/x")).unwrap();
        let set = ControlSet::of_root(&root);
        let mut read_only = set.read_only.clone();
        read_only.sort();
        assert_eq!(
            read_only,
            vec![
                root.join(".claude/hooks"),
                root.join(".claude/settings.json"),
                root.join(".git/config")
            ],
            "everything in .claude but skills and commands"
        );
        assert_eq!(set.pinned, vec![root.join(".claude"), root.join(".git")]);
        assert_eq!(
            set.absent,
            vec![
                root.join(".keel"),
                root.join(".mcp.json"),
                root.join(".claude/settings.local.json"),
                root.join(".git/hooks"),
                root.join(".git/config.worktree"),
                root.join(".git/commondir"),
            ]
        );
        assert!(!root.join(".git/hooks").exists(), "a scan changes nothing");
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        assert_eq!(set.appeared(), vec![root.join(".mcp.json")]);
    }

    #[test]
    fn a_gitdir_pointer_file_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.git");
        std::fs::create_dir_all(&real).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join(".git"), "gitdir: ../real.git\n").unwrap();
        assert_eq!(git_dir(&ws.join(".git")), Some(ws.join("../real.git")));
    }
}
