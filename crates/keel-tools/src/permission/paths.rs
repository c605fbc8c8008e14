//! Real paths for judging: symlinks resolved even when the file does not exist yet.
//!
//! The deepest existing ancestor is canonicalised and the rest appended, so a link inside the
//! workspace that points out of it is judged where it leads. A dangling link is followed by
//! hand (a write through it would create its target).

use std::fs;
use std::path::{Path, PathBuf};

use crate::env::normalize;

/// Most links followed by hand for one path (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// `path` (absolute) with every symlink resolved, as far as the file system knows it.
pub fn real_path(path: &Path) -> PathBuf {
    resolve(&normalize(path), 0)
}

fn resolve(path: &Path, links: usize) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match fs::symlink_metadata(&existing) {
            Ok(meta) => {
                if let Ok(canonical) = fs::canonicalize(&existing) {
                    return join_rest(canonical, &rest);
                }
                if meta.file_type().is_symlink()
                    && links < MAX_LINKS
                    && let Ok(target) = fs::read_link(&existing)
                {
                    let base = existing.parent().map(Path::to_path_buf).unwrap_or_default();
                    let next = join_rest(normalize(&base.join(target)), &rest);
                    return resolve(&next, links + 1);
                }
                return path.to_path_buf();
            }
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => return path.to_path_buf(),
            },
        }
    }
}

fn join_rest(mut base: PathBuf, rest: &[std::ffi::OsString]) -> PathBuf {
    for name in rest.iter().rev() {
        base.push(name);
    }
    base
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
}
