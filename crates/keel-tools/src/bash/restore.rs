//! Putting existing control files back after a command that ran without the read-only
//! mounts (Landlock alone, or no sandbox).
//!
//! Landlock can only grant, so without namespaces a command that may write the workspace
//! may also write `.git/config` or `.git/hooks/`. Before such a command keel keeps the bytes
//! of every existing control file (bounded); afterwards it writes back any that changed or
//! went missing, and moves aside anything new inside a control folder. The files are wrong
//! only while the command runs, and a program they would start runs inside the same
//! sandbox then; what would run later, outside it, is undone before keel goes on.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::protect::ControlSet;

/// Largest control file kept (a git config or a hook is a few KiB).
const MAX_FILE: u64 = 1024 * 1024;
/// Most bytes kept for one command, over all control files.
const MAX_TOTAL: u64 = 8 * 1024 * 1024;
/// Most entries looked at inside the control folders.
const MAX_ENTRIES: usize = 512;

/// One kept file: its bytes, permission bits and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    bytes: Vec<u8>,
    mode: u32,
    modified: Option<std::time::SystemTime>,
}

/// The control files as they were before a command.
#[derive(Debug, Default)]
pub(crate) struct Saved {
    /// Files by path.
    files: BTreeMap<PathBuf, Kept>,
    /// Control folders and every path that was inside them.
    folders: Vec<(PathBuf, Vec<PathBuf>)>,
    /// Paths too large (or too many) to keep.
    skipped: Vec<PathBuf>,
    /// The modification times of the folders that hold what was kept, put back after a
    /// restore so that watchers (git, make, the user's tools) see no change there either.
    folder_times: BTreeMap<PathBuf, std::time::SystemTime>,
}

/// Keeps the existing control files of `set`.
pub(crate) fn save(set: &ControlSet) -> Saved {
    let mut saved = Saved::default();
    let mut total = 0u64;
    let mut entries = 0usize;
    for path in &set.read_only {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if meta.is_dir() {
            let mut inside = Vec::new();
            walk(path, 0, &mut inside, &mut entries);
            for item in &inside {
                keep(item, &mut saved, &mut total);
            }
            for dir in std::iter::once(path.as_path()).chain(
                inside
                    .iter()
                    .filter(|p| p.is_dir() && !p.is_symlink())
                    .map(PathBuf::as_path),
            ) {
                note_time(dir, &mut saved);
            }
            saved.folders.push((path.clone(), inside));
        } else {
            keep(path, &mut saved, &mut total);
        }
        if let Some(parent) = path.parent() {
            note_time(parent, &mut saved);
        }
    }
    saved
}

fn note_time(dir: &Path, saved: &mut Saved) {
    if let Ok(modified) = std::fs::symlink_metadata(dir).and_then(|m| m.modified()) {
        saved.folder_times.insert(dir.to_path_buf(), modified);
    }
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>, entries: &mut usize) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        if *entries >= MAX_ENTRIES {
            return;
        }
        *entries += 1;
        let path = entry.path();
        out.push(path.clone());
        if depth < 4 && entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&path, depth + 1, out, entries);
        }
    }
}

fn keep(path: &Path, saved: &mut Saved, total: &mut u64) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_file() {
        return;
    }
    if meta.len() > MAX_FILE || *total + meta.len() > MAX_TOTAL {
        saved.skipped.push(path.to_path_buf());
        return;
    }
    if let Ok(bytes) = std::fs::read(path) {
        *total += bytes.len() as u64;
        saved.files.insert(
            path.to_path_buf(),
            Kept {
                bytes,
                mode: meta.permissions().mode() & 0o7777,
                modified: meta.modified().ok(),
            },
        );
    }
}

/// Writes back what changed and moves aside what is new; the note for the model, if
/// anything was done.
pub(crate) fn restore(saved: &Saved) -> Option<String> {
    let mut done = Vec::new();
    for (path, kept) in &saved.files {
        let now = std::fs::symlink_metadata(path).ok();
        let same = now.as_ref().is_some_and(|m| {
            m.is_file()
                && m.permissions().mode() & 0o7777 == kept.mode
                && m.modified().ok() == kept.modified
                && std::fs::read(path).is_ok_and(|b| b == kept.bytes)
        });
        if same {
            continue;
        }
        match put_back(path, kept) {
            Ok(()) => done.push(format!("{} (restored)", path.display())),
            Err(e) => done.push(format!("{} (could not be restored: {e})", path.display())),
        }
    }
    for (folder, before) in &saved.folders {
        let mut after = Vec::new();
        let mut entries = 0;
        walk(folder, 0, &mut after, &mut entries);
        // Deepest first, so a new folder is moved aside as a whole only once.
        let mut new: Vec<&PathBuf> = after.iter().filter(|p| !before.contains(p)).collect();
        new.sort_by_key(|p| p.components().count());
        let mut moved: Vec<PathBuf> = Vec::new();
        for path in new {
            if moved.iter().any(|m| path.starts_with(m)) {
                continue;
            }
            match super::control::quarantine(path) {
                Ok(to) => {
                    done.push(format!("{} (moved to {})", path.display(), to.display()));
                    moved.push(path.clone());
                }
                Err(e) => done.push(format!("{} (could not be moved: {e})", path.display())),
            }
        }
    }
    if done.is_empty() {
        return None;
    }
    // Deepest first: setting a folder's time does not change its parent's.
    for (dir, modified) in saved.folder_times.iter().rev() {
        // Only a folder still there as a folder: never through a link put in its place.
        let changed = std::fs::symlink_metadata(dir)
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .and_then(|m| m.modified().ok())
            .is_some_and(|now| now != *modified);
        if changed && let Ok(folder) = std::fs::File::open(dir) {
            let _ = folder.set_times(std::fs::FileTimes::new().set_modified(*modified));
        }
    }
    let mut note = format!(
        "[keel undid the command's changes to protected control files: {}. Control files ({}) are \
         protected from the model; ask the user to make this change.",
        done.join(", "),
        crate::protect::CONTROL_PATTERNS
    );
    if !saved.skipped.is_empty() {
        note.push_str(&format!(
            " Too large to keep, so not checked: {}.",
            saved
                .skipped
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    note.push(']');
    Some(note)
}

/// Replaces `path` (whatever it is now: a file, a link, a folder) with the kept bytes.
fn put_back(path: &Path, kept: &Kept) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.is_dir()
    {
        super::control::quarantine(path)?;
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temp = path.with_file_name(format!(
        ".{}.keel-restore-{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(kept.mode)
        .open(&temp)?;
    file.write_all(&kept.bytes)?;
    file.set_permissions(std::fs::Permissions::from_mode(kept.mode))?;
    if let Some(modified) = kept.modified {
        // As it was, so tools that watch times (git, make) see no change either.
        file.set_times(std::fs::FileTimes::new().set_modified(modified))?;
    }
    drop(file);
    // A rename replaces a link planted at `path`, never what it points to.
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_missing_and_new_control_files_are_undone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit.sample"), "sample").unwrap();
        std::fs::create_dir_all(root.join(".keel")).unwrap();
        std::fs::write(root.join(".keel/config.yaml"), "sandbox: read-only\n").unwrap();
        let set = ControlSet::of_root(&root);
        let saved = save(&set);

        std::fs::write(root.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::remove_file(root.join(".keel/config.yaml")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join(".keel/config.yaml")).unwrap();
        let note = restore(&saved).unwrap();

        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists(), "{note}");
        assert!(root.join(".git/hooks/pre-commit.keel-quarantine").exists());
        let kept = root.join(".keel/config.yaml");
        assert!(
            !std::fs::symlink_metadata(&kept)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(kept).unwrap(),
            "sandbox: read-only\n"
        );
        assert!(restore(&save(&ControlSet::of_root(&root))).is_none());
    }
}
