//! The check after a command: control files it created where none existed.
//!
//! The sandbox mounts existing control files read-only, but a mount needs something to
//! mount over, so a command can still create `.mcp.json`, `.keel/`, a `.claude` settings
//! file or a whole new `.git` with hooks where there was none. After each command keel
//! moves any of these aside (renamed with a `.keel-quarantine` suffix, so nothing is lost
//! and nothing runs) and tells the model. A new `.git` is kept when it holds nothing that
//! would run a program: only `*.sample` hooks and no program-running configuration.

use std::path::{Path, PathBuf};

use crate::protect::ControlSet;

/// Moves aside the control files that appeared since `set` was scanned; the note for the
/// model, if anything was moved.
pub(crate) fn quarantine_new(set: &ControlSet) -> Option<String> {
    let mut moved = Vec::new();
    let mut targets: Vec<PathBuf> = Vec::new();
    for path in set.appeared() {
        let is_git = path.file_name().is_some_and(|n| n == ".git");
        if is_git && harmless_repository(&path) {
            continue;
        }
        // What `git init` puts in a repository that had no hooks folder.
        let is_hooks = path.file_name().is_some_and(|n| n == "hooks");
        if is_hooks && only_sample_hooks(&path) {
            continue;
        }
        match movable(&path, &set.roots) {
            Some(target) if !targets.contains(&target) => targets.push(target),
            Some(_) => {}
            None => moved.push(format!(
                "{} (not moved: it lies outside the workspace)",
                path.display()
            )),
        }
    }
    for path in targets {
        match quarantine(&path) {
            Ok(to) => moved.push(format!("{} (now {})", path.display(), to.display())),
            Err(e) => moved.push(format!("{} (could not be moved: {e})", path.display())),
        }
    }
    if moved.is_empty() {
        return None;
    }
    Some(format!(
        "[keel moved aside control files the command created: {}. Control files ({}) are protected \
         from the model; ask the user to create them.]",
        moved.join(", "),
        crate::protect::CONTROL_PATTERNS
    ))
}

/// What to move aside for the control path `path`: itself when it lies in a workspace root
/// once links are resolved; otherwise the link inside the root that leads out of it (a
/// command's `.claude -> ~/.claude` must not make keel rename the user's own settings).
fn movable(path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let real_roots: Vec<PathBuf> = roots
        .iter()
        .map(|r| r.canonicalize().unwrap_or_else(|_| r.clone()))
        .collect();
    let inside = path
        .parent()
        .and_then(|p| p.canonicalize().ok())
        .is_some_and(|p| real_roots.iter().any(|r| p.starts_with(r)));
    if inside {
        return Some(path.to_path_buf());
    }
    let root = roots.iter().find(|r| path.starts_with(r))?;
    let mut at = root.clone();
    for part in path.strip_prefix(root).ok()?.components() {
        at.push(part);
        if at != path && std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(at);
        }
    }
    None
}

/// Renames `path` to a free `NAME.keel-quarantine[-N]` beside it.
pub(crate) fn quarantine(path: &Path) -> std::io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 0..100 {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!("-{n}")
        };
        let to = path.with_file_name(format!("{name}.keel-quarantine{suffix}"));
        if std::fs::symlink_metadata(&to).is_err() {
            std::fs::rename(path, &to)?;
            return Ok(to);
        }
    }
    Err(std::io::Error::other("no free quarantine name"))
}

/// Whether a hooks folder holds nothing but git's `*.sample` files (and no links).
fn only_sample_hooks(hooks: &Path) -> bool {
    if !std::fs::symlink_metadata(hooks).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    std::fs::read_dir(hooks).is_ok_and(|entries| {
        entries.flatten().all(|e| {
            e.file_name().to_string_lossy().ends_with(".sample")
                && e.file_type().is_ok_and(|t| t.is_file())
        })
    })
}

/// Whether a git folder holds only sample hooks and no program-running configuration.
fn harmless_repository(dot_git: &Path) -> bool {
    let Some(dir) = crate::protect::git_dir(dot_git) else {
        // A `.git` that is not a repository (or points outside) is judged by its file.
        return false;
    };
    if !dir.starts_with(dot_git) {
        return false;
    }
    let hooks_ok = match std::fs::read_dir(dir.join("hooks")) {
        Ok(entries) => entries
            .flatten()
            .all(|e| e.file_name().to_string_lossy().ends_with(".sample")),
        Err(_) => true,
    };
    let config_ok = |name: &str| match std::fs::read_to_string(dir.join(name)) {
        Ok(text) => !runs_programs(&text) && !sends_elsewhere(&text),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    // A new repository borrows nothing: no shared folder elsewhere, no submodules.
    hooks_ok
        && config_ok("config")
        && config_ok("config.worktree")
        && !dir.join("commondir").exists()
        && !dir.join("modules").exists()
}

/// Whether git configuration text sends git elsewhere for hooks or more configuration.
fn sends_elsewhere(config: &str) -> bool {
    let lower = config.to_ascii_lowercase();
    lower.contains("hookspath") || lower.contains("[include")
}

/// Whether git configuration text sets a key that runs a program.
pub(crate) fn runs_programs(config: &str) -> bool {
    let mut section = String::new();
    let mut subsection = false;
    for raw in config.lines() {
        let line = raw.trim();
        if line.starts_with('[') {
            let inner = line.trim_start_matches('[');
            let inner = inner.split(']').next().unwrap_or("");
            let mut parts = inner.splitn(2, |c: char| c == '"' || c.is_whitespace() || c == '.');
            section = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            subsection = parts.next().is_some_and(|s| !s.trim().is_empty());
            // `[section] key = value` on the header line.
            if let Some(rest) = line.split_once(']').map(|(_, r)| r.trim())
                && !rest.is_empty()
                && key_runs(&section, subsection, rest)
            {
                return true;
            }
            continue;
        }
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if key_runs(&section, subsection, line) {
            return true;
        }
    }
    false
}

/// Whether the `name = value` line of `section` (with a subsection or not) sets a key that
/// makes git run a program; the permission gate's list decides, so the two never disagree.
fn key_runs(section: &str, subsection: bool, line: &str) -> bool {
    let (name, value) = line.split_once('=').unwrap_or((line, ""));
    let name = name.trim();
    if name.is_empty() || section.is_empty() {
        return false;
    }
    // The subsection's own name (a URL, a driver name) never changes the verdict.
    let key = if subsection {
        format!("{section}.sub.{name}")
    } else {
        format!("{section}.{name}")
    };
    crate::permission::git_key_runs_program(&key, value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_running_keys_are_found_in_any_layout() {
        assert!(runs_programs("[core]\n\tfsmonitor = curl x\n"));
        assert!(runs_programs("[core]\nhooksPath=/tmp/h\n"));
        assert!(runs_programs("[diff \"x\"]\n\ttextconv = sh -c evil\n"));
        assert!(runs_programs("[alias]\n\tst = !sh -c evil\n"));
        assert!(runs_programs(
            "[includeIf \"gitdir:/\"]\n\tpath = ../evil\n"
        ));
        assert!(runs_programs("[filter \"lfs\"]\n\tclean = x\n"));
        assert!(!runs_programs(
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[alias]\n\tst = status\n"
        ));
        assert!(!runs_programs("[user]\n\tname = x\n\temail = y\n"));
    }

    #[test]
    fn keys_only_the_gate_knew_made_a_new_repository_look_harmless() {
        // Each of these runs a program on an ordinary git command (`git log`, `git fetch`,
        // `git difftool`, `git archive`, a push to that host); the check after a command
        // missed them while the gate's list had them.
        for config in [
            "[pager]\n\tlog = sh -c evil\n",
            "[credential \"https://example.invalid\"]\n\thelper = !sh -c evil\n",
            "[core]\n\talternateRefsCommand = sh -c evil\n",
            "[difftool \"x\"]\n\tcmd = sh -c evil\n",
            "[tar \"tgz\"]\n\tcommand = sh -c evil\n",
            "[submodule \"x\"]\n\tupdate = !sh -c evil\n",
            "[protocol \"ext\"]\n\tallow = always\n",
        ] {
            assert!(runs_programs(config), "{config}");
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let set = ControlSet::of_root(&root);
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[pager]\n\tlog = sh -c evil\n").unwrap();
        assert!(quarantine_new(&set).is_some());
        assert!(!root.join(".git").exists());
    }

    #[test]
    fn a_link_made_keel_move_files_outside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let theirs = dir.path().join("user-claude");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("settings.json"), "{}").unwrap();
        std::fs::write(theirs.join("settings.local.json"), "{}").unwrap();
        let set = ControlSet::of_root(&root);
        std::os::unix::fs::symlink(&theirs, root.join(".claude")).unwrap();
        let note = quarantine_new(&set).unwrap();
        // The user's files stay where they are; the link the command made goes aside.
        let mut left: Vec<String> = std::fs::read_dir(&theirs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["settings.json", "settings.local.json"], "{note}");
        assert!(std::fs::symlink_metadata(root.join(".claude")).is_err());
        let moved = std::fs::symlink_metadata(root.join(".claude.keel-quarantine")).unwrap();
        assert!(moved.file_type().is_symlink());
    }

    #[test]
    fn created_control_files_are_moved_aside_and_a_plain_new_repository_stays() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let set = ControlSet::of_root(&root);
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit.sample"), "").unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        let note = quarantine_new(&set).unwrap();
        assert!(note.contains(".mcp.json"), "{note}");
        assert!(!root.join(".mcp.json").exists());
        assert!(root.join(".mcp.json.keel-quarantine").exists());
        assert!(root.join(".git/config").exists());

        let set = ControlSet::of_root(&root);
        assert_eq!(quarantine_new(&set), None);
    }

    #[test]
    fn a_new_repository_with_a_hook_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let set = ControlSet::of_root(&root);
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        assert!(quarantine_new(&set).is_some());
        assert!(!root.join(".git").exists());
        assert!(root.join(".git.keel-quarantine/hooks/pre-commit").exists());
    }
}
