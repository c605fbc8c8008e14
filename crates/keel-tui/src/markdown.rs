//! Markdown to styled lines, and its streaming form.
//!
//! [`MarkdownStream`] takes an answer's deltas and hands out the lines of every block that
//! is complete (a paragraph ended by a blank line, a heading, a table, each line of a code
//! block), so finished text moves to the scrollback while it streams and only the open
//! block is drawn again on each frame: rendering a long answer costs its length once, not
//! once per delta.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use crate::highlight::Highlighter;
use crate::wrap::{truncate, wrap_line};

const CODE_GUTTER: &str = "  ";

/// What a wrapped code line's continuation starts with: the gutter and the line's own
/// indentation (and four more columns, so it reads as a continuation), so wrapped code keeps
/// its shape.
/// (`wrap_line` cuts it to half the row, so a deeply indented line still has room.)
fn code_indent(line: &str) -> String {
    let own = line.len() - line.trim_start_matches([' ', '\t']).len();
    let own: usize = line[..own]
        .chars()
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum();
    format!("{CODE_GUTTER}{}", " ".repeat(own + 4))
}
const INLINE_CODE: Style = Style::new().fg(Color::Cyan);
const LINK: Style = Style::new()
    .fg(Color::Blue)
    .add_modifier(Modifier::UNDERLINED);
const DIM: Style = Style::new().fg(Color::DarkGray);

/// Renders a whole Markdown text.
pub fn render(text: &str, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut gap = false;
    render_into(text, width, &mut gap, &mut out);
    out
}

/// Renders `text` after earlier output: `gap` says a block ended and the next one starts
/// after an empty line.
fn render_into(text: &str, width: usize, gap: &mut bool, out: &mut Vec<Line<'static>>) {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut r = Renderer {
        width: width.max(8),
        out,
        gap,
        styles: vec![Style::new()],
        spans: Vec::new(),
        prefixes: Vec::new(),
        lists: Vec::new(),
        pending_marker: None,
        code: None,
        table: None,
        link: None,
    };
    for event in Parser::new_ext(text, options) {
        r.event(event);
    }
    r.flush_line();
}

struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<Vec<Span<'static>>>>,
    header_rows: usize,
    in_header: bool,
}

struct Renderer<'a> {
    width: usize,
    out: &'a mut Vec<Line<'static>>,
    gap: &'a mut bool,
    styles: Vec<Style>,
    spans: Vec<Span<'static>>,
    /// Line prefixes of the open quotes and list items: (first line, continuation).
    prefixes: Vec<(Vec<Span<'static>>, Vec<Span<'static>>)>,
    lists: Vec<Option<u64>>,
    pending_marker: Option<usize>,
    code: Option<(String, String)>,
    table: Option<Table>,
    link: Option<String>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, patch: Style) {
        let next = self.style().patch(patch);
        self.styles.push(next);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    fn start_block(&mut self) {
        if *self.gap && self.prefixes.is_empty() {
            self.out.push(Line::default());
        }
        *self.gap = false;
    }

    fn end_block(&mut self) {
        self.flush_line();
        if self.prefixes.is_empty() {
            *self.gap = true;
        }
    }

    /// The prefix of the next row: the first-line marker of a fresh item, else the
    /// continuation indents.
    fn prefix(&mut self, first: bool) -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        let marker_at = if first {
            self.pending_marker.take()
        } else {
            None
        };
        for (i, (lead, rest)) in self.prefixes.iter().enumerate() {
            if marker_at == Some(i) {
                spans.extend(lead.iter().cloned());
            } else {
                spans.extend(rest.iter().cloned());
            }
        }
        spans
    }

    fn flush_line(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        let body = std::mem::take(&mut self.spans);
        let lead = self.prefix(true);
        let rest = Line::from(self.prefix(false));
        let mut spans = lead;
        spans.extend(body);
        self.out
            .extend(wrap_line(&Line::from(spans), self.width, &rest));
    }

    fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        if let Some(table) = &mut self.table {
            if let Some(cell) = table.rows.last_mut().and_then(|r| r.last_mut()) {
                cell.push(Span::styled(
                    text.to_owned(),
                    self.styles.last().copied().unwrap_or_default(),
                ));
            }
            return;
        }
        self.spans.push(Span::styled(text.to_owned(), self.style()));
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().patch(INLINE_CODE);
                if let Some(table) = &mut self.table {
                    if let Some(cell) = table.rows.last_mut().and_then(|r| r.last_mut()) {
                        cell.push(Span::styled(code.to_string(), style));
                    }
                } else {
                    self.spans.push(Span::styled(code.to_string(), style));
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush_line(),
            Event::Rule => {
                self.start_block();
                let width = self.width.min(40);
                self.out.push(Line::styled("─".repeat(width), DIM));
                *self.gap = true;
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph if self.pending_marker.is_none() => {
                self.start_block();
            }
            Tag::Heading { level, .. } => {
                self.start_block();
                let style = match level {
                    HeadingLevel::H1 => Style::new()
                        .fg(Color::Magenta)
                        .add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                    HeadingLevel::H2 => {
                        Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD)
                    }
                    _ => Style::new().add_modifier(Modifier::BOLD | Modifier::ITALIC),
                };
                self.push_style(style);
            }
            Tag::BlockQuote(_) => {
                self.flush_line();
                self.start_block();
                let bar = vec![Span::styled("▌ ", Style::new().fg(Color::Green))];
                self.prefixes.push((bar.clone(), bar));
                self.push_style(Style::new().add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.flush_line();
                self.start_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(lang) => lang.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                self.flush_line();
                if self.lists.is_empty() {
                    self.start_block();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush_line();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let text = format!("{n}. ");
                        *n += 1;
                        text
                    }
                    _ => ["• ", "◦ ", "▪ "][depth % 3].to_owned(),
                };
                let indent = " ".repeat(marker.width());
                let lead = vec![Span::styled(marker, Style::new().fg(Color::Blue))];
                self.prefixes.push((lead, vec![Span::raw(indent)]));
                self.pending_marker = Some(self.prefixes.len() - 1);
            }
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.push_style(LINK);
                self.link = Some(dest_url.to_string());
            }
            Tag::Image { dest_url, .. } => {
                self.text("[image: ");
                self.link = Some(dest_url.to_string());
            }
            Tag::Table(alignments) => {
                self.flush_line();
                self.start_block();
                self.table = Some(Table {
                    alignments,
                    rows: Vec::new(),
                    header_rows: 0,
                    in_header: false,
                });
            }
            Tag::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_header = true;
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(Vec::new());
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.end_block(),
            TagEnd::Heading(_) => {
                self.pop_style();
                self.end_block();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_line();
                self.prefixes.pop();
                self.pop_style();
                if self.prefixes.is_empty() {
                    *self.gap = true;
                }
            }
            TagEnd::CodeBlock => {
                if let Some((lang, code)) = self.code.take() {
                    let mut highlighter = Highlighter::new(&lang);
                    let rest = Line::from(self.prefix(false));
                    for line in code.trim_end_matches('\n').split('\n') {
                        let mut spans = rest.spans.clone();
                        spans.push(Span::raw(CODE_GUTTER));
                        spans.extend(highlighter.line(line, Style::new()));
                        let mut indent = rest.spans.clone();
                        indent.push(Span::raw(code_indent(line)));
                        self.out.extend(wrap_line(
                            &Line::from(spans),
                            self.width,
                            &Line::from(indent),
                        ));
                    }
                }
                if self.prefixes.is_empty() {
                    *self.gap = true;
                }
            }
            TagEnd::List(_) => {
                self.flush_line();
                self.lists.pop();
                if self.lists.is_empty() {
                    *self.gap = true;
                }
            }
            TagEnd::Item => {
                self.flush_line();
                self.prefixes.pop();
                self.pending_marker = None;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.link.take() {
                    let shown: String = self
                        .spans
                        .iter()
                        .rev()
                        .take(1)
                        .map(|s| s.content.to_string())
                        .collect();
                    if !url.is_empty() && shown != url {
                        self.spans.push(Span::styled(format!(" ({url})"), DIM));
                    }
                }
            }
            TagEnd::Image => {
                if let Some(url) = self.link.take() {
                    self.text(&format!("]({url})"));
                }
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_header = false;
                    table.header_rows = table.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.render_table(table);
                }
                *self.gap = true;
            }
            _ => {}
        }
    }

    fn render_table(&mut self, table: Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        if columns == 0 {
            return;
        }
        let cell_width =
            |cell: &Vec<Span<'static>>| cell.iter().map(|s| s.content.width()).sum::<usize>();
        let mut widths = vec![1usize; columns];
        for row in &table.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell_width(cell));
            }
        }
        // Borders take 3 columns per cell plus one; shrink the widest columns to fit.
        let budget = self.width.saturating_sub(3 * columns + 1).max(columns);
        while widths.iter().sum::<usize>() > budget {
            let Some((widest, _)) = widths.iter().enumerate().max_by_key(|(_, w)| **w) else {
                break;
            };
            if widths[widest] <= 3 {
                break;
            }
            widths[widest] -= 1;
        }
        let border = Style::new().fg(Color::DarkGray);
        let rule = |left: &str, mid: &str, right: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            Line::styled(format!("{left}{}{right}", parts.join(mid)), border)
        };
        self.out.push(rule("┌", "┬", "┐"));
        for (r, row) in table.rows.iter().enumerate() {
            let mut spans = vec![Span::styled("│", border)];
            for (i, width) in widths.iter().enumerate() {
                let empty = Vec::new();
                let cell = row.get(i).unwrap_or(&empty);
                let text: String = cell.iter().map(|s| s.content.as_ref()).collect();
                let style = cell.first().map(|s| s.style).unwrap_or_default();
                let style = if r < table.header_rows {
                    style.add_modifier(Modifier::BOLD)
                } else {
                    style
                };
                let shown = truncate(&text, *width);
                let pad = width.saturating_sub(shown.width());
                let (before, after) = match table.alignments.get(i) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                spans.push(Span::raw(format!(" {}", " ".repeat(before))));
                spans.push(Span::styled(shown, style));
                spans.push(Span::raw(format!("{} ", " ".repeat(after))));
                spans.push(Span::styled("│", border));
            }
            self.out.push(Line::from(spans));
            if r + 1 == table.header_rows && table.rows.len() > r + 1 {
                self.out.push(rule("├", "┼", "┤"));
            }
        }
        self.out.push(rule("└", "┴", "┘"));
    }
}

/// An open code fence of a stream.
#[derive(Debug)]
struct Fence {
    marker: String,
    highlighter: Highlighter,
}

/// An answer as it streams: complete blocks become lines once; the open rest is drawn live.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    source: String,
    /// Bytes of `source` already rendered into committed lines.
    committed: usize,
    /// Bytes already looked at for block ends (always at a line start).
    scanned: usize,
    fence: Option<Fence>,
    in_table: bool,
    open_lines: usize,
    gap: bool,
}

/// Lines of open text after which a block is committed even though it has not ended, so
/// the live area (redrawn on every frame) stays small.
const MAX_OPEN_LINES: usize = 40;

/// Bytes of the open block the live area renders at most.
const MAX_TAIL_BYTES: usize = 16 * 1024;

fn fence_marker(line: &str) -> Option<(String, String)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    for ch in ['`', '~'] {
        let count = trimmed.chars().take_while(|c| *c == ch).count();
        if count >= 3 {
            let info = trimmed[count..].trim().to_owned();
            if ch == '`' && info.contains('`') {
                return None;
            }
            return Some((ch.to_string().repeat(count), info));
        }
    }
    None
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds streamed text.
    pub fn push(&mut self, delta: &str) {
        self.source.push_str(delta);
    }

    /// Everything received.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The lines of blocks completed since the last call.
    pub fn take_complete(&mut self, width: usize) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        while let Some(end) = self.source[self.scanned..].find('\n') {
            let start = self.scanned;
            let end = start + end + 1;
            self.scanned = end;
            let line = self.source[start..end]
                .trim_end_matches(['\n', '\r'])
                .to_owned();
            if let Some(fence) = &mut self.fence {
                if let Some((marker, info)) = fence_marker(&line)
                    && info.is_empty()
                    && marker.starts_with(&fence.marker)
                {
                    self.fence = None;
                    self.gap = true;
                } else {
                    let mut spans = vec![Span::raw(CODE_GUTTER)];
                    spans.extend(fence.highlighter.line(&line, Style::new()));
                    out.extend(wrap_line(
                        &Line::from(spans),
                        width,
                        &Line::from(code_indent(&line)),
                    ));
                }
                self.committed = end;
                continue;
            }
            if let Some((marker, info)) = fence_marker(&line) {
                self.commit_until(start, width, &mut out);
                if self.gap {
                    out.push(Line::default());
                    self.gap = false;
                }
                self.fence = Some(Fence {
                    marker,
                    highlighter: Highlighter::new(&info),
                });
                self.committed = end;
                continue;
            }
            let trimmed = line.trim();
            let table_row = trimmed.starts_with('|');
            if self.in_table && !table_row {
                self.in_table = false;
                self.commit_until(start, width, &mut out);
            }
            if trimmed.is_empty() || trimmed.starts_with('#') || is_rule(trimmed) {
                self.commit_until(end, width, &mut out);
                continue;
            }
            if table_row {
                self.in_table = true;
            }
            self.open_lines += 1;
            if self.open_lines >= MAX_OPEN_LINES && !self.in_table {
                self.commit_until(end, width, &mut out);
            }
        }
        out
    }

    fn commit_until(&mut self, end: usize, width: usize, out: &mut Vec<Line<'static>>) {
        if end > self.committed {
            let text = &self.source[self.committed..end];
            if !text.trim().is_empty() {
                render_into(text, width, &mut self.gap, out);
            }
            self.committed = end;
        }
        self.open_lines = 0;
    }

    /// The open rest, as it would render now (not committed).
    pub fn tail(&self, width: usize) -> Vec<Line<'static>> {
        let mut rest = &self.source[self.committed..];
        // A block that never ends (one huge line) is drawn from its last part only: the
        // live area shows the end anyway, and a frame must not cost the whole block.
        if rest.len() > MAX_TAIL_BYTES {
            let mut cut = rest.len() - MAX_TAIL_BYTES;
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            rest = &rest[cut..];
        }
        if rest.is_empty() {
            return Vec::new();
        }
        if let Some(fence) = &self.fence {
            let mut highlighter = fence.highlighter.clone();
            return rest
                .split('\n')
                .filter(|l| !l.is_empty())
                .flat_map(|l| {
                    let mut spans = vec![Span::raw(CODE_GUTTER)];
                    spans.extend(highlighter.line(l, Style::new()));
                    wrap_line(&Line::from(spans), width, &Line::from(code_indent(l)))
                })
                .collect();
        }
        // A block ended just before: the open one starts after the same blank line it
        // will have once committed.
        let mut gap = self.gap;
        let mut out = Vec::new();
        render_into(rest, width, &mut gap, &mut out);
        out
    }

    /// The lines committed so far, rendered again at `width` (after a resize).
    pub fn committed_lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut fresh = Self::default();
        fresh.push(&self.source[..self.committed]);
        fresh.finish(width)
    }

    /// Commits everything left (the answer ended).
    pub fn finish(&mut self, width: usize) -> Vec<Line<'static>> {
        if !self.source.ends_with('\n') && !self.source.is_empty() {
            self.source.push('\n');
        }
        let mut out = self.take_complete(width);
        if self.fence.is_some() {
            self.fence = None;
            self.committed = self.source.len();
        }
        let end = self.source.len();
        self.commit_until(end, width, &mut out);
        out
    }
}

fn is_rule(line: &str) -> bool {
    let chars: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    chars.len() >= 3
        && (chars.iter().all(|c| *c == '-')
            || chars.iter().all(|c| *c == '*')
            || chars.iter().all(|c| *c == '_'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn plain(lines: &[Line<'static>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    const SAMPLE: &str = "# Title\n\nSome **bold** and `code` with a [link](https://x.dev).\n\n- one\n- two\n  1. nested\n\n```rust\nfn main() {}\n```\n\n| a | b |\n|---|--:|\n| 1 | 22 |\n\n> quoted\n";

    #[test]
    fn renders_every_block_kind() {
        let lines = plain(&render(SAMPLE, 60));
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn streaming_commits_the_same_lines_as_rendering_whole() {
        let whole = plain(&render(SAMPLE, 60));
        for chunk in [1, 3, 7, 50] {
            let mut stream = MarkdownStream::new();
            let mut got = Vec::new();
            let chars: Vec<char> = SAMPLE.chars().collect();
            for piece in chars.chunks(chunk) {
                stream.push(&piece.iter().collect::<String>());
                got.extend(stream.take_complete(60));
            }
            got.extend(stream.finish(60));
            assert_eq!(plain(&got), whole, "chunk size {chunk}");
        }
    }

    #[test]
    fn code_lines_commit_as_they_arrive() {
        let mut stream = MarkdownStream::new();
        stream.push("```py\nprint(1)\n");
        assert_eq!(plain(&stream.take_complete(40)), ["  print(1)"]);
        stream.push("pri");
        assert_eq!(plain(&stream.tail(40)), ["  pri"]);
    }

    #[test]
    fn a_long_paragraph_without_breaks_is_committed_in_pieces() {
        let mut stream = MarkdownStream::new();
        for i in 0..100 {
            stream.push(&format!("line {i}\n"));
        }
        let committed = stream.take_complete(80);
        assert!(!committed.is_empty());
        assert!(stream.tail(80).len() < MAX_OPEN_LINES);
    }

    proptest! {
        #[test]
        fn streaming_never_loses_words(words in proptest::collection::vec("[a-z]{1,8}|\n|\n\n|\n```\n|# |- |\\| ", 0..80), split in 1usize..20) {
            let text: String = words.concat();
            let mut stream = MarkdownStream::new();
            let mut got = Vec::new();
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(split) {
                stream.push(&piece.iter().collect::<String>());
                got.extend(stream.take_complete(50));
                let _ = stream.tail(50);
            }
            got.extend(stream.finish(50));
            let shown: String = plain(&got).join(" ");
            for word in text.split(|c: char| !c.is_ascii_lowercase()).filter(|w| !w.is_empty()) {
                prop_assert!(shown.contains(word), "{word} missing from {shown:?}");
            }
        }
    }
}
