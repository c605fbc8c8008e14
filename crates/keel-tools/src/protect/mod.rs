//! What the model may never touch short of `full` permission: keel's own control files, the
//! files that make other programs run code (written), and credential locations (read).
//!
//! One list serves two enforcers. The permission gate asks a session's [`Protection`] about
//! every path a call names, and [`credential`] about reads; the sandbox mounts the existing
//! entries of [`ControlSet`] read-only and masks every [`credential_locations`] entry, so a
//! command the gate could not see through still cannot reach them. Paths that do not exist
//! yet cannot be mounted over; the sandbox moves aside any that a command creates
//! ([`ControlSet::appeared`]).
//!
//! Control files are of four kinds: keel's home; the patterns of every workspace root
//! (`.keel/**`, git's configuration and hooks, `.mcp.json`, `.claude/**` but prompt files);
//! the user's own start-up files ([`home`]: shell rc files, `~/.gitconfig`, `~/.local/bin`,
//! systemd and autostart units), which count wherever the workspace is; and what a command
//! the user trusted runs ([`trusted`]: a hook's script, a project MCP server's program), for
//! as long as that trust stands.

mod home;
mod scan;
pub mod trusted;

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

pub use home::HOME_CONTROL;
pub use scan::{ControlSet, git_dir, recorded_repositories};
pub use trusted::{CommandLine, Reach, TrustedPath, reach};

/// Credential locations under the home folder (DESIGN §17, issue 9): a sandboxed command
/// cannot read them, keel's own tools never read them for the model, and the gate treats any
/// access by a command as a danger. Configuration can add to this list, never remove from it.
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

/// What counts as a control file for one session, with every path resolved the way the
/// kernel resolves it (links followed), so a link cannot make a control file look like
/// another path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// The workspace roots.
    pub roots: Vec<PathBuf>,
    /// keel's own folder.
    pub keel_home: Option<PathBuf>,
    /// The user's home folder, as given and resolved (both, when they differ).
    pub homes: Vec<PathBuf>,
    /// What trusted commands run ([`trusted`]), each as given and resolved.
    pub trusted: Vec<TrustedPath>,
}

impl Protection {
    /// The protection of `env`'s session: its roots, keel's home, the user's home and the
    /// trusted commands' files, all resolved now.
    pub fn of(env: &crate::ToolEnv) -> Self {
        let real = |p: &Path| crate::permission::real_path(p);
        let mut homes = Vec::new();
        if let Some(home) = env.home.as_deref().map(crate::env::normalize) {
            let resolved = real(&home);
            homes.push(home);
            if !homes.contains(&resolved) {
                homes.push(resolved);
            }
        }
        let mut trusted: Vec<TrustedPath> = Vec::new();
        for item in &env.trusted_code {
            for path in [item.path.clone(), real(&item.path)] {
                if !trusted.iter().any(|t| t.path == path) {
                    trusted.push(TrustedPath {
                        path,
                        why: item.why.clone(),
                    });
                }
            }
        }
        Self {
            roots: env.roots.iter().map(|r| real(r)).collect(),
            keel_home: env.keel_home.as_deref().map(real),
            homes,
            trusted,
        }
    }

    /// Why `path` (absolute, links resolved) is a protected control file, if it is one: it
    /// lies in keel's home, is or lies in a file a trusted command runs, is one of the
    /// user's start-up files, or lies in a workspace root and matches a control pattern at
    /// any depth.
    pub fn control_file(&self, path: &Path) -> Option<String> {
        if let Some(keel_home) = &self.keel_home
            && path.starts_with(keel_home)
        {
            return Some(format!("keel's home folder {}", keel_home.display()));
        }
        if let Some(item) = self.trusted.iter().find(|t| path.starts_with(&t.path)) {
            return Some(format!("{}, which {}", item.path.display(), item.why));
        }
        for home in &self.homes {
            if let Ok(rest) = path.strip_prefix(home)
                && let Some((entry, kind)) = home::control(rest)
            {
                return Some(format!("~/{entry} ({kind})"));
            }
        }
        let root = self.roots.iter().find(|root| path.starts_with(root))?;
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
    /// (`rm -rf .git`, `mv .keel x`, `rm -rf ~`, `rm -rf tools` when a trusted server runs
    /// `tools/server.py`), if it would: it is or lies in a control file, is a control
    /// folder (`.git`, `.claude`, a git `hooks` folder), holds keel's home folder, a file a
    /// trusted command runs or one of the user's start-up files, or is a workspace root
    /// holding control files (`rm -rf .`). A nested repository's folder (`vendor/x`, a clone
    /// the model made) may go as a whole; its `.git` is still guarded by name. Other folders
    /// above the workspace are the danger list's to judge.
    pub fn removes_control(&self, path: &Path) -> Option<String> {
        if let Some(found) = self.control_file(path) {
            return Some(found);
        }
        if let Some(keel_home) = &self.keel_home
            && keel_home.starts_with(path)
        {
            return Some(format!(
                "{}, which holds keel's home folder",
                path.display()
            ));
        }
        if let Some(item) = self.trusted.iter().find(|t| t.path.starts_with(path)) {
            return Some(format!(
                "{}, which holds {} ({})",
                path.display(),
                item.path.display(),
                item.why
            ));
        }
        for home in &self.homes {
            if let Some(entry) = home::held_by(home, path) {
                return Some(format!(
                    "{}, which holds ~/{entry} (a file that runs code when you next log in or use a tool)",
                    path.display()
                ));
            }
        }
        let inside = self.roots.iter().any(|root| path.starts_with(root));
        let named = |n: &str| path.file_name().is_some_and(|f| f == n);
        let control_folder = named(".git")
            || named(".claude")
            || (named("hooks") && path.parent().is_some_and(|p| p.ends_with(".git")));
        if inside && control_folder {
            return Some(format!("{} (a control folder)", path.display()));
        }
        self.roots
            .iter()
            .find(|root| root.as_path() == path && holds_control_files(root))
            .map(|root| {
                format!(
                    "{} (the workspace, which holds control files)",
                    root.display()
                )
            })
    }
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

pub(super) fn is_claude_settings(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with("settings") && n.ends_with(".json"))
}

/// Whether the folder `dir` holds a control file directly (`.keel`, `.git`, `.mcp.json`,
/// `.claude`).
fn holds_control_files(dir: &Path) -> bool {
    [".keel", ".git", ".mcp.json", ".claude"]
        .iter()
        .any(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn control_patterns_match_at_any_depth_inside_a_root() {
        let protection = Protection {
            roots: vec![PathBuf::from("/ws")],
            keel_home: Some(PathBuf::from("/home/u/.keel")),
            ..Protection::default()
        };
        let check = |p: &str| protection.control_file(Path::new(p)).is_some();
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
        assert!(protection.removes_control(Path::new("/home/u")).is_some());
        assert!(
            protection
                .removes_control(Path::new("/ws/.git/hooks"))
                .is_some()
        );
        assert!(protection.removes_control(Path::new("/ws/src")).is_none());
        assert!(
            protection
                .removes_control(Path::new("/ws/vendor/x"))
                .is_none()
        );
        assert!(protection.removes_control(Path::new("/ws/.git")).is_some());
        assert!(
            protection
                .removes_control(Path::new("/ws/vendor/x/.git"))
                .is_some()
        );
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
}
