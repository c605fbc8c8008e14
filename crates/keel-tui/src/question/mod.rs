//! A question from an MCP server, asked in place of the composer: a form to fill (text,
//! numbers, yes/no, one or several of a list, each with its default) or a page to agree to
//! open. The server's words are shown as its own, never as keel's; nothing is sent until
//! the user submits, and what is sent is checked against the form first.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel_protocol::{Ask, Field, FieldKind, Form, Question, QuestionAnswer};
use ratatui::style::{Color, Modifier, Style};
use serde_json::{Map, Value};

use crate::composer::Composer;

mod view;

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

#[cfg(test)]
mod tests;
