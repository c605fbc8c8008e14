//! The prompts a person sent, kept across sessions per working folder, for Up and Ctrl+R:
//! one JSON line each (`{"cwd", "text"}`) in `$KEEL_HOME/prompt-history.jsonl`, private to
//! its user, cut to its newer half when it grows past [`MAX_BYTES`].

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in `$KEEL_HOME`.
pub const FILE: &str = "prompt-history.jsonl";

/// How many prompts of a folder are recalled.
pub const RECALLED: usize = 500;

/// Past this size the file keeps only its newer half.
const MAX_BYTES: u64 = 2 * 1024 * 1024;

/// The longest prompt kept: a pasted log is not worth recalling whole.
const MAX_PROMPT_BYTES: usize = 16 * 1024;

#[derive(Serialize, Deserialize)]
struct Entry {
    cwd: String,
    text: String,
}

fn path(keel_home: &Path) -> PathBuf {
    keel_home.join(FILE)
}

/// The last [`RECALLED`] prompts sent in `cwd`, oldest first; empty when there are none
/// or the file cannot be read (a line that does not parse is skipped).
pub fn load(keel_home: Option<&Path>, cwd: &Path) -> Vec<String> {
    let Some(home) = keel_home else {
        return Vec::new();
    };
    // A damaged line costs that line, never the whole history.
    let Ok(bytes) = std::fs::read(path(home)) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let cwd = cwd.to_string_lossy();
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Entry>(line) else {
            continue;
        };
        if entry.cwd == cwd && out.last() != Some(&entry.text) {
            out.push(entry.text);
        }
    }
    let skip = out.len().saturating_sub(RECALLED);
    out.drain(..skip);
    out
}

/// Adds `text` as sent in `cwd`.
pub fn append(keel_home: &Path, cwd: &Path, text: &str) -> std::io::Result<()> {
    if text.len() > MAX_PROMPT_BYTES || text.trim().is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(keel_home)?;
    let file = path(keel_home);
    if std::fs::metadata(&file).is_ok_and(|m| m.len() > MAX_BYTES) {
        shrink(&file)?;
    }
    let mut line = serde_json::to_string(&Entry {
        cwd: cwd.to_string_lossy().into_owned(),
        text: text.to_owned(),
    })
    .map_err(std::io::Error::other)?;
    line.push('\n');
    let mut out = open_private(&file, true)?;
    out.write_all(line.as_bytes())
}

/// Opens `file` for writing, created readable by its user alone, never through a link.
fn open_private(file: &Path, append: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .mode(0o600)
        .custom_flags(no_follow())
        .open(file)
}

/// `O_NOFOLLOW`: the history file is never a link to somewhere else.
fn no_follow() -> i32 {
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0)
}

/// Keeps the newer half of the file's lines.
fn shrink(file: &Path) -> std::io::Result<()> {
    let text = std::fs::read_to_string(file)?;
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[lines.len() / 2..].join("\n");
    let fresh = file.with_extension("jsonl.new");
    {
        let mut out = open_private(&fresh, false)?;
        out.write_all(kept.as_bytes())?;
        out.write_all(b"\n")?;
    }
    std::fs::rename(fresh, file)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn prompts_are_recalled_per_folder_in_order_without_repeats() {
        let home = tempfile::tempdir().unwrap();
        let (a, b) = (Path::new("/work/a"), Path::new("/work/b"));
        append(home.path(), a, "fix the parser").unwrap();
        append(home.path(), b, "elsewhere").unwrap();
        append(home.path(), a, "run the tests").unwrap();
        append(home.path(), a, "run the tests").unwrap();
        append(home.path(), a, "   ").unwrap();
        assert_eq!(
            load(Some(home.path()), a),
            vec!["fix the parser", "run the tests"]
        );
        assert_eq!(load(Some(home.path()), b), vec!["elsewhere"]);
        assert!(load(None, a).is_empty());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(home.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_link_in_place_of_the_file_is_not_followed() {
        let home = tempfile::tempdir().unwrap();
        let target = home.path().join("elsewhere.txt");
        std::fs::write(&target, "").unwrap();
        std::os::unix::fs::symlink(&target, home.path().join(FILE)).unwrap();
        assert!(append(home.path(), Path::new("/w"), "hello").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    }
}
