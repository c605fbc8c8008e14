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
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            inline: 64 * 1024,
            head: 16 * 1024,
            tail: 16 * 1024,
            max_artifact: 1024 * 1024 * 1024,
        }
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
            "[keel: output too large: {} in all; {} omitted here. The whole output is saved in              {}; read it with the read tool (offset and limit, in lines) to see more.",
            human_bytes(self.bytes),
            human_bytes(omitted),
            self.path.display(),
        );
        if self.saved < self.bytes {
            text.push_str(&format!(
                " Only its first {} were saved (the artifact size limit); the rest is lost.",
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

/// Whether `path` lies in the artifacts folder `dir` (both absolute and normalised).
pub fn in_artifacts(path: &Path, dir: Option<&Path>) -> bool {
    dir.is_some_and(|dir| path.starts_with(dir) && path != dir)
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
    fn keeps_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(100);
        let (out, cut) = head_tail(&text, 51);
        assert!(cut);
        assert!(out.starts_with("éé") && out.ends_with("éé"));
        assert!(out.contains("bytes omitted"));
        assert_eq!(head_tail("short", 10), ("short".to_owned(), false));
    }
}
