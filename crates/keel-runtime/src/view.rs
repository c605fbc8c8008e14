//! The one turn-view reducer: folds a turn's runtime events into the items front ends show
//! (answer text, reasoning, tool calls with their status), plus retry notices and status.
//! stream-json, the TUI and ACP all render what this produces, so they cannot disagree
//! about what happened in a turn.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use keel_protocol::{
    Failure, Item, ItemBody, ItemEvent, ItemKind, Message, MessageId, ResponseChunk,
    RuntimeEventBody, SessionEventBody, StreamNotice, ToolCallId, ToolCallStatus, ToolPhase,
    TurnId,
};
use serde_json::Value;

/// The items of one turn so far.
#[derive(Debug)]
pub struct TurnView {
    turn_id: TurnId,
    next: u64,
    texts: HashMap<(MessageId, ItemKind), OpenText>,
    call_index: HashMap<(MessageId, usize), ToolCallId>,
    calls: HashMap<ToolCallId, CallItem>,
    /// Responses whose text was completed when they ended streaming (`ResponseEnded`).
    ended: HashSet<MessageId>,
    limits: WindowLimits,
}

/// From this window (tokens) up the budget is the design's, unscaled (see `lean`).
pub use keel_llm::budget::LARGE_WINDOW;

/// The window a turn's requests count against, and the budget's limits in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowLimits {
    /// The model's context window C.
    pub window: u32,
    /// The input limit L.
    pub input_limit: u64,
    /// Where compaction starts, T.
    pub compact_at: u64,
}

impl WindowLimits {
    /// The limits of `spec`'s model under `context`'s reserve and safety settings.
    pub fn of(spec: &keel_llm::ModelSpec, context: &crate::settings::ContextConfig) -> Self {
        let budget = crate::lean::Limits::of(spec, context).budget(u64::from(spec.context_window));
        Self {
            window: spec.context_window,
            input_limit: budget.input_limit,
            compact_at: budget.compact_at,
        }
    }

    fn usage(self, turn_id: TurnId, usage: keel_protocol::Usage) -> SessionEventBody {
        SessionEventBody::Usage {
            turn_id,
            usage,
            context_window: self.window,
            input_limit: self.input_limit,
            compact_at: self.compact_at,
        }
    }
}

#[derive(Debug)]
struct OpenText {
    number: u64,
    item_id: Arc<str>,
    text: String,
}

#[derive(Debug)]
struct CallItem {
    number: u64,
    item_id: Option<Arc<str>>,
    name: String,
    raw_arguments: String,
    /// The arguments of the complete response, once it ended.
    arguments: Option<Value>,
    /// Where the call's item stands (meaningful once it has one).
    status: ToolCallStatus,
}

impl CallItem {
    /// A call the view has not shown yet.
    fn new(number: u64, name: String, status: ToolCallStatus) -> Self {
        Self {
            number,
            item_id: None,
            name,
            raw_arguments: String::new(),
            arguments: None,
            status,
        }
    }

    /// Whether it ended (completed or failed).
    fn ended(&self) -> bool {
        matches!(
            self.status,
            ToolCallStatus::Completed | ToolCallStatus::Failed
        )
    }

    /// The streamed arguments as JSON, or the raw text when they do not parse.
    fn arguments(&self) -> Value {
        if let Some(arguments) = &self.arguments {
            return arguments.clone();
        }
        if self.raw_arguments.trim().is_empty() {
            return Value::Object(serde_json::Map::new());
        }
        serde_json::from_str(&self.raw_arguments)
            .unwrap_or_else(|_| Value::String(self.raw_arguments.clone()))
    }
}

/// What an interrupted tool call's item says as its result.
pub const INTERRUPTED_ITEM: &str = "interrupted";

impl TurnView {
    /// An empty view of `turn_id`, whose requests count against `limits`.
    pub fn new(turn_id: TurnId, limits: WindowLimits) -> Self {
        Self {
            turn_id,
            next: 0,
            texts: HashMap::new(),
            call_index: HashMap::new(),
            calls: HashMap::new(),
            ended: HashSet::new(),
            limits,
        }
    }

    /// Folds one runtime event; what front ends should see of it goes to `emit`.
    pub fn apply(&mut self, body: RuntimeEventBody, emit: &mut dyn FnMut(SessionEventBody)) {
        match body {
            RuntimeEventBody::SessionStatus { status } => emit(SessionEventBody::TurnStatus {
                turn_id: self.turn_id.clone(),
                status,
            }),
            RuntimeEventBody::ResponseChunk { message_id, chunk } => {
                self.chunk(message_id, chunk, emit);
            }
            RuntimeEventBody::ResponseEnded {
                message_id,
                message,
            } => {
                if let Message::Assistant(assistant) = &*message {
                    self.response_ended(&message_id, assistant, emit);
                }
            }
            RuntimeEventBody::MessageCompleted {
                message_id,
                message,
            } => match &*message {
                Message::Assistant(_) if self.ended.remove(&message_id) => {}
                Message::Assistant(assistant) => {
                    self.complete_text(
                        &message_id,
                        ItemKind::Reasoning,
                        assistant.thinking(),
                        emit,
                    );
                    self.complete_text(&message_id, ItemKind::AgentMessage, assistant.text(), emit);
                    emit(self.limits.usage(self.turn_id.clone(), assistant.usage));
                }
                Message::ToolResult(result) => {
                    // Calls answered without running (blocked, aborted) end here.
                    self.start_call(&result.tool_call_id, &result.tool_name, emit);
                    let status = if result.is_error {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    };
                    let details = result.details.clone();
                    self.end_call(&result.tool_call_id, status, result.text(), details, emit);
                }
                _ => {}
            },
            RuntimeEventBody::Notice {
                notice:
                    StreamNotice::RetryScheduled {
                        attempt,
                        max_retries,
                        delay_ms,
                        error,
                    },
                ..
            } => emit(SessionEventBody::Retry {
                turn_id: self.turn_id.clone(),
                attempt,
                max_retries,
                delay_ms,
                failure: Failure::new(keel_agent::runner::model_code(error.code), error.message),
            }),
            _ => {}
        }
    }

    fn chunk(
        &mut self,
        message_id: MessageId,
        chunk: ResponseChunk,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        match chunk {
            ResponseChunk::Text { delta, .. } => {
                self.delta(message_id, ItemKind::AgentMessage, delta, emit);
            }
            ResponseChunk::Thinking { delta, .. } => {
                self.delta(message_id, ItemKind::Reasoning, delta, emit);
            }
            ResponseChunk::ToolCallStart { index, id, name } => {
                self.call_index.insert((message_id, index), id.clone());
                let number = self.next;
                self.calls
                    .entry(id)
                    .or_insert_with(|| CallItem::new(number, name, ToolCallStatus::Pending));
            }
            ResponseChunk::ToolCallDelta { index, delta } => {
                if let Some(call) = self
                    .call_index
                    .get(&(message_id, index))
                    .and_then(|id| self.calls.get_mut(id))
                {
                    call.raw_arguments.push_str(&delta);
                }
            }
            ResponseChunk::ToolOutput {
                tool_call_id,
                delta,
            } => self.call_output(&tool_call_id, delta, emit),
            ResponseChunk::ToolExecution {
                tool_call_id,
                tool_name,
                phase,
                result,
            } => {
                let ended = match phase {
                    ToolPhase::Started => None,
                    ToolPhase::Failed => Some(ToolCallStatus::Failed),
                    _ => Some(ToolCallStatus::Completed),
                };
                self.start_call(&tool_call_id, &tool_name, emit);
                if ended.is_none() {
                    self.admit(&tool_call_id, emit);
                }
                if let Some(status) = ended {
                    let ended = result.as_deref().and_then(Message::as_tool_result);
                    let text = ended
                        .map(keel_protocol::ToolResultMessage::text)
                        .unwrap_or_default();
                    let details = ended.and_then(|r| r.details.clone());
                    self.end_call(&tool_call_id, status, text, details, emit);
                }
            }
            _ => {}
        }
    }

    fn next_item(&mut self) -> (u64, Arc<str>) {
        let number = self.next;
        self.next += 1;
        (number, Arc::from(format!("item_{number}")))
    }

    fn item_event(&self, event: ItemEvent) -> SessionEventBody {
        SessionEventBody::Item {
            turn_id: self.turn_id.clone(),
            event,
        }
    }

    fn text_body(kind: ItemKind, text: String) -> ItemBody {
        match kind {
            ItemKind::Reasoning => ItemBody::Reasoning { text },
            _ => ItemBody::AgentMessage { text },
        }
    }

    fn delta(
        &mut self,
        message_id: MessageId,
        kind: ItemKind,
        delta: String,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let key = (message_id, kind);
        let item_id = match self.texts.get_mut(&key) {
            Some(open) => {
                open.text.push_str(&delta);
                open.item_id.clone()
            }
            None => {
                let (number, item_id) = self.next_item();
                emit(self.item_event(ItemEvent::Started {
                    item: Item {
                        id: item_id.clone(),
                        body: Self::text_body(kind, String::new()),
                    },
                }));
                self.texts.insert(
                    key,
                    OpenText {
                        number,
                        item_id: item_id.clone(),
                        text: delta.clone(),
                    },
                );
                item_id
            }
        };
        emit(self.item_event(ItemEvent::Updated {
            item_id,
            kind,
            delta,
        }));
    }

    fn complete_text(
        &mut self,
        message_id: &MessageId,
        kind: ItemKind,
        text: String,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let item_id = match self.texts.remove(&(message_id.clone(), kind)) {
            Some(open) => open.item_id,
            None if text.is_empty() => return,
            None => {
                let (_, item_id) = self.next_item();
                emit(self.item_event(ItemEvent::Started {
                    item: Item {
                        id: item_id.clone(),
                        body: Self::text_body(kind, String::new()),
                    },
                }));
                item_id
            }
        };
        emit(self.item_event(ItemEvent::Completed {
            item: Item {
                id: item_id,
                body: Self::text_body(kind, text),
            },
        }));
    }

    fn call_body(
        call: &CallItem,
        id: &ToolCallId,
        result: Option<String>,
        status: ToolCallStatus,
        details: Option<Value>,
    ) -> ItemBody {
        ItemBody::ToolCall {
            call_id: id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments(),
            result,
            status,
            details,
        }
    }

    fn start_call(
        &mut self,
        call_id: &ToolCallId,
        tool_name: &str,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let number = self.next;
        let call = self.calls.entry(call_id.clone()).or_insert_with(|| {
            CallItem::new(number, tool_name.to_owned(), ToolCallStatus::InProgress)
        });
        if call.item_id.is_some() {
            return;
        }
        let item_id: Arc<str> = Arc::from(format!("item_{number}"));
        call.item_id = Some(item_id.clone());
        call.number = number;
        let body = Self::call_body(call, call_id, None, call.status, None);
        self.next += 1;
        emit(self.item_event(ItemEvent::Started {
            item: Item { id: item_id, body },
        }));
    }

    /// A call the host runs itself (a `!` command) starts: its item shows in progress with
    /// these arguments at once, with no response before it.
    pub fn host_call_started(
        &mut self,
        call_id: &ToolCallId,
        tool_name: &str,
        arguments: Value,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let number = self.next;
        let mut call = CallItem::new(number, tool_name.to_owned(), ToolCallStatus::InProgress);
        call.arguments = Some(arguments);
        self.calls.insert(call_id.clone(), call);
        self.start_call(call_id, tool_name, emit);
    }

    /// A running call printed `delta`: its item gets it, until the call ends.
    pub fn call_output(
        &mut self,
        call_id: &ToolCallId,
        delta: String,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let Some(call) = self.calls.get(call_id) else {
            return;
        };
        let Some(item_id) = call.item_id.clone().filter(|_| !call.ended()) else {
            return;
        };
        if delta.is_empty() {
            return;
        }
        emit(self.item_event(ItemEvent::Updated {
            item_id,
            kind: ItemKind::ToolCall,
            delta,
        }));
    }

    /// A call the host runs itself ended with `result`.
    pub fn host_call_ended(
        &mut self,
        call_id: &ToolCallId,
        result: &keel_protocol::ToolResultMessage,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let status = if result.is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        self.end_call(call_id, status, result.text(), result.details.clone(), emit);
    }

    /// A pending call was admitted: its item moves on to in progress.
    fn admit(&mut self, call_id: &ToolCallId, emit: &mut dyn FnMut(SessionEventBody)) {
        let Some(call) = self.calls.get_mut(call_id) else {
            return;
        };
        if call.status != ToolCallStatus::Pending {
            return;
        }
        call.status = ToolCallStatus::InProgress;
        if let Some(item_id) = call.item_id.clone() {
            emit(self.item_event(ItemEvent::Status {
                item_id,
                status: ToolCallStatus::InProgress,
            }));
        }
    }

    /// A response with tool calls stopped streaming: its reasoning and text complete now
    /// (before any of its calls runs or asks), then each call shows as pending, in the
    /// model's order, so the calls keep that order whatever order they end in.
    fn response_ended(
        &mut self,
        message_id: &MessageId,
        assistant: &keel_protocol::AssistantMessage,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        self.ended.insert(message_id.clone());
        self.complete_text(message_id, ItemKind::Reasoning, assistant.thinking(), emit);
        self.complete_text(message_id, ItemKind::AgentMessage, assistant.text(), emit);
        emit(self.limits.usage(self.turn_id.clone(), assistant.usage));
        for call in assistant.tool_calls() {
            let number = self.next;
            let entry = self.calls.entry(call.id.clone()).or_insert_with(|| {
                CallItem::new(number, call.name.clone(), ToolCallStatus::Pending)
            });
            if entry.item_id.is_some() {
                continue;
            }
            // The final arguments: the streamed text may have been cut or repaired.
            entry.arguments = Some(call.arguments.clone());
            self.start_call(&call.id, &call.name, emit);
        }
    }

    fn end_call(
        &mut self,
        call_id: &ToolCallId,
        status: ToolCallStatus,
        result: String,
        details: Option<Value>,
        emit: &mut dyn FnMut(SessionEventBody),
    ) {
        let Some(call) = self.calls.get_mut(call_id) else {
            return;
        };
        let Some(item_id) = call.item_id.clone().filter(|_| !call.ended()) else {
            return;
        };
        call.status = status;
        let body = Self::call_body(call, call_id, Some(result), status, details);
        let event = self.item_event(ItemEvent::Completed {
            item: Item { id: item_id, body },
        });
        emit(event);
    }

    /// Completes every item a stopped turn left open (text as it stands, tool calls failed
    /// as interrupted), in the order they started, so every started item also completes.
    pub fn close(&mut self, emit: &mut dyn FnMut(SessionEventBody)) {
        let mut open: Vec<((MessageId, ItemKind), OpenText)> = self.texts.drain().collect();
        open.sort_by_key(|(_, text)| text.number);
        let mut calls: Vec<(u64, ToolCallId)> = self
            .calls
            .iter()
            .filter(|(_, c)| c.item_id.is_some() && !c.ended())
            .map(|(id, c)| (c.number, id.clone()))
            .collect();
        calls.sort();
        for ((_, kind), text) in open {
            emit(self.item_event(ItemEvent::Completed {
                item: Item {
                    id: text.item_id,
                    body: Self::text_body(kind, text.text),
                },
            }));
        }
        for (_, id) in calls {
            self.end_call(
                &id,
                ToolCallStatus::Failed,
                INTERRUPTED_ITEM.into(),
                None,
                emit,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use keel_protocol::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage};
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: ToolCallId::from(id),
            name: "read".into(),
            arguments: json!({"path": format!("{id}.rs")}),
        }
    }

    /// What the view says, one short line per event.
    fn said(events: &[SessionEventBody]) -> Vec<String> {
        events
            .iter()
            .filter_map(|body| match body {
                SessionEventBody::Item { event, .. } => Some(match event {
                    ItemEvent::Started { item } => format!("start {} {:?}", item.id, status(item)),
                    ItemEvent::Updated { item_id, .. } => format!("delta {item_id}"),
                    ItemEvent::Status { item_id, status } => format!("status {item_id} {status:?}"),
                    ItemEvent::Completed { item } => format!("end {} {:?}", item.id, status(item)),
                    _ => "other".into(),
                }),
                SessionEventBody::Usage { .. } => Some("usage".into()),
                _ => None,
            })
            .collect()
    }

    fn status(item: &Item) -> Option<ToolCallStatus> {
        match &item.body {
            ItemBody::ToolCall { status, .. } => Some(*status),
            _ => None,
        }
    }

    fn result(id: &str) -> Arc<Message> {
        Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: ToolCallId::from(id),
            tool_name: "read".into(),
            content: vec![ContentBlock::text(format!("{id} read"))],
            details: None,
            is_error: false,
            timestamp: 0,
        }))
    }

    fn execution(id: &str, phase: ToolPhase) -> RuntimeEventBody {
        RuntimeEventBody::ResponseChunk {
            message_id: MessageId::new("m-1"),
            chunk: ResponseChunk::ToolExecution {
                tool_call_id: ToolCallId::from(id),
                tool_name: "read".into(),
                phase,
                result: (phase != ToolPhase::Started).then(|| result(id)),
            },
        }
    }

    #[test]
    fn text_ends_before_the_calls_which_keep_the_model_s_order() {
        let mut view = TurnView::new(
            TurnId::from("t-1"),
            WindowLimits {
                window: 1000,
                input_limit: 900,
                compact_at: 800,
            },
        );
        let mut out = Vec::new();
        let message = Arc::new(Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::text("Reading both."),
                ContentBlock::ToolCall(call("c1")),
                ContentBlock::ToolCall(call("c2")),
            ],
            ..AssistantMessage::default()
        }));
        let id = MessageId::new("m-1");
        let mut feed = |view: &mut TurnView, body| view.apply(body, &mut |e| out.push(e));
        feed(
            &mut view,
            RuntimeEventBody::ResponseChunk {
                message_id: id.clone(),
                chunk: ResponseChunk::Text {
                    index: 0,
                    delta: "Reading both.".into(),
                },
            },
        );
        feed(
            &mut view,
            RuntimeEventBody::ResponseEnded {
                message_id: id.clone(),
                message: message.clone(),
            },
        );
        feed(&mut view, execution("c1", ToolPhase::Started));
        feed(&mut view, execution("c2", ToolPhase::Started));
        feed(&mut view, execution("c2", ToolPhase::Succeeded));
        feed(&mut view, execution("c1", ToolPhase::Succeeded));
        feed(
            &mut view,
            RuntimeEventBody::MessageCompleted {
                message_id: id,
                message,
            },
        );
        assert_eq!(
            said(&out),
            vec![
                "start item_0 None",
                "delta item_0",
                "end item_0 None",
                "usage",
                "start item_1 Some(Pending)",
                "start item_2 Some(Pending)",
                "status item_1 InProgress",
                "status item_2 InProgress",
                "end item_2 Some(Completed)",
                "end item_1 Some(Completed)",
            ]
        );
    }
}
