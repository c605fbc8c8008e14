//! Word wrapping of styled lines to a width, so a cell knows its height before it is drawn
//! (scrollback insertion needs the height up front).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Display width of a line.
pub fn line_width(line: &Line<'_>) -> usize {
    line.spans.iter().map(|s| s.content.width()).sum()
}

/// Wraps `line` to `width` columns at spaces (hard breaks inside words longer than a row);
/// continuation rows start with `indent`.
pub fn wrap_line(line: &Line<'static>, width: usize, indent: &Line<'static>) -> Vec<Line<'static>> {
    let width = width.max(4);
    if line_width(line) <= width {
        return vec![line.clone()];
    }
    let indent_width = line_width(indent).min(width / 2);
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut row: Vec<Span<'static>> = Vec::new();
    let mut used = 0usize;
    // Words with their style: a word is a run of non-spaces, spaces are kept as their own
    // pieces so wrapping can drop them at a row's end.
    for (piece, style) in pieces(line) {
        let piece_width = piece.width();
        let is_space = piece.chars().all(|c| c == ' ');
        if used + piece_width <= width {
            push(&mut row, piece, style);
            used += piece_width;
            continue;
        }
        if is_space {
            // A space at a row's end is where it breaks.
            finish_row(&mut rows, &mut row, line.style);
            start_row(&mut row, &mut used, indent, indent_width);
            continue;
        }
        let row_start = if rows.is_empty() { 0 } else { indent_width };
        if used > row_start && piece_width <= width - indent_width {
            finish_row(&mut rows, &mut row, line.style);
            start_row(&mut row, &mut used, indent, indent_width);
            push(&mut row, piece, style);
            used += piece_width;
            continue;
        }
        // A word longer than the row: break it by characters.
        let mut chunk = String::new();
        for ch in piece.chars() {
            let w = ch.width().unwrap_or(0);
            if used + w > width {
                push(&mut row, std::mem::take(&mut chunk), style);
                finish_row(&mut rows, &mut row, line.style);
                start_row(&mut row, &mut used, indent, indent_width);
            }
            chunk.push(ch);
            used += w;
        }
        push(&mut row, chunk, style);
    }
    if !row.is_empty() || rows.is_empty() {
        finish_row(&mut rows, &mut row, line.style);
    }
    rows
}

/// Wraps every line; see [`wrap_line`].
pub fn wrap_lines(
    lines: impl IntoIterator<Item = Line<'static>>,
    width: usize,
    indent: &Line<'static>,
) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .flat_map(|line| wrap_line(&line, width, indent))
        .collect()
}

fn pieces(line: &Line<'static>) -> Vec<(String, Style)> {
    let mut out = Vec::new();
    for span in &line.spans {
        let style = line.style.patch(span.style);
        let mut current = String::new();
        let mut in_space = false;
        for ch in span.content.chars() {
            let space = ch == ' ';
            if !current.is_empty() && space != in_space {
                out.push((std::mem::take(&mut current), style));
            }
            in_space = space;
            current.push(ch);
        }
        if !current.is_empty() {
            out.push((current, style));
        }
    }
    out
}

fn push(row: &mut Vec<Span<'static>>, text: String, style: Style) {
    if text.is_empty() {
        return;
    }
    if let Some(last) = row.last_mut()
        && last.style == style
    {
        last.content.to_mut().push_str(&text);
        return;
    }
    row.push(Span::styled(text, style));
}

fn finish_row(rows: &mut Vec<Line<'static>>, row: &mut Vec<Span<'static>>, style: Style) {
    // Trailing spaces would only push the cursor past the edge.
    if let Some(last) = row.last_mut() {
        let trimmed = last.content.trim_end_matches(' ').to_owned();
        *last = Span::styled(trimmed, last.style);
    }
    rows.push(Line::from(std::mem::take(row)).style(style));
}

/// Starts a continuation row with `indent`, cut to `width` columns (the indent may be wider
/// than the room a row leaves for it).
fn start_row(row: &mut Vec<Span<'static>>, used: &mut usize, indent: &Line<'static>, width: usize) {
    *used = 0;
    if width == 0 {
        return;
    }
    let mut left = width;
    for span in &indent.spans {
        if left == 0 {
            break;
        }
        let mut text = String::new();
        for ch in span.content.chars() {
            let w = ch.width().unwrap_or(0);
            if w > left {
                left = 0;
                break;
            }
            left -= w;
            text.push(ch);
        }
        row.push(Span::styled(text, span.style));
    }
    *used = width - left;
}

/// `text` as plain rows of at most `width` columns, its runs of white space made one space,
/// the first row after `first` and the others after `rest`: for what keel writes to the
/// terminal before the TUI takes it (a question), where the terminal would break words.
pub fn wrap_text(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = Line::from(format!("{first}{words}"));
    wrap_line(&line, width, &Line::from(rest.to_owned()))
        .iter()
        .map(|row| row.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

/// Cuts `text` to at most `width` columns, ending in `…` when it was longer.
pub fn truncate(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in text.chars() {
        let w = ch.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(ch);
        used += w;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn text(lines: &[Line<'static>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_spaces_with_an_indent() {
        let line = Line::from("the quick brown fox jumps over the lazy dog");
        let rows = wrap_line(&line, 16, &Line::from("  "));
        assert_eq!(
            text(&rows),
            ["the quick brown", "  fox jumps over", "  the lazy dog"]
        );
    }

    #[test]
    fn breaks_long_words_and_wide_characters() {
        let rows = wrap_line(&Line::from("abcdefghijklmnop"), 6, &Line::default());
        assert_eq!(text(&rows), ["abcdef", "ghijkl", "mnop"]);
        let rows = wrap_line(&Line::from("漢字漢字漢字"), 5, &Line::default());
        assert!(rows.iter().all(|r| line_width(r) <= 5));
    }

    #[test]
    fn plain_text_wraps_after_its_first_and_rest_prefixes() {
        assert_eq!(
            wrap_text("a question  about\nthe project", 12, "  ! ", "    "),
            [
                "  ! a",
                "    question",
                "    about",
                "    the",
                "    project"
            ]
        );
        assert_eq!(wrap_text("short", 80, "", ""), ["short"]);
    }

    #[test]
    fn truncates_with_an_ellipsis() {
        assert_eq!(truncate("hello world", 6), "hello…");
        assert_eq!(truncate("hi", 6), "hi");
    }

    proptest! {
        #[test]
        fn no_row_is_wider_than_the_width(s in "[a-z 漢]{0,200}", width in 4usize..60) {
            let rows = wrap_line(&Line::from(s.clone()), width, &Line::from("  "));
            for row in &rows {
                prop_assert!(line_width(row) <= width, "{:?}", text(&rows));
            }
            let joined: String = text(&rows).join("").chars().filter(|c| *c != ' ').collect();
            let original: String = s.chars().filter(|c| *c != ' ').collect();
            prop_assert_eq!(joined, original);
        }
    }
}
