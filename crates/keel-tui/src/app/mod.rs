//! The TUI's state and how it changes: session events fold into the transcript and the
//! live area, keys edit the composer or act, and every action on the session becomes an
//! [`Effect`] (an operation for the runtime, a terminal request) that the event loop
//! carries out. Nothing here touches the terminal or the runtime, so the whole front end
//! is testable by feeding events and reading frames.

mod commands;
mod input;
pub mod live;
mod plan;
pub mod popup;
mod tasks;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_protocol::ops;
use keel_protocol::{
    Op, PermissionMode, QueueEntry, SandboxMode, SessionEvent, SessionId, TaskInfo, ThinkingLevel,
    Usage,
};
use keel_runtime::SessionRecord;
use keel_runtime::{Reply, RuntimeError};
use ratatui::text::Line;

use crate::cells::{Cell, Tone};
use crate::composer::Composer;
use crate::files::FileIndex;
use crate::keys::KeyMap;
use crate::slash::{Catalog, Expect};

pub use live::Live;
pub use popup::{PickerKind, Popup};
pub use tasks::is_active;

/// What the app asks the event loop to do.
#[derive(Debug, PartialEq)]
pub enum Effect {
    /// Send an operation; its reply comes back as [`UiEvent::Reply`] with `tag`.
    Call(Tag, Op),
    /// Deliver this session's events from now on (and stop delivering the previous one's).
    Subscribe(SessionId),
    /// Leave keel.
    Exit,
    /// Stop the process (job control) until it is resumed.
    Suspend,
    /// Edit this draft in `$EDITOR`; the result comes back as [`UiEvent::Edited`].
    Editor(String),
    /// Put this text on the clipboard (OSC 52).
    Copy(String),
    /// Show the whole transcript, expanded, until a key is pressed.
    Pager(Vec<Line<'static>>),
    /// Start listing the folder's files for `@`.
    IndexFiles,
    /// Run `git diff` in the working folder; the output comes back as [`UiEvent::GitDiff`].
    GitDiff,
    /// Write this file; the outcome comes back as a notice.
    Write(PathBuf, String),
    /// Keep this sent prompt for Up and Ctrl+R in later sessions of the folder.
    Remember(String),
    /// Tell the user, out of the terminal's focus, that keel needs them.
    Notify(String),
}

/// Which request an operation's reply answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Tag {
    /// Opening the session at start or on `/new`, `/sessions`, `/fork`.
    Open,
    /// A submitted prompt.
    Submit(String),
    /// A `!` command, as typed.
    Shell(String),
    /// A steer or follow-up.
    Enqueue,
    /// Stored history to show after opening a session.
    History,
    /// History for the rewind picker.
    RewindList,
    /// An unanswered prompt taken back after an interrupt.
    TakeBack,
    /// Sessions for the picker.
    Sessions,
    /// A fork; the text goes into the composer of the new session.
    Fork(Option<String>),
    /// `/retry`, with the message it asks again.
    Retry(String),
    /// `/compact`.
    Compact,
    /// The extensions' commands, for the slash catalog.
    Commands,
    /// What `@` completes besides files.
    Mentions,
    /// An extension's command run through the runtime.
    Command {
        /// Its name.
        name: String,
        /// What the user typed (`/name args`), shown as their message if a turn starts.
        typed: String,
        /// What it was expected to do when sent.
        expect: Expect,
    },
    /// An answer to an MCP server's question (its id): a refusal reopens the prompt.
    Question(String),
    /// History for `/export` to this path.
    Export(PathBuf),
    /// History for `/context`.
    Context,
    /// The session's record for `/status`.
    Status,
    /// The session's tasks; `open`: show them in the `/tasks` picker.
    Tasks {
        /// Whether the picker opens with them.
        open: bool,
    },
    /// Stopping this task from its details.
    StopTask(String),
    /// Anything whose reply only needs an error shown.
    Plain(&'static str),
}

/// What reaches the app.
#[derive(Debug)]
pub enum UiEvent {
    /// An event of the subscribed session.
    Session(SessionEvent),
    /// A terminal event.
    Term(crossterm::event::Event),
    /// An operation's reply.
    Reply(Tag, Result<Reply, RuntimeError>),
    /// The file list for `@` is ready.
    FilesReady,
    /// `$EDITOR` finished with this text (`None`: it failed, with the reason as a notice).
    Edited(Result<String, crate::outside::OutsideError>),
    /// `git diff`'s output.
    GitDiff(Result<String, crate::outside::OutsideError>),
    /// A file write finished.
    Written(Result<PathBuf, crate::outside::OutsideError>),
    /// The terminal hung up or keel was told to stop: quit as Ctrl+D would.
    Quit,
}

/// What the app is started with.
#[derive(Debug, Clone)]
pub struct Info {
    /// The working folder.
    pub cwd: PathBuf,
    /// The model in use, provider/model.
    pub model: String,
    /// The permission mode.
    pub mode: PermissionMode,
    /// The sandbox mode.
    pub sandbox: SandboxMode,
    /// Models the `/model` picker offers, provider/model.
    pub models: Vec<String>,
    /// `$KEEL_HOME`, for keybindings.yaml.
    pub keel_home: Option<PathBuf>,
    /// Warnings from start-up to show once.
    pub warnings: Vec<String>,
    /// The thinking level sessions start with (`None`: the model's own).
    pub thinking: Option<ThinkingLevel>,
    /// How a terminal out of focus is told keel needs the user.
    pub notifications: keel_runtime::settings::extend::Notifications,
}

/// The whole TUI state.
pub struct App {
    /// Static facts and the current model/mode.
    pub info: Info,
    /// The session shown.
    pub session: Option<SessionRecord>,
    /// The composer.
    pub composer: Composer,
    /// The open popup.
    pub popup: Option<Popup>,
    /// The turn in progress, if any.
    pub live: Live,
    /// Finished cells, oldest first (the full-screen view and the pager show them).
    pub transcript: Vec<Cell>,
    /// Lines finished since the last frame, for the scrollback.
    pending: Vec<Line<'static>>,
    /// The terminal's width.
    pub width: u16,
    /// Show long output, diffs and thinking in full.
    pub expanded: bool,
    /// Waiting inputs of the session.
    pub queue: Vec<QueueEntry>,
    /// The tasks the session started, as last told (oldest first).
    pub tasks: Vec<TaskInfo>,
    /// The session opened new and its first turn has not completed: when it does, the
    /// model is asked for a title.
    pub untitled: bool,
    /// Tokens and cost of the session in this process and its stored history.
    pub usage: Usage,
    /// The last request's size and the model's window.
    pub context: Option<(u64, u32)>,
    /// Where compaction starts in that window (0 until a response reports it).
    pub compact_at: u64,
    /// Prompts sent, oldest first.
    pub history: Vec<String>,
    /// Where Up/Down is in `history`.
    pub history_at: Option<usize>,
    /// Sent prompts not yet written to the folder's history file.
    to_remember: Vec<String>,
    /// Whether the terminal has focus (as far as it reports focus changes).
    pub focused: bool,
    /// Images pasted for the next message.
    pub images: Vec<keel_protocol::ImageBlock>,
    /// Images sent with a message whose turn has not started yet (back on a refusal).
    unsent_images: Vec<keel_protocol::ImageBlock>,
    /// The last todo list the model wrote.
    pub todos: Vec<serde_json::Value>,
    /// The session's goal, while one is set.
    pub goal: Option<crate::goal::GoalBanner>,
    /// The slash catalog.
    pub catalog: Catalog,
    /// The key map.
    pub keys: KeyMap,
    /// The `@` index, once started.
    pub files: Option<FileIndex>,
    /// When Ctrl+C was last pressed on an empty composer.
    pub last_ctrl_c: Option<Instant>,
    /// When Esc was last pressed on an empty composer.
    pub last_esc: Option<Instant>,
    /// The queued input being edited in the composer.
    pub editing_queued: Option<String>,
    /// Whether the app should quit.
    pub quitting: bool,
    /// The mode before `/plan on`.
    pub mode_before_plan: Option<PermissionMode>,
    /// A plan submitted for review whose choice (approve, keep planning) opens once its
    /// turn ended.
    pub plan_review: bool,
    /// The thinking level chosen for the session (`None`: the model's own).
    pub thinking: Option<ThinkingLevel>,
    /// `@` was typed and the folder is not listed yet.
    files_requested: bool,
    /// The slash popup opened: the extensions' commands are listed again.
    commands_requested: bool,
    /// The filter `/sessions` was given, for its picker.
    sessions_filter: String,
    /// The prompt `keel PROMPT` starts with, sent once the session is open.
    pub initial_prompt: Option<String>,
    /// Questions from MCP servers waiting behind the prompt shown now, oldest first.
    pub questions: std::collections::VecDeque<keel_protocol::Question>,
    /// What `@` completes besides files (MCP resources), as last listed.
    pub mentions: Vec<keel_protocol::MentionInfo>,
    /// The `@` popup opened: the mentions are listed again.
    mentions_requested: bool,
}

/// Two presses of Ctrl+C or Esc within this count as "twice".
pub const DOUBLE_PRESS: Duration = Duration::from_millis(1500);

impl App {
    /// A fresh app; `width` is the terminal's.
    pub fn new(info: Info, width: u16) -> Self {
        let thinking = info.thinking;
        let (keys, warning) = KeyMap::load(info.keel_home.as_deref());
        let history = crate::prompts::load(info.keel_home.as_deref(), &info.cwd);
        let mut app = Self {
            info,
            session: None,
            composer: Composer::new(),
            popup: None,
            live: Live::default(),
            transcript: Vec::new(),
            pending: Vec::new(),
            width,
            expanded: false,
            queue: Vec::new(),
            tasks: Vec::new(),
            untitled: false,
            usage: Usage::default(),
            context: None,
            compact_at: 0,
            history,
            history_at: None,
            to_remember: Vec::new(),
            focused: true,
            images: Vec::new(),
            unsent_images: Vec::new(),
            todos: Vec::new(),
            goal: None,
            catalog: Catalog::default(),
            keys,
            files: None,
            last_ctrl_c: None,
            last_esc: None,
            editing_queued: None,
            quitting: false,
            mode_before_plan: None,
            plan_review: false,
            thinking,
            files_requested: false,
            commands_requested: false,
            sessions_filter: String::new(),
            initial_prompt: None,
            questions: std::collections::VecDeque::new(),
            mentions: Vec::new(),
            mentions_requested: false,
        };
        for warning in app.info.warnings.clone() {
            app.push(Cell::Notice(Tone::Warn, warning));
        }
        if let Some(warning) = warning {
            app.push(Cell::Notice(Tone::Warn, warning));
        }
        app
    }

    /// The session's id.
    pub fn session_id(&self) -> Option<SessionId> {
        self.session.as_ref().map(|s| s.id.clone())
    }

    /// Adds a finished cell: to the transcript and, rendered, to the scrollback.
    pub fn push(&mut self, cell: Cell) {
        let lines = cell.lines(self.width as usize, self.expanded);
        self.pending.extend(lines);
        self.transcript.push(cell);
    }

    /// Adds finished lines that belong to a cell still open (a streaming answer).
    pub fn push_lines(&mut self, lines: Vec<Line<'static>>) {
        self.pending.extend(lines);
    }

    /// Shows the oldest waiting question of an MCP server, unless a question is shown.
    pub(crate) fn next_question(&mut self) {
        if self.popup.as_ref().is_some_and(Popup::is_question) {
            return;
        }
        if let Some(question) = self.questions.pop_front() {
            self.popup = Some(Popup::Question(crate::question::QuestionPrompt::new(
                question,
            )));
        }
    }

    /// A notice.
    pub fn notice(&mut self, tone: Tone, text: impl Into<String>) {
        self.push(Cell::Notice(tone, text.into()));
    }

    /// Takes the lines finished since the last call.
    pub fn take_pending(&mut self) -> Vec<Line<'static>> {
        std::mem::take(&mut self.pending)
    }

    /// Whether a turn runs (or was just submitted).
    pub fn busy(&self) -> bool {
        self.live.running()
    }

    /// Folds one event in; returns what must happen.
    pub fn update(&mut self, event: UiEvent) -> Vec<Effect> {
        let mut effects = Vec::new();
        match event {
            UiEvent::Session(event) => self.session_event(event, &mut effects),
            UiEvent::Term(event) => self.term_event(event, &mut effects),
            UiEvent::Reply(tag, reply) => self.reply(tag, reply, &mut effects),
            UiEvent::FilesReady => self.refresh_popup(),
            UiEvent::Edited(Ok(text)) => {
                let text = text.strip_suffix('\n').unwrap_or(&text).to_owned();
                self.composer.set(&text);
            }
            UiEvent::Edited(Err(error)) => self.notice(Tone::Error, format!("editor: {error}")),
            UiEvent::GitDiff(Ok(diff)) if diff.trim().is_empty() => {
                self.notice(Tone::Info, "no changes in the working tree");
            }
            UiEvent::GitDiff(Ok(diff)) => {
                let width = self.width as usize;
                let limit = (!self.expanded).then_some(200);
                let mut lines = crate::diff::render(&diff, "", width, limit);
                lines.insert(0, Line::from("git diff"));
                self.push(Cell::Info(lines));
            }
            UiEvent::GitDiff(Err(error)) => self.notice(Tone::Error, format!("git diff: {error}")),
            UiEvent::Written(Ok(path)) => {
                self.notice(Tone::Info, format!("wrote {}", path.display()));
            }
            UiEvent::Written(Err(error)) => self.notice(Tone::Error, error.to_string()),
            UiEvent::Quit => self.quit(&mut effects),
        }
        if self.files_requested {
            self.files_requested = false;
            effects.push(Effect::IndexFiles);
        }
        if self.commands_requested {
            self.commands_requested = false;
            effects.push(Self::list_commands());
        }
        if std::mem::take(&mut self.mentions_requested)
            && let Some(session_id) = self.session_id()
        {
            effects.push(Effect::Call(
                Tag::Mentions,
                Op::ListMentions(ops::ListMentions { session_id }),
            ));
        }
        effects.extend(self.to_remember.drain(..).map(Effect::Remember));
        effects
    }

    /// Runs a slash command by name, as if typed.
    pub fn command(&mut self, name: &str, effects: &mut Vec<Effect>) {
        self.run_command(name, "", effects);
    }

    /// Asks the runtime for the extensions' commands.
    fn list_commands() -> Effect {
        Effect::Call(Tag::Commands, Op::ListCommands(ops::ListCommands {}))
    }

    fn reply(&mut self, tag: Tag, reply: Result<Reply, RuntimeError>, effects: &mut Vec<Effect>) {
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                let unsent = match &tag {
                    Tag::Submit(text) | Tag::Retry(text) | Tag::Shell(text) => {
                        Some((text, Expect::Turn))
                    }
                    Tag::Command { typed, expect, .. } => Some((typed, *expect)),
                    _ => None,
                };
                if let Some((text, expect)) = unsent {
                    // The turn did not start: nothing may be lost.
                    if expect == Expect::Turn {
                        self.live.finish();
                    }
                    if matches!(tag, Tag::Submit(_)) {
                        self.images = std::mem::take(&mut self.unsent_images);
                    }
                    if self.composer.is_empty() {
                        self.composer.set(text);
                    }
                }
                if let Tag::Command { name, .. } = &tag {
                    // A command's own errors name it; the catalog may be out of date (a
                    // command file removed), so it is listed again.
                    let text = match &error {
                        RuntimeError::Command { .. } | RuntimeError::UnknownCommand(_) => {
                            error.to_string()
                        }
                        _ => format!("/{name}: {error}"),
                    };
                    self.notice(Tone::Error, text);
                    effects.push(Self::list_commands());
                    return;
                }
                if matches!(tag, Tag::Mentions) {
                    // Completion goes on with the files alone.
                    tracing::debug!(%error, "cannot list the mentions");
                    return;
                }
                if let Tag::Question(id) = &tag
                    && let Some(Popup::Question(prompt)) = &mut self.popup
                    && &prompt.question.id == id
                {
                    prompt.refused(error.to_string());
                    return;
                }
                let what = match &tag {
                    Tag::Plain(what) => what,
                    Tag::Open => "cannot open the session",
                    Tag::Submit(_) => "cannot start the turn",
                    Tag::Shell(_) => "cannot run the command",
                    Tag::Enqueue => "cannot queue the message",
                    Tag::Sessions => "cannot list sessions",
                    Tag::Fork(_) => "cannot fork",
                    Tag::Retry(_) => "cannot ask the last message again",
                    Tag::TakeBack => "cannot take the unanswered message back",
                    Tag::Commands => "cannot list the extensions' commands",
                    Tag::Tasks { .. } => "cannot list the tasks",
                    Tag::StopTask(_) => "cannot stop the task",
                    _ => "failed",
                };
                self.notice(Tone::Error, format!("{what}: {error}"));
                return;
            }
        };
        self.on_reply(tag, reply, effects);
    }

    /// The footer's fields, in order.
    pub fn footer(&self) -> Vec<String> {
        let mut parts = vec![
            self.info.model.clone(),
            format!("{} mode", self.info.mode),
            self.info.sandbox.name().to_owned(),
        ];
        if let Some((used, window)) = self.context
            && window > 0
        {
            let percent = (used as f64 * 100.0 / f64::from(window)).round() as u64;
            let mut part = format!("ctx {percent}%");
            // The window and where compaction starts, where they matter: a window below the
            // budget's large ones (compaction comes within a few steps there), or a context
            // past half of its compaction start.
            if self.compact_at > 0
                && (u64::from(window) < keel_runtime::view::LARGE_WINDOW
                    || used * 2 >= self.compact_at)
            {
                part.push_str(&format!(
                    " of {}, compacts at {}",
                    short_count(u64::from(window)),
                    short_count(self.compact_at)
                ));
            }
            parts.push(part);
        }
        let tokens = self.usage.total_tokens();
        if tokens > 0 {
            parts.push(format!("{} tok", short_count(tokens)));
        }
        let cost = self.usage.cost.total;
        if cost > 0.0 {
            parts.push(format!("${cost:.2}"));
        }
        let queued = self.queue.len();
        if queued > 0 {
            parts.push(format!("{queued} queued"));
        }
        let tasks = self.running_tasks();
        if tasks > 0 {
            let noun = if tasks == 1 { "task" } else { "tasks" };
            parts.push(format!("{tasks} {noun} running"));
        }
        parts
    }
}

/// 1234 as "1.2k", 1234567 as "1.2M".
pub fn short_count(n: u64) -> String {
    keel_runtime::notice::short_count(n)
}
