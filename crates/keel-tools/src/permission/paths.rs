//! Real paths for judging: each component resolved as the kernel resolves it, so a link
//! inside the workspace that points out of it is judged where it leads.
//!
//! Symlinks are followed before `..` is applied: `link/../x` is `x` next to where `link`
//! points, not next to `link` (folding `..` first is what let `cat link/../.ssh/id_rsa` past
//! the gate, issue 9). A component that does not exist yet is taken as written (a write would
//! create it as a file or folder); a dangling link is followed (a write through it creates its
//! target).

use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Most links followed for one path (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// `path` (absolute) with every symlink resolved, as far as the file system knows it.
pub fn real_path(path: &Path) -> PathBuf {
    resolve_until(path, &|_| false).unwrap_or_else(|| path.to_path_buf())
}

/// Like [`real_path`], but `None` as soon as a prefix of the resolved path is one `unknown`
/// says cannot be judged from the file system as it is now (a link the command itself makes).
pub fn resolve_until(path: &Path, unknown: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    let mut stack: Vec<OsString> = Vec::new();
    push_components(&mut stack, path);
    let mut links = 0usize;
    while let Some(name) = stack.pop() {
        if name == "." {
            continue;
        }
        if name == ".." {
            out.pop();
            continue;
        }
        out.push(&name);
        if unknown(&out) {
            return None;
        }
        let is_link = fs::symlink_metadata(&out).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link || links >= MAX_LINKS {
            continue;
        }
        let Ok(target) = fs::read_link(&out) else {
            continue;
        };
        links += 1;
        out.pop();
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        push_components(&mut stack, &target);
    }
    Some(out)
}

/// Pushes `path`'s components onto `stack` so that the first is popped first.
fn push_components(stack: &mut Vec<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::CurDir => Some(OsString::from(".")),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(names.into_iter().rev());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn links_are_followed_for_missing_files_and_dangling_links() {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let outside = base.join("outside");
        let inside = base.join("ws");
        fs::create_dir_all(&outside).unwrap();
        fs::create_dir_all(&inside).unwrap();
        std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("new"), inside.join("dangling")).unwrap();
        assert_eq!(real_path(&inside.join("link/a/b")), outside.join("a/b"));
        assert_eq!(real_path(&inside.join("dangling")), outside.join("new"));
        assert_eq!(real_path(&inside.join("plain/x")), inside.join("plain/x"));
    }

    #[test]
    fn links_are_resolved_before_dot_dot_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let deep = base.join("home/u/deep");
        let ws = base.join("ws");
        fs::create_dir_all(&deep).unwrap();
        fs::create_dir_all(&ws).unwrap();
        std::os::unix::fs::symlink(&deep, ws.join("link")).unwrap();
        // `link/..` is the parent of where the link points, not the workspace.
        assert_eq!(
            real_path(&ws.join("link/../.ssh/id_rsa")),
            base.join("home/u/.ssh/id_rsa")
        );
        assert_eq!(real_path(&ws.join("new/../p")), ws.join("p"));
        std::os::unix::fs::symlink("../home/u", ws.join("rel")).unwrap();
        assert_eq!(real_path(&ws.join("rel/deep/x")), deep.join("x"));
        std::os::unix::fs::symlink("loop", ws.join("loop")).unwrap();
        let _ = real_path(&ws.join("loop/x"));
        let made = ws.join("made");
        assert_eq!(resolve_until(&ws.join("made/../p"), &|p| p == made), None);
    }
}
