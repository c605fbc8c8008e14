//! What `keel exec` writes, rendered from the session's events.
//!
//! The runtime's turn view already folded the turn into items (answer text, reasoning,
//! tool calls); this only renders them: `text` keeps stdout for the final answer and
//! narrates progress on stderr, `stream-json` writes the versioned exec envelope, `json`
//! stays silent until the result. One mutex orders every write, so
//! `sequence` has no gaps and lines never interleave. Lines are collected while the runner
//! has more events ready and written together when it has none (one write per burst of
//! streamed deltas, not one per delta), so they still appear as the events happen.
//!
//! A run can hold more than one turn (a background task's end starts a turn of the
//! session, and `keel exec` waits for it): `stream-json` closes each turn with its
//! `turn.completed` or `turn.failed` line when the next one starts, the last one with the
//! run's result; `task` events are `task.updated` lines, and in `text` a task's start and end
//! are one stderr note each.
//!
//! A write to a closed stdout (EPIPE) stops the turn instead of panicking: the reader is
//! gone, so further work would only cost tokens.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use keel_protocol::{
    ItemBody, ItemEvent, RunId, SessionEvent, SessionEventBody, TaskInfo, TaskStatus,
    ToolCallStatus, TurnOutcome, Usage,
};
use keel_runtime::SessionSink;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::report::{ExecError, ExecResult, ExecStatus, SCHEMA_VERSION};

/// How `keel exec` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The final answer on stdout, progress on stderr.
    Text,
    /// One `exec.result` object at the end.
    Json,
    /// One JSON event per line while the run goes on.
    StreamJson,
}

/// Why a run was stopped from outside the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// `--timeout` passed.
    Timeout,
    /// SIGINT or SIGTERM.
    Signal,
    /// Standard output was closed under us.
    StdoutClosed,
}

/// The run's abort switch: the first reason wins and cancels the turn.
#[derive(Debug, Default)]
pub struct Stop {
    reason: OnceLock<Interrupt>,
    /// The turn's cancellation token.
    pub cancel: CancellationToken,
}

impl Stop {
    /// Stops the run for `reason` unless it was already stopped.
    pub fn trigger(&self, reason: Interrupt) {
        let _ = self.reason.set(reason);
        self.cancel.cancel();
    }

    /// Why the run was stopped, if it was.
    pub fn reason(&self) -> Option<Interrupt> {
        self.reason.get().copied()
    }
}

/// Ids every stream-json line carries besides the turn's.
#[derive(Debug, Clone)]
pub struct RunIds {
    /// This invocation.
    pub run_id: RunId,
    /// The session.
    pub session_id: String,
}

/// What the opening lines say, written when the turn starts.
struct Opening {
    model: String,
    cwd: std::path::PathBuf,
    new_session: bool,
    /// `--timeout`, for the error of a turn it stopped.
    timeout: Option<Duration>,
}

/// How a turn ended, as its events told it: its closing line waits for the next turn's start
/// (the last turn's closing line comes from the run's result instead).
struct TurnEnd {
    turn_id: String,
    outcome: TurnOutcome,
    usage: Usage,
    duration_ms: u64,
}

/// The stream-json turn the lines are about.
#[derive(Default)]
struct TurnLines {
    /// Whether the opening lines were written.
    began: bool,
    started: Option<Instant>,
    /// History of the turn that could not be stored.
    lost: Option<String>,
    ended: Option<TurnEnd>,
}

/// Renders one session's events for `keel exec`.
pub struct ExecSink {
    format: Format,
    stop: Arc<Stop>,
    ids: RunIds,
    opening: Opening,
    state: Mutex<Emitter>,
    /// The session's permission mode as the run last heard of it (a command may change it).
    mode: Mutex<Option<keel_protocol::PermissionMode>>,
    /// The goal's banner as text last printed it: a goal is announced at each turn's start
    /// and end, and an unchanged line is not printed twice.
    banner: Mutex<Option<String>>,
    /// Text mode's account of the run: each call's title by item, and the counts the last
    /// line sums up.
    tally: Mutex<Tally>,
}

/// What `text` tells of the tools as they run, and counts for its last line.
#[derive(Default)]
struct Tally {
    titles: std::collections::HashMap<Arc<str>, String>,
    calls: usize,
    failed: usize,
    turns: usize,
}

/// A call as one line: the tool and what it acts on (a command whole, on one line).
fn call_title(tool: &str, arguments: &Value) -> String {
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let name = keel_runtime::notice::tool_title(tool);
    match (text("command"), text("path"), text("pattern"), text("url")) {
        (Some(command), ..) => format!("{name} `{}`", one_line(command)),
        (None, Some(path), ..) => format!("{name} {path}"),
        (None, None, Some(pattern), _) => format!("{name} `{}`", one_line(pattern)),
        (None, None, None, Some(url)) => format!("{name} {url}"),
        _ => name,
    }
}

/// Why a call failed, in one line, with the way round a refusal `exec` cannot ask about.
fn failure_line(result: &str) -> String {
    let first = result
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("failed");
    let mut line: String = first.chars().take(200).collect();
    if first.contains("needs approval") || first.contains("Blocked by permissions") {
        line.push_str(" — nobody can answer in exec: pass --permission auto (or full)");
    }
    line
}

impl ExecSink {
    /// A sink printing in `format`.
    pub fn new(
        format: Format,
        ids: RunIds,
        stop: Arc<Stop>,
        model: &str,
        cwd: &std::path::Path,
        new_session: bool,
        timeout: Option<Duration>,
    ) -> Self {
        Self {
            format,
            stop,
            state: Mutex::new(Emitter::default()),
            ids,
            mode: Mutex::new(None),
            banner: Mutex::new(None),
            tally: Mutex::new(Tally::default()),
            opening: Opening {
                model: model.to_owned(),
                cwd: cwd.to_path_buf(),
                new_session,
                timeout,
            },
        }
    }

    fn emitter(&self) -> std::sync::MutexGuard<'_, Emitter> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lines before a turn: `exec.started`, `session.started` (or `session.resumed`),
    /// `turn.started` for the run's first; for a later one the closing line of the turn before
    /// it, then `turn.started`.
    fn begin(&self, turn_id: &str) {
        let mut out = self.emitter();
        if out.turn.began {
            if let Some(end) = out.turn.ended.take() {
                self.close_turn(&mut out, end);
            }
            out.envelope = envelope_ids(&self.ids, turn_id);
        } else {
            out.envelope = envelope_ids(&self.ids, turn_id);
            out.emit(
                &self.stop,
                "exec.started",
                json!({"model": self.opening.model, "cwd": self.opening.cwd}),
            );
            let kind = if self.opening.new_session {
                "session.started"
            } else {
                "session.resumed"
            };
            out.emit(&self.stop, kind, json!({}));
        }
        out.emit(&self.stop, "turn.started", json!({}));
        out.turn = TurnLines {
            began: true,
            started: Some(Instant::now()),
            ..TurnLines::default()
        };
        out.flush(&self.stop);
    }

    /// The closing line of a turn that is not the run's last, from its events.
    fn close_turn(&self, out: &mut Emitter, end: TurnEnd) {
        let (status, error) = super::report::status_of(
            &end.outcome,
            None,
            out.turn.lost.as_deref(),
            self.stop.reason(),
            self.opening.timeout,
        );
        out.envelope = envelope_ids(&self.ids, &end.turn_id);
        out.turn_line(
            &self.stop,
            status,
            error.as_ref(),
            end.usage,
            end.duration_ms,
        );
    }

    /// A turn ended: its closing line is written when the next starts or the run ends.
    fn ended(&self, turn_id: &str, outcome: &TurnOutcome, usage: Usage) {
        let mut out = self.emitter();
        let duration_ms = out
            .turn
            .started
            .map(|at| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX))
            .unwrap_or_default();
        out.turn.ended = Some(TurnEnd {
            turn_id: turn_id.to_owned(),
            outcome: outcome.clone(),
            usage,
            duration_ms,
        });
    }

    /// A task changed: a `task.updated` line, or in `text` a note when it starts or ends.
    fn task(&self, task: &TaskInfo) {
        let mut out = self.emitter();
        let previous = out.tasks.insert(task.id.clone(), task.status);
        match self.format {
            // Only lines of a turn: the envelope names it.
            Format::StreamJson if !out.envelope.is_empty() => {
                out.emit(&self.stop, "task.updated", json!({"task": task}));
            }
            Format::Text => {
                if let Some((_, text)) = keel_runtime::notice::task(previous, task) {
                    eprintln!("[task {text}]");
                }
            }
            _ => {}
        }
    }

    /// Lines after the run's last turn, or the result object, or the answer.
    pub fn finish(&self, result: &ExecResult) {
        let mut out = self.emitter();
        match self.format {
            Format::StreamJson => {
                // A turn that ended after the one reported (it cannot, but its line is due).
                if let Some(end) = out.turn.ended.take()
                    && end.turn_id != result.turn_id
                {
                    self.close_turn(&mut out, end);
                }
                out.envelope = envelope_ids(&self.ids, &result.turn_id);
                out.turn_line(
                    &self.stop,
                    result.status,
                    result.error.as_ref(),
                    result.usage,
                    result.duration_ms,
                );
                out.emit(&self.stop, "exec.completed", json!({"result": result}));
            }
            Format::Json => match serde_json::to_string(result) {
                Ok(line) => out.write_line(&self.stop, format!("{line}\n").as_bytes()),
                Err(error) => eprintln!("keel: cannot encode the result: {error}"),
            },
            Format::Text => {
                // For a person watching: a script's standard error stays as it was.
                if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    eprintln!("{}", self.summary(result));
                }
                if let Some(error) = &result.error {
                    eprintln!(
                        "keel: {} ({}): {}",
                        status_word(result.status),
                        error.code,
                        error.message
                    );
                }
                // A goal that used up a limit ended after a turn that completed: its answer
                // is the run's.
                let answered = result.status == ExecStatus::Succeeded
                    || result
                        .error
                        .as_ref()
                        .is_some_and(|e| super::goal::ran_out(e.code));
                if answered && !result.final_text.is_empty() {
                    let text = result.final_text.trim_end_matches('\n');
                    out.write_line(&self.stop, format!("{text}\n").as_bytes());
                }
            }
        }
        out.flush(&self.stop);
    }

    /// The permission mode the session was last switched to during the run, if it was.
    pub fn mode(&self) -> Option<keel_protocol::PermissionMode> {
        *self.mode.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a write found stdout closed.
    pub fn stdout_closed(&self) -> bool {
        self.emitter().stdout_closed
    }
}

fn status_word(status: ExecStatus) -> &'static str {
    match status {
        ExecStatus::Succeeded => "succeeded",
        ExecStatus::Failed => "the turn failed",
        ExecStatus::Timeout => "timed out",
        ExecStatus::Cancelled => "cancelled",
        ExecStatus::LimitExceeded => "limit reached",
    }
}

impl SessionSink for ExecSink {
    fn on_event(&self, event: &SessionEvent) {
        if let SessionEventBody::SessionUpdated {
            mode: Some(mode), ..
        } = &event.body
        {
            *self.mode.lock().unwrap_or_else(PoisonError::into_inner) = Some(*mode);
        }
        match (&event.body, self.format) {
            (SessionEventBody::TurnStarted { turn_id, .. }, Format::StreamJson) => {
                self.begin(turn_id.as_str());
            }
            (
                SessionEventBody::TurnEnded {
                    turn_id,
                    outcome,
                    usage,
                    ..
                },
                Format::StreamJson,
            ) => self.ended(turn_id.as_str(), outcome, *usage),
            (SessionEventBody::TurnEnded { .. }, Format::Text) => {
                self.tally
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .turns += 1;
            }
            (SessionEventBody::Failure { failure, .. }, Format::StreamJson)
                if failure.code == keel_protocol::FailureCode::HistoryCommitFailed =>
            {
                self.emitter().turn.lost = Some(failure.message.clone());
            }
            (SessionEventBody::Task { task }, _) => self.task(task),
            (SessionEventBody::Item { event, .. }, Format::StreamJson) => {
                self.emitter().item(&self.stop, event);
            }
            (SessionEventBody::Item { event, .. }, Format::Text) => self.progress(event),
            (
                SessionEventBody::Retry {
                    attempt,
                    max_retries,
                    delay_ms,
                    failure,
                    ..
                },
                Format::Text,
            ) => eprintln!(
                "[retry {attempt}/{max_retries} in {delay_ms} ms: {}]",
                failure.message
            ),
            (
                SessionEventBody::Extension {
                    extension,
                    kind,
                    details,
                    notice,
                    ..
                },
                Format::StreamJson,
            ) => {
                let mut out = self.emitter();
                // Only lines of the turn: the envelope names it.
                if !out.envelope.is_empty() {
                    let mut fields =
                        json!({"extension": extension, "kind": kind, "details": details});
                    if let Some(notice) = notice {
                        fields["notice"] = json!(notice);
                    }
                    out.emit(&self.stop, "extension.event", fields);
                }
            }
            (
                SessionEventBody::Extension {
                    extension,
                    kind,
                    details,
                    notice,
                    ..
                },
                Format::Text,
            ) => match notice {
                Some(notice) => eprintln!("[{}]", notice.text),
                None => eprintln!("[{extension}: {kind} {details}]"),
            },
            // A goal's change reads as its banner line, once per change.
            (SessionEventBody::Goal { goal, .. }, Format::Text) => {
                let banner = if goal.banner.is_empty() {
                    format!("goal {}", goal.status)
                } else {
                    goal.banner.clone()
                };
                let mut last = self.banner.lock().unwrap_or_else(PoisonError::into_inner);
                if last.as_deref() != Some(banner.as_str()) {
                    eprintln!("[{banner}]");
                    *last = Some(banner);
                }
            }
            (SessionEventBody::PlanReady { plan, .. }, Format::StreamJson) => {
                self.emitter()
                    .emit(&self.stop, "plan.ready", json!({ "plan": plan }));
            }
            (SessionEventBody::Goal { goal, .. }, Format::StreamJson) => {
                let mut out = self.emitter();
                if !out.envelope.is_empty() {
                    out.emit(&self.stop, "goal.updated", json!({ "goal": goal }));
                }
            }
            (
                SessionEventBody::Retry {
                    attempt,
                    max_retries,
                    delay_ms,
                    failure,
                    ..
                },
                Format::StreamJson,
            ) => self.emitter().emit(
                &self.stop,
                "retry.scheduled",
                json!({"attempt": attempt, "max_retries": max_retries,
                       "delay_ms": delay_ms, "error": failure}),
            ),
            (
                SessionEventBody::Usage {
                    usage,
                    context_window,
                    input_limit,
                    compact_at,
                    ..
                },
                Format::StreamJson,
            ) => self.emitter().emit(
                &self.stop,
                "model.usage",
                json!({"usage": usage, "context_window": context_window,
                       "input_limit": input_limit, "compact_at": compact_at}),
            ),
            _ => {}
        }
    }

    fn on_drained(&self) {
        self.emitter().flush(&self.stop);
    }
}

impl ExecSink {
    /// Progress for `text`, on stderr: each call when it runs (a command shows its text), and
    /// why one failed.
    fn progress(&self, event: &ItemEvent) {
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            ItemEvent::Started { item } => {
                if let ItemBody::ToolCall {
                    tool_name,
                    arguments,
                    status,
                    ..
                } = &item.body
                {
                    let title = call_title(tool_name, arguments);
                    if *status == ToolCallStatus::InProgress {
                        eprintln!("[{title}]");
                    }
                    tally.titles.insert(item.id.clone(), title);
                }
            }
            ItemEvent::Status {
                item_id,
                status: ToolCallStatus::InProgress,
            } => {
                if let Some(title) = tally.titles.get(item_id) {
                    eprintln!("[{title}]");
                }
            }
            ItemEvent::Completed { item } => {
                if let ItemBody::ToolCall {
                    tool_name,
                    arguments,
                    status,
                    result,
                    ..
                } = &item.body
                {
                    tally.calls += 1;
                    if *status == ToolCallStatus::Failed {
                        tally.failed += 1;
                        let title = tally
                            .titles
                            .remove(&item.id)
                            .unwrap_or_else(|| call_title(tool_name, arguments));
                        eprintln!(
                            "[{title}: {}]",
                            failure_line(result.as_deref().unwrap_or_default())
                        );
                    } else {
                        tally.titles.remove(&item.id);
                    }
                }
            }
            _ => {}
        }
    }

    /// The last line of `text`: turns, calls, tokens, cost and time.
    fn summary(&self, result: &ExecResult) -> String {
        let tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let usage = &result.usage;
        let tokens = usage.input + usage.cache_read + usage.cache_write + usage.output;
        let plural = |n: usize, one: &str, many: &str| {
            if n == 1 {
                format!("{n} {one}")
            } else {
                format!("{n} {many}")
            }
        };
        let mut line = format!(
            "[{}, {}",
            plural(tally.turns.max(1), "turn", "turns"),
            plural(tally.calls, "tool call", "tool calls")
        );
        if tally.failed > 0 {
            line.push_str(&format!(" ({} failed)", tally.failed));
        }
        line.push_str(&format!(
            ", {} tokens",
            keel_runtime::notice::short_count(tokens)
        ));
        if usage.cost.total > 0.0 {
            line.push_str(&format!(", ${:.4}", usage.cost.total));
        }
        line.push_str(&format!(", {:.1} s]", result.duration_ms as f64 / 1000.0));
        line
    }
}

/// The run's ids as the start of a JSON object's members, ending with a comma.
fn envelope_ids(ids: &RunIds, turn_id: &str) -> String {
    let member = |key: &str, value: &str| format!("\"{key}\":{},", Value::String(value.to_owned()));
    member("run_id", ids.run_id.as_str())
        + &member("session_id", &ids.session_id)
        + &member("turn_id", turn_id)
}

/// Pending output written at once, whether or not more events are ready.
const PENDING_LIMIT: usize = 64 * 1024;

#[derive(Default)]
struct Emitter {
    /// `"run_id":…,"session_id":…,"turn_id":…,` serialized once for every line.
    envelope: String,
    sequence: u64,
    stdout_closed: bool,
    /// Lines not written yet (see the module documentation).
    pending: Vec<u8>,
    /// The turn the lines are about.
    turn: TurnLines,
    /// The status each task was last seen in (a note only when it changes).
    tasks: HashMap<String, TaskStatus>,
}

impl Emitter {
    /// A turn's closing line: `turn.completed`, or `turn.failed` with its status and error.
    fn turn_line(
        &mut self,
        stop: &Stop,
        status: ExecStatus,
        error: Option<&ExecError>,
        usage: Usage,
        duration_ms: u64,
    ) {
        match error {
            None => self.emit(
                stop,
                "turn.completed",
                json!({"usage": usage, "duration_ms": duration_ms}),
            ),
            Some(error) => self.emit(
                stop,
                "turn.failed",
                json!({"status": status, "error": error,
                       "usage": usage, "duration_ms": duration_ms}),
            ),
        }
    }

    /// Writes one enveloped event: the envelope's fields, then `fields`' members.
    fn emit(&mut self, stop: &Stop, kind: &str, fields: Value) {
        self.emit_with(stop, kind, |line| {
            if let Value::Object(fields) = &fields {
                for (key, value) in fields {
                    line.push(b',');
                    let _ = serde_json::to_writer(&mut *line, key);
                    line.push(b':');
                    let _ = serde_json::to_writer(&mut *line, value);
                }
            }
        });
    }

    /// Writes one enveloped event whose members after `type` `members` writes, each
    /// starting with a comma, straight into the pending output.
    fn emit_with(&mut self, stop: &Stop, kind: &str, members: impl FnOnce(&mut Vec<u8>)) {
        self.sequence += 1;
        if self.stdout_closed {
            return;
        }
        let line = &mut self.pending;
        let _ = write!(
            line,
            "{{\"schema_version\":{SCHEMA_VERSION},\"sequence\":{},\"timestamp_ms\":{},{}\"type\":",
            self.sequence - 1,
            keel_protocol::now_ms(),
            self.envelope
        );
        let _ = serde_json::to_writer(&mut *line, kind);
        members(line);
        line.extend_from_slice(b"}\n");
        self.flush_if_full(stop);
    }

    fn write_line(&mut self, stop: &Stop, line: &[u8]) {
        if self.stdout_closed {
            return;
        }
        self.pending.extend_from_slice(line);
        self.flush_if_full(stop);
    }

    fn flush_if_full(&mut self, stop: &Stop) {
        if self.pending.len() >= PENDING_LIMIT {
            self.flush(stop);
        }
    }

    /// Writes the pending lines.
    fn flush(&mut self, stop: &Stop) {
        if self.pending.is_empty() || self.stdout_closed {
            return;
        }
        let mut out = std::io::stdout().lock();
        let written = out.write_all(&self.pending).and_then(|()| out.flush());
        self.pending.clear();
        if written.is_err() {
            // EPIPE or any other failure: nobody can read what follows.
            self.stdout_closed = true;
            stop.trigger(Interrupt::StdoutClosed);
        }
    }

    /// Writes one item event: `item.started`, `item.updated` or `item.completed`.
    fn item(&mut self, stop: &Stop, event: &ItemEvent) {
        match event {
            ItemEvent::Started { item } => self.emit_with(stop, "item.started", |line| {
                line.extend_from_slice(b",\"item\":");
                let _ = serde_json::to_writer(&mut *line, item);
            }),
            // A line per streamed delta: written directly, in the members' sorted order.
            ItemEvent::Updated {
                item_id,
                kind,
                delta,
            } => self.emit_with(stop, "item.updated", |line| {
                line.extend_from_slice(b",\"delta\":");
                let _ = serde_json::to_writer(&mut *line, delta);
                line.extend_from_slice(b",\"item\":{\"id\":");
                let _ = serde_json::to_writer(&mut *line, &**item_id);
                line.extend_from_slice(b",\"type\":");
                let _ = serde_json::to_writer(&mut *line, kind.as_str());
                line.push(b'}');
            }),
            // A tool call was admitted: the item's new status, without a delta.
            ItemEvent::Status { item_id, status } => self.emit(
                stop,
                "item.updated",
                json!({"item": {"id": &**item_id, "type": "tool_call", "status": status}}),
            ),
            ItemEvent::Completed { item } => self.emit_with(stop, "item.completed", |line| {
                line.extend_from_slice(b",\"item\":");
                let _ = serde_json::to_writer(&mut *line, item);
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc as StdArc;

    use keel_protocol::ItemKind;

    use super::*;

    fn emitter() -> Emitter {
        let ids = RunIds {
            run_id: RunId::new("r\"1"),
            session_id: "s-1".into(),
        };
        Emitter {
            envelope: envelope_ids(&ids, "t-1"),
            ..Emitter::default()
        }
    }

    /// A delta's line is written without a JSON tree; it must be the line the general path
    /// writes from one: same members, same order, same length (timestamps aside).
    #[test]
    fn a_delta_line_is_the_line_of_its_json_object() {
        let stop = Stop::default();
        let mut direct = emitter();
        let delta = "a \"quoted\"\nline \u{1F600}";
        direct.item(
            &stop,
            &ItemEvent::Updated {
                item_id: StdArc::from("item_0"),
                kind: ItemKind::Reasoning,
                delta: delta.into(),
            },
        );
        let mut general = emitter();
        general.emit(
            &stop,
            "item.updated",
            json!({"item": {"id": "item_0", "type": "reasoning"}, "delta": delta}),
        );
        // The timestamps may differ by a millisecond; compare without them.
        let without_time = |line: &[u8]| {
            let mut value: Value = serde_json::from_slice(line).unwrap();
            value["timestamp_ms"] = json!(0);
            (value, line.len())
        };
        assert_eq!(
            without_time(&direct.pending),
            without_time(&general.pending)
        );
        let text = std::str::from_utf8(&direct.pending).unwrap();
        let order: Vec<usize> = ["\"type\":\"item.updated\"", "\"delta\":", "\"item\":"]
            .iter()
            .map(|key| text.find(key).unwrap())
            .collect();
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{text}");
    }
}
