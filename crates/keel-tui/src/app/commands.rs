//! Slash commands and the replies of the operations they send.

use std::collections::HashMap;
use std::path::PathBuf;

use keel_protocol::ops;
use keel_protocol::{
    InputKind, Message, Op, PermissionMode, SessionTarget, ThinkingChoice, ThinkingLevel,
    ToolCallStatus,
};
use keel_runtime::StoredEntry;
use keel_runtime::{CommandOutcome, Reply};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::popup::{PickItem, Picker, PickerKind, Popup};
use super::{App, Effect, Tag, short_count};
use crate::cells::{Cell, Tone, ToolCell};
use crate::slash::{Expect, Origin};

/// What `/init` asks the model.
pub const INIT_PROMPT: &str = "Look through this repository (its layout, build and test commands, code style, and anything a newcomer would trip over) and write an AGENTS.md at its root for coding agents working here: short sections for the project's purpose, how to build, test and lint, the code layout, and conventions to follow. If an AGENTS.md exists, improve it instead of starting over.";

fn user_text(message: &Message) -> Option<String> {
    match message {
        Message::User(user) if !user.hidden => Some(match &user.shell {
            Some(run) => format!("!{}", run.command),
            None => user.joined_text(),
        }),
        _ => None,
    }
}

/// A `!` command kept in history, as the cell that showed it ran.
fn shell_cell(user: &keel_protocol::UserMessage) -> Option<Cell> {
    let run = user.shell.as_ref()?;
    Some(Cell::Tool(ToolCell {
        name: "bash".into(),
        arguments: serde_json::json!({ "command": run.command }),
        result: user.shell_output().map(str::to_owned),
        details: Some(serde_json::json!({ "exit_code": run.exit_code })),
        status: if run.exit_code == Some(0) {
            ToolCallStatus::Completed
        } else {
            ToolCallStatus::Failed
        },
        elapsed: None,
    }))
}

/// The revision history had just before `index` (0 when nothing came before).
fn revision_before(entries: &[StoredEntry], index: usize) -> u64 {
    entries[..index]
        .iter()
        .map(|e| e.revision)
        .max()
        .unwrap_or(0)
}

impl App {
    /// Runs a slash command.
    pub(super) fn run_command(&mut self, name: &str, args: &str, effects: &mut Vec<Effect>) {
        let Some(command) = self.catalog.find(name).cloned() else {
            self.notice(Tone::Error, format!("unknown command /{name} (try /help)"));
            return;
        };
        if self.busy() && !command.while_running {
            self.notice(
                Tone::Warn,
                format!("Stop the running turn before using /{}", command.name),
            );
            return;
        }
        if let Origin::Extension { expect, .. } = command.origin {
            self.extension_command(&command.name, args, expect, effects);
            return;
        }
        let session_id = self.session_id();
        match command.name.as_ref() {
            "help" => self.help(),
            "new" => effects.push(Effect::Call(
                Tag::Open,
                Op::OpenSession(ops::OpenSession {
                    target: SessionTarget::New { title: None },
                }),
            )),
            "sessions" => {
                self.sessions_filter = args.to_owned();
                effects.push(Effect::Call(
                    Tag::Sessions,
                    Op::ListSessions(ops::ListSessions {
                        cwd: Some(self.info.cwd.to_string_lossy().into_owned()),
                        limit: 500,
                    }),
                ));
            }
            "model" => {
                let items = self
                    .info
                    .models
                    .iter()
                    .map(|m| PickItem {
                        label: m.clone(),
                        detail: if *m == self.info.model {
                            "current".into()
                        } else {
                            String::new()
                        },
                        value: m.clone(),
                        revision: None,
                    })
                    .collect();
                let mut picker = Picker::new(PickerKind::Model, "Model for the next turns", items);
                picker.filter = args.to_owned();
                if picker.visible().len() == 1
                    && let Some(item) = picker.current()
                {
                    self.picked(PickerKind::Model, item, effects);
                } else {
                    self.popup = Some(Popup::Picker(picker));
                }
            }
            "permission" => {
                if args.is_empty() {
                    let items = PermissionMode::ALL
                        .iter()
                        .map(|m| PickItem {
                            label: m.name().to_owned(),
                            detail: m.summary().to_owned(),
                            value: m.name().to_owned(),
                            revision: None,
                        })
                        .collect();
                    self.popup = Some(Popup::Picker(Picker::new(
                        PickerKind::Permission,
                        "Permission mode",
                        items,
                    )));
                } else {
                    match args.parse::<PermissionMode>() {
                        Ok(mode) => self.set_mode(mode, effects),
                        Err(error) => self.notice(Tone::Error, error.to_string()),
                    }
                }
            }
            "thinking" => {
                if args.is_empty() {
                    let now = self
                        .thinking
                        .map_or("the model's default", ThinkingLevel::name);
                    self.notice(
                        Tone::Info,
                        format!(
                            "thinking: {now}; set it with /thinking off|minimal|low|medium|high|default"
                        ),
                    );
                } else if let Some(session_id) = self.session_id() {
                    match args.parse::<ThinkingChoice>() {
                        Ok(choice) => effects.push(Effect::Call(
                            Tag::Plain("cannot change the thinking level"),
                            Op::UpdateSession(ops::UpdateSession {
                                session_id,
                                title: None,
                                model: None,
                                mode: None,
                                thinking: Some(choice),
                            }),
                        )),
                        Err(error) => self.notice(Tone::Error, error.to_string()),
                    }
                }
            }
            "sandbox" => {
                let text = if args.is_empty() || args == self.info.sandbox.name() {
                    format!("commands run in the {} sandbox", self.info.sandbox)
                } else {
                    format!(
                        "commands run in the {} sandbox; it is fixed for the process: start keel with --sandbox {args} to change it",
                        self.info.sandbox
                    )
                };
                self.notice(Tone::Info, text);
            }
            "plan" => match args {
                "" | "on" => {
                    if self.info.mode != PermissionMode::Plan {
                        self.mode_before_plan = Some(self.info.mode);
                        self.set_mode(PermissionMode::Plan, effects);
                    }
                }
                "off" => {
                    let back = self.mode_before_plan.take().unwrap_or(PermissionMode::Auto);
                    self.set_mode(back, effects);
                }
                other => self.notice(Tone::Error, format!("/plan takes on or off, not `{other}`")),
            },
            "compact" => {
                // The runtime tells when the compaction starts and ends (its notices).
                if let Some(session_id) = session_id {
                    let instructions = (!args.is_empty()).then(|| args.to_owned());
                    effects.push(Effect::Call(
                        Tag::Compact,
                        Op::Compact(ops::Compact {
                            session_id,
                            instructions,
                        }),
                    ));
                }
            }
            // The session's record as it stands now, not as it was opened.
            "status" => match session_id.clone() {
                Some(session_id) => effects.push(Effect::Call(
                    Tag::Status,
                    Op::GetSession(ops::GetSession { session_id }),
                )),
                None => self.status(),
            },
            "usage" => {
                let u = &self.usage;
                let lines = vec![
                    Line::styled(
                        "Usage of this session",
                        Style::new().add_modifier(Modifier::BOLD),
                    ),
                    Line::from(format!("  input        {}", short_count(u.input))),
                    Line::from(format!("  cache read   {}", short_count(u.cache_read))),
                    Line::from(format!("  cache write  {}", short_count(u.cache_write))),
                    Line::from(format!(
                        "  output       {} ({} reasoning)",
                        short_count(u.output),
                        short_count(u.reasoning)
                    )),
                    Line::from(format!("  cost         ${:.4}", u.cost.total)),
                ];
                self.push(Cell::Info(lines));
            }
            "context" => effects.extend(session_id.clone().map(|session_id| {
                Effect::Call(
                    Tag::Context,
                    Op::ContextReport(ops::ContextReport { session_id }),
                )
            })),
            "diff" => effects.push(Effect::GitDiff),
            "export" => {
                let path = if args.is_empty() {
                    let id = session_id.as_ref().map_or("session", |s| s.as_str());
                    self.info.cwd.join(format!("keel-{id}.md"))
                } else {
                    let path = PathBuf::from(args);
                    if path.is_absolute() {
                        path
                    } else {
                        self.info.cwd.join(path)
                    }
                };
                effects.extend(session_id.clone().map(|session_id| {
                    Effect::Call(
                        Tag::Export(path),
                        Op::ExportSession(ops::ExportSession {
                            session_id,
                            format: keel_protocol::ExportFormat::Markdown,
                        }),
                    )
                }));
            }
            "copy" => {
                let last = self.transcript.iter().rev().find_map(|c| match c {
                    Cell::Answer(text) => Some(text.clone()),
                    _ => None,
                });
                match last {
                    Some(text) => {
                        effects.push(Effect::Copy(text));
                        self.notice(Tone::Info, "copied the last answer");
                    }
                    None => self.notice(Tone::Warn, "no answer to copy yet"),
                }
            }
            "fork" => {
                if let Some(session_id) = session_id {
                    effects.push(Effect::Call(
                        Tag::Fork(None),
                        Op::ForkSession(ops::ForkSession {
                            session_id,
                            revision: None,
                        }),
                    ));
                }
            }
            "rewind" => self.open_rewind(effects),
            "rename" => match (args.is_empty(), session_id) {
                (true, _) => self.notice(Tone::Error, "/rename needs a title"),
                (false, Some(session_id)) => effects.push(Effect::Call(
                    Tag::Plain("cannot rename"),
                    Op::UpdateSession(ops::UpdateSession {
                        session_id,
                        title: Some(args.to_owned()),
                        model: None,
                        mode: None,
                        thinking: None,
                    }),
                )),
                _ => {}
            },
            "retry" => {
                // The runtime finds the message and rewinds; the transcript shows it asked.
                let last = self.transcript.iter().rev().find_map(|cell| match cell {
                    Cell::User(text) => Some(text.clone()),
                    _ => None,
                });
                match (last, session_id.clone()) {
                    (Some(text), Some(session_id)) => {
                        self.notice(Tone::Info, "asking the last message again");
                        self.push(Cell::User(text.clone()));
                        self.live.begin(Some(text.clone()));
                        effects.push(Effect::Call(
                            Tag::Retry(text),
                            Op::Retry(ops::Retry { session_id }),
                        ));
                    }
                    _ => self.notice(Tone::Info, "no message to ask again"),
                }
            }
            "queue" => {
                if self.queue.is_empty() {
                    self.notice(Tone::Info, "nothing is queued");
                } else {
                    let items = self
                        .queue
                        .iter()
                        .map(|e| PickItem {
                            label: super::input::first_line(&e.text),
                            detail: if e.kind == InputKind::Steer {
                                "steer".into()
                            } else {
                                "follow-up".into()
                            },
                            value: e.id.clone(),
                            revision: None,
                        })
                        .collect();
                    self.popup = Some(Popup::Picker(Picker::new(
                        PickerKind::Queue,
                        "Queued messages (enter: edit, ctrl+d: cancel)",
                        items,
                    )));
                }
            }
            "tasks" => self.open_tasks(effects),
            "init" => self.start_turn(INIT_PROMPT.to_owned(), effects),
            "quit" => self.quit(effects),
            other => self.notice(Tone::Error, format!("/{other} is not available here")),
        }
    }

    /// Sends an extension's command to the runtime. One expected to start a turn shows as
    /// the user's message at once, as a submitted prompt does; the reply settles it.
    pub(super) fn extension_command(
        &mut self,
        name: &str,
        args: &str,
        expect: Expect,
        effects: &mut Vec<Effect>,
    ) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        let typed = if args.is_empty() {
            format!("/{name}")
        } else {
            format!("/{name} {args}")
        };
        if expect == Expect::Turn {
            self.show_prompt(&typed);
        }
        effects.push(Effect::Call(
            Tag::Command {
                name: name.to_owned(),
                typed,
                expect,
            },
            Op::RunCommand(ops::RunCommand {
                session_id,
                name: name.to_owned(),
                arguments: args.to_owned(),
            }),
        ));
    }

    /// A command's prompt as the user's message of a starting turn.
    fn show_prompt(&mut self, typed: &str) {
        self.sent(typed);
        self.push(Cell::User(typed.to_owned()));
        if !self.live.running() {
            self.live.begin(Some(typed.to_owned()));
        } else if self.live.prompt.is_none() {
            // Its turn's first event came before the reply.
            self.live.prompt = Some(typed.to_owned());
        }
    }

    /// A command's reply, once the runtime ran it.
    fn command_done(&mut self, typed: String, expect: Expect, reply: Reply) {
        match reply {
            Reply::RunCommand(CommandOutcome::Turn(_)) if expect == Expect::Answer => {
                self.show_prompt(&typed)
            }
            Reply::RunCommand(CommandOutcome::Turn(_)) => {}
            Reply::RunCommand(CommandOutcome::Text(text)) => {
                if expect == Expect::Turn {
                    // It answered instead: no turn runs for it.
                    self.live.finish();
                }
                if text.trim().is_empty() {
                    self.notice(Tone::Info, format!("{typed}: done"));
                    return;
                }
                let mut lines = vec![Line::styled(
                    typed,
                    Style::new().add_modifier(Modifier::BOLD),
                )];
                lines.extend(
                    text.trim_end()
                        .lines()
                        .map(|line| Line::from(format!("  {}", line.replace('\t', "    ")))),
                );
                self.push(Cell::Info(lines));
            }
            _ => {}
        }
    }

    pub(super) fn open_rewind(&mut self, effects: &mut Vec<Effect>) {
        if let Some(session_id) = self.session_id() {
            effects.push(Effect::Call(
                Tag::RewindList,
                Op::GetMessages(ops::GetMessages {
                    session_id,
                    revision: None,
                }),
            ));
        }
    }

    fn help(&mut self) {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let dim = Style::new().fg(Color::DarkGray);
        let mut lines = Vec::new();
        let (builtin, extension): (Vec<_>, Vec<_>) = self
            .catalog
            .all()
            .iter()
            .partition(|c| c.origin == Origin::Builtin);
        for (title, commands) in [("Commands", builtin), ("Extension commands", extension)] {
            if commands.is_empty() {
                continue;
            }
            lines.push(Line::styled(title, bold));
            for c in commands {
                let mut name = format!("/{}", c.name);
                if !c.args.is_empty() {
                    name.push(' ');
                    name.push_str(&c.args);
                }
                let mut spans = vec![
                    Span::raw(format!("  {name:<28} ")),
                    Span::raw(c.description.clone().into_owned()),
                ];
                if !c.aliases.is_empty() {
                    spans.push(Span::styled(
                        format!(" (also /{})", c.aliases.join(", /")),
                        dim,
                    ));
                }
                if let Some(source) = c.source() {
                    spans.push(Span::styled(format!(" · {source}"), dim));
                }
                lines.push(Line::from(spans));
            }
        }
        lines.push(Line::styled("Keys", bold));
        let keys = [
            (
                crate::keys::Action::Submit,
                "send; while a turn runs, steer it",
            ),
            (
                crate::keys::Action::Queue,
                "queue a follow-up for after the turn",
            ),
            (crate::keys::Action::Newline, "new line"),
            (
                crate::keys::Action::Interrupt,
                "interrupt; twice on an empty composer: rewind",
            ),
            (crate::keys::Action::CycleMode, "cycle the permission mode"),
            (crate::keys::Action::Clear, "clear; twice: quit"),
            (crate::keys::Action::Exit, "quit when the composer is empty"),
            (crate::keys::Action::HistorySearch, "search sent prompts"),
            (crate::keys::Action::Todos, "the todo list"),
            (crate::keys::Action::Editor, "edit the draft in $EDITOR"),
            (
                crate::keys::Action::ToggleExpand,
                "the full transcript, expanded",
            ),
            (
                crate::keys::Action::PullQueued,
                "take the last queued message back",
            ),
        ];
        for (action, what) in keys {
            let bound = self.keys.keys_of(action).join(", ");
            lines.push(Line::from(vec![
                Span::raw(format!("  {bound:<28} ")),
                Span::raw(what),
            ]));
        }
        lines.push(Line::styled(
            "  @ completes files, / commands; keys can be changed in $KEEL_HOME/keybindings.yaml",
            dim,
        ));
        self.push(Cell::Info(lines));
    }

    fn status(&mut self) {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let mut lines = vec![Line::styled("Status", bold)];
        if let Some(s) = &self.session {
            lines.push(Line::from(format!("  session      {} ({})", s.id, s.title)));
            lines.push(Line::from(format!(
                "  messages     {} at revision {}",
                s.length, s.revision
            )));
        }
        lines.push(Line::from(format!(
            "  folder       {}",
            self.info.cwd.display()
        )));
        lines.push(Line::from(format!("  model        {}", self.info.model)));
        lines.push(Line::from(format!("  permission   {}", self.info.mode)));
        lines.push(Line::from(format!("  sandbox      {}", self.info.sandbox)));
        if let Some((used, window)) = self.context {
            lines.push(Line::from(format!(
                "  context      {} of {} tokens",
                short_count(used),
                short_count(u64::from(window))
            )));
        }
        self.push(Cell::Info(lines));
    }

    /// A picker row was chosen.
    pub(super) fn picked(&mut self, kind: PickerKind, item: PickItem, effects: &mut Vec<Effect>) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        match kind {
            PickerKind::Model => effects.push(Effect::Call(
                Tag::Plain("cannot change the model"),
                Op::UpdateSession(ops::UpdateSession {
                    session_id,
                    title: None,
                    model: Some(item.value),
                    mode: None,
                    thinking: None,
                }),
            )),
            PickerKind::Permission => {
                if let Ok(mode) = item.value.parse() {
                    self.set_mode(mode, effects);
                }
            }
            PickerKind::Sessions => {
                if item.value != session_id.as_str() {
                    effects.push(Effect::Call(
                        Tag::Open,
                        Op::OpenSession(ops::OpenSession {
                            target: SessionTarget::Id { id: item.value },
                        }),
                    ));
                }
            }
            PickerKind::Rewind => {
                let revision = item.revision.filter(|r| *r > 0);
                effects.push(Effect::Call(
                    Tag::Fork(Some(item.value)),
                    Op::ForkSession(ops::ForkSession {
                        session_id,
                        revision,
                    }),
                ));
            }
            PickerKind::Queue => {
                if let Some(entry) = self.queue.iter().find(|e| e.id == item.value) {
                    self.composer.set(&entry.text);
                    self.editing_queued = Some(entry.id.clone());
                    self.notice(
                        Tone::Info,
                        "editing the queued message: Enter saves it, Ctrl+C leaves it as it was",
                    );
                }
            }
            PickerKind::History => self.composer.set(&item.value),
            PickerKind::Tasks => self.task_picked(&item.value),
            PickerKind::PlanReview => self.plan_picked(&item, effects),
        }
    }

    pub(super) fn on_reply(&mut self, tag: Tag, reply: Reply, effects: &mut Vec<Effect>) {
        match (tag, reply) {
            (
                _,
                Reply::ListQueue(queue)
                | Reply::EditQueued(queue)
                | Reply::CancelQueued(queue)
                | Reply::ReorderQueue(queue),
            ) => self.queue = queue,
            (Tag::Tasks { open }, Reply::ListTasks(tasks)) => self.tasks_listed(tasks, open),
            (Tag::StopTask(id), Reply::StopTask(stopped)) => self.task_stop_answered(&id, stopped),
            (Tag::Mentions, Reply::ListMentions(mentions)) => {
                self.mentions = mentions;
                self.refresh_popup();
            }
            (Tag::Commands, Reply::ListCommands(offered)) => {
                self.catalog.set_extensions(offered);
                self.refresh_popup();
            }
            (Tag::Command { typed, expect, .. }, reply) => self.command_done(typed, expect, reply),
            (Tag::Open, Reply::OpenSession(opened)) => {
                let record = opened.record;
                let resumed = opened.start == keel_runtime::SessionStart::Resumed;
                let switching = self.session.as_ref().is_some_and(|s| s.id != record.id);
                if switching {
                    self.live.finish();
                    self.usage = Default::default();
                    self.context = None;
                    self.compact_at = 0;
                    self.todos.clear();
                    self.queue.clear();
                    self.goal = None;
                    self.tasks.clear();
                }
                self.info.model = record.model.clone();
                effects.push(Effect::Subscribe(record.id.clone()));
                effects.push(Self::list_commands());
                let what = if resumed { "resumed" } else { "new" };
                self.push(Cell::Notice(
                    Tone::Info,
                    format!("{what} session {} · {}", record.id, self.info.cwd.display()),
                ));
                let id = record.id.clone();
                self.untitled = !resumed && record.length == 0;
                self.session = Some(record);
                if resumed {
                    effects.push(Effect::Call(
                        Tag::History,
                        Op::GetMessages(ops::GetMessages {
                            session_id: id.clone(),
                            revision: None,
                        }),
                    ));
                    effects.push(Effect::Call(
                        Tag::Plain("cannot read the queue"),
                        Op::ListQueue(ops::ListQueue { session_id: id }),
                    ));
                    // Its tasks (lost ones were settled as it opened) for the footer.
                    effects.extend(self.list_tasks(false));
                }
                if let Some(text) = self.initial_prompt.take() {
                    self.sent(&text);
                    self.start_turn(text, effects);
                }
            }
            (Tag::History, Reply::GetMessages(entries)) => self.show_history(&entries),
            (Tag::Sessions, Reply::ListSessions(sessions)) => {
                let items = sessions
                    .into_iter()
                    .map(|s| PickItem {
                        detail: match keel_runtime::sessions::first_prompt_line(&s) {
                            Some(first) => format!(
                                "{} · {} messages · › {first}",
                                keel_runtime::sessions::age(s.updated_ms),
                                s.length,
                            ),
                            None => format!(
                                "{} · {} messages · {}",
                                keel_runtime::sessions::age(s.updated_ms),
                                s.length,
                                s.id,
                            ),
                        },
                        label: s.title,
                        value: s.id.to_string(),
                        revision: None,
                    })
                    .collect();
                let mut picker = Picker::new(
                    PickerKind::Sessions,
                    format!(
                        "Sessions in {} (enter: resume, ctrl+r: rename, ctrl+d twice: delete)",
                        self.info.cwd.display()
                    ),
                    items,
                );
                picker.filter = std::mem::take(&mut self.sessions_filter);
                self.popup = Some(Popup::Picker(picker));
            }
            (Tag::RewindList, Reply::GetMessages(entries)) => {
                let items: Vec<PickItem> = entries
                    .iter()
                    .enumerate()
                    .filter_map(|(i, e)| {
                        let text = user_text(&e.message)?;
                        Some(PickItem {
                            label: super::input::first_line(&text),
                            detail: keel_runtime::sessions::age(e.created_ms),
                            value: text,
                            revision: Some(revision_before(&entries, i)),
                        })
                    })
                    .rev()
                    .collect();
                if items.is_empty() {
                    self.notice(Tone::Info, "no earlier message to go back to");
                } else {
                    self.popup = Some(Popup::Picker(Picker::new(
                        PickerKind::Rewind,
                        "Go back to before… (a fork; this session stays as it is)",
                        items,
                    )));
                }
            }
            (Tag::Fork(text), Reply::ForkSession(record)) => {
                self.notice(Tone::Info, format!("forked into {}", record.id));
                effects.push(Effect::Call(
                    Tag::Open,
                    Op::OpenSession(ops::OpenSession {
                        target: SessionTarget::Id {
                            id: record.id.to_string(),
                        },
                    }),
                ));
                if let Some(text) = text {
                    self.composer.set(&text);
                }
            }
            (Tag::Compact, Reply::Compact(None)) => self.notice(Tone::Info, "nothing to compact"),
            // The file lands in the workspace: the runtime masked its secrets.
            (Tag::Export(path), Reply::ExportSession(export)) => {
                effects.push(Effect::Write(path, export.text));
            }
            (Tag::Context, Reply::ContextReport(report)) => self.context_report(&report),
            // The images went with the message.
            (Tag::Submit(_), Reply::Submit(_)) => self.unsent_images.clear(),
            (Tag::Status, Reply::GetSession(record)) => {
                if self.session.as_ref().is_some_and(|s| s.id == record.id) {
                    self.session = Some(record);
                }
                self.status();
            }
            _ => {}
        }
    }

    /// A resumed session's history as cells.
    fn show_history(&mut self, entries: &[StoredEntry]) {
        let mut calls: HashMap<String, (String, serde_json::Value)> = HashMap::new();
        for entry in entries {
            match &entry.message {
                Message::User(user) => {
                    if let Some(text) = user_text(&entry.message) {
                        // Up recalls the session's prompts; those the folder's history
                        // holds already are not repeated.
                        if !self.history.contains(&text) {
                            self.history.push(text.clone());
                        }
                        self.push(Cell::User(text));
                    }
                    if let Some(cell) = shell_cell(user) {
                        self.push(cell);
                    }
                }
                Message::Assistant(a) => {
                    self.usage += a.usage;
                    let thinking = a.thinking();
                    if !thinking.trim().is_empty() {
                        self.push(Cell::Reasoning(thinking));
                    }
                    let text = a.text();
                    if !text.trim().is_empty() {
                        self.push(Cell::Answer(text));
                    }
                    for call in a.tool_calls() {
                        calls.insert(
                            call.id.to_string(),
                            (call.name.clone(), call.arguments.clone()),
                        );
                        if call.name == "todowrite"
                            && let Some(todos) =
                                call.arguments.get("todos").and_then(|t| t.as_array())
                        {
                            self.todos = todos.clone();
                        }
                    }
                }
                Message::ToolResult(r) => {
                    let (name, arguments) = calls
                        .remove(r.tool_call_id.as_str())
                        .unwrap_or_else(|| (r.tool_name.clone(), serde_json::Value::Null));
                    self.push(Cell::Tool(ToolCell {
                        name,
                        arguments,
                        result: Some(r.text()),
                        details: r.details.clone(),
                        status: if r.is_error {
                            ToolCallStatus::Failed
                        } else {
                            ToolCallStatus::Completed
                        },
                        elapsed: None,
                    }));
                }
                Message::Host(h) if h.kind == "compaction" => {
                    self.notice(
                        Tone::Info,
                        "earlier conversation was compacted into a summary",
                    );
                }
                _ => {}
            }
        }
        // The last response's usage says how full the context is.
        if let Some(last) = entries.iter().rev().find_map(|e| e.message.as_assistant()) {
            let u = &last.usage;
            let used = u.input + u.cache_read + u.cache_write + u.output;
            if used > 0 {
                self.context = Some((used, self.context.map_or(0, |(_, w)| w)));
            }
        }
    }

    fn context_report(&mut self, report: &keel_protocol::ContextReport) {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let mut lines = vec![Line::styled("Context", bold)];
        let window = u64::from(report.window);
        let percent = |tokens: u64| {
            if window > 0 {
                format!(" ({:.0}%)", tokens as f64 * 100.0 / window as f64)
            } else {
                String::new()
            }
        };
        // The last request's size is exact: the provider reported it (a model that reports
        // no usage has nothing to show).
        if let Some((used, _)) = self.context.filter(|(used, _)| *used > 0) {
            lines.push(Line::from(format!(
                "  last request  {} tokens of {}{}",
                short_count(used),
                short_count(window),
                percent(used)
            )));
        }
        let total = report.total();
        let about = if report.measured { "" } else { "≈" };
        lines.push(Line::from(format!(
            "  next request  {about}{} tokens{}",
            short_count(total),
            percent(total)
        )));
        for part in report.parts.iter().filter(|part| part.tokens > 0) {
            lines.push(Line::from(format!(
                "    {:<22} {about}{}",
                part.label,
                short_count(part.tokens)
            )));
        }
        // The budget in use: where compaction starts, and the most a request may carry.
        let mut budget = format!("  window        {} tokens", short_count(window));
        if let Some(at) = report.compact_at {
            budget.push_str(&format!("; compaction starts at {}", short_count(at)));
        }
        if let Some(limit) = report.limit {
            budget.push_str(&format!("; input limit {}", short_count(limit)));
        }
        lines.push(Line::from(budget));
        if report.compactions > 0 {
            lines.push(Line::from(format!(
                "  compacted     {} time{}; summaries ≈{} tokens in all",
                report.compactions,
                if report.compactions == 1 { "" } else { "s" },
                short_count(report.summary_tokens)
            )));
        }
        self.push(Cell::Info(lines));
    }
}
