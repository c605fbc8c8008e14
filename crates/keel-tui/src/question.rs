//! A question from an MCP server, asked in place of the composer: a form to fill (text,
//! numbers, yes/no, one or several of a list, each with its default) or a page to agree to
//! open. The server's words are shown as its own, never as keel's; nothing is sent until
//! the user submits, and what is sent is checked against the form first.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel_protocol::{Ask, Field, FieldKind, Form, Question, QuestionAnswer};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::{Map, Value};

use crate::composer::Composer;
use crate::visible::visible;
use crate::wrap::wrap_line;

const DIM: Style = Style::new().fg(Color::DarkGray);
const FOCUS: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);

/// One field's value as it is being filled in.
#[derive(Debug, Clone)]
enum Entry {
    /// Text or a number, typed.
    Typed(Composer),
    /// Yes, no, or not answered.
    Flag(Option<bool>),
    /// One of a list (the highlighted option, and the one chosen).
    One { at: usize, chosen: Option<usize> },
    /// Some of a list (the highlighted option, and which are picked).
    Many { at: usize, picked: Vec<bool> },
}

/// A question being answered.
#[derive(Debug, Clone)]
pub struct QuestionPrompt {
    /// The question.
    pub question: Question,
    values: Vec<Entry>,
    /// The focused row: a field, or past the fields the two buttons.
    focus: usize,
    /// On the buttons row: decline rather than submit.
    on_decline: bool,
    /// Why the last submit was refused.
    error: Option<String>,
    /// An answer was sent: the prompt stays until the runtime says the question ended
    /// (an answer it refuses leaves it open).
    pub sent: bool,
}

/// What a key did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The prompt stays.
    Stay,
    /// Send this answer.
    Answer(QuestionAnswer),
}

impl QuestionPrompt {
    /// The prompt for `question`, its fields holding their defaults.
    pub fn new(question: Question) -> Self {
        let values = match &question.ask {
            Ask::Form(form) => form.fields.iter().map(initial).collect(),
            Ask::Url { .. } => Vec::new(),
        };
        Self {
            question,
            values,
            focus: 0,
            on_decline: false,
            error: None,
            sent: false,
        }
    }

    fn fields(&self) -> &[Field] {
        match &self.question.ask {
            Ask::Form(form) => &form.fields,
            Ask::Url { .. } => &[],
        }
    }

    /// Whether the buttons row has the focus.
    fn on_buttons(&self) -> bool {
        self.focus >= self.fields().len()
    }

    /// Handles a key.
    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        let outcome = self.key_inner(key);
        if matches!(outcome, Outcome::Answer(_)) {
            self.sent = true;
        }
        outcome
    }

    fn key_inner(&mut self, key: KeyEvent) -> Outcome {
        if key.code == KeyCode::Esc {
            return Outcome::Answer(QuestionAnswer::Cancel);
        }
        if let Ask::Url { .. } = self.question.ask {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('o') => Outcome::Answer(accept(Map::new())),
                KeyCode::Char('n') => Outcome::Answer(QuestionAnswer::Decline),
                KeyCode::Left | KeyCode::Right | KeyCode::Tab => {
                    self.on_decline = !self.on_decline;
                    Outcome::Stay
                }
                KeyCode::Enter if self.on_decline => Outcome::Answer(QuestionAnswer::Decline),
                KeyCode::Enter => Outcome::Answer(accept(Map::new())),
                _ => Outcome::Stay,
            };
        }
        let count = self.fields().len();
        let back = key.code == KeyCode::BackTab
            || (key.code == KeyCode::Tab && key.modifiers.contains(KeyModifiers::SHIFT));
        match key.code {
            _ if back => self.focus = self.focus.checked_sub(1).unwrap_or(count),
            KeyCode::Tab => self.focus = (self.focus + 1) % (count + 1),
            KeyCode::Up => self.focus = self.focus.saturating_sub(1),
            KeyCode::Down => self.focus = (self.focus + 1).min(count),
            KeyCode::Enter if self.on_buttons() && self.on_decline => {
                return Outcome::Answer(QuestionAnswer::Decline);
            }
            KeyCode::Enter if self.on_buttons() => return self.submit(),
            KeyCode::Enter => self.focus += 1,
            KeyCode::Left | KeyCode::Right if self.on_buttons() => {
                self.on_decline = !self.on_decline;
            }
            _ if self.on_buttons() => {}
            _ => self.edit(key),
        }
        Outcome::Stay
    }

    /// Shows why the runtime refused the answer sent; the prompt takes another.
    pub fn refused(&mut self, why: String) {
        self.sent = false;
        self.error = Some(why);
    }

    /// Pasted text goes into the focused text field.
    pub fn paste(&mut self, text: &str) {
        if let Some(Entry::Typed(composer)) = self.values.get_mut(self.focus) {
            composer.insert(&text.replace(['\n', '\r'], " "));
        }
    }

    /// A key on the focused field.
    fn edit(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let Some(value) = self.values.get_mut(self.focus) else {
            return;
        };
        match value {
            Entry::Typed(composer) => match key.code {
                KeyCode::Backspace => composer.backspace(),
                KeyCode::Delete => composer.delete(),
                KeyCode::Left => composer.left(),
                KeyCode::Right => composer.right(),
                KeyCode::Home => composer.home(),
                KeyCode::End => composer.end(),
                KeyCode::Char('u') if ctrl => composer.kill_to_start(),
                KeyCode::Char(c) if !ctrl => composer.insert(&c.to_string()),
                _ => {}
            },
            Entry::Flag(flag) => match key.code {
                KeyCode::Char(' ') | KeyCode::Left | KeyCode::Right => {
                    *flag = Some(!flag.unwrap_or(false));
                }
                KeyCode::Char('y') => *flag = Some(true),
                KeyCode::Char('n') => *flag = Some(false),
                _ => {}
            },
            Entry::One { at, chosen } => {
                let options = options_of(&self.question.ask, self.focus);
                match key.code {
                    KeyCode::Left => *at = at.checked_sub(1).unwrap_or(options - 1),
                    KeyCode::Right => *at = (*at + 1) % options.max(1),
                    KeyCode::Char(' ') => *chosen = Some(*at),
                    _ => {}
                }
                // Moving along the list chooses, as a radio list does.
                if matches!(key.code, KeyCode::Left | KeyCode::Right) {
                    *chosen = Some(*at);
                }
            }
            Entry::Many { at, picked } => match key.code {
                KeyCode::Left => *at = at.checked_sub(1).unwrap_or(picked.len() - 1),
                KeyCode::Right => *at = (*at + 1) % picked.len().max(1),
                KeyCode::Char(' ') => {
                    if let Some(p) = picked.get_mut(*at) {
                        *p = !*p;
                    }
                }
                _ => {}
            },
        }
        self.error = None;
    }

    /// The form's values, checked; a refusal stays on the prompt with its reason and the
    /// focus on the field at fault.
    fn submit(&mut self) -> Outcome {
        let fields = self.fields().to_vec();
        let mut content = Map::new();
        for (index, (field, value)) in fields.iter().zip(&self.values).enumerate() {
            match read(field, value) {
                Ok(Some(v)) => {
                    content.insert(field.name.clone(), v);
                }
                Ok(None) => {}
                Err(why) => {
                    self.error = Some(format!("`{}`: {why}", field.label()));
                    self.focus = index;
                    return Outcome::Stay;
                }
            }
        }
        let form = Form { fields };
        if let Err(why) = form.check(&content) {
            self.focus = form
                .fields
                .iter()
                .position(|f| why.contains(&format!("`{}`", f.label())))
                .unwrap_or(self.focus);
            self.error = Some(why);
            return Outcome::Stay;
        }
        Outcome::Answer(accept(content))
    }

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

fn accept(content: Map<String, Value>) -> QuestionAnswer {
    QuestionAnswer::Accept {
        content,
        opened: false,
    }
}

/// How many options field `index` of a form lists.
fn options_of(ask: &Ask, index: usize) -> usize {
    match ask {
        Ask::Form(form) => match form.fields.get(index).map(|f| &f.kind) {
            Some(FieldKind::Choice { options }) | Some(FieldKind::Choices { options, .. }) => {
                options.len().max(1)
            }
            _ => 1,
        },
        Ask::Url { .. } => 1,
    }
}

/// A field's starting value: its default.
fn initial(field: &Field) -> Entry {
    let default = field.default.as_ref();
    match &field.kind {
        FieldKind::Text { .. } | FieldKind::Number { .. } => {
            let mut composer = Composer::new();
            match default {
                Some(Value::String(text)) => composer.set(text),
                Some(Value::Number(n)) => composer.set(&n.to_string()),
                _ => {}
            }
            Entry::Typed(composer)
        }
        FieldKind::Boolean => Entry::Flag(default.and_then(Value::as_bool)),
        FieldKind::Choice { options } => {
            let chosen = default
                .and_then(Value::as_str)
                .and_then(|d| options.iter().position(|o| o.value == d));
            Entry::One {
                at: chosen.unwrap_or(0),
                chosen,
            }
        }
        FieldKind::Choices { options, .. } => {
            let wanted: Vec<&str> = default
                .and_then(Value::as_array)
                .map(|all| all.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Entry::Many {
                at: 0,
                picked: options
                    .iter()
                    .map(|o| wanted.contains(&o.value.as_str()))
                    .collect(),
            }
        }
    }
}

/// A field's value to send: `None` when left empty.
fn read(field: &Field, value: &Entry) -> Result<Option<Value>, String> {
    Ok(match (value, &field.kind) {
        (Entry::Typed(composer), _) if composer.text().trim().is_empty() => None,
        (Entry::Typed(composer), FieldKind::Number { integer, .. }) => {
            let text = composer.text().trim();
            let number = if *integer {
                text.parse::<i64>().ok().map(Value::from)
            } else {
                text.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
            };
            Some(number.ok_or_else(|| {
                if *integer {
                    "expected a whole number".to_owned()
                } else {
                    "expected a number".to_owned()
                }
            })?)
        }
        (Entry::Typed(composer), _) => Some(Value::String(composer.text().to_owned())),
        (Entry::Flag(flag), _) => flag.map(Value::Bool),
        (Entry::One { chosen, .. }, FieldKind::Choice { options }) => chosen
            .and_then(|i| options.get(i))
            .map(|o| Value::String(o.value.clone())),
        (Entry::Many { picked, .. }, FieldKind::Choices { options, .. }) => {
            let chosen: Vec<Value> = options
                .iter()
                .zip(picked)
                .filter(|(_, p)| **p)
                .map(|(o, _)| Value::String(o.value.clone()))
                .collect();
            (!chosen.is_empty() || field.required).then_some(Value::Array(chosen))
        }
        _ => None,
    })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use keel_protocol::Choice;
    use serde_json::json;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn type_text(prompt: &mut QuestionPrompt, text: &str) {
        for c in text.chars() {
            prompt.key(key(KeyCode::Char(c)));
        }
    }

    fn question() -> Question {
        let field = |name: &str, required: bool, kind: FieldKind, default: Option<Value>| Field {
            name: name.into(),
            title: None,
            description: None,
            required,
            kind,
            default,
        };
        Question {
            id: "q-1".into(),
            server: "tracker".into(),
            tool_call_id: None,
            message: "Details for the ticket".into(),
            ask: Ask::Form(Form {
                fields: vec![
                    field(
                        "title",
                        true,
                        FieldKind::Text {
                            min_length: None,
                            max_length: None,
                            format: None,
                        },
                        None,
                    ),
                    field(
                        "points",
                        false,
                        FieldKind::Number {
                            integer: true,
                            minimum: Some(1.0),
                            maximum: None,
                        },
                        Some(json!(3)),
                    ),
                    field("urgent", false, FieldKind::Boolean, None),
                    field(
                        "team",
                        false,
                        FieldKind::Choice {
                            options: vec![
                                Choice {
                                    value: "core".into(),
                                    label: "Core".into(),
                                },
                                Choice {
                                    value: "web".into(),
                                    label: "Web".into(),
                                },
                            ],
                        },
                        Some(json!("web")),
                    ),
                ],
            }),
        }
    }

    #[test]
    fn a_form_is_filled_field_by_field_and_submitted_with_its_defaults() {
        let mut prompt = QuestionPrompt::new(question());
        type_text(&mut prompt, "Fix login");
        prompt.key(key(KeyCode::Enter));
        prompt.key(key(KeyCode::Enter));
        prompt.key(key(KeyCode::Char(' ')));
        prompt.key(key(KeyCode::Enter));
        prompt.key(key(KeyCode::Enter));
        let outcome = prompt.key(key(KeyCode::Enter));
        assert_eq!(
            outcome,
            Outcome::Answer(accept(
                json!({"title": "Fix login", "points": 3, "urgent": true, "team": "web"})
                    .as_object()
                    .cloned()
                    .unwrap()
            ))
        );
    }

    #[test]
    fn a_submit_that_does_not_fit_stays_and_names_the_field() {
        let mut prompt = QuestionPrompt::new(question());
        prompt.key(key(KeyCode::BackTab));
        assert_eq!(prompt.key(key(KeyCode::Enter)), Outcome::Stay);
        assert!(
            prompt
                .error
                .as_deref()
                .unwrap()
                .contains("`title` is required")
        );
        assert_eq!(prompt.focus, 0, "the focus goes to the field at fault");
        type_text(&mut prompt, "x");
        prompt.key(key(KeyCode::Tab));
        prompt.key(key(KeyCode::Backspace));
        type_text(&mut prompt, "0");
        prompt.focus = 4;
        assert_eq!(prompt.key(key(KeyCode::Enter)), Outcome::Stay);
        assert!(prompt.error.as_deref().unwrap().contains("at least 1"));
        let (lines, _) = prompt.lines(80, 100);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        assert!(text.contains("at least 1"), "{text}");
    }

    #[test]
    fn esc_dismisses_and_decline_says_no() {
        let mut prompt = QuestionPrompt::new(question());
        assert_eq!(
            prompt.key(key(KeyCode::Esc)),
            Outcome::Answer(QuestionAnswer::Cancel)
        );
        prompt.key(key(KeyCode::BackTab));
        prompt.key(key(KeyCode::Right));
        assert_eq!(
            prompt.key(key(KeyCode::Enter)),
            Outcome::Answer(QuestionAnswer::Decline)
        );
    }

    #[test]
    fn a_page_shows_its_host_and_opens_only_on_yes() {
        let mut question = question();
        question.ask = Ask::Url {
            url: "https://pay.example.com/checkout".into(),
            host: "pay.example.com".into(),
        };
        let mut prompt = QuestionPrompt::new(question);
        let (lines, _) = prompt.lines(80, 100);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        assert!(
            text.contains("Open pay.example.com in your browser?"),
            "{text}"
        );
        assert_eq!(prompt.key(key(KeyCode::Char('x'))), Outcome::Stay);
        assert_eq!(
            prompt.key(key(KeyCode::Char('n'))),
            Outcome::Answer(QuestionAnswer::Decline)
        );
        assert_eq!(
            prompt.key(key(KeyCode::Char('y'))),
            Outcome::Answer(accept(Map::new()))
        );
    }

    #[test]
    fn a_form_taller_than_its_room_keeps_the_focused_field_in_view() {
        let mut long = question();
        if let Ask::Form(form) = &mut long.ask {
            let extra = form.fields[2].clone();
            for i in 0..12 {
                let mut field = extra.clone();
                field.name = format!("flag{i}");
                form.fields.push(field);
            }
        }
        let mut prompt = QuestionPrompt::new(long);
        for _ in 0..10 {
            prompt.key(key(KeyCode::Tab));
        }
        let (lines, _) = prompt.lines(80, 16);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        assert!(lines.len() <= 16, "{text}");
        assert!(text.contains("› flag6"), "the focused field shows: {text}");
        assert!(
            text.contains("more field(s)") && text.contains("[ Submit ]"),
            "{text}"
        );
        assert!(
            text.contains("MCP server tracker"),
            "the asker stays named: {text}"
        );
    }
}
