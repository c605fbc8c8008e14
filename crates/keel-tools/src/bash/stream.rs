//! A running command's output, reported to front ends as it comes: at most one report per
//! [`EVERY`], each the newest [`MOST`] bytes printed since the last one, cut at character
//! boundaries. It is a preview: the call's result when it ends is the whole (budgeted) output.

use std::time::Duration;

use keel_agent::ToolUpdates;
use tokio::time::Instant;

/// The least time between two reports, so a command printing megabytes costs a front end
/// a few redraws a second, not one per read.
pub const EVERY: Duration = Duration::from_millis(100);

/// The most bytes one report carries; what came before them in the same interval is
/// skipped (front ends show the last lines).
pub const MOST: usize = 16 * 1024;

/// Output waiting to be reported.
pub struct Stream {
    updates: ToolUpdates,
    pending: Vec<u8>,
    /// When the next report may go; `None` until the first output.
    next: Option<Instant>,
}

impl Stream {
    /// Reports through `updates`.
    pub fn new(updates: ToolUpdates) -> Self {
        Self {
            updates,
            pending: Vec::new(),
            next: None,
        }
    }

    /// Takes what the command printed; reports at once when the last report is old enough.
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() > MOST {
            // What is skipped goes up to a line's end, so no line reads half of another.
            let mut cut = self.pending.len() - MOST;
            if let Some(end) = self.pending[cut..].iter().position(|b| *b == b'\n') {
                cut += end + 1;
            }
            self.pending.drain(..cut);
        }
        if self.next.is_none_or(|next| Instant::now() >= next) {
            self.flush();
        }
    }

    /// When waiting output should be reported, if any waits.
    pub fn due(&self) -> Option<Instant> {
        if self.pending.is_empty() {
            return None;
        }
        Some(self.next.unwrap_or_else(Instant::now))
    }

    /// Reports what waits (a character cut at the end waits for its other bytes).
    pub fn flush(&mut self) {
        // A cut at the front (bytes skipped) may start inside a character: skip its rest.
        let start = self
            .pending
            .iter()
            .position(|b| (*b as i8) >= -0x40)
            .unwrap_or(self.pending.len());
        let text = &self.pending[start..];
        let (valid, keep) = match std::str::from_utf8(text) {
            Ok(text) => (text.to_owned(), 0),
            Err(error) if error.error_len().is_none() => {
                let valid = error.valid_up_to();
                (
                    String::from_utf8_lossy(&text[..valid]).into_owned(),
                    text.len() - valid,
                )
            }
            Err(_) => (String::from_utf8_lossy(text).into_owned(), 0),
        };
        self.next = Some(Instant::now() + EVERY);
        if valid.is_empty() {
            return;
        }
        // A report the front end had no room for is not lost: it goes with the next one.
        if self.updates.output(&valid) {
            let rest = self.pending.len() - keep;
            self.pending.drain(..rest);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn reports(rx: &mut tokio::sync::mpsc::Receiver<(usize, serde_json::Value)>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok((_, update)) = rx.try_recv() {
            out.push(update["output"].as_str().unwrap().to_owned());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn output_is_reported_at_once_then_at_most_every_interval_and_bounded() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mut stream = Stream::new(ToolUpdates::new(0, tx));
        stream.push(b"first line\n");
        assert_eq!(reports(&mut rx), vec!["first line\n"]);
        stream.push(b"second\n");
        assert!(reports(&mut rx).is_empty(), "too soon");
        assert!(stream.due().is_some());
        tokio::time::advance(EVERY).await;
        stream.push(b"third\n");
        assert_eq!(reports(&mut rx), vec!["second\nthird\n"]);
        // A flood: only the newest bytes go.
        tokio::time::advance(EVERY).await;
        stream.push(&vec![b'x'; 3 * MOST]);
        let sent = reports(&mut rx);
        assert_eq!(sent[0].len(), MOST);
        // Lines: the skipped part ends at a line's end.
        tokio::time::advance(EVERY).await;
        let lines: String = (0..5000).map(|i| format!("line {i:05}\n")).collect();
        stream.push(lines.as_bytes());
        let sent = reports(&mut rx);
        assert!(sent[0].starts_with("line "), "{}", &sent[0][..20]);
        assert!(sent[0].len() <= MOST);
        assert!(stream.due().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_character_split_between_reads_is_reported_whole() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mut stream = Stream::new(ToolUpdates::new(0, tx));
        let word = "héllo".as_bytes();
        stream.push(&word[..2]);
        assert_eq!(reports(&mut rx), vec!["h"]);
        tokio::time::advance(EVERY).await;
        stream.push(&word[2..]);
        assert_eq!(reports(&mut rx), vec!["éllo"]);
    }
}
