//! Drawing the bottom panel: the live part of the turn, the spinner, queued messages, the
//! popup or permission prompt, the composer and the footer.

use keel_protocol::InputKind;
use keel_protocol::{PermissionMode, ToolPreview};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::app::popup::{POPUP_ROWS, Stage};
use crate::app::{App, Popup};
use crate::cells::{elapsed_words, todo_lines};
use crate::visible::visible;
use crate::wrap::{truncate, wrap_line, wrap_lines};

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const DIM: Style = Style::new().fg(Color::DarkGray);
const SELECTED: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);

/// The panel's lines and where the cursor goes (row, column), if it shows.
pub fn panel(app: &App, width: u16) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
    panel_within(app, width, u16::MAX)
}

/// [`panel`] for an area `height` rows tall: a permission prompt's preview takes only the
/// rows its question leaves (the panel is drawn from its end, so the question's head stays).
pub fn panel_within(
    app: &App,
    width: u16,
    height: u16,
) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
    let width = width as usize;
    let mut top: Vec<Line<'static>> = app.live.lines(width, app.expanded);
    if let Some(started) = app.live.started {
        let elapsed = started.elapsed();
        let frame = (elapsed.as_millis() / 80) as usize % SPINNER.len();
        let what = if app.popup.as_ref().is_some_and(Popup::is_question) {
            "Waiting for your answer"
        } else {
            app.live.activity()
        };
        top.push(Line::from(vec![
            Span::styled(format!("{} ", SPINNER[frame]), Style::new().fg(Color::Cyan)),
            Span::styled(
                format!("{what}… "),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::styled(
                format!("({} · esc to interrupt)", elapsed_words(elapsed)),
                DIM,
            ),
        ]));
    }
    for entry in app.queue.iter().take(3) {
        let mark = if entry.kind == InputKind::Steer {
            "↳ steer"
        } else {
            "⏳ queued"
        };
        top.push(Line::from(vec![
            Span::styled(format!("{mark}: "), DIM),
            Span::raw(truncate(
                entry.text.lines().next().unwrap_or_default(),
                width.saturating_sub(12),
            )),
        ]));
    }
    if app.queue.len() > 3 {
        top.push(Line::styled(
            format!("  … {} more (/queue)", app.queue.len() - 3),
            DIM,
        ));
    }
    if let Some(goal) = &app.goal {
        top.push(goal.line(width));
    }
    let mut bottom: Vec<Line<'static>> = Vec::new();
    let mut cursor = None;
    match &app.popup {
        Some(Popup::Permission(prompt)) => {
            // The footer takes the last row.
            let room = usize::from(height).saturating_sub(1);
            let view = PromptView {
                width,
                expanded: app.expanded,
                room,
                cwd: &app.info.cwd,
            };
            bottom.extend(permission_lines(prompt, &view));
        }
        Some(Popup::Question(prompt)) => {
            // The footer takes the last row.
            let (lines, at) = prompt.lines(width, usize::from(height).saturating_sub(1));
            cursor = at;
            bottom.extend(lines);
        }
        popup => {
            let rule = Line::styled("─".repeat(width), DIM);
            bottom.push(rule);
            let placeholder = if app.busy() {
                "steer the turn (enter), or queue a follow-up (alt+enter)"
            } else {
                "ask keel to do something · / for commands · @ for files"
            };
            let (rows, (row, col)) = app.composer.render(width, placeholder);
            let start = bottom.len() as u16;
            bottom.extend(rows);
            cursor = Some((start + row, col));
            if popup.is_none()
                && crate::composer::shell_line(&app.composer)
                && let Some(hint) = shell_hint(app.composer.text())
            {
                bottom.push(Line::styled(clip_line(hint, width), DIM));
            }
            if let Some(popup) = popup {
                bottom.extend(popup_lines(app, popup, width));
            }
        }
    }
    bottom.extend(footer(app, width));
    let mut lines = top;
    let offset = lines.len() as u16;
    lines.extend(bottom);
    (lines, cursor.map(|(r, c)| (r + offset, c)))
}

/// Draws the panel into `area`: the end of it when it is taller than the area.
pub fn draw_panel(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let (lines, cursor) = panel_within(app, area.width, area.height);
    let height = area.height as usize;
    let skip = lines.len().saturating_sub(height);
    let shown: Vec<Line<'static>> = lines.into_iter().skip(skip).collect();
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(shown), area);
    if let Some((row, col)) = cursor
        && (row as usize) >= skip
    {
        let row = row - skip as u16;
        if row < area.height {
            frame.set_cursor_position((
                area.x + col.min(area.width.saturating_sub(1)),
                area.y + row,
            ));
        }
    }
}

/// What Enter does with a `!` line, said while it is typed.
fn shell_hint(text: &str) -> Option<&'static str> {
    if text.starts_with("!!") {
        Some("  !! runs this in the shell; the output stays out of the conversation")
    } else if text.starts_with('!') {
        Some("  ! runs this in the shell; the output joins the conversation · !! keeps it out")
    } else {
        None
    }
}

/// `text` cut to `width` columns.
fn clip_line(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

/// The footer's fields on as many rows as they need: a field that does not fit the rest
/// of a row starts the next, so the cost is never cut off.
fn footer(app: &App, width: usize) -> Vec<Line<'static>> {
    // The modes that change what may happen stand out.
    let mode_style = match app.info.mode {
        PermissionMode::Full => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        PermissionMode::Plan => Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD),
        _ => DIM,
    };
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for (i, part) in app.footer().into_iter().enumerate() {
        let shown = truncate(&part, width);
        let part_width = unicode_width::UnicodeWidthStr::width(shown.as_str());
        if !spans.is_empty() && used + 3 + part_width > width {
            rows.push(Line::from(std::mem::take(&mut spans)));
            used = 0;
        }
        if !spans.is_empty() {
            spans.push(Span::styled(" · ", DIM));
            used += 3;
        }
        used += part_width;
        // The footer's second part is the permission mode.
        spans.push(Span::styled(shown, if i == 1 { mode_style } else { DIM }));
    }
    if !spans.is_empty() {
        rows.push(Line::from(spans));
    }
    rows
}

fn popup_lines(app: &App, popup: &Popup, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let row = |selected: bool, label: String, detail: String| {
        let style = if selected { SELECTED } else { Style::new() };
        let mark = if selected { "› " } else { "  " };
        let label = truncate(&label, width.saturating_sub(4));
        let room = width.saturating_sub(label.chars().count() + 4);
        let mut spans = vec![Span::styled(format!("{mark}{label}"), style)];
        if !detail.is_empty() && room > 4 {
            spans.push(Span::styled(format!("  {}", truncate(&detail, room)), DIM));
        }
        Line::from(spans)
    };
    match popup {
        Popup::Slash(selected) => {
            let query = app.composer.text().get(1..).unwrap_or_default();
            let matches = app.catalog.filter(query);
            if matches.is_empty() {
                out.push(Line::styled("  no such command", DIM));
            }
            let start = selected.saturating_sub(POPUP_ROWS - 1);
            for (i, c) in matches.iter().enumerate().skip(start).take(POPUP_ROWS) {
                let mut name = format!("/{}", c.name);
                if !c.args.is_empty() {
                    name.push(' ');
                    name.push_str(&c.args);
                }
                let mut detail = c.description.clone().into_owned();
                if let Some(source) = c.source() {
                    detail.push_str(&format!(" · {source}"));
                }
                if app.busy() && !c.while_running {
                    detail.push_str(" (after the turn)");
                }
                out.push(row(i == *selected, name, detail));
            }
        }
        Popup::Files { selected, matches } => {
            let ready = app
                .files
                .as_ref()
                .is_some_and(crate::files::FileIndex::ready);
            if !ready && matches.is_empty() {
                out.push(Line::styled("  listing files…", DIM));
            } else if matches.is_empty() {
                out.push(Line::styled("  no matching file or resource", DIM));
            }
            for (i, (path, _)) in matches.iter().enumerate() {
                // An MCP resource says what it is beside its `server:uri`.
                let detail = app
                    .mentions
                    .iter()
                    .find(|m| &m.text == path)
                    .map(|m| visible(&m.detail).into_owned())
                    .unwrap_or_default();
                out.push(row(i == *selected, visible(path).into_owned(), detail));
            }
        }
        Popup::Todos => {
            out.push(Line::styled(
                "Todos",
                Style::new().add_modifier(Modifier::BOLD),
            ));
            if app.todos.is_empty() {
                out.push(Line::styled("  no todo list yet", DIM));
            }
            out.extend(wrap_lines(todo_lines(&app.todos), width, &Line::from("  ")));
        }
        Popup::Picker(picker) => {
            out.push(Line::styled(
                picker.title.clone(),
                Style::new().add_modifier(Modifier::BOLD),
            ));
            if let Some((_, title)) = &picker.renaming {
                out.push(Line::from(vec![
                    Span::styled("new title: ", DIM),
                    Span::raw(title.text().to_owned()),
                ]));
                return out;
            }
            out.push(Line::from(vec![
                Span::styled("filter: ", DIM),
                Span::raw(picker.filter.clone()),
            ]));
            let visible = picker.visible();
            if visible.is_empty() {
                out.push(Line::styled("  nothing matches", DIM));
            }
            let start = picker.selected.saturating_sub(POPUP_ROWS - 1);
            for (i, item) in visible.iter().enumerate().skip(start).take(POPUP_ROWS) {
                let mut detail = item.detail.clone();
                if picker.confirm_delete.as_deref() == Some(item.value.as_str()) {
                    detail = "press ctrl+d again to delete".into();
                }
                out.push(row(i == picker.selected, item.label.clone(), detail));
            }
        }
        Popup::Task(task) => out.extend(task_lines(task, width)),
        Popup::Permission(_) | Popup::Question(_) => {}
    }
    out
}

/// One task's details, and what the keys do.
fn task_lines(task: &keel_protocol::TaskInfo, width: usize) -> Vec<Line<'static>> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut out = vec![Line::styled(format!("Task {}", task.id), bold)];
    let field = |name: &str, value: String| {
        wrap_line(
            &Line::from(vec![
                Span::styled(format!("  {name:<13}"), DIM),
                Span::raw(value),
            ]),
            width,
            &Line::from(" ".repeat(15)),
        )
    };
    let one_line = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    out.extend(field("description", one_line(&task.description)));
    let how = if task.background {
        "in the background"
    } else {
        "the turn waits for it"
    };
    out.extend(field("agent", format!("{} ({how})", task.agent)));
    let mut status = task.status.to_string();
    if let (Some(started), Some(ended)) = (task.started_ms, task.ended_ms) {
        let ran = std::time::Duration::from_millis(u64::try_from(ended - started).unwrap_or(0));
        status.push_str(&format!(" after {}", elapsed_words(ran)));
    }
    out.extend(field("status", status));
    if let Some(error) = &task.error {
        out.extend(field("error", one_line(error)));
    }
    if let Some(child) = &task.child_session_id {
        out.extend(field("session", child.to_string()));
    }
    let keys = if crate::app::is_active(task.status) {
        "s: stop it · esc: back to the list"
    } else {
        "esc: back to the list"
    };
    out.push(Line::styled(format!("  {keys}"), DIM));
    out
}

/// Lines of a change's preview the permission prompt shows at once, when the area has them
/// (PageUp and PageDown scroll, Ctrl+O gives it all the room there is).
pub const PREVIEW_LINES: usize = 16;
/// Lines PageUp and PageDown move a preview by.
pub const PREVIEW_STEP: isize = 8;
/// Lines of a command or of a call's arguments shown before Ctrl+O.
const QUESTION_LINES: usize = 12;

/// `mcp__server__tool` as "server · tool"; other tools by their name.
fn tool_title(tool: &str) -> String {
    keel_runtime::notice::tool_title(tool)
}

/// What the question shows of the call: a command whole, an MCP tool's arguments whole
/// (its title names server and tool), anything else its summary (a change's diff follows).
fn question_text(r: &keel_protocol::PermissionRequest) -> String {
    if let Some(command) = r.arguments.get("command").and_then(|c| c.as_str()) {
        return command.to_owned();
    }
    if r.tool.starts_with("mcp__") && r.arguments.is_object() {
        return serde_json::to_string_pretty(&r.arguments).unwrap_or_default();
    }
    r.summary.clone()
}

/// Where the permission prompt is drawn.
struct PromptView<'a> {
    width: usize,
    /// Ctrl+O is on.
    expanded: bool,
    /// Rows the prompt may take.
    room: usize,
    /// The working folder: a changed file inside it is named from there.
    cwd: &'a std::path::Path,
}

fn permission_lines(
    prompt: &crate::app::popup::PermissionPrompt,
    view: &PromptView<'_>,
) -> Vec<Line<'static>> {
    let (width, expanded, room) = (view.width, view.expanded, view.room);
    let mut out = question_lines(&prompt.request, width, expanded);
    let mut answers = answer_lines(prompt, width, false);
    // In a short area (the inline viewport is a third of the window) the answers take one
    // line, so the change itself has rows to show.
    if prompt.request.preview.is_some() && out.len() + answers.len() + 2 + PREVIEW_LINES > room {
        answers = answer_lines(prompt, width, true);
    }
    if let Some(preview) = &prompt.request.preview {
        // What the question and its answers leave, less the preview's own two lines.
        let fit = room.saturating_sub(out.len() + answers.len() + 2);
        out.extend(preview_lines(preview, prompt.scroll, view, fit));
    }
    out.extend(answers);
    out
}

/// The question: the tool, what the call does, and why keel asks.
fn question_lines(
    r: &keel_protocol::PermissionRequest,
    width: usize,
    expanded: bool,
) -> Vec<Line<'static>> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut out = vec![Line::styled(
        "─".repeat(width),
        Style::new().fg(Color::Yellow),
    )];
    out.push(Line::from(vec![
        Span::styled("Allow ", bold),
        Span::styled(
            visible(&tool_title(&r.tool)).into_owned(),
            bold.fg(Color::Yellow),
        ),
        Span::styled("?", bold),
    ]));
    let shown = question_text(r);
    let limit = if expanded { usize::MAX } else { QUESTION_LINES };
    let total = shown.lines().count();
    for line in visible(&shown).lines().take(limit) {
        out.extend(wrap_line(
            &Line::from(format!("  {line}")),
            width,
            &Line::from("    "),
        ));
    }
    if total > limit {
        out.push(Line::styled(
            format!("  … {} more lines (ctrl+o to show all)", total - limit),
            DIM,
        ));
    }
    for reason in &r.reasons {
        out.extend(wrap_line(
            &Line::styled(format!("  because {}", visible(reason)), DIM),
            width,
            &Line::from("    "),
        ));
    }
    out
}

/// The answers offered at the prompt's stage; `compact`, the first choice's on one line.
fn answer_lines(
    prompt: &crate::app::popup::PermissionPrompt,
    width: usize,
    compact: bool,
) -> Vec<Line<'static>> {
    let r = &prompt.request;
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut out = Vec::new();
    let can_always = !r.safety && !r.scopes.is_empty();
    let option = |n: usize, selected: bool, text: String, enabled: bool| {
        Line::from(choice(n, selected, &text, enabled))
    };
    match &prompt.stage {
        Stage::Choose(selected) if compact => {
            // "Always" says for what even here: it is one key.
            let always = match r.scopes.first() {
                Some(scope) if can_always => format!("Always allow {} (a)", visible(scope)),
                _ => "Always (a)".to_owned(),
            };
            let gap = Span::raw(" ");
            let mut spans = vec![
                choice(1, *selected == 0, "Yes, once (y)", true),
                gap.clone(),
                choice(2, *selected == 1, &always, can_always),
                gap.clone(),
                choice(3, *selected == 2, "No (n)", true),
                gap,
            ];
            if can_always && r.scopes.len() > 1 {
                spans.push(Span::styled("· s: wider", DIM));
            }
            let line = Line::from(spans);
            out.extend(wrap_line(&line, width, &Line::from("  ")));
        }
        Stage::Choose(selected) => {
            let always = match r.scopes.first() {
                _ if r.safety => "Always — not offered for a dangerous call".to_owned(),
                Some(scope) => format!("Yes, and always allow {} (a)", visible(scope)),
                None => "Always — nothing here to allow for good".to_owned(),
            };
            let options = [
                option(1, *selected == 0, "Yes, once (y)".into(), true),
                option(2, *selected == 1, always, can_always),
                option(
                    3,
                    *selected == 2,
                    "No, and tell keel why (n: no reason)".into(),
                    true,
                ),
            ];
            for line in &options {
                out.extend(wrap_line(line, width, &Line::from("     ")));
            }
            if can_always && r.scopes.len() > 1 {
                out.extend(wrap_line(
                    &Line::styled("  s: always, for a wider scope", DIM),
                    width,
                    &Line::from("     "),
                ));
            }
        }
        Stage::Scope(selected) => {
            out.push(Line::styled(
                "Always allow which calls? (narrowest first)",
                bold,
            ));
            for (i, scope) in r.scopes.iter().enumerate() {
                let line = option(i + 1, i == *selected, visible(scope).into_owned(), true);
                out.extend(wrap_line(&line, width, &Line::from("     ")));
            }
        }
        Stage::Confirm(scope) => {
            // Scopes and rules quote the command the model wrote: shown, never run.
            let label = visible(r.scopes.get(*scope).map_or("", String::as_str)).into_owned();
            let rules = visible(r.rules.get(*scope).map_or("", String::as_str)).into_owned();
            // A scope with no rule (a host for the sandbox's proxy, say) lasts the session
            // and is written nowhere.
            if rules.trim().is_empty() {
                out.push(Line::styled(
                    "Allowed for the rest of this session (not saved):",
                    bold,
                ));
                out.push(Line::from(format!("  {label}")));
                out.push(Line::styled("  enter: allow · esc: back", DIM));
                return out;
            }
            out.push(Line::styled(
                "This rule is saved to $KEEL_HOME/permissions.yaml:",
                bold,
            ));
            out.push(Line::from(format!("  {label}")));
            out.push(Line::styled("  allow:", Style::new().fg(Color::Green)));
            for rule in rules.lines() {
                out.extend(wrap_line(
                    &Line::styled(format!("    - {rule}"), Style::new().fg(Color::Green)),
                    width,
                    &Line::from("      "),
                ));
            }
            out.push(Line::styled("  enter: save and allow · esc: back", DIM));
        }
        Stage::Reason(reason) => {
            out.push(Line::styled(
                "What should keel do instead? (enter sends, empty: just no)",
                bold,
            ));
            out.push(Line::from(format!("  {}", reason.text())));
        }
    }
    out
}

/// Answer `n` of the permission prompt, marked when selected, dim when not offered.
fn choice(n: usize, selected: bool, text: &str, enabled: bool) -> Span<'static> {
    let style = match (selected, enabled) {
        (_, false) => DIM,
        (true, _) => SELECTED,
        _ => Style::new(),
    };
    let mark = if selected { "›" } else { " " };
    Span::styled(format!("{mark} {n}. {text}"), style)
}

/// A change's preview in the permission prompt: what it touches, then a window of its diff.
fn preview_lines(
    preview: &ToolPreview,
    scroll: isize,
    view: &PromptView<'_>,
    fit: usize,
) -> Vec<Line<'static>> {
    let (width, expanded) = (view.width, view.expanded);
    let ToolPreview::File {
        path,
        created,
        diff,
        truncated,
        ..
    } = preview;
    let named = std::path::Path::new(path)
        .strip_prefix(view.cwd)
        .ok()
        .filter(|inside| !inside.as_os_str().is_empty())
        .map_or_else(|| path.clone(), |inside| inside.display().to_string());
    let (added, removed) = crate::diff::counts(diff);
    let verb = if *created { "create" } else { "change" };
    let mut out = wrap_line(
        &Line::from(vec![
            Span::styled(
                format!("  {verb} {}", visible(&named)),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::styled(format!("  +{added} -{removed}"), DIM),
        ]),
        width,
        &Line::from("    "),
    );
    let body = crate::diff::render(diff, path, width, None);
    // Ctrl+O gives the diff every row the area has; one row shows in any case.
    let wanted = if expanded { body.len() } else { PREVIEW_LINES };
    let window = wanted.min(fit).max(1);
    // The window opens one line above the first change, so a small one shows the change.
    let first_change = body
        .iter()
        .position(|line| {
            line.spans
                .get(1)
                .is_some_and(|sign| sign.content == "+" || sign.content == "-")
        })
        .unwrap_or(0);
    let anchor = first_change.saturating_sub(1) as isize;
    let last_start = body.len().saturating_sub(window) as isize;
    let start = (anchor + scroll).clamp(0, last_start) as usize;
    let end = (start + window).min(body.len());
    out.extend(body[start..end].iter().cloned());
    if start > 0 || end < body.len() {
        out.push(Line::styled(
            format!(
                "  lines {}–{end} of {} · pgup/pgdn scroll · ctrl+o {}",
                start + 1,
                body.len(),
                if expanded { "less" } else { "more" }
            ),
            DIM,
        ));
    }
    if *truncated {
        out.push(Line::styled(
            "  … the change is longer than a preview carries",
            DIM,
        ));
    }
    out
}
