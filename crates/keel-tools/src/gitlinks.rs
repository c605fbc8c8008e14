//! The repositories a workspace's own repository records inside it: gitlinks in its index
//! (submodules, or a nested clone added with `git add`) and the paths `.gitmodules` names.
//! The user's git commands in the outer repository enter these (`git status` reads their
//! configuration), so their configuration and hooks are control files too. A nested
//! repository nothing records is not entered by the outer one; running git inside it is
//! the user's choice, like running a script the model wrote.
//!
//! Reading the index is cheap but not free, so what it records is kept per index file
//! until the file's size or modification time changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

/// Largest index read (a bound on the work for a huge repository; one past it records no
/// gitlinks we can see, and the repository's own submodule folders still are protected).
const MAX_INDEX: u64 = 64 * 1024 * 1024;

/// The index file mode of a gitlink.
const GITLINK: u32 = 0o160_000;

type Cached = (u64, Option<SystemTime>, Vec<PathBuf>);

fn cache() -> &'static Mutex<HashMap<PathBuf, Cached>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Cached>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The worktree paths (relative) that the repository at `git_dir` (with its worktree at
/// `worktree`) records as other repositories.
pub fn recorded(git_dir: &Path, worktree: &Path) -> Vec<PathBuf> {
    let mut out = index_gitlinks(&git_dir.join("index"));
    if let Ok(text) = std::fs::read_to_string(worktree.join(".gitmodules")) {
        for line in text.lines() {
            let line = line.trim();
            if let Some((key, value)) = line.split_once('=')
                && key.trim() == "path"
            {
                let path = PathBuf::from(value.trim().trim_matches('"'));
                if !out.contains(&path) {
                    out.push(path);
                }
            }
        }
    }
    // Only relative paths inside the worktree count.
    out.retain(|p| {
        p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
    });
    out
}

fn index_gitlinks(index: &Path) -> Vec<PathBuf> {
    let Ok(meta) = std::fs::metadata(index) else {
        return Vec::new();
    };
    if meta.len() > MAX_INDEX {
        return Vec::new();
    }
    let modified = meta.modified().ok();
    let mut cache = cache().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((len, when, links)) = cache.get(index)
        && *len == meta.len()
        && *when == modified
    {
        return links.clone();
    }
    let links = std::fs::read(index)
        .ok()
        .and_then(|bytes| parse(&bytes))
        .unwrap_or_default();
    cache.insert(index.to_path_buf(), (meta.len(), modified, links.clone()));
    links
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at + 2)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// The gitlink paths of an index file (versions 2, 3 and 4); `None` for what is not one.
fn parse(bytes: &[u8]) -> Option<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStrExt as _;
    if bytes.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(bytes, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(bytes, 8)? as usize;
    // SHA-1 repositories have 20-byte object names, SHA-256 ones 32; the entry's flags
    // give its name's length, which tells which when the names are short enough.
    let mut links = Vec::new();
    let mut at = 12;
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let mode = be32(bytes, start + 24)?;
        // ctime, mtime (16), dev, ino, mode, uid, gid, size (24), then the object name.
        let hash_len = 20;
        let flags_at = start + 40 + hash_len;
        let flags = be16(bytes, flags_at)?;
        let mut name_at = flags_at + 2;
        if version >= 3 && flags & 0x4000 != 0 {
            name_at += 2;
        }
        let name: Vec<u8>;
        if version == 4 {
            // A varint of bytes to drop from the previous name, then the rest.
            let mut strip: usize = 0;
            let mut pos = name_at;
            loop {
                let byte = *bytes.get(pos)?;
                pos += 1;
                strip = (strip << 7) | usize::from(byte & 0x7f);
                if byte & 0x80 == 0 {
                    break;
                }
                strip += 1;
            }
            let end = pos + bytes.get(pos..)?.iter().position(|b| *b == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            let mut full = previous.get(..keep)?.to_vec();
            full.extend_from_slice(bytes.get(pos..end)?);
            name = full;
            at = end + 1;
        } else {
            let end = name_at + bytes.get(name_at..)?.iter().position(|b| *b == 0)?;
            name = bytes.get(name_at..end)?.to_vec();
            // Entries are padded with NULs to a multiple of 8 bytes.
            let length = end - start + 1;
            at = start + length.div_ceil(8) * 8;
        }
        if mode & 0o170_000 == GITLINK {
            links.push(PathBuf::from(std::ffi::OsStr::from_bytes(&name)));
        }
        previous = name;
    }
    Some(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn gitlinks_are_read_from_the_index_in_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q", "."]);
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/deep/a.txt"), "a").unwrap();
        std::fs::write(root.join("b.txt"), "b").unwrap();
        let nested = root.join("vendor/sub");
        std::fs::create_dir_all(&nested).unwrap();
        git(&nested, &["init", "-q", "."]);
        git(
            &nested,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
        );
        git(root, &["add", "src", "b.txt", "vendor/sub"]);
        for version in ["2", "3", "4"] {
            git(root, &["update-index", "--index-version", version]);
            let links = parse(&std::fs::read(root.join(".git/index")).unwrap()).unwrap();
            assert_eq!(links, vec![PathBuf::from("vendor/sub")], "index v{version}");
        }
        std::fs::write(
            root.join(".gitmodules"),
            "[submodule \"x\"]\n\tpath = libs/x\n",
        )
        .unwrap();
        assert_eq!(
            recorded(&root.join(".git"), root),
            vec![PathBuf::from("vendor/sub"), PathBuf::from("libs/x")]
        );
    }

    #[test]
    fn what_is_not_an_index_records_nothing() {
        assert_eq!(parse(b"not an index"), None);
        assert_eq!(parse(b"DIRC\0\0\0\x09\0\0\0\x01"), None);
        assert_eq!(parse(b"DIRC\0\0\0\x02\0\0\0\x05"), None);
    }
}
