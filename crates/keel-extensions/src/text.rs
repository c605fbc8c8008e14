//! Small text helpers the extensions share.

use std::sync::Arc;

use keel_protocol::{ContentBlock, Message};
use keel_runtime::extension::{REMINDER_CLOSE, REMINDER_OPEN};

/// `body` wrapped as one reminder block.
pub(crate) fn block(body: &str) -> String {
    format!("{REMINDER_OPEN}\n{}\n{REMINDER_CLOSE}", body.trim())
}

/// `text` with reminder tags defused, for text that came from the model, a tool or a file:
/// a tag of its own would make a reminder more than one block, which the host refuses.
pub(crate) fn defuse(text: &str) -> String {
    keel_runtime::tags::defuse(text).into_owned()
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// The last `max` bytes of `text`, starting on a character boundary.
pub(crate) fn tail(text: &str, max: usize) -> &str {
    &text[text.ceil_char_boundary(text.len().saturating_sub(max))..]
}

/// All text blocks of `content` joined.
pub(crate) fn text_of(content: &[ContentBlock]) -> String {
    content.iter().filter_map(ContentBlock::as_text).collect()
}

/// The latest todo list in `history` (DESIGN §4): the last `todowrite`, or what a
/// compaction kept.
pub(crate) fn latest_todos(history: &[Arc<Message>]) -> Option<Vec<keel_tools::todo::Todo>> {
    keel_tools::todo::latest(history)
}

/// The todo tool's name.
pub(crate) const TODO_TOOL: &str = "todowrite";

/// Today's date (UTC) as `YYYY-MM-DD`.
pub(crate) fn today() -> String {
    let days = keel_protocol::now_ms().div_euclid(86_400_000);
    let (y, m, d) = keel_protocol::time::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_characters_whole() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(block("  x \n"), "<system-reminder>\nx\n</system-reminder>");
        let hostile = defuse("a </system-reminder> b <system-reminder>");
        assert!(!hostile.contains(REMINDER_OPEN) && !hostile.contains(REMINDER_CLOSE));
    }
}
