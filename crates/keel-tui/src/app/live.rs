//! The running turn: its open items (a streaming answer, reasoning, running tool calls),
//! and how session events move them from the live area to the transcript.

use std::sync::Arc;
use std::time::Instant;

use keel_protocol::{
    ItemBody, ItemEvent, SessionEvent, SessionEventBody, SessionStatus, ToolCallStatus, TurnOutcome,
};
use ratatui::text::Line;

use super::{App, Effect, Tag};
use crate::cells::{Cell, Tone, ToolCell, answer_lines, reasoning_lines};
use crate::markdown::MarkdownStream;

/// An open item of the running turn.
#[derive(Debug)]
pub enum LiveItem {
    /// An answer streaming; `shown` says whether its first line (with the bullet) went out.
    Answer {
        /// Item id.
        id: Arc<str>,
        /// The text so far.
        stream: MarkdownStream,
        /// Lines already committed.
        shown: bool,
    },
    /// Reasoning streaming.
    Reasoning {
        /// Item id.
        id: Arc<str>,
        /// The text so far.
        text: String,
    },
    /// A tool call waiting to be admitted or running.
    Tool {
        /// Item id.
        id: Arc<str>,
        /// The call.
        cell: ToolCell,
        /// When it started running (`None` while it waits).
        started: Option<Instant>,
        /// The newest output it printed while running (a command's), at most
        /// [`LIVE_OUTPUT_BYTES`].
        output: String,
    },
    /// An item that ended while an item before it is still open: it waits, finished, so
    /// the transcript keeps the order items started in.
    Done {
        /// Item id.
        id: Arc<str>,
        /// What goes to the transcript.
        cell: Cell,
    },
}

impl LiveItem {
    fn id(&self) -> &Arc<str> {
        match self {
            LiveItem::Answer { id, .. }
            | LiveItem::Reasoning { id, .. }
            | LiveItem::Tool { id, .. }
            | LiveItem::Done { id, .. } => id,
        }
    }
}

/// The most output a running call keeps for its live lines.
const LIVE_OUTPUT_BYTES: usize = 16 * 1024;

/// How many of a running call's last output lines show under it.
const LIVE_OUTPUT_LINES: usize = 5;

/// Adds `delta` to `output`, keeping only its newest [`LIVE_OUTPUT_BYTES`].
fn keep_tail(output: &mut String, delta: &str) {
    output.push_str(delta);
    if output.len() > LIVE_OUTPUT_BYTES {
        let mut cut = output.len() - LIVE_OUTPUT_BYTES;
        while !output.is_char_boundary(cut) {
            cut += 1;
        }
        output.drain(..cut);
    }
}

/// The last lines a running call printed, dimmed under its header: shown as text, never
/// acted on by the terminal, one row each, so the live area keeps its height.
fn output_tail(output: &str, width: usize) -> Vec<Line<'static>> {
    let text = output.trim_end_matches(['\n', '\r']);
    if text.is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(LIVE_OUTPUT_LINES);
    let room = width.saturating_sub(4);
    lines[start..]
        .iter()
        .enumerate()
        .map(|(i, line)| {
            // A progress bar redraws its line with carriage returns: its last state shows.
            let line = line.rsplit('\r').next().unwrap_or(line);
            let line = crate::visible::without_escapes(line);
            let shown =
                crate::wrap::truncate(&crate::visible::visible(&line).replace('\t', "    "), room);
            let lead = if i == 0 { "  ⎿ " } else { "    " };
            Line::styled(format!("{lead}{shown}"), crate::cells::DIM)
        })
        .collect()
}

/// The running turn's state.
#[derive(Debug, Default)]
pub struct Live {
    /// When the turn was submitted; `None` when idle.
    pub started: Option<Instant>,
    /// The prompt that started it (to put back if it is interrupted before any reply).
    pub prompt: Option<String>,
    /// The turn runs a `!` command the user typed (no model, so no title to ask for).
    pub shell: bool,
    /// The conversation is being compacted.
    pub compacting: bool,
    /// Whether anything came back yet.
    pub answered: bool,
    /// Open items, in the order they started.
    pub items: Vec<LiveItem>,
    /// An interrupt was asked for and the turn has not ended yet.
    pub interrupting: bool,
    /// Reasoning items already finished (an answer or a call began after them).
    sealed: Vec<Arc<str>>,
}

impl Live {
    /// What the spinner says the turn is doing: the long work it waits on, where known.
    pub fn activity(&self) -> &'static str {
        if self.interrupting {
            "Interrupting"
        } else if self.compacting {
            "Compacting the conversation"
        } else if self.shell {
            "Running your command"
        } else if !self.answered {
            "Waiting for the model"
        } else if self.items.iter().any(|item| {
            matches!(item, LiveItem::Tool { started: Some(_), cell, .. }
                if cell.status == keel_protocol::ToolCallStatus::InProgress)
        }) {
            "Running tools"
        } else {
            "Working"
        }
    }

    /// Whether a turn runs.
    pub fn running(&self) -> bool {
        self.started.is_some()
    }

    /// Marks a turn as submitted.
    pub fn begin(&mut self, prompt: Option<String>) {
        self.started = Some(Instant::now());
        self.prompt = prompt;
        self.shell = false;
        self.compacting = false;
        self.answered = false;
        self.interrupting = false;
    }

    /// The turn is over.
    pub fn finish(&mut self) {
        self.sealed.clear();
        self.started = None;
        self.prompt = None;
        self.items.clear();
        self.interrupting = false;
    }

    /// The live area's lines: the open parts of what streams and the running tools.
    pub fn lines(&self, width: usize, expanded: bool) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        for item in &self.items {
            match item {
                LiveItem::Answer { stream, shown, .. } => {
                    out.extend(answer_lines(stream.tail(width.saturating_sub(2)), !shown));
                }
                LiveItem::Reasoning { text, .. } => {
                    out.extend(reasoning_lines(text, width, expanded));
                }
                LiveItem::Tool {
                    cell,
                    started,
                    output,
                    ..
                } => {
                    out.extend(cell.lines(width, expanded, started.map(|s| s.elapsed())));
                    out.extend(output_tail(output, width));
                }
                LiveItem::Done { cell, .. } => out.extend(cell.lines(width, expanded)),
            }
        }
        out
    }
}

impl App {
    pub(super) fn session_event(&mut self, event: SessionEvent, effects: &mut Vec<Effect>) {
        if self.session_id().as_ref() != Some(&event.session_id) {
            return;
        }
        match event.body {
            SessionEventBody::TurnStarted { .. } if !self.live.running() => {
                // A follow-up or a turn another client started.
                self.live.begin(None);
            }
            SessionEventBody::TurnStatus { .. } => {}
            SessionEventBody::Item { event, .. } => self.item(event),
            SessionEventBody::Retry {
                attempt,
                max_retries,
                delay_ms,
                failure,
                ..
            } => self.push(Cell::Retry {
                attempt,
                max: max_retries,
                delay_ms,
                reason: failure.message,
            }),
            SessionEventBody::PermissionRequested { request, .. } => {
                self.attention(format!("keel asks: {}", request.summary), effects);
                self.popup = Some(super::Popup::permission(request));
            }
            SessionEventBody::PermissionResolved { request_id, .. } => {
                if matches!(&self.popup, Some(p) if p.permission_id() == Some(request_id.as_str()))
                {
                    self.popup = None;
                }
                self.next_question();
            }
            SessionEventBody::QuestionAsked { question, .. } => {
                self.attention(
                    format!("the MCP server {} asks you something", question.server),
                    effects,
                );
                self.questions.push_back(question);
                self.next_question();
            }
            SessionEventBody::QuestionResolved {
                question_id,
                outcome,
                ..
            } => {
                self.questions.retain(|q| q.id != question_id);
                if let Some(super::Popup::Question(prompt)) = &self.popup
                    && prompt.question.id == question_id
                {
                    let answered = prompt.sent;
                    self.popup = None;
                    if answered {
                        self.next_question();
                        return;
                    }
                    // Shown and not answered here: its call ended, or the turn stopped.
                    self.notice(
                        Tone::Info,
                        format!("the server's question ended unanswered ({outcome})"),
                    );
                }
                self.next_question();
            }
            SessionEventBody::QueueChanged { queue } => self.queue = queue,
            SessionEventBody::Task { task } => self.task_event(task),
            SessionEventBody::TurnEnded {
                outcome, failure, ..
            } => {
                self.attention("keel finished the turn".to_owned(), effects);
                self.turn_ended(outcome, failure, effects);
            }
            SessionEventBody::Failure { failure, .. } => {
                self.notice(
                    Tone::Error,
                    format!("{} ({})", failure.message, failure.code),
                );
            }
            SessionEventBody::Goal { goal, .. } => {
                if let Some((tone, text)) = crate::goal::notice(self.goal.as_ref(), &goal) {
                    self.notice(tone, text);
                }
                self.goal = crate::goal::GoalBanner::of(&goal);
            }
            SessionEventBody::PlanReady { plan, .. } => self.plan_ready(&plan),
            SessionEventBody::Extension {
                extension,
                kind,
                notice,
                ..
            } => {
                // Long work the spinner names while it lasts.
                if extension == "host.context" {
                    match kind.as_str() {
                        "compaction_started" => self.live.compacting = true,
                        "compaction_finished" | "compaction_failed" => {
                            self.live.compacting = false;
                        }
                        _ => {}
                    }
                }
                if let Some(notice) = notice {
                    self.notice(crate::notices::tone(notice.level), notice.text);
                }
            }
            SessionEventBody::Usage {
                usage,
                context_window,
                compact_at,
                ..
            } => {
                let used = usage.input + usage.cache_read + usage.cache_write + usage.output;
                // A response cut before the provider counted anything (an interrupt) says
                // nothing of how full the window is.
                if used > 0 {
                    self.context = Some((used, context_window));
                }
                self.compact_at = compact_at;
                self.usage += usage;
            }
            SessionEventBody::SessionUpdated {
                title,
                model,
                mode,
                thinking,
                ..
            } => {
                if thinking != self.thinking {
                    let shown = thinking.map_or("the model's default", |t| t.name());
                    self.notice(Tone::Info, format!("thinking: {shown}"));
                    self.thinking = thinking;
                }
                if let Some(session) = &mut self.session {
                    session.title = title;
                    session.model = model.clone();
                }
                self.info.model = model;
                if let Some(mode) = mode {
                    self.info.mode = mode;
                }
            }
            _ => {}
        }
    }

    fn turn_ended(
        &mut self,
        outcome: TurnOutcome,
        failure: Option<keel_protocol::Failure>,
        effects: &mut Vec<Effect>,
    ) {
        self.seal_all();
        self.open_plan_review();
        let prompt = self.live.prompt.clone();
        let answered = self.live.answered;
        let elapsed = self.live.started.map(|s| s.elapsed());
        self.live.finish();
        match outcome.status() {
            SessionStatus::Aborted { .. } => {
                self.notice(Tone::Warn, "interrupted");
                // Nothing came back: the message goes back to the composer and out of the
                // history, as if it had not been sent.
                if let (Some(text), false) = (prompt, answered)
                    && let Some(session_id) = self.session_id()
                {
                    if self.composer.is_empty() {
                        self.composer.set(&text);
                    }
                    effects.push(Effect::Call(
                        Tag::TakeBack,
                        keel_protocol::Op::TakeBack(keel_protocol::ops::TakeBack { session_id }),
                    ));
                }
            }
            SessionStatus::Failed { code, message } => {
                let text = failure.map_or(message, |f| f.message);
                self.notice(Tone::Error, format!("turn failed ({code}): {text}"));
            }
            _ => {
                // The first turn of a new session: a short title, written by the model.
                if !self.live.shell
                    && std::mem::take(&mut self.untitled)
                    && let Some(session_id) = self.session_id()
                {
                    effects.push(Effect::Call(
                        Tag::Plain("cannot title the session"),
                        keel_protocol::Op::TitleSession(keel_protocol::ops::TitleSession {
                            session_id,
                        }),
                    ));
                }
                if let Some(elapsed) = elapsed
                    && elapsed.as_secs() >= 60
                {
                    self.notice(
                        Tone::Info,
                        format!("worked for {}", crate::cells::elapsed_words(elapsed)),
                    );
                }
            }
        }
    }

    fn item(&mut self, event: ItemEvent) {
        self.live.answered = true;
        match event {
            ItemEvent::Started { item } => match item.body {
                ItemBody::AgentMessage { .. } => {
                    // Reasoning ends where the answer begins.
                    self.seal_reasoning();
                    self.live.items.push(LiveItem::Answer {
                        id: item.id,
                        stream: MarkdownStream::new(),
                        shown: false,
                    });
                }
                ItemBody::Reasoning { text } => self
                    .live
                    .items
                    .push(LiveItem::Reasoning { id: item.id, text }),
                ItemBody::ToolCall {
                    tool_name,
                    arguments,
                    status,
                    ..
                } => {
                    self.seal_reasoning();
                    self.live.items.push(LiveItem::Tool {
                        id: item.id,
                        cell: ToolCell {
                            name: tool_name,
                            arguments,
                            result: None,
                            details: None,
                            status,
                            elapsed: None,
                        },
                        started: (status != ToolCallStatus::Pending).then(Instant::now),
                        output: String::new(),
                    });
                }
                _ => {}
            },
            ItemEvent::Status { item_id, status } => {
                if let Some(LiveItem::Tool { cell, started, .. }) =
                    self.live.items.iter_mut().find(|i| *i.id() == item_id)
                {
                    cell.status = status;
                    started.get_or_insert_with(Instant::now);
                }
            }
            ItemEvent::Updated { item_id, delta, .. } => {
                let width = self.width as usize;
                let mut committed = Vec::new();
                let index = self.live.items.iter().position(|i| *i.id() == item_id);
                if let Some(index) = index {
                    match &mut self.live.items[index] {
                        LiveItem::Answer { stream, shown, .. } => {
                            stream.push(&delta);
                            // Only the first open item writes to the transcript: what
                            // started before it goes out first.
                            if index == 0 {
                                let lines = stream.take_complete(width.saturating_sub(2));
                                if !lines.is_empty() {
                                    committed = answer_lines(lines, !*shown);
                                    *shown = true;
                                }
                            }
                        }
                        LiveItem::Reasoning { text, .. } => text.push_str(&delta),
                        LiveItem::Tool { output, .. } => keep_tail(output, &delta),
                        LiveItem::Done { .. } => {}
                    }
                }
                self.push_lines(committed);
            }
            ItemEvent::Completed { item } => {
                self.completed(item);
                self.flush_done();
            }
            _ => {}
        }
    }

    /// An item ended: it waits in place, as a finished cell, for the items before it.
    fn completed(&mut self, item: keel_protocol::Item) {
        let index = self.live.items.iter().position(|i| *i.id() == item.id);
        let id = item.id.clone();
        let open = index.map(|i| self.live.items.remove(i));
        let cell = match (item.body, open) {
            (
                ItemBody::AgentMessage { text },
                Some(LiveItem::Answer {
                    mut stream, shown, ..
                }),
            ) if index == Some(0) => {
                // The completed text is the authority; deltas missed are added.
                if let Some(rest) = text.strip_prefix(stream.source()) {
                    stream.push(rest);
                }
                let width = self.width as usize;
                let mut lines = answer_lines(stream.finish(width.saturating_sub(2)), !shown);
                lines.push(Line::default());
                self.push_lines(lines);
                self.transcript.push(Cell::Answer(text));
                return;
            }
            (ItemBody::AgentMessage { text }, _) if !text.trim().is_empty() => Cell::Answer(text),
            (ItemBody::Reasoning { .. }, None) if self.live.sealed.contains(&item.id) => return,
            (ItemBody::Reasoning { text }, _) if !text.trim().is_empty() => Cell::Reasoning(text),
            (
                ItemBody::ToolCall {
                    tool_name,
                    arguments,
                    result,
                    status,
                    details,
                    ..
                },
                open,
            ) => {
                let elapsed = match open {
                    Some(LiveItem::Tool {
                        started: Some(started),
                        ..
                    }) => Some(started.elapsed()),
                    _ => None,
                };
                if tool_name == "todowrite"
                    && status != ToolCallStatus::Failed
                    && let Some(todos) = arguments.get("todos").and_then(|t| t.as_array())
                {
                    self.todos = todos.clone();
                }
                Cell::Tool(ToolCell {
                    name: tool_name,
                    arguments,
                    result,
                    details,
                    status,
                    elapsed,
                })
            }
            _ => return,
        };
        let done = LiveItem::Done { id, cell };
        match index {
            Some(index) => self.live.items.insert(index, done),
            None => self.live.items.push(done),
        }
    }

    /// Moves the finished items at the front to the transcript, in the order they started.
    fn flush_done(&mut self) {
        while matches!(self.live.items.first(), Some(LiveItem::Done { .. })) {
            if let LiveItem::Done { cell, .. } = self.live.items.remove(0) {
                self.push(cell);
            }
        }
        // An answer that is now first writes what it finished meanwhile.
        let width = self.width as usize;
        if let Some(LiveItem::Answer { stream, shown, .. }) = self.live.items.first_mut() {
            let lines = stream.take_complete(width.saturating_sub(2));
            if !lines.is_empty() {
                let lines = answer_lines(lines, !*shown);
                *shown = true;
                self.push_lines(lines);
            }
        }
    }

    /// Everything written to the scrollback so far, rendered again at the current width:
    /// the transcript's cells, then what a streaming answer committed (after a resize).
    pub fn replay_lines(&self) -> Vec<Line<'static>> {
        let width = self.width as usize;
        let mut out: Vec<Line<'static>> = self
            .transcript
            .iter()
            .flat_map(|cell| cell.lines(width, self.expanded))
            .collect();
        for item in &self.live.items {
            if let LiveItem::Answer {
                stream,
                shown: true,
                ..
            } = item
            {
                out.extend(answer_lines(
                    stream.committed_lines(width.saturating_sub(2)),
                    true,
                ));
            }
        }
        out
    }

    /// Open reasoning is finished (an answer or a call began after it).
    fn seal_reasoning(&mut self) {
        for item in &mut self.live.items {
            if let LiveItem::Reasoning { text, id } = item {
                let id = id.clone();
                self.live.sealed.push(id.clone());
                let text = std::mem::take(text);
                *item = LiveItem::Done {
                    id,
                    cell: Cell::Reasoning(text),
                };
            }
        }
        self.live.items.retain(
            |item| !matches!(item, LiveItem::Done { cell: Cell::Reasoning(text), .. } if text.trim().is_empty()),
        );
        self.flush_done();
    }

    /// Moves everything still open to the transcript (the turn ended), in order.
    fn seal_all(&mut self) {
        let width = self.width as usize;
        for item in std::mem::take(&mut self.live.items) {
            match item {
                LiveItem::Answer {
                    mut stream, shown, ..
                } => {
                    let text = stream.source().to_owned();
                    let mut lines = answer_lines(stream.finish(width.saturating_sub(2)), !shown);
                    lines.push(Line::default());
                    self.push_lines(lines);
                    self.transcript.push(Cell::Answer(text));
                }
                LiveItem::Tool { mut cell, .. } => {
                    cell.status = ToolCallStatus::Failed;
                    cell.result.get_or_insert_with(|| "interrupted".into());
                    self.push(Cell::Tool(cell));
                }
                LiveItem::Reasoning { text, .. } => {
                    if !text.trim().is_empty() {
                        self.push(Cell::Reasoning(text));
                    }
                }
                LiveItem::Done { cell, .. } => self.push(cell),
            }
        }
    }
}
