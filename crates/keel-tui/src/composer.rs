//! The composer: a multi-line text buffer with Emacs-style editing, a kill buffer, and
//! paste chips (a long paste shows as one placeholder and expands when sent).

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Pastes longer than this many characters become a chip.
pub const PASTE_CHIP_CHARS: usize = 1000;

/// The composer's state.
#[derive(Debug, Default, Clone)]
pub struct Composer {
    text: String,
    /// Byte offset of the cursor, always at a character boundary.
    cursor: usize,
    kill: String,
    chips: Vec<(String, String)>,
    pastes: usize,
}

impl Composer {
    /// An empty composer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The text as typed (chips as their placeholders).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The cursor's byte offset.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Replaces the text; the cursor goes to its end.
    pub fn set(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
        self.chips.retain(|(chip, _)| text.contains(chip.as_str()));
    }

    /// Empties the composer and returns the text to send, chips expanded.
    pub fn take(&mut self) -> String {
        let mut text = std::mem::take(&mut self.text);
        for (chip, pasted) in self.chips.drain(..) {
            text = text.replacen(&chip, &pasted, 1);
        }
        self.cursor = 0;
        text
    }

    /// The text to send, chips expanded, without clearing.
    pub fn expanded(&self) -> String {
        let mut text = self.text.clone();
        for (chip, pasted) in &self.chips {
            text = text.replacen(chip.as_str(), pasted, 1);
        }
        text
    }

    /// Clears everything typed.
    pub fn clear(&mut self) {
        self.text.clear();
        self.chips.clear();
        self.cursor = 0;
    }

    /// Inserts text at the cursor.
    pub fn insert(&mut self, text: &str) {
        self.text.insert_str(self.cursor, text);
        self.cursor += text.len();
    }

    /// Inserts a paste: a long one as a chip.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        if text.chars().count() <= PASTE_CHIP_CHARS {
            self.insert(&text);
            return;
        }
        self.pastes += 1;
        let lines = text.lines().count();
        let chip = format!("[Pasted text #{} +{lines} lines]", self.pastes);
        self.insert(&chip);
        self.chips.push((chip, text));
    }

    fn prev_boundary(&self, at: usize) -> usize {
        self.text[..at]
            .char_indices()
            .next_back()
            .map_or(0, |(i, _)| i)
    }

    fn next_boundary(&self, at: usize) -> usize {
        self.text[at..]
            .chars()
            .next()
            .map_or(at, |c| at + c.len_utf8())
    }

    /// The chip that covers the byte range ending (or starting) at `at`, if any.
    fn chip_at(&self, at: usize, backwards: bool) -> Option<(usize, usize)> {
        self.chips.iter().find_map(|(chip, _)| {
            let start = self.text.find(chip.as_str())?;
            let end = start + chip.len();
            let hit = if backwards {
                at > start && at <= end
            } else {
                at >= start && at < end
            };
            hit.then_some((start, end))
        })
    }

    /// Moves one character left.
    pub fn left(&mut self) {
        self.cursor = self.prev_boundary(self.cursor);
    }

    /// Moves one character right.
    pub fn right(&mut self) {
        self.cursor = self.next_boundary(self.cursor);
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i)
    }

    /// To the start of the line.
    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    /// To the end of the line.
    pub fn end(&mut self) {
        self.cursor = self.line_end();
    }

    fn word_left(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches(|c: char| !c.is_alphanumeric());
        trimmed
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_alphanumeric())
            .map_or(0, |(i, c)| i + c.len_utf8())
    }

    fn word_right(&self) -> usize {
        let after = &self.text[self.cursor..];
        let skip = after.len()
            - after
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .len();
        let rest = &after[skip..];
        let word = rest
            .find(|c: char| !c.is_alphanumeric())
            .unwrap_or(rest.len());
        self.cursor + skip + word
    }

    /// One word left.
    pub fn word_back(&mut self) {
        self.cursor = self.word_left();
    }

    /// One word right.
    pub fn word_forward(&mut self) {
        self.cursor = self.word_right();
    }

    fn remove(&mut self, from: usize, to: usize, keep: bool) {
        if from >= to {
            return;
        }
        if keep {
            self.kill = self.text[from..to].to_owned();
        }
        self.text.replace_range(from..to, "");
        self.cursor = from;
        let text = self.text.clone();
        self.chips.retain(|(chip, _)| text.contains(chip.as_str()));
    }

    /// Deletes the character before the cursor (a whole chip at once).
    pub fn backspace(&mut self) {
        let (from, to) = self
            .chip_at(self.cursor, true)
            .unwrap_or((self.prev_boundary(self.cursor), self.cursor));
        self.remove(from, to, false);
    }

    /// Deletes the character under the cursor (a whole chip at once).
    pub fn delete(&mut self) {
        let (from, to) = self
            .chip_at(self.cursor, false)
            .unwrap_or((self.cursor, self.next_boundary(self.cursor)));
        self.remove(from, to, false);
    }

    /// Kills to the end of the line (the newline itself at a line's end).
    pub fn kill_to_end(&mut self) {
        let end = self.line_end();
        let end = if end == self.cursor {
            self.next_boundary(end)
        } else {
            end
        };
        self.remove(self.cursor, end, true);
    }

    /// Kills to the start of the line.
    pub fn kill_to_start(&mut self) {
        self.remove(self.line_start(), self.cursor, true);
    }

    /// Kills the word before the cursor.
    pub fn kill_word_back(&mut self) {
        self.remove(self.word_left(), self.cursor, true);
    }

    /// Kills the word after the cursor.
    pub fn kill_word_forward(&mut self) {
        self.remove(self.cursor, self.word_right(), true);
    }

    /// Inserts what was last killed.
    pub fn yank(&mut self) {
        let kill = self.kill.clone();
        self.insert(&kill);
    }

    /// Whether the cursor is on the first line.
    pub fn on_first_line(&self) -> bool {
        !self.text[..self.cursor].contains('\n')
    }

    /// Whether the cursor is on the last line.
    pub fn on_last_line(&self) -> bool {
        !self.text[self.cursor..].contains('\n')
    }

    /// One line up, keeping the column where it can.
    pub fn up(&mut self) {
        let start = self.line_start();
        if start == 0 {
            return;
        }
        let column = self.text[start..self.cursor].chars().count();
        let prev_start = self.text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
        self.cursor = column_in(&self.text, prev_start, start - 1, column);
    }

    /// One line down, keeping the column where it can.
    pub fn down(&mut self) {
        let end = self.line_end();
        if end == self.text.len() {
            return;
        }
        let column = self.text[self.line_start()..self.cursor].chars().count();
        let next_end = self.text[end + 1..]
            .find('\n')
            .map_or(self.text.len(), |i| end + 1 + i);
        self.cursor = column_in(&self.text, end + 1, next_end, column);
    }

    /// The `@` or `/` word the cursor is in: (its start, the text after the sigil).
    pub fn token_at_cursor(&self, sigil: char) -> Option<(usize, &str)> {
        let before = &self.text[..self.cursor];
        let start = before
            .rfind(|c: char| c.is_whitespace())
            .map_or(0, |i| i + 1);
        let word = &self.text[start..self.cursor];
        word.strip_prefix(sigil).map(|rest| (start, rest))
    }

    /// Replaces the word from `start` to the cursor with `text`.
    pub fn replace_token(&mut self, start: usize, text: &str) {
        self.text.replace_range(start..self.cursor, text);
        self.cursor = start + text.len();
    }

    /// The composer's rows at `width` (after a two-column prompt) and the cursor's (row,
    /// column) among them.
    pub fn render(&self, width: usize, placeholder: &str) -> (Vec<Line<'static>>, (u16, u16)) {
        let width = width.saturating_sub(2).max(4);
        let prompt = Span::styled(
            "› ",
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
        );
        if self.text.is_empty() {
            let line = Line::from(vec![
                prompt,
                Span::styled(placeholder.to_owned(), Style::new().fg(Color::DarkGray)),
            ]);
            return (vec![line], (0, 2));
        }
        let mut rows: Vec<Line<'static>> = Vec::new();
        let mut cursor = (0u16, 2u16);
        let mut row = String::new();
        let mut used = 0usize;
        let chip_style = Style::new().fg(Color::Magenta);
        let mut offset = 0usize;
        let push_row = |rows: &mut Vec<Line<'static>>, row: &mut String| {
            let lead = if rows.is_empty() {
                prompt.clone()
            } else {
                Span::raw("  ")
            };
            let text = std::mem::take(row);
            let mut spans = vec![lead];
            // Chips stand out so the user sees the paste is there.
            let mut rest = text.as_str();
            while let Some((start, chip)) = self
                .chips
                .iter()
                .filter_map(|(c, _)| rest.find(c.as_str()).map(|i| (i, c)))
                .min_by_key(|(i, _)| *i)
            {
                spans.push(Span::raw(rest[..start].to_owned()));
                spans.push(Span::styled(chip.clone(), chip_style));
                rest = &rest[start + chip.len()..];
            }
            spans.push(Span::raw(rest.to_owned()));
            rows.push(Line::from(spans));
        };
        for ch in self.text.chars() {
            if offset == self.cursor {
                cursor = (rows.len() as u16, (used + 2) as u16);
            }
            offset += ch.len_utf8();
            if ch == '\n' {
                push_row(&mut rows, &mut row);
                used = 0;
                continue;
            }
            let w = ch.width().unwrap_or(0);
            if used + w > width {
                push_row(&mut rows, &mut row);
                used = 0;
            }
            row.push(ch);
            used += w;
        }
        if offset == self.cursor {
            if used >= width {
                push_row(&mut rows, &mut row);
                used = 0;
            }
            cursor = (rows.len() as u16, (used + 2) as u16);
        }
        push_row(&mut rows, &mut row);
        (rows, cursor)
    }
}

fn column_in(text: &str, start: usize, end: usize, column: usize) -> usize {
    text[start..end]
        .char_indices()
        .nth(column)
        .map_or(end, |(i, _)| start + i)
}

/// Display width of the composer text's longest line, for tests.
#[cfg(test)]
fn widest(text: &str) -> usize {
    text.lines()
        .map(unicode_width::UnicodeWidthStr::width)
        .max()
        .unwrap_or(0)
}

/// Whether what the composer holds is a `!` command: typed text starting with `!` (or
/// `!!`), with no pasted chip in it (a long paste is text for the model, whatever it starts
/// with), and not a Markdown image (`![…]`) nor a row of `!!!`.
pub fn shell_line(composer: &Composer) -> bool {
    composer.chips.is_empty() && keel_protocol::ops::RunShell::typed(composer.text()).is_some()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn emacs_editing() {
        let mut c = Composer::new();
        c.insert("hello brave world");
        c.word_back();
        c.kill_word_back();
        assert_eq!(c.text(), "hello world");
        c.home();
        c.kill_to_end();
        assert_eq!(c.text(), "");
        c.yank();
        assert_eq!(c.text(), "hello world");
        c.home();
        c.word_forward();
        c.kill_word_forward();
        assert_eq!(c.text(), "hello");
        c.insert("\nsecond");
        c.up();
        assert!(c.on_first_line());
        c.down();
        assert!(c.on_last_line());
    }

    #[test]
    fn a_long_paste_is_a_chip_that_expands_on_send() {
        let mut c = Composer::new();
        c.insert("look: ");
        let big = "x\n".repeat(600);
        c.paste(&big);
        assert_eq!(c.text(), "look: [Pasted text #1 +600 lines]");
        assert_eq!(c.take(), format!("look: {big}"));
        c.paste(&big);
        c.backspace();
        assert_eq!(c.text(), "", "backspace removes the whole chip");
        assert_eq!(widest("ab\nabc"), 3);
    }

    #[test]
    fn the_cursor_is_placed_on_wrapped_rows() {
        let mut c = Composer::new();
        c.insert("abcdefgh");
        let (rows, cursor) = c.render(7, "");
        assert_eq!(rows.len(), 2);
        assert_eq!(cursor, (1, 5));
    }

    proptest! {
        #[test]
        fn edits_keep_the_cursor_on_a_boundary(ops in proptest::collection::vec(0u8..14, 0..60), text in "[a-zé漢 \n]{0,20}") {
            let mut c = Composer::new();
            for op in ops {
                match op {
                    0 => c.insert(&text),
                    1 => c.left(),
                    2 => c.right(),
                    3 => c.backspace(),
                    4 => c.delete(),
                    5 => c.word_back(),
                    6 => c.word_forward(),
                    7 => c.kill_to_end(),
                    8 => c.kill_to_start(),
                    9 => c.kill_word_back(),
                    10 => c.up(),
                    11 => c.down(),
                    12 => c.yank(),
                    _ => c.paste(&text),
                }
                prop_assert!(c.text().is_char_boundary(c.cursor()));
                prop_assert!(c.cursor() <= c.text().len());
                let _ = c.render(10, "");
            }
        }
    }
}
