//! The transcript's cells: what one user message, answer, reasoning, tool call, notice,
//! task start or end, or error looks like as lines. A cell renders itself at a width, collapsed or expanded; the
//! transcript decides where the lines go (scrollback or the full-screen view).

use std::time::Duration;

use keel_protocol::{TaskStatus, ToolCallStatus};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::diff;
use crate::markdown;
use crate::wrap::{truncate, wrap_line, wrap_lines};

/// Output lines a collapsed tool cell shows.
pub const PREVIEW_LINES: usize = 6;
/// Diff lines a collapsed edit shows.
pub const PREVIEW_DIFF_LINES: usize = 24;
/// Reasoning lines shown collapsed.
pub const PREVIEW_REASONING_LINES: usize = 3;

pub(crate) const DIM: Style = Style::new().fg(Color::DarkGray);
const BULLET: &str = "● ";

/// How a notice looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Neutral information.
    Info,
    /// Something the user should notice (a guard observation, a dropped reminder).
    Warn,
    /// A failure.
    Error,
}

/// One transcript entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// The user's message.
    User(String),
    /// A steering message sent while the turn ran.
    Steer(String),
    /// An answer in Markdown.
    Answer(String),
    /// Reasoning text.
    Reasoning(String),
    /// A tool call.
    Tool(ToolCell),
    /// A one-line notice (compaction, archive, guard, mode change).
    Notice(Tone, String),
    /// A background task started or ended, in the runtime's shared wording.
    Task(TaskStatus, String),
    /// Several lines of plain information (`/help`, `/status`).
    Info(Vec<Line<'static>>),
    /// A plan submitted for review (plan mode), in Markdown.
    Plan(String),
    /// A retry of a failed model request.
    Retry {
        /// Retry number.
        attempt: u32,
        /// Retries allowed.
        max: u32,
        /// Wait before it.
        delay_ms: u64,
        /// Why.
        reason: String,
    },
}

/// A tool call, as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCell {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// The result text, once it ended.
    pub result: Option<String>,
    /// Its structured details, once it ended.
    pub details: Option<Value>,
    /// Where it stands.
    pub status: ToolCallStatus,
    /// How long it ran.
    pub elapsed: Option<Duration>,
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

impl ToolCell {
    /// The cell's title: the tool and what it acts on.
    pub fn title(&self) -> (String, String) {
        let a = &self.arguments;
        let (verb, target) = match self.name.as_str() {
            "bash" => ("Bash", str_arg(a, "command").unwrap_or_default().to_owned()),
            "read" => {
                let mut t = str_arg(a, "path").unwrap_or_default().to_owned();
                if let Some(offset) = a.get("offset").and_then(Value::as_u64) {
                    t.push_str(&format!(":{offset}"));
                }
                ("Read", t)
            }
            "write" => ("Write", str_arg(a, "path").unwrap_or_default().to_owned()),
            "edit" => ("Edit", str_arg(a, "path").unwrap_or_default().to_owned()),
            "grep" => {
                let mut t = str_arg(a, "pattern").unwrap_or_default().to_owned();
                if let Some(path) = str_arg(a, "path") {
                    t.push_str(&format!(" in {path}"));
                }
                ("Search", t)
            }
            "glob" => ("Glob", str_arg(a, "pattern").unwrap_or_default().to_owned()),
            "ls" => ("List", str_arg(a, "path").unwrap_or(".").to_owned()),
            "web_fetch" => ("Fetch", str_arg(a, "url").unwrap_or_default().to_owned()),
            "todowrite" => ("Update todos", String::new()),
            other => {
                let text = match a {
                    Value::Object(map) if map.is_empty() => String::new(),
                    other => other.to_string(),
                };
                return (keel_runtime::notice::tool_title(other), text);
            }
        };
        (verb.to_owned(), target)
    }

    fn header(&self, width: usize, running_for: Option<Duration>) -> Line<'static> {
        let (verb, target) = self.title();
        let (bullet_style, suffix) = match self.status {
            ToolCallStatus::Pending => (DIM, Some("  (waiting)".to_owned())),
            ToolCallStatus::InProgress => (
                Style::new().fg(Color::Yellow),
                running_for.map(|d| format!("  ({})", elapsed_words(d))),
            ),
            ToolCallStatus::Failed => (Style::new().fg(Color::Red), None),
            _ => (Style::new().fg(Color::Green), None),
        };
        let mut spans = vec![
            Span::styled(BULLET, bullet_style),
            Span::styled(verb.clone(), Style::new().add_modifier(Modifier::BOLD)),
        ];
        if !target.is_empty() {
            let room = width
                .saturating_sub(verb.chars().count() + 4 + suffix.as_ref().map_or(0, String::len));
            let target = target.replace('\n', " ⏎ ");
            spans.push(Span::raw(format!(" {}", truncate(&target, room.max(8)))));
        }
        if let Some(suffix) = suffix {
            spans.push(Span::styled(suffix, DIM));
        }
        Line::from(spans)
    }

    /// The cell's lines; `running_for` while it runs.
    pub fn lines(
        &self,
        width: usize,
        expanded: bool,
        running_for: Option<Duration>,
    ) -> Vec<Line<'static>> {
        let mut out = vec![self.header(width, running_for)];
        let gutter = Line::from(Span::styled("  ⎿ ", DIM));
        let indent = Line::from("    ");
        let body_width = width.saturating_sub(4);
        let mut body: Vec<Line<'static>> = Vec::new();
        match (self.name.as_str(), &self.result) {
            ("todowrite", _) => {
                if let Some(todos) = self.arguments.get("todos").and_then(Value::as_array) {
                    body.extend(todo_lines(todos));
                }
            }
            ("edit", Some(_)) if self.status != ToolCallStatus::Failed => {
                let diff_text = self
                    .details
                    .as_ref()
                    .and_then(|d| d.get("diff"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let path = str_arg(&self.arguments, "path").unwrap_or_default();
                let (added, removed) = diff::counts(diff_text);
                body.push(Line::from(vec![
                    Span::raw("Updated with "),
                    Span::styled(
                        format!("{added} addition{}", plural(added)),
                        Style::new().fg(Color::Green),
                    ),
                    Span::raw(" and "),
                    Span::styled(
                        format!("{removed} removal{}", plural(removed)),
                        Style::new().fg(Color::Red),
                    ),
                ]));
                let limit = (!expanded).then_some(PREVIEW_DIFF_LINES);
                body.extend(diff::render(diff_text, path, body_width, limit));
            }
            ("write", Some(_)) if self.status != ToolCallStatus::Failed => {
                let content = str_arg(&self.arguments, "content").unwrap_or_default();
                let lines = content.lines().count();
                let created = self
                    .details
                    .as_ref()
                    .and_then(|d| d.get("created"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                body.push(Line::from(format!(
                    "{} {lines} line{}",
                    if created { "Created with" } else { "Wrote" },
                    plural(lines)
                )));
                let path = str_arg(&self.arguments, "path").unwrap_or_default();
                let mut h =
                    crate::highlight::Highlighter::new(crate::highlight::lang_of_path(path));
                let limit = if expanded { usize::MAX } else { PREVIEW_LINES };
                for (i, line) in content.lines().take(limit).enumerate() {
                    let mut spans = vec![Span::styled(format!("{:>4} ", i + 1), DIM)];
                    spans.extend(
                        h.line(&truncate(line, body_width.saturating_sub(5)), Style::new()),
                    );
                    body.push(Line::from(spans));
                }
                if lines > limit {
                    body.push(Line::styled(
                        format!("… {} more lines (ctrl+o to expand)", lines - limit),
                        DIM,
                    ));
                }
            }
            (_, Some(result)) => {
                let style = if self.status == ToolCallStatus::Failed {
                    Style::new().fg(Color::Red)
                } else {
                    Style::new()
                };
                body.extend(preview(result, body_width, expanded, style));
                if let Some(code) = self
                    .details
                    .as_ref()
                    .and_then(|d| d.get("exit_code"))
                    .and_then(Value::as_i64)
                    .filter(|c| *c != 0)
                {
                    body.push(Line::styled(
                        format!("exit code {code}"),
                        Style::new().fg(Color::Red),
                    ));
                }
            }
            (_, None) => {}
        }
        for (i, line) in body.into_iter().enumerate() {
            let lead = if i == 0 {
                gutter.clone()
            } else {
                indent.clone()
            };
            let mut spans = lead.spans;
            spans.extend(line.spans);
            out.extend(wrap_line(
                &Line::from(spans).style(line.style),
                width,
                &indent,
            ));
        }
        out
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The todo list as lines: ☐ pending, ◐ in progress, ☒ done.
pub fn todo_lines(todos: &[Value]) -> Vec<Line<'static>> {
    todos
        .iter()
        .map(|todo| {
            let content = str_arg(todo, "content").unwrap_or_default().to_owned();
            match str_arg(todo, "status").unwrap_or_default() {
                "completed" => Line::from(vec![
                    Span::styled("☒ ", Style::new().fg(Color::Green)),
                    Span::styled(
                        content,
                        Style::new()
                            .add_modifier(Modifier::CROSSED_OUT)
                            .fg(Color::DarkGray),
                    ),
                ]),
                "in_progress" => Line::from(vec![
                    Span::styled("◐ ", Style::new().fg(Color::Yellow)),
                    Span::styled(content, Style::new().add_modifier(Modifier::BOLD)),
                ]),
                _ => Line::from(vec![Span::raw("☐ "), Span::raw(content)]),
            }
        })
        .collect()
}

/// The head of a long output, or all of it when expanded.
fn preview(text: &str, width: usize, expanded: bool, style: Style) -> Vec<Line<'static>> {
    let text = text.trim_end();
    if text.is_empty() {
        return vec![Line::styled("(no output)", DIM)];
    }
    let lines: Vec<&str> = text.lines().collect();
    let limit = if expanded { lines.len() } else { PREVIEW_LINES };
    let mut out: Vec<Line<'static>> = lines
        .iter()
        .take(limit)
        .map(|l| Line::styled(truncate(&l.replace('\t', "    "), width), style))
        .collect();
    if lines.len() > limit {
        out.push(Line::styled(
            format!("… {} more lines (ctrl+o to expand)", lines.len() - limit),
            DIM,
        ));
    }
    out
}

/// "3s", "1m 05s".
pub fn elapsed_words(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m {:02}s", secs / 60, secs % 60)
    }
}

impl Cell {
    /// The cell's lines at `width`.
    pub fn lines(&self, width: usize, expanded: bool) -> Vec<Line<'static>> {
        let width = width.max(10);
        let mut out = match self {
            Cell::User(text) | Cell::Steer(text) => {
                let (mark, style) = match self {
                    Cell::Steer(_) => ("↳ ", Style::new().fg(Color::Cyan)),
                    _ => (
                        "› ",
                        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
                    ),
                };
                let lines = text.lines().enumerate().map(|(i, l)| {
                    let lead = if i == 0 { mark } else { "  " };
                    Line::from(vec![Span::styled(lead, style), Span::raw(l.to_owned())])
                });
                wrap_lines(lines, width, &Line::from("  "))
                    .into_iter()
                    .map(|l| l.style(Style::new().add_modifier(Modifier::BOLD)))
                    .collect()
            }
            Cell::Answer(text) => {
                answer_lines(markdown::render(text, width.saturating_sub(2)), true)
            }
            Cell::Reasoning(text) => reasoning_lines(text, width, expanded),
            Cell::Tool(tool) => tool.lines(width, expanded, None),
            Cell::Notice(tone, text) => {
                let (mark, style) = match tone {
                    Tone::Info => ("· ", DIM),
                    Tone::Warn => ("⚠ ", Style::new().fg(Color::Yellow)),
                    Tone::Error => ("✗ ", Style::new().fg(Color::Red)),
                };
                wrap_line(
                    &Line::from(vec![
                        Span::styled(mark, style),
                        Span::styled(text.clone(), style),
                    ]),
                    width,
                    &Line::from("  "),
                )
            }
            Cell::Task(status, text) => {
                let style = match status {
                    TaskStatus::Running => Style::new().fg(Color::Cyan),
                    TaskStatus::Succeeded => Style::new().fg(Color::Green),
                    TaskStatus::Failed => Style::new().fg(Color::Red),
                    TaskStatus::Canceled | TaskStatus::Lost => Style::new().fg(Color::Yellow),
                    TaskStatus::Queued | TaskStatus::Stopping => DIM,
                };
                wrap_line(
                    &Line::from(vec![
                        Span::styled("⧉ ", style),
                        Span::styled(text.clone(), style),
                    ]),
                    width,
                    &Line::from("  "),
                )
            }
            Cell::Info(lines) => wrap_lines(lines.clone(), width, &Line::from("  ")),
            Cell::Plan(text) => {
                let accent = Style::new().fg(Color::Magenta);
                let mut out = vec![Line::from(vec![
                    Span::styled(BULLET, accent),
                    Span::styled("Plan for review", accent.add_modifier(Modifier::BOLD)),
                ])];
                out.extend(
                    markdown::render(text, width.saturating_sub(2))
                        .into_iter()
                        .map(|line| {
                            let mut spans = vec![Span::styled("│ ", accent)];
                            spans.extend(line.spans);
                            Line::from(spans).style(line.style)
                        }),
                );
                out
            }
            Cell::Retry {
                attempt,
                max,
                delay_ms,
                reason,
            } => {
                let text = keel_runtime::notice::retry(reason, *attempt, *max, *delay_ms);
                wrap_line(
                    &Line::styled(format!("↻ {text}"), Style::new().fg(Color::Yellow)),
                    width,
                    &Line::from("  "),
                )
            }
        };
        // One empty row between cells.
        out.push(Line::default());
        out
    }
}

/// Answer lines with the bullet on the first row and an indent on the others.
pub fn answer_lines(lines: Vec<Line<'static>>, first: bool) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .enumerate()
        .map(|(i, line)| {
            let lead = if i == 0 && first {
                Span::raw(BULLET)
            } else {
                Span::raw("  ")
            };
            let mut spans = vec![lead];
            spans.extend(line.spans);
            Line::from(spans).style(line.style)
        })
        .collect()
}

/// Reasoning, dimmed; the last few lines unless expanded.
pub fn reasoning_lines(text: &str, width: usize, expanded: bool) -> Vec<Line<'static>> {
    let style = Style::new()
        .fg(Color::DarkGray)
        .add_modifier(Modifier::ITALIC);
    let text = text.trim();
    // Collapsed, only the last few lines are wrapped: this runs on every frame while the
    // reasoning streams, and must not grow with it.
    let (earlier, shown) = if expanded {
        (false, text)
    } else {
        match text.rmatch_indices('\n').nth(PREVIEW_REASONING_LINES - 1) {
            Some((at, _)) => (true, &text[at + 1..]),
            None => (false, text),
        }
    };
    let rows = wrap_lines(
        shown.lines().map(|l| Line::styled(l.to_owned(), style)),
        width.saturating_sub(2),
        &Line::default(),
    );
    let mut out = vec![Line::styled("✻ Thinking…", style)];
    let total = rows.len();
    let keep = if expanded {
        total
    } else {
        PREVIEW_REASONING_LINES.min(total)
    };
    if earlier || total > keep {
        out.push(Line::styled("  … earlier thinking (ctrl+o to expand)", DIM));
    }
    out.extend(rows.into_iter().skip(total - keep).map(|l| {
        let mut spans = vec![Span::raw("  ")];
        spans.extend(l.spans);
        Line::from(spans)
    }));
    out
}
