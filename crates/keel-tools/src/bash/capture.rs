//! Capturing a command's output: all of it in memory up to the limit, then head and tail in
//! memory and the bytes in a private file, up to a cap on the file. What the model is told
//! about the file is what the file holds: past the cap the file ends with a marker and the
//! message says how much of the output it keeps.

use std::io::Write as _;
use std::path::PathBuf;

pub(super) use crate::output::private_file;
use crate::output::{Artifact, OutputLimits};

/// The line that ends a saved file cut at `cap` bytes.
pub(super) fn cut_marker(cap: u64) -> String {
    format!(
        "\n[keel: saving stopped here, at {}; the rest of the output was not saved]\n",
        crate::output::human_bytes(cap)
    )
}

/// Collects a command's output under the tool-output budget: all of it in memory up to the
/// inline limit; past it, the head and the tail in memory and every byte (up to the
/// artifact cap) streamed to an artifact in the session's folder, so memory stays bounded
/// whatever the command prints.
pub(super) struct Collected {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
    saved: u64,
    /// Saving stopped at the cap (and the marker was written).
    cut: bool,
    file: Option<(PathBuf, std::fs::File)>,
    /// Why the artifact could not be made or written, when it could not.
    failed: Option<String>,
    dir: PathBuf,
    limits: OutputLimits,
    /// Most of the output the artifact keeps: the cap, or what the quota leaves.
    cap: u64,
    overflowed: bool,
}

impl Collected {
    pub(super) fn new(dir: PathBuf, limits: OutputLimits) -> Self {
        Self {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total: 0,
            saved: 0,
            cut: false,
            file: None,
            failed: None,
            dir,
            cap: limits.max_artifact,
            limits,
            overflowed: false,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if !self.overflowed {
            if self.head.len() + bytes.len() <= self.limits.inline {
                self.head.extend_from_slice(bytes);
                return;
            }
            // First overflow: everything so far goes to the artifact, the head stays, the
            // rest starts the tail.
            self.overflowed = true;
            let mut all = std::mem::take(&mut self.head);
            all.extend_from_slice(bytes);
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let path = self
                .dir
                .join(format!("bash-{}-{stamp}.log", std::process::id()));
            match self.limits.room_in(&self.dir) {
                Ok(cap) => {
                    self.cap = cap;
                    match private_file(&path) {
                        Ok(file) => {
                            self.file = Some((path, file));
                            self.save(&all);
                        }
                        Err(error) => self.failed = Some(error.to_string()),
                    }
                }
                Err(full) => self.failed = Some(full.to_string()),
            }
            let split = self.limits.head.min(all.len());
            self.tail.extend(&all[split..]);
            all.truncate(split);
            self.head = all;
        } else {
            self.save(bytes);
            self.tail.extend(bytes);
        }
        let excess = self.tail.len().saturating_sub(self.limits.tail);
        if excess > 0 {
            self.tail.drain(..excess);
        }
    }

    /// Appends to the artifact up to the cap; the byte that crosses it writes the marker.
    fn save(&mut self, bytes: &[u8]) {
        let Some((_, file)) = &mut self.file else {
            return;
        };
        if self.cut {
            return;
        }
        let room = usize::try_from(self.cap.saturating_sub(self.saved)).unwrap_or(usize::MAX);
        let part = bytes.get(..room.min(bytes.len())).unwrap_or(bytes);
        if let Err(error) = file.write_all(part) {
            self.failed = Some(error.to_string());
            self.file = None;
            return;
        }
        self.saved += part.len() as u64;
        if part.len() < bytes.len() {
            self.cut = true;
            let _ = file.write_all(cut_marker(self.cap).as_bytes());
        }
    }

    /// The text for the model and the artifact, when the output went past the budget.
    pub(super) fn finish(mut self) -> (String, Option<Artifact>) {
        if !self.overflowed {
            return (String::from_utf8_lossy(&self.head).into_owned(), None);
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        let shown = self.head.len() + tail.len();
        let (artifact, note) = match (self.file.take(), self.failed) {
            (Some((path, _)), None) => {
                let artifact = Artifact {
                    path,
                    bytes: self.total,
                    saved: self.saved,
                };
                let receipt = artifact.receipt(shown);
                (Some(artifact), receipt)
            }
            (_, failed) => (
                None,
                format!(
                    "[keel: output too large: {} in all, {} omitted here; it could not be saved: {}]",
                    crate::output::human_bytes(self.total),
                    crate::output::human_bytes(self.total.saturating_sub(shown as u64)),
                    failed.unwrap_or_else(|| "unknown error".into())
                ),
            ),
        };
        let text = format!(
            "{}\n\n{note}\n\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        );
        (text, artifact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder like keel's output folder: this user's, 0700.
    fn private_tempdir() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt as _;
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn output_is_not_saved_through_a_link_or_into_a_shared_folder() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = private_tempdir();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("outputs");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(private_file(&link.join("a.log")).is_err());
        assert!(!elsewhere.join("a.log").exists());
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(private_file(&shared.join("a.log")).is_err());
        let fresh = dir.path().join("fresh");
        assert!(private_file(&fresh.join("a.log")).is_ok());
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn a_first_read_larger_than_the_limit_keeps_head_tail_and_all_bytes() {
        let dir = private_tempdir();
        let mut collected = Collected::new(dir.path().to_path_buf(), OutputLimits::default());
        let data: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        collected.push(&data);
        collected.push(b"END");
        let (text, artifact) = collected.finish();
        assert!(text.starts_with("abcdefghij"), "{}", &text[..20]);
        assert!(text.ends_with("END"));
        assert!(text.contains("97.7 KiB in all"), "{text}");
        assert!(text.len() < 33 * 1024 + 400, "{}", text.len());
        let artifact = artifact.unwrap();
        assert_eq!((artifact.bytes, artifact.saved), (100_003, 100_003));
        assert!(text.contains(&artifact.path.display().to_string()));
        let mut all = data.clone();
        all.extend_from_slice(b"END");
        assert_eq!(std::fs::read(&artifact.path).unwrap(), all);
    }

    #[test]
    fn output_past_the_saving_cap_is_marked_in_the_file_and_told_truthfully() {
        let dir = private_tempdir();
        let cap = 4 * 1024 * 1024;
        let limits = OutputLimits {
            max_artifact: cap,
            ..OutputLimits::default()
        };
        let mut collected = Collected::new(dir.path().to_path_buf(), limits);
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..7 {
            collected.push(&chunk);
        }
        let (text, artifact) = collected.finish();
        let artifact = artifact.unwrap();
        assert_eq!((artifact.bytes, artifact.saved), (7 * 1024 * 1024, cap));
        assert!(text.contains("7.0 MiB in all"), "{text:.200}");
        assert!(
            text.contains("Only its first 4.0 MiB were saved"),
            "{}",
            &text[text.len() - 400..]
        );
        let saved = std::fs::read(&artifact.path).unwrap();
        assert_eq!(saved.len() as u64, cap + cut_marker(cap).len() as u64);
        assert!(saved.ends_with(cut_marker(cap).as_bytes()));
    }

    #[test]
    fn a_sessions_artifacts_stop_at_their_quota_and_say_so() {
        let dir = private_tempdir();
        let limits = OutputLimits {
            inline: 1024,
            head: 256,
            tail: 256,
            max_artifact: 1024 * 1024,
            quota: 3 * 1024 * 1024 / 2,
        };
        let chunk = vec![b'y'; 1024 * 1024];
        let first = {
            let mut collected = Collected::new(dir.path().to_path_buf(), limits);
            collected.push(&chunk);
            collected.finish().1.unwrap()
        };
        assert_eq!(first.saved, 1024 * 1024);
        // The second keeps only what the quota leaves.
        let mut collected = Collected::new(dir.path().to_path_buf(), limits);
        collected.push(&chunk);
        let (text, second) = collected.finish();
        assert_eq!(second.unwrap().saved, 512 * 1024);
        assert!(
            text.contains("what the session's quota had left"),
            "{text:.300}"
        );
        // The third is not saved at all, and the model is told why.
        let mut collected = Collected::new(dir.path().to_path_buf(), limits);
        collected.push(&chunk);
        let (text, third) = collected.finish();
        assert!(third.is_none());
        assert!(
            text.contains("reached their quota of 1.5 MiB (output_budget.artifacts_quota_mib)"),
            "{text:.400}"
        );
    }
}
