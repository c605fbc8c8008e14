//! Unified diffs as coloured lines with old and new line numbers, for edit cells, the
//! permission prompt and `/diff`.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::highlight::{Highlighter, lang_of_path};
use crate::wrap::truncate;

const ADDED: Style = Style::new().fg(Color::Green);
const REMOVED: Style = Style::new().fg(Color::Red);
const NUMBER: Style = Style::new().fg(Color::DarkGray);

/// Lines added and removed by a diff.
pub fn counts(diff: &str) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in diff.lines() {
        if line.starts_with("+++") || line.starts_with("---") {
            continue;
        }
        if line.starts_with('+') {
            added += 1;
        } else if line.starts_with('-') {
            removed += 1;
        }
    }
    (added, removed)
}

/// Renders `diff` (unified format) for `path`, at most `limit` body lines (`None`: all).
pub fn render(diff: &str, path: &str, width: usize, limit: Option<usize>) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut old = 0u64;
    let mut new = 0u64;
    let mut highlighter = Highlighter::new(lang_of_path(path));
    let digits = max_line_number(diff).to_string().len().max(3);
    let mut shown = 0usize;
    let mut hidden = 0usize;
    for line in diff.lines() {
        if line.starts_with("+++")
            || line.starts_with("---")
            || line.starts_with("diff ")
            || line.starts_with("index ")
        {
            if line.starts_with("diff --git") {
                // /diff over several files: name each file.
                let name = line.rsplit(" b/").next().unwrap_or(line).to_owned();
                out.push(Line::from(Span::styled(
                    name,
                    Style::new().add_modifier(Modifier::BOLD),
                )));
                highlighter = Highlighter::new(lang_of_path(line));
            }
            continue;
        }
        if let Some(header) = line.strip_prefix("@@") {
            if let Some((o, n)) = hunk_start(header) {
                old = o;
                new = n;
            }
            if shown > 0 && limit.is_none_or(|l| shown < l) {
                out.push(Line::styled(format!("{:>digits$} ⋮", ""), NUMBER));
            }
            continue;
        }
        if limit.is_some_and(|l| shown >= l) {
            hidden += 1;
            continue;
        }
        let (sign, number, style) = if let Some(_rest) = line.strip_prefix('+') {
            new += 1;
            ('+', new - 1, ADDED)
        } else if line.starts_with('-') {
            old += 1;
            ('-', old - 1, REMOVED)
        } else if line.starts_with('\\') {
            out.push(Line::styled(line.to_owned(), NUMBER));
            continue;
        } else {
            old += 1;
            new += 1;
            (' ', new - 1, Style::new())
        };
        let body = line.get(1..).unwrap_or_default();
        let mut spans = vec![
            Span::styled(format!("{number:>digits$} "), NUMBER),
            Span::styled(sign.to_string(), style),
        ];
        let room = width.saturating_sub(digits + 2);
        // A file's escapes and bidi overrides are shown, never run by the terminal.
        let body = truncate(&crate::visible::visible(body).replace('\t', "    "), room);
        if sign == ' ' {
            spans.extend(highlighter.line(&body, Style::new().add_modifier(Modifier::DIM)));
        } else {
            spans.extend(highlighter.line(&body, style).into_iter().map(|s| {
                // Keep the sign's colour: highlighting only adds emphasis on changed lines.
                Span::styled(s.content, style.add_modifier(s.style.add_modifier))
            }));
        }
        out.push(Line::from(spans));
        shown += 1;
    }
    if hidden > 0 {
        out.push(Line::styled(
            format!(
                "{:>digits$} … {hidden} more diff lines (ctrl+o to expand)",
                ""
            ),
            NUMBER,
        ));
    }
    out
}

fn hunk_start(header: &str) -> Option<(u64, u64)> {
    // " -12,3 +14,4 @@ context"
    let mut parts = header.split_whitespace();
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    let first = |s: &str| s.split(',').next().and_then(|n| n.parse::<u64>().ok());
    Some((first(old)?, first(new)?))
}

fn max_line_number(diff: &str) -> u64 {
    diff.lines()
        .filter_map(|l| l.strip_prefix("@@"))
        .filter_map(|h| {
            let mut parts = h.split_whitespace();
            let old = parts.next()?.strip_prefix('-')?;
            let new = parts.next()?.strip_prefix('+')?;
            let end = |s: &str| {
                let mut it = s.split(',');
                let start: u64 = it.next()?.parse().ok()?;
                let len: u64 = it.next().map_or(Some(1), |n| n.parse().ok())?;
                Some(start + len)
            };
            Some(end(old)?.max(end(new)?))
        })
        .max()
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const DIFF: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -9,3 +9,4 @@\n fn a() {}\n-fn b() {}\n+fn b() -> u8 { 1 }\n+fn c() {}\n fn d() {}\n";

    #[test]
    fn numbers_lines_from_the_hunk_header() {
        let lines: Vec<String> = render(DIFF, "src/lib.rs", 80, None)
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(
            lines,
            [
                "  9  fn a() {}",
                " 10 -fn b() {}",
                " 10 +fn b() -> u8 { 1 }",
                " 11 +fn c() {}",
                " 12  fn d() {}"
            ]
        );
        assert_eq!(counts(DIFF), (2, 1));
    }

    #[test]
    fn a_limit_hides_the_rest_with_a_hint() {
        let lines = render(DIFF, "x.rs", 80, Some(2));
        assert_eq!(lines.len(), 3);
        assert!(lines[2].spans[0].content.contains("3 more diff lines"));
    }
}
