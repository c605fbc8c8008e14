//! The turn host of `keel exec` and everything it writes.
//!
//! Runtime events come in from the runner; what goes out depends on the format: `text`
//! keeps stdout for the final answer and narrates progress on stderr, `stream-json` turns
//! the events into the versioned exec envelope (items for messages, reasoning and tool
//! calls), `json` stays silent until the result. One mutex orders every write, so
//! `sequence` has no gaps and lines never interleave. Lines are collected while the runner
//! has more events ready and written together when it has none (one write per burst of
//! streamed deltas, not one per delta), so they still appear as the events happen.
//!
//! A write to a closed stdout (EPIPE) stops the turn instead of panicking: the reader is
//! gone, so further work would only cost tokens.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::TurnHost;
use keel_protocol::{
    ContentBlock, Message, MessageId, ResponseChunk, RunId, RuntimeEvent, RuntimeEventBody,
    StreamNotice, ToolCallId, ToolPhase,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::persist::SessionStart;
use super::report::{ExecResult, ExecStatus, SCHEMA_VERSION};

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

/// Ids every stream-json line carries.
#[derive(Debug, Clone)]
pub struct RunIds {
    /// This invocation.
    pub run_id: RunId,
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
}

/// The host of the exec turn: translates and writes.
pub struct ExecHost {
    format: Format,
    stop: Arc<Stop>,
    state: Mutex<Emitter>,
}

impl ExecHost {
    /// A host printing in `format`.
    pub fn new(format: Format, ids: RunIds, stop: Arc<Stop>) -> Self {
        Self {
            format,
            stop,
            state: Mutex::new(Emitter {
                envelope: envelope_ids(&ids),
                sequence: 0,
                stdout_closed: false,
                items: Items::default(),
                pending: Vec::new(),
            }),
        }
    }

    fn emitter(&self) -> std::sync::MutexGuard<'_, Emitter> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lines before the turn: `exec.started`, `session.started` (or `session.resumed`),
    /// `turn.started`.
    pub fn begin(&self, model: &str, cwd: &std::path::Path, start: SessionStart) {
        if self.format != Format::StreamJson {
            return;
        }
        let mut out = self.emitter();
        out.emit(
            &self.stop,
            "exec.started",
            json!({"model": model, "cwd": cwd}),
        );
        let kind = match start {
            SessionStart::New => "session.started",
            SessionStart::Resumed => "session.resumed",
        };
        out.emit(&self.stop, kind, json!({}));
        out.emit(&self.stop, "turn.started", json!({}));
        out.flush(&self.stop);
    }

    /// Lines after the turn, or the result object, or the answer.
    pub fn finish(&self, result: &ExecResult) {
        let mut out = self.emitter();
        match self.format {
            Format::StreamJson => {
                out.close_items(&self.stop);
                match &result.error {
                    None => out.emit(
                        &self.stop,
                        "turn.completed",
                        json!({"usage": result.usage, "duration_ms": result.duration_ms}),
                    ),
                    Some(error) => out.emit(
                        &self.stop,
                        "turn.failed",
                        json!({"status": result.status, "error": error,
                               "usage": result.usage, "duration_ms": result.duration_ms}),
                    ),
                }
                out.emit(&self.stop, "exec.completed", json!({"result": result}));
            }
            Format::Json => match serde_json::to_string(result) {
                Ok(line) => out.write_line(&self.stop, format!("{line}\n").as_bytes()),
                Err(error) => eprintln!("keel: cannot encode the result: {error}"),
            },
            Format::Text => {
                if let Some(error) = &result.error {
                    eprintln!(
                        "keel: {} ({}): {}",
                        status_word(result.status),
                        error.code,
                        error.message
                    );
                }
                if result.status == ExecStatus::Succeeded && !result.final_text.is_empty() {
                    let text = result.final_text.trim_end_matches('\n');
                    out.write_line(&self.stop, format!("{text}\n").as_bytes());
                }
            }
        }
        out.flush(&self.stop);
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
        ExecStatus::LimitExceeded => "step limit reached",
    }
}

#[async_trait]
impl TurnHost for ExecHost {
    async fn on_runtime_event(&self, event: RuntimeEvent) {
        match self.format {
            Format::StreamJson => self.emitter().translate(&self.stop, event.body),
            Format::Text => progress(&event.body),
            Format::Json => {}
        }
    }

    async fn on_events_drained(&self) {
        self.emitter().flush(&self.stop);
    }
}

/// Progress for `text`: tool activity and retries on stderr.
fn progress(body: &RuntimeEventBody) {
    match body {
        RuntimeEventBody::ResponseChunk {
            chunk: ResponseChunk::ToolExecution {
                tool_name, phase, ..
            },
            ..
        } => {
            let state = match phase {
                ToolPhase::Started => "started",
                ToolPhase::Succeeded => "done",
                ToolPhase::Failed => "failed",
                _ => "changed",
            };
            eprintln!("[tool {tool_name}: {state}]");
        }
        RuntimeEventBody::DebugTrace { trace } if trace.name == "llm_notice" => {
            let notice = serde_json::from_value::<StreamNotice>(trace.data["notice"].clone());
            if let Ok(StreamNotice::RetryScheduled {
                attempt,
                max_retries,
                delay_ms,
                error,
            }) = notice
            {
                eprintln!(
                    "[retry {attempt}/{max_retries} in {delay_ms} ms: {}]",
                    error.message
                );
            }
        }
        _ => {}
    }
}

/// Numbering, ids and item state of the stream-json output.
/// The run's ids as the start of a JSON object's members, ending with a comma.
fn envelope_ids(ids: &RunIds) -> String {
    let member = |key: &str, value: &str| format!("\"{key}\":{},", Value::String(value.to_owned()));
    member("run_id", ids.run_id.as_str())
        + &member("session_id", &ids.session_id)
        + &member("turn_id", &ids.turn_id)
}

/// Pending output written at once, whether or not more events are ready.
const PENDING_LIMIT: usize = 64 * 1024;

struct Emitter {
    /// `"run_id":…,"session_id":…,"turn_id":…,` serialized once for every line.
    envelope: String,
    sequence: u64,
    stdout_closed: bool,
    /// Lines not written yet (see the module documentation).
    pending: Vec<u8>,
    items: Items,
}

impl Emitter {
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

    fn item(&mut self, stop: &Stop, kind: &str, item: Value) {
        self.emit(stop, kind, json!({ "item": item }));
    }

    fn translate(&mut self, stop: &Stop, body: RuntimeEventBody) {
        match body {
            RuntimeEventBody::ResponseChunk { message_id, chunk } => match chunk {
                ResponseChunk::Text { delta, .. } => {
                    self.delta(stop, &message_id, TextKind::Message, &delta);
                }
                ResponseChunk::Thinking { delta, .. } => {
                    self.delta(stop, &message_id, TextKind::Reasoning, &delta);
                }
                ResponseChunk::ToolCallStart { index, id, name } => {
                    self.items
                        .call_index
                        .insert((message_id, index), id.clone());
                    self.items.calls.entry(id).or_insert_with(|| CallItem {
                        item_id: None,
                        name,
                        raw_arguments: String::new(),
                        done: false,
                    });
                }
                ResponseChunk::ToolCallDelta { index, delta } => {
                    if let Some(call) = self
                        .items
                        .call_index
                        .get(&(message_id, index))
                        .and_then(|id| self.items.calls.get_mut(id))
                    {
                        call.raw_arguments.push_str(&delta);
                    }
                }
                ResponseChunk::ToolExecution {
                    tool_call_id,
                    tool_name,
                    phase,
                    result,
                } => {
                    let ended = match phase {
                        ToolPhase::Started => None,
                        ToolPhase::Failed => Some("failed"),
                        _ => Some("completed"),
                    };
                    self.start_call(stop, &tool_call_id, &tool_name);
                    if let Some(status) = ended {
                        let text = result.as_deref().map(result_text).unwrap_or_default();
                        self.end_call(stop, &tool_call_id, status, &text);
                    }
                }
                _ => {}
            },
            RuntimeEventBody::MessageCompleted {
                message_id,
                message,
            } => match &*message {
                Message::Assistant(assistant) => {
                    let thinking: String = assistant
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Thinking(t) => Some(t.thinking.as_str()),
                            _ => None,
                        })
                        .collect();
                    self.complete_text(stop, &message_id, TextKind::Reasoning, thinking);
                    self.complete_text(stop, &message_id, TextKind::Message, assistant.text());
                }
                Message::ToolResult(result) => {
                    // Calls answered without running (aborted, never admitted) end here.
                    self.start_call(stop, &result.tool_call_id, &result.tool_name);
                    let status = if result.is_error {
                        "failed"
                    } else {
                        "completed"
                    };
                    self.end_call(stop, &result.tool_call_id, status, &result.text());
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn next_item_id(&mut self) -> String {
        let id = format!("item_{}", self.items.next);
        self.items.next += 1;
        id
    }

    /// Numbers a new text item and writes its `item.started`; returns its id.
    fn start_text(&mut self, stop: &Stop, kind: TextKind) -> String {
        let item_id = self.next_item_id();
        self.item(
            stop,
            "item.started",
            json!({"id": item_id, "type": kind.name(), "text": ""}),
        );
        item_id
    }

    fn delta(&mut self, stop: &Stop, message_id: &MessageId, kind: TextKind, delta: &str) {
        let key = (message_id.clone(), kind);
        let item_id = match self.items.texts.get_mut(&key) {
            Some(open) => {
                open.text.push_str(delta);
                open.item_id.clone()
            }
            None => {
                let item_id = self.start_text(stop, kind);
                self.items.texts.insert(
                    key,
                    OpenText {
                        item_id: item_id.clone(),
                        text: delta.to_owned(),
                    },
                );
                item_id
            }
        };
        // A line per streamed delta: written directly, in the members' sorted order.
        self.emit_with(stop, "item.updated", |line| {
            line.extend_from_slice(b",\"delta\":");
            let _ = serde_json::to_writer(&mut *line, delta);
            line.extend_from_slice(b",\"item\":{\"id\":");
            let _ = serde_json::to_writer(&mut *line, &item_id);
            line.extend_from_slice(b",\"type\":");
            let _ = serde_json::to_writer(&mut *line, kind.name());
            line.push(b'}');
        });
    }

    fn complete_text(&mut self, stop: &Stop, message_id: &MessageId, kind: TextKind, text: String) {
        let item_id = match self.items.texts.remove(&(message_id.clone(), kind)) {
            Some(open) => open.item_id,
            None if text.is_empty() => return,
            None => self.start_text(stop, kind),
        };
        self.item(
            stop,
            "item.completed",
            json!({"id": item_id, "type": kind.name(), "text": text}),
        );
    }

    fn start_call(&mut self, stop: &Stop, call_id: &ToolCallId, tool_name: &str) {
        let next = format!("item_{}", self.items.next);
        let call = self
            .items
            .calls
            .entry(call_id.clone())
            .or_insert_with(|| CallItem {
                item_id: None,
                name: tool_name.to_owned(),
                raw_arguments: String::new(),
                done: false,
            });
        if call.item_id.is_some() {
            return;
        }
        call.item_id = Some(next.clone());
        let item = json!({"id": next, "type": "tool_call", "call_id": call_id,
            "tool_name": call.name, "arguments": call.arguments(), "status": "in_progress"});
        self.items.next += 1;
        self.item(stop, "item.started", item);
    }

    fn end_call(&mut self, stop: &Stop, call_id: &ToolCallId, status: &str, result: &str) {
        let Some(call) = self.items.calls.get_mut(call_id) else {
            return;
        };
        if call.done {
            return;
        }
        call.done = true;
        let item = json!({"id": call.item_id, "type": "tool_call", "call_id": call_id,
            "tool_name": call.name, "arguments": call.arguments(), "result": result,
            "status": status});
        self.item(stop, "item.completed", item);
    }

    /// Completes items a stopped turn left open, so every started item also completes.
    fn close_items(&mut self, stop: &Stop) {
        let mut open: Vec<((MessageId, TextKind), OpenText)> = self.items.texts.drain().collect();
        open.sort_by(|a, b| a.1.item_id.cmp(&b.1.item_id));
        for ((_, kind), text) in open {
            self.item(
                stop,
                "item.completed",
                json!({"id": text.item_id, "type": kind.name(), "text": text.text}),
            );
        }
        let mut calls: Vec<ToolCallId> = self
            .items
            .calls
            .iter()
            .filter(|(_, c)| c.item_id.is_some() && !c.done)
            .map(|(id, _)| id.clone())
            .collect();
        calls.sort_by_key(|id| id.to_string());
        for id in calls {
            self.end_call(stop, &id, "failed", "interrupted");
        }
    }
}

/// Text-like items that stream in deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TextKind {
    /// Answer text.
    Message,
    /// Model reasoning.
    Reasoning,
}

impl TextKind {
    fn name(self) -> &'static str {
        match self {
            Self::Message => "agent_message",
            Self::Reasoning => "reasoning",
        }
    }
}

struct OpenText {
    item_id: String,
    text: String,
}

struct CallItem {
    item_id: Option<String>,
    name: String,
    raw_arguments: String,
    done: bool,
}

impl CallItem {
    /// The streamed arguments as JSON, or the raw text when they do not parse.
    fn arguments(&self) -> Value {
        if self.raw_arguments.trim().is_empty() {
            return json!({});
        }
        serde_json::from_str(&self.raw_arguments)
            .unwrap_or_else(|_| Value::String(self.raw_arguments.clone()))
    }
}

#[derive(Default)]
struct Items {
    next: u64,
    texts: HashMap<(MessageId, TextKind), OpenText>,
    call_index: HashMap<(MessageId, usize), ToolCallId>,
    calls: HashMap<ToolCallId, CallItem>,
}

fn result_text(message: &Message) -> String {
    message
        .as_tool_result()
        .map(keel_protocol::ToolResultMessage::text)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn emitter() -> Emitter {
        let ids = RunIds {
            run_id: "r\"1".into(),
            session_id: "s-1".into(),
            turn_id: "t-1".into(),
        };
        Emitter {
            envelope: envelope_ids(&ids),
            sequence: 0,
            stdout_closed: false,
            items: Items::default(),
            pending: Vec::new(),
        }
    }

    /// A delta's line is written without a JSON tree; it must be the line the general path
    /// writes from one: same members, same order, same length (timestamps aside).
    #[test]
    fn a_delta_line_is_the_line_of_its_json_object() {
        let stop = Stop::default();
        let mut direct = emitter();
        let message = MessageId::new("m-1");
        direct.delta(
            &stop,
            &message,
            TextKind::Reasoning,
            "a \"quoted\"\nline \u{1F600}",
        );
        let lines: Vec<&[u8]> = direct.pending.split_inclusive(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 2, "item.started, then item.updated");
        let mut general = emitter();
        general.sequence = 1;
        general.emit(
            &stop,
            "item.updated",
            json!({"item": {"id": "item_0", "type": "reasoning"},
                   "delta": "a \"quoted\"\nline \u{1F600}"}),
        );
        // The timestamps may differ by a millisecond; compare without them.
        let without_time = |line: &[u8]| {
            let mut value: Value = serde_json::from_slice(line).unwrap();
            value["timestamp_ms"] = json!(0);
            (value, line.len())
        };
        assert_eq!(without_time(lines[1]), without_time(&general.pending));
        let text = std::str::from_utf8(lines[1]).unwrap();
        let order: Vec<usize> = ["\"type\":\"item.updated\"", "\"delta\":", "\"item\":"]
            .iter()
            .map(|key| text.find(key).unwrap())
            .collect();
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{text}");
    }
}
