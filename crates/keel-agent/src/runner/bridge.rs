//! The event bridge: loop events become numbered runtime events (DESIGN §2).
//!
//! `message_*` and `tool_execution_*` become streamed response chunks; loop and step
//! lifecycle and tool progress become debug traces. A complete assistant message that
//! holds tool calls is reported only after every one of its executions ended, so a
//! persisted tool state can never stay "started" forever; its end of streaming is reported
//! at once (`ResponseEnded`), so front ends can close its text before its calls run. A
//! call's `Started` phase means admitted: the runner reports it once the call passed its
//! gate (and any question), not when the loop began judging it.
//!
//! Message ids come from the host, and the loop awaits the id before it emits a message's
//! start event, so no delta can reach the bridge ahead of the id it belongs to: the
//! "hold deltas back until the id exists" rule holds by construction.

use std::collections::HashSet;
use std::sync::Arc;

use keel_protocol::{
    AgentEvent, DebugTrace, Message, MessageId, ResponseChunk, RuntimeEvent, RuntimeEventBody,
    SessionId, SessionStatus, StreamEvent, ToolCallId, ToolPhase, TurnId,
};
use serde_json::json;

/// An assistant message waiting for its tool executions to end.
struct Held {
    message_id: MessageId,
    message: Arc<Message>,
    waiting: HashSet<ToolCallId>,
}

/// Translates and numbers the events of one turn.
pub(crate) struct EventBridge {
    session_id: SessionId,
    turn_id: TurnId,
    seq: u64,
    held: Vec<Held>,
}

impl EventBridge {
    pub(crate) fn new(session_id: SessionId, turn_id: TurnId) -> Self {
        Self {
            session_id,
            turn_id,
            seq: 0,
            held: Vec::new(),
        }
    }

    /// Numbers one event.
    pub(crate) fn number(&mut self, body: RuntimeEventBody) -> RuntimeEvent {
        let event = RuntimeEvent {
            seq: self.seq,
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
            body,
        };
        self.seq += 1;
        event
    }

    /// A status change.
    pub(crate) fn status(&mut self, status: SessionStatus) -> RuntimeEvent {
        self.number(RuntimeEventBody::SessionStatus { status })
    }

    /// Translates one loop event into zero or more runtime event bodies.
    pub(crate) fn translate(&mut self, event: AgentEvent, out: &mut Vec<RuntimeEventBody>) {
        match event {
            AgentEvent::MessageUpdate {
                message_id,
                event: StreamEvent::Notice { notice },
            } => {
                // Retries and recoveries: worth showing, but not part of the answer.
                out.push(RuntimeEventBody::Notice { message_id, notice });
            }
            AgentEvent::MessageUpdate { message_id, event } => {
                if let Some(chunk) = chunk(event) {
                    out.push(RuntimeEventBody::ResponseChunk { message_id, chunk });
                }
            }
            AgentEvent::MessageStart {
                message_id,
                message,
            } => {
                out.push(trace(
                    "message_start",
                    json!({"message_id": message_id, "role": message.role()}),
                ));
            }
            AgentEvent::MessageEnd {
                message_id,
                message,
            } => {
                let waiting: HashSet<ToolCallId> = message
                    .as_assistant()
                    .map(|a| a.tool_calls().map(|c| c.id.clone()).collect())
                    .unwrap_or_default();
                if waiting.is_empty() {
                    out.push(RuntimeEventBody::MessageCompleted {
                        message_id,
                        message,
                    });
                } else {
                    out.push(RuntimeEventBody::ResponseEnded {
                        message_id: message_id.clone(),
                        message: message.clone(),
                    });
                    self.held.push(Held {
                        message_id,
                        message,
                        waiting,
                    });
                }
            }
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                ..
            } => {
                // The call is being judged; it is reported as started once admitted.
                out.push(trace(
                    "tool_execution_start",
                    json!({"tool_call_id": tool_call_id, "tool_name": tool_name}),
                ));
            }
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                update,
                ..
            } if update
                .get(crate::tool::OUTPUT_UPDATE)
                .is_some_and(serde_json::Value::is_string) =>
            {
                let delta = match update {
                    serde_json::Value::Object(mut fields) => {
                        match fields.remove(crate::tool::OUTPUT_UPDATE) {
                            Some(serde_json::Value::String(delta)) => delta,
                            _ => String::new(),
                        }
                    }
                    _ => String::new(),
                };
                out.push(RuntimeEventBody::ResponseChunk {
                    message_id: self.owner(&tool_call_id),
                    chunk: ResponseChunk::ToolOutput {
                        tool_call_id,
                        delta,
                    },
                });
            }
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                update,
            } => {
                out.push(trace(
                    "tool_execution_update",
                    json!({"tool_call_id": tool_call_id, "tool_name": tool_name, "update": update}),
                ));
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => {
                let message_id = self.owner(&tool_call_id);
                let phase = if is_error {
                    ToolPhase::Failed
                } else {
                    ToolPhase::Succeeded
                };
                out.push(RuntimeEventBody::ResponseChunk {
                    message_id,
                    chunk: ResponseChunk::ToolExecution {
                        tool_call_id: tool_call_id.clone(),
                        tool_name,
                        phase,
                        result: Some(result),
                    },
                });
                self.release(&tool_call_id, out);
            }
            AgentEvent::AgentStart => out.push(trace("agent_start", json!({}))),
            AgentEvent::TurnStart => out.push(trace("step_start", json!({}))),
            AgentEvent::TurnEnd { tool_results, .. } => {
                out.push(trace(
                    "step_end",
                    json!({"tool_results": tool_results.len()}),
                ));
            }
            AgentEvent::AgentEnd { messages } => {
                out.push(trace("agent_end", json!({"messages": messages.len()})));
            }
            _ => {}
        }
    }

    /// A call passed its gate and runs now.
    pub(crate) fn admitted(
        &mut self,
        tool_call_id: ToolCallId,
        tool_name: String,
        out: &mut Vec<RuntimeEventBody>,
    ) {
        let message_id = self.owner(&tool_call_id);
        out.push(RuntimeEventBody::ResponseChunk {
            message_id,
            chunk: ResponseChunk::ToolExecution {
                tool_call_id,
                tool_name,
                phase: ToolPhase::Started,
                result: None,
            },
        });
    }

    /// Reports whatever is still held (only possible if a run crashed mid-batch).
    pub(crate) fn flush_held(&mut self, out: &mut Vec<RuntimeEventBody>) {
        for held in self.held.drain(..) {
            out.push(RuntimeEventBody::MessageCompleted {
                message_id: held.message_id,
                message: held.message,
            });
        }
    }

    fn owner(&self, call: &ToolCallId) -> MessageId {
        self.held
            .iter()
            .find(|h| h.waiting.contains(call))
            .map_or_else(|| MessageId::new(""), |h| h.message_id.clone())
    }

    fn release(&mut self, call: &ToolCallId, out: &mut Vec<RuntimeEventBody>) {
        let Some(pos) = self.held.iter().position(|h| h.waiting.contains(call)) else {
            return;
        };
        let held = &mut self.held[pos];
        held.waiting.remove(call);
        if held.waiting.is_empty() {
            let held = self.held.remove(pos);
            out.push(RuntimeEventBody::MessageCompleted {
                message_id: held.message_id,
                message: held.message,
            });
        }
    }
}

fn chunk(event: StreamEvent) -> Option<ResponseChunk> {
    Some(match event {
        StreamEvent::TextDelta { index, delta } => ResponseChunk::Text { index, delta },
        StreamEvent::ThinkingDelta { index, delta } => ResponseChunk::Thinking { index, delta },
        StreamEvent::ToolCallStart { index, id, name } => {
            ResponseChunk::ToolCallStart { index, id, name }
        }
        StreamEvent::ToolCallDelta { index, delta } => {
            ResponseChunk::ToolCallDelta { index, delta }
        }
        _ => return None,
    })
}

fn trace(name: &str, data: serde_json::Value) -> RuntimeEventBody {
    RuntimeEventBody::DebugTrace {
        trace: DebugTrace {
            name: name.to_owned(),
            data,
        },
    }
}
