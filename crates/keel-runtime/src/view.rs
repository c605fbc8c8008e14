//! The one turn-view reducer: folds a turn's runtime events into the items front ends show
//! (answer text, reasoning, tool calls with their status), plus retry notices and status.
//! stream-json, the TUI and ACP all render what this produces, so they cannot disagree
//! about what happened in a turn.

use std::collections::HashMap;
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
    context_window: u32,
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
    done: bool,
}

impl CallItem {
    /// The streamed arguments as JSON, or the raw text when they do not parse.
    fn arguments(&self) -> Value {
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
    /// An empty view of `turn_id`, whose model has a window of `context_window` tokens.
    pub fn new(turn_id: TurnId, context_window: u32) -> Self {
        Self {
            turn_id,
            next: 0,
            texts: HashMap::new(),
            call_index: HashMap::new(),
            calls: HashMap::new(),
            context_window,
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
            RuntimeEventBody::MessageCompleted {
                message_id,
                message,
            } => match &*message {
                Message::Assistant(assistant) => {
                    self.complete_text(
                        &message_id,
                        ItemKind::Reasoning,
                        assistant.thinking(),
                        emit,
                    );
                    self.complete_text(&message_id, ItemKind::AgentMessage, assistant.text(), emit);
                    emit(SessionEventBody::Usage {
                        turn_id: self.turn_id.clone(),
                        usage: assistant.usage,
                        context_window: self.context_window,
                    });
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
                self.calls.entry(id).or_insert_with(|| CallItem {
                    number,
                    item_id: None,
                    name,
                    raw_arguments: String::new(),
                    done: false,
                });
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
        let call = self
            .calls
            .entry(call_id.clone())
            .or_insert_with(|| CallItem {
                number,
                item_id: None,
                name: tool_name.to_owned(),
                raw_arguments: String::new(),
                done: false,
            });
        if call.item_id.is_some() {
            return;
        }
        let item_id: Arc<str> = Arc::from(format!("item_{number}"));
        call.item_id = Some(item_id.clone());
        call.number = number;
        let body = Self::call_body(call, call_id, None, ToolCallStatus::InProgress, None);
        self.next += 1;
        emit(self.item_event(ItemEvent::Started {
            item: Item { id: item_id, body },
        }));
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
        let Some(item_id) = call.item_id.clone().filter(|_| !call.done) else {
            return;
        };
        call.done = true;
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
            .filter(|(_, c)| c.item_id.is_some() && !c.done)
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
