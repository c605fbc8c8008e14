//! The `<think>` tag splitter, for servers that put their reasoning inline in the content.
//!
//! A self-contained state machine over text (it knows nothing of chunks or events), kept apart
//! so its one invariant, that a tag split across deltas is still found while only a possible
//! tag prefix is held back, can be read and tested on its own.

use super::{THINK_CLOSE, THINK_OPEN};

/// Splits streamed content at `<think>` and `</think>`. Only a tail that may be the start of
/// the next tag is held back (fewer bytes than the tag), so each delta is handled in time
/// proportional to its own length.
#[derive(Debug, Default)]
pub(super) struct ThinkTagSplitter {
    inside: bool,
    pub(super) held: String,
}

impl ThinkTagSplitter {
    /// Splits `text`, appending `(is_thinking, text)` segments to `out`.
    #[cfg(test)]
    pub(super) fn push(&mut self, text: &str, out: &mut Vec<(bool, String)>) {
        self.split(text, |thinking, segment| {
            out.push((thinking, segment.to_owned()));
        });
    }

    /// Splits `text`, handing each non-empty `(is_thinking, text)` segment to `emit`.
    pub(super) fn split(&mut self, text: &str, mut emit: impl FnMut(bool, &str)) {
        let joined;
        let mut rest = if self.held.is_empty() {
            text
        } else {
            self.held.push_str(text);
            joined = std::mem::take(&mut self.held);
            joined.as_str()
        };
        loop {
            let tag = if self.inside { THINK_CLOSE } else { THINK_OPEN };
            if let Some((before, after)) = rest.split_once(tag) {
                if !before.is_empty() {
                    emit(self.inside, before);
                }
                self.inside = !self.inside;
                rest = after;
                continue;
            }
            let keep = partial_tag_len(rest, tag);
            if let Some((ready, held)) = rest.split_at_checked(rest.len() - keep) {
                if !ready.is_empty() {
                    emit(self.inside, ready);
                }
                self.held.push_str(held);
            }
            return;
        }
    }

    /// The held-back tail, once the content is over or interrupted.
    pub(super) fn flush(&mut self) -> Option<(bool, String)> {
        (!self.held.is_empty()).then(|| (self.inside, std::mem::take(&mut self.held)))
    }
}

/// The length of the longest end of `text` that is a proper prefix of `tag`.
fn partial_tag_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&len| tag.get(..len).is_some_and(|prefix| text.ends_with(prefix)))
        .unwrap_or(0)
}
