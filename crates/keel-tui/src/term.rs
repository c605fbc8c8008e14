//! The terminal side: raw mode and its restoration (on exit, suspend and panic), the input
//! thread, the event loop that feeds the app and draws only when something changed, and
//! the effects that need the terminal or the runtime.
//!
//! Rendering runs on this thread and operations on the runtime's tasks: a slow terminal
//! delays only frames, and a commit never delays a keystroke.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, Event, KeyCode, KeyEventKind};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

use keel_protocol::ops;
use keel_protocol::{Op, SessionEvent, SessionTarget};
use keel_runtime::{ConversationContract, SessionSink, Subscription};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use crate::app::{App, Effect, Info, Tag, UiEvent};
use crate::render;

/// Why the TUI could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// Standard input or output is not a terminal.
    #[error(
        "keel's interactive mode needs a terminal ({0} is not one); for scripts and pipes use `keel exec`"
    )]
    NotATerminal(&'static str),
    /// The terminal refused a setting or a write.
    #[error("terminal error: {0}")]
    Terminal(#[from] std::io::Error),
}

impl TuiError {
    /// A stable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotATerminal(_) => "not_a_terminal",
            Self::Terminal(_) => "terminal",
        }
    }
}

/// How the TUI starts.
pub struct Launch {
    /// The runtime's contract.
    pub contract: Arc<dyn ConversationContract>,
    /// Runs the contract's futures.
    pub handle: tokio::runtime::Handle,
    /// Facts for the footer and pickers.
    pub info: Info,
    /// The session to open.
    pub target: SessionTarget,
    /// A prompt to send once it is open.
    pub prompt: Option<String>,
    /// Use the alternate screen instead of the inline viewport.
    pub fullscreen: bool,
    /// Open the session picker at start (`keel resume`).
    pub pick_session: bool,
}

/// What the session ended as, for the caller's closing line.
#[derive(Debug, Clone)]
pub struct Ended {
    /// The session shown last.
    pub session_id: Option<String>,
}

/// Frames are at most this often while text streams.
const FRAME: Duration = Duration::from_millis(16);
/// The spinner's rate while a turn runs.
const TICK: Duration = Duration::from_millis(80);
/// How long quitting waits for an interrupted turn to record its end.
const QUIT_GRACE: Duration = Duration::from_secs(3);

struct UiSink(Sender<UiEvent>);

impl SessionSink for UiSink {
    fn on_event(&self, event: &SessionEvent) {
        let _ = self.0.send(UiEvent::Session(event.clone()));
    }
}

/// Puts the terminal back: raw mode off, bracketed paste off, main screen, cursor shown.
pub fn restore() {
    let _ = disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = crossterm::execute!(
        out,
        DisableBracketedPaste,
        crossterm::event::DisableFocusChange,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = out.flush();
}

fn enter(fullscreen: bool) -> std::io::Result<()> {
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    crossterm::execute!(
        out,
        EnableBracketedPaste,
        crossterm::event::EnableFocusChange
    )?;
    if fullscreen {
        crossterm::execute!(out, EnterAlternateScreen)?;
    }
    Ok(())
}

type Term = Terminal<CrosstermBackend<std::io::Stdout>>;

/// The terminal's width in columns (80 when it cannot be told).
pub fn columns() -> usize {
    crossterm::terminal::size().map_or(80, |(columns, _)| usize::from(columns))
}

fn inline_height(rows: u16) -> u16 {
    (rows * 2 / 5).clamp(10, 24).min(rows)
}

fn new_terminal(fullscreen: bool) -> std::io::Result<Term> {
    let backend = CrosstermBackend::new(std::io::stdout());
    let viewport = if fullscreen {
        Viewport::Fullscreen
    } else {
        let (_, rows) = crossterm::terminal::size()?;
        Viewport::Inline(inline_height(rows))
    };
    Terminal::with_options(backend, TerminalOptions { viewport })
}

/// Runs the TUI until the user quits.
pub fn run(launch: Launch) -> Result<Ended, TuiError> {
    if !std::io::stdin().is_terminal() {
        return Err(TuiError::NotATerminal("standard input"));
    }
    if !std::io::stdout().is_terminal() {
        return Err(TuiError::NotATerminal("standard output"));
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    enter(launch.fullscreen)?;
    let result = Loop::new(launch).and_then(Loop::run);
    restore();
    result
}

struct Loop {
    launch: Launch,
    app: App,
    terminal: Term,
    tx: Sender<UiEvent>,
    rx: Receiver<UiEvent>,
    ops: tokio::sync::mpsc::UnboundedSender<(Tag, Op)>,
    subscription: Option<Subscription>,
    paused: Arc<AtomicBool>,
    /// Full-screen mode: every finished line, and how far up the view is scrolled.
    transcript: Vec<Line<'static>>,
    scroll: usize,
    pager: Option<(Vec<Line<'static>>, usize)>,
    /// When the scrollback is written again at the terminal's new width (inline mode, after
    /// a resize settles).
    reflow_at: Option<Instant>,
    /// The width the scrollback was last written at.
    reflowed_width: u16,
}

/// How long a resize must settle before the scrollback is written again: a window being
/// dragged sends many.
const REFLOW_WAIT: Duration = Duration::from_millis(75);

/// The most lines of history written again after a resize.
const REFLOW_LINES: usize = 5_000;

/// Resets the scroll region and style, clears the screen and the terminal's scrollback, and
/// homes the cursor: what was wrapped at the old width (the panel's old frames among it) goes.
const CLEAR_ALL: &[u8] = b"\x1b[r\x1b[0m\x1b[H\x1b[2J\x1b[3J\x1b[H";

impl Loop {
    fn new(launch: Launch) -> Result<Self, TuiError> {
        let terminal = new_terminal(launch.fullscreen)?;
        let width = terminal.size()?.width;
        let mut app = App::new(launch.info.clone(), width);
        app.initial_prompt = launch.prompt.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let paused = Arc::new(AtomicBool::new(false));
        spawn_input(tx.clone(), paused.clone());
        let ops = spawn_ops(launch.contract.clone(), &launch.handle, tx.clone());
        spawn_signals(&launch.handle, tx.clone());
        Ok(Self {
            launch,
            app,
            terminal,
            tx,
            rx,
            ops,
            subscription: None,
            paused,
            transcript: Vec::new(),
            scroll: 0,
            pager: None,
            reflow_at: None,
            reflowed_width: width,
        })
    }

    fn run(mut self) -> Result<Ended, TuiError> {
        let target = self.launch.target.clone();
        self.carry_out(vec![Effect::Call(
            Tag::Open,
            Op::OpenSession(ops::OpenSession { target }),
        )])?;
        if self.launch.pick_session {
            let mut effects = Vec::new();
            self.app.command("sessions", &mut effects);
            self.carry_out(effects)?;
        }
        self.draw()?;
        let mut last_frame = Instant::now();
        let mut dirty = false;
        let mut quit_by: Option<Instant> = None;
        loop {
            let wait = match (quit_by, dirty, self.app.busy()) {
                (Some(by), _, _) => Some(by.saturating_duration_since(Instant::now())),
                (None, true, _) => Some(FRAME.saturating_sub(last_frame.elapsed())),
                (None, false, true) => Some(TICK.saturating_sub(last_frame.elapsed())),
                (None, false, false) => None,
            };
            let wait = match (wait, self.reflow_at) {
                (wait, Some(at)) => {
                    let until = at.saturating_duration_since(Instant::now());
                    Some(wait.map_or(until, |wait| wait.min(until)))
                }
                (wait, None) => wait,
            };
            let first = match wait {
                Some(wait) => match self.rx.recv_timeout(wait) {
                    Ok(event) => Some(event),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match self.rx.recv() {
                    Ok(event) => Some(event),
                    Err(_) => break,
                },
            };
            let mut keyed = false;
            let mut events: Vec<UiEvent> = first.into_iter().collect();
            // Everything already waiting is folded before one frame.
            while events.len() < 4096 {
                match self.rx.try_recv() {
                    Ok(event) => events.push(event),
                    Err(_) => break,
                }
            }
            for event in events {
                keyed |= matches!(event, UiEvent::Term(_));
                if let UiEvent::Term(term) = &event
                    && self.intercept(term)?
                {
                    continue;
                }
                let effects = self.app.update(event);
                self.carry_out(effects)?;
                dirty = true;
            }
            if self.app.quitting {
                if !self.app.busy() {
                    break;
                }
                let by = *quit_by.get_or_insert_with(|| Instant::now() + QUIT_GRACE);
                if Instant::now() >= by {
                    break;
                }
            }
            if self.reflow_at.is_some_and(|at| Instant::now() >= at) {
                self.reflow()?;
                last_frame = Instant::now();
                dirty = false;
                continue;
            }
            let due = last_frame.elapsed() >= FRAME;
            let ticking = self.app.busy() && last_frame.elapsed() >= TICK;
            if (dirty && (keyed || due)) || ticking {
                self.draw()?;
                last_frame = Instant::now();
                dirty = false;
            }
        }
        self.finish()?;
        Ok(Ended {
            session_id: self.app.session_id().map(|s| s.to_string()),
        })
    }

    /// Keys the loop itself handles: the pager, full-screen scrolling; and a resize, after
    /// which the inline scrollback is written again at the new width.
    fn intercept(&mut self, event: &Event) -> Result<bool, TuiError> {
        // Only a new width rewraps what the terminal holds.
        if let Event::Resize(width, _) = event
            && !self.launch.fullscreen
            && *width != self.reflowed_width
        {
            self.reflow_at = Some(Instant::now() + REFLOW_WAIT);
        }
        if let Some((lines, offset)) = &mut self.pager {
            if let Event::Key(key) = event
                && key.kind != KeyEventKind::Release
            {
                let page = self.terminal.size()?.height.saturating_sub(1) as usize;
                let max = lines.len().saturating_sub(page);
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => *offset = offset.saturating_sub(1),
                    KeyCode::Down | KeyCode::Char('j') => *offset = (*offset + 1).min(max),
                    KeyCode::PageUp => *offset = offset.saturating_sub(page),
                    KeyCode::PageDown | KeyCode::Char(' ') => *offset = (*offset + page).min(max),
                    KeyCode::Home | KeyCode::Char('g') => *offset = 0,
                    KeyCode::End | KeyCode::Char('G') => *offset = max,
                    _ => {
                        self.pager = None;
                        if !self.launch.fullscreen {
                            crossterm::execute!(std::io::stdout(), LeaveAlternateScreen)?;
                        }
                        self.terminal.clear()?;
                    }
                }
            }
            return Ok(true);
        }
        if self.launch.fullscreen
            && let Event::Key(key) = event
        {
            let page = (self.terminal.size()?.height / 2) as usize;
            match key.code {
                KeyCode::PageUp => {
                    self.scroll = (self.scroll + page).min(self.transcript.len());
                    return Ok(true);
                }
                KeyCode::PageDown => {
                    self.scroll = self.scroll.saturating_sub(page);
                    return Ok(true);
                }
                _ => {}
            }
        }
        Ok(false)
    }

    fn carry_out(&mut self, effects: Vec<Effect>) -> Result<(), TuiError> {
        for effect in effects {
            match effect {
                Effect::Call(tag, op) => {
                    let _ = self.ops.send((tag, op));
                }
                Effect::Subscribe(session_id) => {
                    self.subscription = None;
                    let sink = Arc::new(UiSink(self.tx.clone()));
                    let contract = self.launch.contract.clone();
                    match self
                        .launch
                        .handle
                        .block_on(async move { contract.subscribe(&session_id, sink).await })
                    {
                        Ok(subscription) => self.subscription = Some(subscription),
                        Err(error) => self.app.notice(
                            crate::cells::Tone::Error,
                            format!("cannot follow the session: {error}"),
                        ),
                    }
                }
                Effect::Exit => self.app.quitting = true,
                Effect::Suspend => self.suspend()?,
                Effect::Editor(draft) => {
                    let result =
                        self.with_terminal_released(|| crate::outside::edit_in_editor(&draft))?;
                    let _ = self.tx.send(UiEvent::Edited(result));
                }
                Effect::Copy(text) => {
                    use base64::Engine as _;
                    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
                    let mut out = std::io::stdout();
                    write!(out, "\x1b]52;c;{encoded}\x07")?;
                    out.flush()?;
                }
                Effect::Pager(lines) => {
                    if !self.launch.fullscreen {
                        crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
                    }
                    let page = self.terminal.size()?.height.saturating_sub(1) as usize;
                    let offset = lines.len().saturating_sub(page);
                    self.pager = Some((lines, offset));
                }
                Effect::IndexFiles => {
                    let tx = self.tx.clone();
                    self.app.files = Some(crate::files::FileIndex::start(
                        self.app.info.cwd.clone(),
                        move || {
                            let _ = tx.send(UiEvent::FilesReady);
                        },
                    ));
                }
                Effect::GitDiff => {
                    let tx = self.tx.clone();
                    let cwd = self.app.info.cwd.clone();
                    std::thread::spawn(move || {
                        let _ = tx.send(UiEvent::GitDiff(crate::outside::git_diff(&cwd)));
                    });
                }
                Effect::Notify(text) => {
                    let mut out = std::io::stdout();
                    out.write_all(&crate::outside::notification(
                        self.app.info.notifications,
                        &text,
                    ))?;
                    out.flush()?;
                }
                Effect::Remember(text) => {
                    if let Some(home) = &self.app.info.keel_home
                        && let Err(error) = crate::prompts::append(home, &self.app.info.cwd, &text)
                    {
                        tracing::warn!(%error, "cannot keep the prompt in the history file");
                    }
                }
                Effect::Write(path, text) => {
                    let result = crate::outside::write_file(&path, &text).map(|()| path.clone());
                    let _ = self.tx.send(UiEvent::Written(result));
                }
            }
        }
        Ok(())
    }

    fn with_terminal_released<T>(&mut self, f: impl FnOnce() -> T) -> Result<T, TuiError> {
        self.paused.store(true, Ordering::SeqCst);
        // Let the input thread leave its poll before the child reads the terminal.
        std::thread::sleep(Duration::from_millis(60));
        restore();
        let result = f();
        enter(self.launch.fullscreen)?;
        self.paused.store(false, Ordering::SeqCst);
        self.terminal.clear()?;
        Ok(result)
    }

    fn suspend(&mut self) -> Result<(), TuiError> {
        self.with_terminal_released(|| {
            crate::signal::stop_self();
        })?;
        self.draw()
    }

    fn draw(&mut self) -> Result<(), TuiError> {
        if let Some((lines, offset)) = &self.pager {
            let lines = lines.clone();
            let offset = *offset;
            let mut pager = Terminal::with_options(
                CrosstermBackend::new(std::io::stdout()),
                TerminalOptions {
                    viewport: Viewport::Fullscreen,
                },
            )?;
            pager.draw(|frame| {
                let area = frame.area();
                let height = area.height.saturating_sub(1) as usize;
                let shown: Vec<Line<'static>> =
                    lines.iter().skip(offset).take(height).cloned().collect();
                frame.render_widget(
                    Paragraph::new(shown),
                    Rect {
                        height: area.height.saturating_sub(1),
                        ..area
                    },
                );
                let hint = Line::styled(
                    format!(
                        "transcript ({}/{}) · ↑↓ pgup pgdn g G to move · any other key closes",
                        (offset + height).min(lines.len()),
                        lines.len()
                    ),
                    ratatui::style::Style::new().fg(ratatui::style::Color::DarkGray),
                );
                frame.render_widget(
                    Paragraph::new(hint),
                    Rect {
                        y: area.y + area.height.saturating_sub(1),
                        height: 1,
                        ..area
                    },
                );
            })?;
            return Ok(());
        }
        let width = self.terminal.size()?.width;
        if width != self.app.width {
            self.app.width = width;
        }
        let pending = self.app.take_pending();
        if self.launch.fullscreen {
            self.transcript.extend(pending);
            let transcript = &self.transcript;
            let scroll = self.scroll;
            let app = &self.app;
            self.terminal.draw(|frame| {
                let area = frame.area();
                let (panel, _) = render::panel(app, area.width);
                let panel_height = (panel.len() as u16)
                    .min(area.height / 2)
                    .max(3)
                    .min(area.height);
                let top = Rect {
                    height: area.height - panel_height,
                    ..area
                };
                let bottom = Rect {
                    y: area.y + top.height,
                    height: panel_height,
                    ..area
                };
                let visible = top.height as usize;
                let end = transcript.len().saturating_sub(scroll);
                let start = end.saturating_sub(visible);
                let shown: Vec<Line<'static>> = transcript[start..end].to_vec();
                frame.render_widget(Paragraph::new(shown), top);
                render::draw_panel(frame, app, bottom);
            })?;
        } else {
            write_history(&mut self.terminal, &pending)?;
            let app = &self.app;
            self.terminal
                .draw(|frame| render::draw_panel(frame, app, frame.area()))?;
        }
        // Start-up's last mark for the TUI (`KEEL_TRACE`, best sent to a file with `2>`).
        static DRAWN: AtomicBool = AtomicBool::new(false);
        if !DRAWN.swap(true, Ordering::Relaxed) {
            tracing::info!(target: "keel_startup", "first frame drawn");
        }
        Ok(())
    }

    /// After a resize (inline mode): the terminal wrapped what it held at the old width,
    /// the panel's old frames among it, so the screen and its scrollback are cleared and the
    /// session's history is written again at the new width, then the panel drawn, in one
    /// synchronized update so the screen is never seen blank.
    fn reflow(&mut self) -> Result<(), TuiError> {
        self.reflow_at = None;
        if self.launch.fullscreen {
            return Ok(());
        }
        // The pager holds the screen: the history is written again once it is closed.
        if self.pager.is_some() {
            self.reflow_at = Some(Instant::now() + REFLOW_WAIT * 4);
            return Ok(());
        }
        let (width, _) = crossterm::terminal::size()?;
        self.app.width = width;
        self.reflowed_width = width;
        // What was waiting to be written is part of the history written now.
        drop(self.app.take_pending());
        let lines = self.app.replay_lines();
        let skip = lines.len().saturating_sub(REFLOW_LINES);
        let mut out = std::io::stdout();
        crossterm::execute!(out, crossterm::terminal::BeginSynchronizedUpdate)?;
        out.write_all(CLEAR_ALL)?;
        out.flush()?;
        self.terminal = new_terminal(false)?;
        write_history(&mut self.terminal, &lines[skip..])?;
        let app = &self.app;
        self.terminal
            .draw(|frame| render::draw_panel(frame, app, frame.area()))?;
        crossterm::execute!(out, crossterm::terminal::EndSynchronizedUpdate)?;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), TuiError> {
        // What finished last still belongs in the scrollback.
        self.pager = None;
        let pending = self.app.take_pending();
        if !self.launch.fullscreen {
            write_history(&mut self.terminal, &pending)?;
            self.terminal.clear()?;
            let area = self.terminal.get_frame().area();
            crossterm::execute!(std::io::stdout(), crossterm::cursor::MoveTo(0, area.y))?;
        }
        self.subscription = None;
        Ok(())
    }
}

/// Writes finished `lines` into the terminal's scrollback above the inline view, a screen
/// at a time.
fn write_history(terminal: &mut Term, lines: &[Line<'static>]) -> Result<(), TuiError> {
    let rows = usize::from(terminal.size()?.height.max(1));
    for chunk in lines.chunks(rows) {
        let chunk = chunk.to_vec();
        let height = chunk.len() as u16;
        terminal.insert_before(height, |buf| {
            Paragraph::new(chunk).render(buf.area, buf);
        })?;
    }
    Ok(())
}

fn spawn_input(tx: Sender<UiEvent>, paused: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("keel-input".into())
        .spawn(move || {
            loop {
                if paused.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                // A bounded wait, so a pause (editor, suspend) is noticed within a quarter second.
                match crossterm::event::poll(Duration::from_millis(250)) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => return,
                }
                if paused.load(Ordering::SeqCst) {
                    continue;
                }
                match crossterm::event::read() {
                    Ok(event) => {
                        if tx.send(UiEvent::Term(event)).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
}

/// Operations run one after another, in the order the user caused them; a compaction
/// (minutes) and an extension command that answers with text (`/mcp reload` waits for
/// servers) run beside them so that an interrupt is never stuck behind them.
fn spawn_ops(
    contract: Arc<dyn ConversationContract>,
    handle: &tokio::runtime::Handle,
    tx: Sender<UiEvent>,
) -> tokio::sync::mpsc::UnboundedSender<(Tag, Op)> {
    let (ops_tx, mut ops_rx) = tokio::sync::mpsc::unbounded_channel::<(Tag, Op)>();
    handle.spawn(async move {
        while let Some((tag, op)) = ops_rx.recv().await {
            let beside = matches!(op, Op::Compact(_))
                || matches!(
                    tag,
                    Tag::Command {
                        expect: crate::slash::Expect::Answer,
                        ..
                    }
                );
            let contract = contract.clone();
            let tx = tx.clone();
            let call = async move {
                let reply = contract.call(op).await;
                let _ = tx.send(UiEvent::Reply(tag, reply));
            };
            if beside {
                tokio::spawn(call);
            } else {
                call.await;
            }
        }
    });
    ops_tx
}

fn spawn_signals(handle: &tokio::runtime::Handle, tx: Sender<UiEvent>) {
    handle.spawn(async move {
        crate::signal::hangup_or_terminate().await;
        let _ = tx.send(UiEvent::Quit);
    });
}
