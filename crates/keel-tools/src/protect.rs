//! What the model may never touch short of `full` permission: keel's own control files and
//! the files that make other programs run code (written), and credential locations (read).
//!
//! One list serves two enforcers. The permission gate asks [`control_file`] and
//! [`credential`] about every path a call names; the sandbox mounts the existing entries of
//! [`ControlSet`] read-only and masks every [`credential_locations`] entry, so a command the
//! gate could not see through still cannot reach them. Paths that do not exist yet cannot be
//! mounted over; the sandbox removes any that a command creates ([`ControlSet::appeared`]).

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// Credential locations under the home folder (DESIGN §17, issue 9): a sandboxed command
/// cannot read them, and the gate treats any access as a danger. Configuration can add to
/// this list, never remove from it.
pub const DEFAULT_CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".gnupg",
    ".netrc",
    ".docker/config.json",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gh",
    ".config/hub",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    // Other agents' and tools' tokens.
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".gemini/oauth_creds.json",
    ".config/github-copilot",
    ".config/op",
    ".config/doctl",
    ".config/hcloud",
    ".config/rclone",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".gem/credentials",
    ".m2/settings-security.xml",
    ".databrickscfg",
    ".terraformrc",
    ".boto",
    ".oci",
    ".s3cfg",
    // Database passwords.
    ".pgpass",
    ".my.cnf",
    // Browser profiles: cookies are sessions.
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
];

/// Names of the control files inside a workspace, as shown in messages.
pub const CONTROL_PATTERNS: &str =
    ".keel/**, .git/config, .git/hooks/**, .mcp.json, .claude/** but skills/ and commands/";

/// Every credential location: the defaults under `home`, `keel_home` (sessions, keys) and
/// `extra` (from configuration), absolute and without duplicates.
pub fn credential_locations(
    home: Option<&Path>,
    keel_home: Option<&Path>,
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |path: PathBuf| {
        if path.is_absolute() && !out.contains(&path) {
            out.push(path);
        }
    };
    if let Some(home) = home {
        for entry in DEFAULT_CREDENTIALS {
            push(home.join(entry));
        }
    }
    if let Some(keel_home) = keel_home {
        push(keel_home.to_path_buf());
    }
    for path in extra {
        push(path.clone());
    }
    out
}

/// The credential location `path` (absolute, symlinks resolved) is or lies in, if any.
pub fn credential<'a>(path: &Path, locations: &'a [PathBuf]) -> Option<&'a Path> {
    locations
        .iter()
        .find(|location| path.starts_with(location))
        .map(PathBuf::as_path)
}

/// Why `path` (absolute, symlinks resolved) is a protected control file, if it is one: it
/// lies in a workspace root and matches a control pattern at any depth, or lies in
/// `keel_home`.
pub fn control_file(path: &Path, roots: &[PathBuf], keel_home: Option<&Path>) -> Option<String> {
    if let Some(keel_home) = keel_home
        && path.starts_with(keel_home)
    {
        return Some(format!("keel's home folder {}", keel_home.display()));
    }
    let root = roots.iter().find(|root| path.starts_with(root))?;
    let rest = path.strip_prefix(root).ok()?;
    let names: Vec<&OsStr> = rest
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    pattern_in(&names).map(str::to_owned)
}

/// Why deleting or moving away the folder `path` would take protected files with it
/// (`rm -rf .git`, `mv .keel x`, `rm -rf ~`), if it would: it is or lies in a control file,
/// is a control folder (`.git`, `.claude`, a git `hooks` folder), holds keel's home folder,
/// or is a workspace root holding control files (`rm -rf .`). A nested repository's folder
/// (`vendor/x`, a clone the model made) may go as a whole; its `.git` is still guarded by
/// name. Folders above the workspace are the danger list's to judge.
pub fn removes_control(path: &Path, roots: &[PathBuf], keel_home: Option<&Path>) -> Option<String> {
    if let Some(found) = control_file(path, roots, keel_home) {
        return Some(found);
    }
    if let Some(keel_home) = keel_home
        && keel_home.starts_with(path)
    {
        return Some(format!(
            "{}, which holds keel's home folder",
            path.display()
        ));
    }
    let inside = roots.iter().any(|root| path.starts_with(root));
    let named = |n: &str| path.file_name().is_some_and(|f| f == n);
    let control_folder = named(".git")
        || named(".claude")
        || (named("hooks") && path.parent().is_some_and(|p| p.ends_with(".git")));
    if inside && control_folder {
        return Some(format!("{} (a control folder)", path.display()));
    }
    roots
        .iter()
        .find(|root| root.as_path() == path && holds_control_files(root))
        .map(|root| {
            format!(
                "{} (the workspace, which holds control files)",
                root.display()
            )
        })
}

/// The control pattern that a workspace-relative path matches.
fn pattern_in(names: &[&OsStr]) -> Option<&'static str> {
    for (i, name) in names.iter().enumerate() {
        let rest = names.get(i + 1..).unwrap_or(&[]);
        match name.to_str() {
            Some(".keel") => return Some(".keel/**"),
            Some(".mcp.json") if rest.is_empty() => return Some(".mcp.json"),
            Some(".claude") if matches!(rest, [file] if is_claude_settings(file)) => {
                return Some(".claude/settings*.json");
            }
            // Hook scripts live here (`.claude/hooks/…`); a trusted hook runs whatever its
            // script holds, unsandboxed, so the model may not change it. Skills and custom
            // commands are prompt text and stay the model's to write.
            Some(".claude")
                if rest
                    .first()
                    .is_some_and(|first| *first != "skills" && *first != "commands") =>
            {
                return Some(".claude/** (but skills/ and commands/)");
            }
            Some(".git") if git_control(rest) => return Some(".git/config, .git/hooks/**"),
            _ => {}
        }
    }
    None
}

/// Whether a path inside a git folder is its configuration or its hooks, including those
/// of submodules (`.git/modules/NAME/config`).
fn git_control(rest: &[&OsStr]) -> bool {
    match rest {
        [] => false,
        [first, ..] if *first == "hooks" => true,
        [only] => *only == "config",
        [first, tail @ ..] if *first == "modules" => {
            tail.len() >= 2
                && (tail.last().is_some_and(|n| *n == "config")
                    || tail.iter().any(|n| *n == "hooks"))
        }
        _ => false,
    }
}

fn is_claude_settings(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with("settings") && n.ends_with(".json"))
}

/// Whether the folder `dir` holds a control file directly (`.keel`, `.git`, `.mcp.json`,
/// `.claude`), or is itself a git or `.claude` folder.
fn holds_control_files(dir: &Path) -> bool {
    [".keel", ".git", ".mcp.json", ".claude"]
        .iter()
        .any(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
}

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
    /// Looks at each root's control files.
    pub fn scan(roots: &[PathBuf]) -> Self {
        let mut set = Self {
            roots: roots.to_vec(),
            ..Self::default()
        };
        for root in roots {
            set.scan_root(root);
        }
        set
    }

    fn scan_root(&mut self, root: &Path) {
        let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        for name in [".keel", ".mcp.json"] {
            let path = root.join(name);
            if exists(&path) {
                self.read_only.push(path);
            } else {
                self.absent.push(path);
            }
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
                    if std::fs::symlink_metadata(&path).is_ok() {
                        self.read_only.push(path);
                    } else {
                        self.absent.push(path);
                    }
                }
            }
        }
        true
    }

    fn scan_git_dir(&mut self, dir: &Path, depth: usize) {
        let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        // What git reads besides objects and refs: its configuration (also per worktree),
        // its hooks, and where the shared part of a linked worktree is.
        for name in ["config", "hooks", "config.worktree", "commondir"] {
            let path = dir.join(name);
            if exists(&path) {
                self.read_only.push(path);
            } else {
                self.absent.push(path);
            }
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
    fn control_patterns_match_at_any_depth_inside_a_root() {
        let roots = [PathBuf::from("/ws")];
        let home = Some(Path::new("/home/u/.keel"));
        let check = |p: &str| control_file(Path::new(p), &roots, home).is_some();
        for protected in [
            "/ws/.keel",
            "/ws/.keel/config.yaml",
            "/ws/sub/.keel/permissions.yaml",
            "/ws/.git/config",
            "/ws/.git/hooks",
            "/ws/.git/hooks/pre-commit",
            "/ws/vendor/x/.git/hooks/post-checkout",
            "/ws/.git/modules/sub/config",
            "/ws/.git/modules/sub/hooks/pre-push",
            "/ws/.mcp.json",
            "/ws/.claude/settings.json",
            "/ws/.claude/settings.local.json",
            "/ws/.claude/hooks/check.sh",
            "/ws/.claude/agents/x.md",
            "/home/u/.keel/config.yaml",
        ] {
            assert!(check(protected), "{protected}");
        }
        for free in [
            "/ws/src/main.rs",
            "/ws/.git/index",
            "/ws/.git/objects/ab/cdef",
            "/ws/.git/configx",
            "/ws/.claude/commands/x.md",
            "/ws/.claude/skills/x/SKILL.md",
            "/ws/docs/.mcp.json.bak",
            "/elsewhere/.keel/config.yaml",
            "/home/u",
        ] {
            assert!(!check(free), "{free}");
        }
        assert!(removes_control(Path::new("/home/u"), &roots, home).is_some());
        assert!(removes_control(Path::new("/ws/.git/hooks"), &roots, home).is_some());
        assert!(removes_control(Path::new("/ws/src"), &roots, home).is_none());
        assert!(removes_control(Path::new("/ws/vendor/x"), &roots, home).is_none());
        assert!(removes_control(Path::new("/ws/.git"), &roots, home).is_some());
        assert!(removes_control(Path::new("/ws/vendor/x/.git"), &roots, home).is_some());
    }

    #[test]
    fn credential_locations_extend_and_never_duplicate() {
        let extra = vec![PathBuf::from("/secrets"), PathBuf::from("/home/u/.ssh")];
        let all = credential_locations(
            Some(Path::new("/home/u")),
            Some(Path::new("/home/u/.keel")),
            &extra,
        );
        assert_eq!(all.len(), DEFAULT_CREDENTIALS.len() + 2);
        assert_eq!(
            credential(Path::new("/home/u/.ssh/id_rsa"), &all),
            Some(Path::new("/home/u/.ssh"))
        );
        assert_eq!(
            credential(Path::new("/secrets/x"), &all),
            Some(Path::new("/secrets"))
        );
        assert_eq!(credential(Path::new("/home/u/.sshx"), &all), None);
    }

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
        let set = ControlSet::scan(std::slice::from_ref(&root));
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
