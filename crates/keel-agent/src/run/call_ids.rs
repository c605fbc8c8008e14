//! Tool-call ids are unique within a turn (DESIGN §13).
//!
//! A response that repeats an id (two calls with one id, or an id an earlier step of the turn
//! already used) would leave history with two results for one id, which providers reject, and
//! front ends keyed by call id would merge the two calls into one. So a call that reuses an id
//! gets a fresh one, `<id>~2` (or the next free number), as its start event streams: the
//! message that is committed, every event about the call and its result all carry the fresh
//! id, and the call is answered with an error instead of running. Renaming at the stream
//! rather than after it means no front end ever sees the duplicate.

use std::collections::{HashMap, HashSet};

use keel_protocol::{AssistantMessage, ContentBlock, StreamEvent, ToolCallId};

use super::Run;

/// The call ids of one response as it streams.
#[derive(Debug, Default)]
pub(super) struct ResponseCallIds {
    /// Ids of this response's calls so far.
    ids: HashSet<ToolCallId>,
    /// Fresh id → the id the model reused.
    renamed: HashMap<ToolCallId, ToolCallId>,
}

impl ResponseCallIds {
    /// `event`, with a fresh call id when it starts a call whose id this turn (`seen`) or
    /// this response already used.
    pub(super) fn admit(&mut self, seen: &HashSet<ToolCallId>, event: StreamEvent) -> StreamEvent {
        let StreamEvent::ToolCallStart { index, id, name } = event else {
            return event;
        };
        let id = if seen.contains(&id) || self.ids.contains(&id) {
            let fresh = fresh_id(&id, |candidate| {
                seen.contains(candidate) || self.ids.contains(candidate)
            });
            self.renamed.insert(fresh.clone(), id);
            fresh
        } else {
            id
        };
        self.ids.insert(id.clone());
        StreamEvent::ToolCallStart { index, id, name }
    }
}

/// `<id>~N` for the smallest N from 2 that `taken` does not hold (it holds finitely many).
pub(crate) fn fresh_id(id: &ToolCallId, taken: impl Fn(&ToolCallId) -> bool) -> ToolCallId {
    let mut n: u64 = 2;
    loop {
        let candidate = ToolCallId::new(format!("{id}~{n}"));
        if !taken(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

impl Run {
    /// Records the calls of a response about to be committed as used in this turn. A call
    /// that reuses an id is marked as a duplicate (it will not run); one that did so without
    /// streaming a start event is given its fresh id here, before anyone sees the message.
    pub(super) fn claim_call_ids(
        &mut self,
        message: &mut AssistantMessage,
        streamed: ResponseCallIds,
    ) {
        let ResponseCallIds { mut renamed, .. } = streamed;
        for block in &mut message.content {
            let ContentBlock::ToolCall(call) = block else {
                continue;
            };
            if self.seen_call_ids.contains(&call.id) {
                let seen = &self.seen_call_ids;
                let fresh = fresh_id(&call.id, |candidate| seen.contains(candidate));
                let original = std::mem::replace(&mut call.id, fresh);
                renamed.insert(call.id.clone(), original);
            }
            self.seen_call_ids.insert(call.id.clone());
            if let Some(original) = renamed.remove(&call.id) {
                self.duplicate_calls.insert(call.id.clone(), original);
            }
        }
    }

    /// The id a call reused, when it is a duplicate that must not run.
    pub(super) fn reused_id(&self, call: &ToolCallId) -> Option<&ToolCallId> {
        self.duplicate_calls.get(call)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn start(index: usize, id: &str) -> StreamEvent {
        StreamEvent::ToolCallStart {
            index,
            id: ToolCallId::new(id),
            name: "bash".into(),
        }
    }

    fn id_of(event: &StreamEvent) -> &str {
        match event {
            StreamEvent::ToolCallStart { id, .. } => id.as_str(),
            other => panic!("not a call start: {other:?}"),
        }
    }

    #[test]
    fn reused_ids_get_the_next_free_suffix() {
        let seen: HashSet<ToolCallId> = ["a", "b~2"].into_iter().map(ToolCallId::new).collect();
        let mut ids = ResponseCallIds::default();
        let events: Vec<StreamEvent> = [(0, "b"), (1, "b"), (2, "a"), (3, "a"), (4, "c")]
            .into_iter()
            .map(|(index, id)| ids.admit(&seen, start(index, id)))
            .collect();
        let got: Vec<&str> = events.iter().map(id_of).collect();
        assert_eq!(got, ["b", "b~3", "a~2", "a~3", "c"]);
        let mut renamed: Vec<(String, String)> = ids
            .renamed
            .iter()
            .map(|(fresh, old)| (fresh.to_string(), old.to_string()))
            .collect();
        renamed.sort();
        assert_eq!(
            renamed,
            [("a~2", "a"), ("a~3", "a"), ("b~3", "b")].map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }
}
