//! `convert_to_llm`: projecting agent history into what a model is sent (DESIGN §1).
//!
//! Rules: host-only messages are dropped; errored and aborted assistant messages are
//! dropped (providers reject them, and their calls were answered with synthetic results);
//! user messages sent in one batch merge into one; host fields (batch ids, hidden flags,
//! tool-result details) are stripped; tool results whose call is not in a kept assistant
//! message are dropped; images below a minimum size are dropped.
//!
//! The projection is incremental: history only grows between model calls, so the
//! projector remembers how far it got and projects only the new tail. A step therefore
//! costs the same with 10 or 1,000 messages of history. Replacing history bumps its epoch
//! and forces one full rebuild.

use std::collections::HashSet;
use std::sync::Arc;

use keel_protocol::{ContentBlock, Message, StopReason, ToolCallId};

/// Images smaller than this many bytes are dropped: providers reject degenerate images.
pub const DEFAULT_MIN_IMAGE_BYTES: usize = 32;

/// Incremental projector of one agent's history.
#[derive(Debug, Clone)]
pub(crate) struct Projector {
    epoch: u64,
    consumed: usize,
    out: Arc<Vec<Arc<Message>>>,
    call_ids: HashSet<ToolCallId>,
    last_batch: Option<String>,
    min_image_bytes: usize,
}

impl Projector {
    pub(crate) fn new(min_image_bytes: usize) -> Self {
        Self {
            epoch: u64::MAX,
            consumed: 0,
            out: Arc::new(Vec::new()),
            call_ids: HashSet::new(),
            last_batch: None,
            min_image_bytes,
        }
    }

    /// The projection of `history`, which has been at `epoch` since the last call (or was
    /// replaced, in which case the epoch differs).
    pub(crate) fn project(
        &mut self,
        history: &[Arc<Message>],
        epoch: u64,
    ) -> Arc<Vec<Arc<Message>>> {
        if epoch != self.epoch || history.len() < self.consumed {
            *self = Self {
                epoch,
                ..Self::new(self.min_image_bytes)
            };
        }
        if history.len() > self.consumed {
            let out = Arc::make_mut(&mut self.out);
            let mut state = State {
                call_ids: &mut self.call_ids,
                last_batch: &mut self.last_batch,
                min_image_bytes: self.min_image_bytes,
            };
            for message in &history[self.consumed..] {
                state.push(out, message);
            }
            self.consumed = history.len();
        }
        self.out.clone()
    }
}

/// A one-off projection (for a request-only message list, or to rebuild a stored request):
/// the same messages the incremental projector gives for the same history.
pub fn project_all(messages: &[Arc<Message>], min_image_bytes: usize) -> Vec<Arc<Message>> {
    let mut call_ids = HashSet::new();
    let mut last_batch = None;
    let mut state = State {
        call_ids: &mut call_ids,
        last_batch: &mut last_batch,
        min_image_bytes,
    };
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        state.push(&mut out, message);
    }
    out
}

struct State<'a> {
    call_ids: &'a mut HashSet<ToolCallId>,
    last_batch: &'a mut Option<String>,
    min_image_bytes: usize,
}

impl State<'_> {
    fn push(&mut self, out: &mut Vec<Arc<Message>>, message: &Arc<Message>) {
        let batch = match &**message {
            Message::User(user) => user.batch_id.clone(),
            _ => None,
        };
        match &**message {
            Message::Host(_) => return,
            Message::Assistant(assistant) => {
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) {
                    return;
                }
                self.call_ids
                    .extend(assistant.tool_calls().map(|call| call.id.clone()));
                out.push(message.clone());
            }
            Message::ToolResult(result) => {
                if !self.call_ids.contains(&result.tool_call_id) {
                    return;
                }
                if result.details.is_some() {
                    let mut stripped = result.clone();
                    stripped.details = None;
                    out.push(Arc::new(Message::ToolResult(stripped)));
                } else {
                    out.push(message.clone());
                }
            }
            Message::User(user) => {
                let too_small = |block: &ContentBlock| match block {
                    ContentBlock::Image(image) => image.data.len() < self.min_image_bytes,
                    _ => false,
                };
                let needs_copy = user.batch_id.is_some()
                    || user.hidden
                    || user.shell.is_some()
                    || user.content.iter().any(too_small);
                let mergeable = batch.is_some() && batch == *self.last_batch;
                if !needs_copy {
                    out.push(message.clone());
                } else {
                    let content: Vec<ContentBlock> = user
                        .content
                        .iter()
                        .filter(|b| !too_small(b))
                        .cloned()
                        .collect();
                    if content.is_empty() {
                        return;
                    }
                    let last_is_user = matches!(out.last().map(|m| &**m), Some(Message::User(_)));
                    if mergeable && last_is_user {
                        if let Some(Message::User(previous)) = out.last_mut().map(Arc::make_mut) {
                            previous.content.extend(content);
                        }
                    } else {
                        let mut stripped = user.clone();
                        stripped.content = content;
                        stripped.batch_id = None;
                        stripped.hidden = false;
                        stripped.shell = None;
                        out.push(Arc::new(Message::User(stripped)));
                    }
                }
            }
            _ => return,
        }
        *self.last_batch = batch;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{
        AssistantMessage, HostMessage, ImageBlock, ToolCall, ToolResultMessage, UserMessage,
    };
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn user(text: &str, batch: Option<&str>) -> Arc<Message> {
        Arc::new(Message::User(UserMessage {
            batch_id: batch.map(str::to_owned),
            ..UserMessage::text(text)
        }))
    }

    fn assistant_with_call(id: &str, stop: StopReason) -> Arc<Message> {
        Arc::new(Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: json!({}),
            })],
            stop_reason: stop,
            ..AssistantMessage::default()
        }))
    }

    fn result(id: &str) -> Arc<Message> {
        let mut r = ToolResultMessage::error(id.into(), "t", "r");
        r.details = Some(json!({"x": 1}));
        Arc::new(Message::ToolResult(r))
    }

    fn texts(messages: &[Arc<Message>]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match &**m {
                Message::User(u) => {
                    format!(
                        "user:{}",
                        u.content
                            .iter()
                            .filter_map(|b| b.as_text())
                            .collect::<Vec<_>>()
                            .join("+")
                    )
                }
                Message::Assistant(a) => format!("assistant:{}", a.tool_calls().count()),
                Message::ToolResult(r) => {
                    format!("result:{}:{}", r.tool_call_id, r.details.is_some())
                }
                Message::Host(_) => "host".into(),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn applies_every_rule() {
        let history = vec![
            user("a", Some("b1")),
            user("b", Some("b1")),
            Arc::new(Message::Host(HostMessage {
                kind: "k".into(),
                data: json!(null),
                timestamp: 0,
            })),
            assistant_with_call("c1", StopReason::ToolUse),
            result("c1"),
            result("orphan"),
            assistant_with_call("c2", StopReason::Aborted),
            result("c2"),
            user("c", Some("b2")),
            Arc::new(Message::User(UserMessage {
                content: vec![ContentBlock::Image(ImageBlock {
                    data: vec![0; 4],
                    mime_type: "image/png".into(),
                })],
                ..UserMessage::text("")
            })),
        ];
        let projected = project_all(&history, DEFAULT_MIN_IMAGE_BYTES);
        assert_eq!(
            texts(&projected),
            ["user:a+b", "assistant:1", "result:c1:false", "user:c"]
        );
    }

    #[test]
    fn incremental_equals_full_and_reuses_the_prefix() {
        let mut history = vec![
            user("a", None),
            assistant_with_call("c1", StopReason::ToolUse),
        ];
        let mut projector = Projector::new(DEFAULT_MIN_IMAGE_BYTES);
        let first = projector.project(&history, 0);
        history.push(result("c1"));
        history.push(user("x", Some("b")));
        history.push(user("y", Some("b")));
        let second = projector.project(&history, 0);
        assert_eq!(*second, project_all(&history, DEFAULT_MIN_IMAGE_BYTES));
        assert!(Arc::ptr_eq(&first[0], &second[0]));
        // A new epoch rebuilds.
        let replaced = vec![user("z", None)];
        assert_eq!(texts(&projector.project(&replaced, 1)), ["user:z"]);
    }
}
