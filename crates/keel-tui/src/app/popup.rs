//! Popups over the composer: the slash and `@` completions, pickers (model, permission
//! mode, sessions, rewind, queue, prompt history, tasks), a task's details, the todo list and
//! the permission prompt and an MCP server's question.

use keel_protocol::{PermissionRequest, TaskInfo};
use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

use crate::composer::Composer;

/// Rows a popup lists at most.
pub const POPUP_ROWS: usize = 8;

/// What a picker picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickerKind {
    /// A model for the next turns.
    Model,
    /// A permission mode.
    Permission,
    /// A session to resume (or rename, delete).
    Sessions,
    /// A user message to go back to.
    Rewind,
    /// A queued input to edit or cancel.
    Queue,
    /// A prompt from the history.
    History,
    /// A task of the session, to see and perhaps stop.
    Tasks,
    /// What to do with a plan submitted for review.
    PlanReview,
}

/// One row of a picker.
#[derive(Debug, Clone, PartialEq)]
pub struct PickItem {
    /// What the row shows.
    pub label: String,
    /// Dimmed text after it.
    pub detail: String,
    /// What choosing it means (an id, a model name, a text).
    pub value: String,
    /// A revision, for rewind rows.
    pub revision: Option<u64>,
}

/// A filterable list.
#[derive(Debug, Clone)]
pub struct Picker {
    /// What it picks.
    pub kind: PickerKind,
    /// Its title.
    pub title: String,
    /// Every row.
    pub items: Vec<PickItem>,
    /// The typed filter.
    pub filter: String,
    /// The highlighted row among the filtered ones.
    pub selected: usize,
    /// A session row waiting for a second delete key.
    pub confirm_delete: Option<String>,
    /// A session being renamed, with the new title typed so far.
    pub renaming: Option<(String, Composer)>,
}

impl Picker {
    /// A picker over `items`.
    pub fn new(kind: PickerKind, title: impl Into<String>, items: Vec<PickItem>) -> Self {
        Self {
            kind,
            title: title.into(),
            items,
            filter: String::new(),
            selected: 0,
            confirm_delete: None,
            renaming: None,
        }
    }

    /// The rows the filter keeps, best first.
    pub fn visible(&self) -> Vec<&PickItem> {
        ranked(&self.items, &self.filter, |item| {
            format!("{} {}", item.label, item.detail)
        })
        .into_iter()
        .map(|i| &self.items[i])
        .collect()
    }

    /// The highlighted row.
    pub fn current(&self) -> Option<PickItem> {
        self.visible().get(self.selected).map(|i| (*i).clone())
    }

    /// Moves the highlight by `delta`, wrapping.
    pub fn step(&mut self, delta: isize) {
        let count = self.visible().len();
        if count == 0 {
            self.selected = 0;
            return;
        }
        let next = (self.selected as isize + delta).rem_euclid(count as isize);
        self.selected = next as usize;
        self.confirm_delete = None;
    }
}

/// The indexes of `items` whose `haystack` fuzzily matches `query`, best first (ties in
/// their order); all of them for an empty query.
fn ranked<T>(items: &[T], query: &str, haystack: impl Fn(&T) -> String) -> Vec<usize> {
    if query.is_empty() {
        return (0..items.len()).collect();
    }
    let mut matcher = Matcher::new(Config::DEFAULT);
    let pattern = Pattern::parse(query, CaseMatching::Ignore, Normalization::Smart);
    let mut buf = Vec::new();
    let mut scored: Vec<(u32, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            pattern
                .score(Utf32Str::new(&haystack(item), &mut buf), &mut matcher)
                .map(|s| (s, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}

/// The mentions (MCP resources) whose text or detail matches `query`, best first, at
/// most `rows`.
pub fn mention_matches(
    mentions: &[keel_protocol::MentionInfo],
    query: &str,
    rows: usize,
) -> Vec<String> {
    ranked(mentions, query, |m| format!("{} {}", m.text, m.detail))
        .into_iter()
        .take(rows)
        .map(|i| mentions[i].text.clone())
        .collect()
}

/// Where the permission prompt is.
#[derive(Debug, Clone)]
pub enum Stage {
    /// Choosing among allow once, always, deny.
    Choose(usize),
    /// Choosing the scope of "always".
    Scope(usize),
    /// Confirming the exact rule of a scope.
    Confirm(usize),
    /// Typing what the model is told.
    Reason(Composer),
}

/// The permission prompt.
#[derive(Debug, Clone)]
pub struct PermissionPrompt {
    /// The question.
    pub request: PermissionRequest,
    /// Where it is.
    pub stage: Stage,
    /// Where the change's preview window is, in lines from where it opens (at the first
    /// changed line): PageUp and PageDown move it.
    pub scroll: isize,
}

/// The popup shown.
#[derive(Debug, Clone)]
pub enum Popup {
    /// Slash-command completion (its filter is the composer's text).
    Slash(usize),
    /// `@` file completion: the highlighted row and the matches for the `@` word.
    Files {
        /// The highlighted row.
        selected: usize,
        /// (path, is a folder), best first.
        matches: Vec<(String, bool)>,
    },
    /// A picker.
    Picker(Picker),
    /// The permission prompt.
    Permission(PermissionPrompt),
    /// An MCP server's question (a form, or a page to open).
    Question(crate::question::QuestionPrompt),
    /// The todo list.
    Todos,
    /// One task's details (`s` stops it while it runs).
    Task(TaskInfo),
}

impl Popup {
    /// The permission prompt for `request`.
    pub fn permission(request: PermissionRequest) -> Self {
        Popup::Permission(PermissionPrompt {
            request,
            stage: Stage::Choose(0),
            scroll: 0,
        })
    }

    /// The request a permission prompt answers.
    pub fn permission_id(&self) -> Option<&str> {
        match self {
            Popup::Permission(p) => Some(&p.request.id),
            _ => None,
        }
    }

    /// Whether it waits for the user's answer to keel's or a server's question (another
    /// question waits behind it).
    pub fn is_question(&self) -> bool {
        matches!(self, Popup::Permission(_) | Popup::Question(_))
    }

    /// Whether it completes what the composer holds (and closes when that changes).
    pub fn is_completion(&self) -> bool {
        matches!(self, Popup::Slash(_) | Popup::Files { .. })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn item(label: &str) -> PickItem {
        PickItem {
            label: label.into(),
            detail: String::new(),
            value: label.into(),
            revision: None,
        }
    }

    #[test]
    fn filters_and_wraps() {
        let mut p = Picker::new(
            PickerKind::Model,
            "Model",
            vec![
                item("anthropic/claude-sonnet-4-5"),
                item("openai/gpt-5"),
                item("ollama/qwen3"),
            ],
        );
        p.filter = "gpt".into();
        assert_eq!(p.current().unwrap().label, "openai/gpt-5");
        p.filter.clear();
        p.step(-1);
        assert_eq!(p.current().unwrap().label, "ollama/qwen3");
    }
}
