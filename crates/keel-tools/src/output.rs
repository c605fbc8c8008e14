//! Bounding what a tool sends back to the model: the limits of the tool-output budget, the
//! receipt that names an archived output's artifact, and head-and-tail cuts.
//!
//! A result larger than the inline limit is stored whole as an artifact in the session's
//! folder; the model gets its head and tail and a receipt saying where the rest is, how large
//! it truly is and how to page it with `read`. Tools that stream (bash) write the artifact as
//! the output arrives, so a 50 MB log never sits in memory; the others are archived by the
//! output-budget extension from the result they return.

use std::path::{Path, PathBuf};

/// The tool-output budget's limits, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// A result up to this size reaches the model whole.
    pub inline: usize,
    /// What the model sees of a larger result's beginning.
    pub head: usize,
    /// What it sees of the end.
    pub tail: usize,
    /// Most of one output kept in its artifact.
    pub max_artifact: u64,
    /// Most bytes a session's artifacts hold together.
    pub quota: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            inline: 64 * 1024,
            head: 16 * 1024,
            tail: 16 * 1024,
            max_artifact: 1024 * 1024 * 1024,
            quota: 2 * 1024 * 1024 * 1024,
        }
    }
}

/// The session's saved outputs have used up their quota.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the session's saved outputs reached their quota of {} \
     (output_budget.artifacts_quota_mib); nothing more is saved in this session",
    human_bytes(*quota)
)]
pub struct QuotaSpent {
    /// The quota, in bytes.
    pub quota: u64,
}

impl OutputLimits {
    /// How much a new artifact in `dir` may keep: the cap on one artifact, or what the
    /// session's quota leaves, whichever is less; `Err` names the quota when it is spent.
    pub fn room_in(&self, dir: &Path) -> Result<u64, QuotaSpent> {
        let used: u64 = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .filter(std::fs::Metadata::is_file)
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        let left = self.quota.saturating_sub(used);
        if left == 0 {
            return Err(QuotaSpent { quota: self.quota });
        }
        Ok(self.max_artifact.min(left))
    }
}

/// An output stored in the session's artifacts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Artifact {
    /// Where it is.
    pub path: PathBuf,
    /// How large the output was.
    pub bytes: u64,
    /// How much of it the artifact holds (less than `bytes` when it was cut at the cap).
    pub saved: u64,
}

impl Artifact {
    /// The receipt the model reads in place of the archived middle: the artifact's path,
    /// the output's true size, and how to page it with `read`. `shown` is how many bytes of
    /// head and tail the result keeps.
    pub fn receipt(&self, shown: usize) -> String {
        let omitted = self.bytes.saturating_sub(shown as u64);
        let mut text = format!(
            "[keel: output too large: {} in all; {} omitted here. The whole output is saved in {}; \
             read it with the read tool (offset and limit, in lines) to see more.",
            human_bytes(self.bytes),
            human_bytes(omitted),
            self.path.display(),
        );
        if self.saved < self.bytes {
            text.push_str(&format!(
                " Only its first {} were saved (the size limit of one artifact, or what the \
                 session's quota had left); the rest is lost.",
                human_bytes(self.saved)
            ));
        }
        text.push(']');
        text
    }

    /// The details a result carries about its artifact.
    pub fn details(&self) -> serde_json::Value {
        serde_json::json!({"path": self.path, "bytes": self.bytes, "saved": self.saved})
    }

    /// The artifact a result's details name, when they name one.
    pub fn from_details(details: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(details.get("artifact")?.clone()).ok()
    }
}

/// A size as people read it: `812 B`, `64.0 KiB`, `48.3 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let value = bytes as f64;
    if value < KIB {
        format!("{bytes} B")
    } else if value < KIB * KIB {
        format!("{:.1} KiB", value / KIB)
    } else if value < KIB * KIB * KIB {
        format!("{:.1} MiB", value / (KIB * KIB))
    } else {
        format!("{:.2} GiB", value / (KIB * KIB * KIB))
    }
}

/// Creates a new output file (0600) in the output folder `dir`, which must be this user's
/// own private folder: a folder (not a link: commands may write the temp folder it lives
/// in and could put a link there, to make keel write a command's output wherever it
/// leads), owned by this user, open to nobody else. The file is created through the
/// folder's descriptor, never following or reusing anything planted under its name.
pub fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("no folder to save output in"));
    };
    let dir = private_folder(dir)?;
    create_in(&dir, name)
}

/// Replaces `path` with `bytes` whole or not at all, for keel's own records (rule and trust
/// files): a new 0600 file beside it (never following a link planted under its name),
/// synced, then renamed over it; its folder is made 0700 when missing.
pub fn replace_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("no folder to write in"));
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&temp);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Opens (making it if needed, 0700) the private folder `dir` and checks it is one: a
/// folder (not a link), owned by this user, open to nobody else.
pub(crate) fn private_folder(dir: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let folder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    let meta = folder.metadata()?;
    if !meta.is_dir() || meta.uid() != crate::env::own_uid() || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private folder of keel's (a folder of this user's, open to nobody else)",
            dir.display()
        )));
    }
    Ok(std::os::fd::OwnedFd::from(folder))
}

fn create_in(dir: &std::os::fd::OwnedFd, name: &std::ffi::OsStr) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600))?;
    Ok(std::fs::File::from(fd))
}

/// `text` on one line (runs of white space, newlines included, become one space) and cut to
/// at most `max` characters, the last of them `…` when something was cut.
pub fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut cut: String = joined.chars().take(max.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    if max > 0 {
        cut.push('…');
    }
    cut
}

/// Keeps the head and tail of `text` when it is longer than `max_bytes`, cutting on
/// character boundaries, with a marker saying how much was left out.
pub fn head_tail(text: &str, max_bytes: usize) -> (String, bool) {
    if text.len() <= max_bytes {
        return (text.to_owned(), false);
    }
    let half = max_bytes / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = tail_start - head_end;
    let out = format!(
        "{}\n\n[… {omitted} bytes omitted …]\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    );
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdef ghij", 8), "abcdef…");
        assert_eq!(one_line("abcdefgh", 8), "abcdefgh");
        assert_eq!(one_line("abcdefghi", 1), "…");
        assert_eq!(one_line("abc", 0), "");
    }

    #[test]
    fn keeps_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(100);
        let (out, cut) = head_tail(&text, 51);
        assert!(cut);
        assert!(out.starts_with("éé") && out.ends_with("éé"));
        assert!(out.contains("bytes omitted"));
        assert_eq!(head_tail("short", 10), ("short".to_owned(), false));
    }
}
