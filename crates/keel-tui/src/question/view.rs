//! Drawing a question: the server and its message, then the form's fields (windowed
//! around the focused one when the form is taller than its room) or the page's host, the
//! buttons, the last refusal and the keys.

use keel_protocol::{Ask, Field, FieldKind};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::{DIM, Entry, FOCUS, QuestionPrompt};
use crate::visible::visible;
use crate::wrap::wrap_line;

impl QuestionPrompt {
    /// The prompt's lines at `width` within `room` rows (a long form shows the fields
    /// around the focused one), and the cursor's (row, column) in a text field.
    pub fn lines(&self, width: usize, room: usize) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let mut out = vec![Line::styled(
            "─".repeat(width),
            Style::new().fg(Color::Yellow),
        )];
        let server = visible(&self.question.server).into_owned();
        let wrap = |line: Line<'static>, out: &mut Vec<Line<'static>>| {
            out.extend(wrap_line(&line, width, &Line::from("    ")));
        };
        let what = match &self.question.ask {
            Ask::Form(_) => "asks you to fill in a form",
            Ask::Url { .. } => "asks you to open a page",
        };
        wrap(
            Line::from(vec![
                Span::styled("MCP server ", bold),
                Span::styled(server, bold.fg(Color::Yellow)),
                Span::styled(format!(" {what} (your answer goes to the server):"), bold),
            ]),
            &mut out,
        );
        for line in visible(&self.question.message).lines().take(12) {
            wrap(Line::styled(format!("  “{line}”"), DIM), &mut out);
        }
        let mut cursor = None;
        match &self.question.ask {
            Ask::Url { url, host } => {
                wrap(
                    Line::from(vec![
                        Span::raw("  Open "),
                        Span::styled(visible(host).into_owned(), bold.fg(Color::Yellow)),
                        Span::raw(" in your browser?"),
                    ]),
                    &mut out,
                );
                wrap(Line::styled(format!("  {}", visible(url)), DIM), &mut out);
                out.push(self.buttons("Open (y)", "No (n)"));
                out.push(Line::styled(
                    "  enter: choose · ←/→: switch · esc: dismiss",
                    DIM,
                ));
            }
            Ask::Form(form) => {
                // Each field's lines, and the cursor's row among them when focused.
                let mut blocks: Vec<Block> = Vec::new();
                for (index, (field, value)) in form.fields.iter().zip(&self.values).enumerate() {
                    let mut block = Vec::new();
                    let mut at = None;
                    let focused = index == self.focus;
                    let mark = if focused { "› " } else { "  " };
                    let star = if field.required { " *" } else { "" };
                    let label = format!("{mark}{}{star}", visible(field.label()));
                    block.push(Line::styled(label, if focused { FOCUS } else { bold }));
                    if let Some(description) = &field.description {
                        wrap(
                            Line::styled(format!("    {}", visible(description)), DIM),
                            &mut block,
                        );
                    }
                    let (line, column) = value_line(field, value, focused);
                    if let (true, Some(column)) = (focused, column) {
                        at = Some((block.len() as u16, column.min(width as u16)));
                        block.push(line);
                    } else {
                        // A long list of choices wraps; a text field is one line.
                        wrap(line, &mut block);
                    }
                    blocks.push((block, at));
                }
                // The fields that fit beside the rest, around the focused one.
                let fixed = out.len() + 4 + usize::from(self.error.is_some());
                let (first, last) = window(&blocks, self.focus, room.saturating_sub(fixed));
                if first > 0 {
                    out.push(Line::styled(format!("  ↑ {first} more field(s)"), DIM));
                }
                for (block, at) in &blocks[first..last] {
                    if let Some((row, column)) = at {
                        cursor = Some((out.len() as u16 + row, *column));
                    }
                    out.extend(block.iter().cloned());
                }
                if last < blocks.len() {
                    out.push(Line::styled(
                        format!("  ↓ {} more field(s)", blocks.len() - last),
                        DIM,
                    ));
                }
                out.push(self.buttons("Submit", "Decline"));
                if self.sent {
                    out.push(Line::styled("  sent; waiting for the server…", DIM));
                }
                if let Some(error) = &self.error {
                    wrap(
                        Line::styled(format!("  {}", visible(error)), Style::new().fg(Color::Red)),
                        &mut out,
                    );
                }
                wrap(
                    Line::styled(
                        "  tab/↑↓: move · space: pick · ←/→: choose · enter: next, then submit · esc: dismiss",
                        DIM,
                    ),
                    &mut out,
                );
            }
        }
        (out, cursor)
    }

    /// The two buttons, the chosen one marked when the row has the focus.
    fn buttons(&self, yes: &str, no: &str) -> Line<'static> {
        let row = matches!(self.question.ask, Ask::Url { .. }) || self.on_buttons();
        let style = |on: bool| if row && on { FOCUS } else { Style::new() };
        let mark = |on: bool| if row && on { "›" } else { " " };
        Line::from(vec![
            Span::raw("  "),
            Span::styled(
                format!("{}[ {yes} ]", mark(!self.on_decline)),
                style(!self.on_decline),
            ),
            Span::raw("  "),
            Span::styled(
                format!("{}[ {no} ]", mark(self.on_decline)),
                style(self.on_decline),
            ),
        ])
    }
}

/// A field's lines, and the cursor's (row, column) among them when it is focused text.
type Block = (Vec<Line<'static>>, Option<(u16, u16)>);

/// The blocks `first..last` to show: the focused one (or the last, on the buttons), then
/// as many around it as fit in `room` rows; at least the focused one.
fn window(blocks: &[Block], focus: usize, room: usize) -> (usize, usize) {
    if blocks.is_empty() {
        return (0, 0);
    }
    let total: usize = blocks.iter().map(|(b, _)| b.len()).sum();
    if total <= room {
        return (0, blocks.len());
    }
    // Two rows go to the "more fields" lines.
    let room = room.saturating_sub(2);
    let focus = focus.min(blocks.len() - 1);
    let (mut first, mut last) = (focus, focus + 1);
    let mut used = blocks[focus].0.len();
    loop {
        let below = blocks.get(last).map(|(b, _)| b.len());
        let above = first.checked_sub(1).map(|i| blocks[i].0.len());
        match (below, above) {
            (Some(n), _) if used + n <= room => {
                used += n;
                last += 1;
            }
            (_, Some(n)) if used + n <= room => {
                used += n;
                first -= 1;
            }
            _ => return (first, last),
        }
    }
}

/// The line showing a field's value, and the cursor's column in a text field.
fn value_line(field: &Field, value: &Entry, focused: bool) -> (Line<'static>, Option<u16>) {
    let on = |yes: bool| if yes { FOCUS } else { Style::new() };
    match (value, &field.kind) {
        (Entry::Typed(composer), kind) => {
            let text = visible(composer.text()).into_owned();
            let column =
                4 + unicode_width::UnicodeWidthStr::width(&composer.text()[..composer.cursor()])
                    as u16;
            let hint = match kind {
                FieldKind::Text {
                    format: Some(format),
                    ..
                } => format!("({format})"),
                FieldKind::Number { integer: true, .. } => "(a whole number)".into(),
                FieldKind::Number { .. } => "(a number)".into(),
                _ => "(type here)".into(),
            };
            let line = if text.is_empty() {
                Line::from(vec![Span::raw("    "), Span::styled(hint, DIM)])
            } else {
                Line::from(vec![Span::raw("    "), Span::raw(text)])
            };
            (line, focused.then_some(column))
        }
        (Entry::Flag(flag), _) => {
            let mark = match flag {
                Some(true) => "[x] yes",
                Some(false) => "[ ] no",
                None => "[ ] not answered",
            };
            (
                Line::from(vec![Span::raw("    "), Span::styled(mark, on(focused))]),
                None,
            )
        }
        (Entry::One { at, chosen }, FieldKind::Choice { options }) => {
            let mut spans = vec![Span::raw("   ")];
            for (i, option) in options.iter().enumerate() {
                let dot = if *chosen == Some(i) { "(•)" } else { "( )" };
                spans.push(Span::styled(
                    format!(" {dot} {}", visible(&option.label)),
                    on(focused && *at == i),
                ));
            }
            (Line::from(spans), None)
        }
        (Entry::Many { at, picked }, FieldKind::Choices { options, .. }) => {
            let mut spans = vec![Span::raw("   ")];
            for (i, (option, p)) in options.iter().zip(picked).enumerate() {
                let mark = if *p { "[x]" } else { "[ ]" };
                spans.push(Span::styled(
                    format!(" {mark} {}", visible(&option.label)),
                    on(focused && *at == i),
                ));
            }
            (Line::from(spans), None)
        }
        _ => (Line::from(""), None),
    }
}
