//! Durable sessions for `keel exec`: opening or resuming a session, committing each new history
//! message as the runner hands it over, and recording how the turn ended.
//!
//! Every message is committed through the store's history writer from the runner's
//! `on_history_changed` hook, before the runner moves on, so a crash or `kill -9` loses nothing
//! the run had acknowledged. The cost is one small SQLite transaction per message, which is
//! noise next to a model call.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::runner::HistoryChangedHook;
use keel_agent::{HookError, TurnContext};
use keel_protocol::{Message, SessionId, ToolResultMessage, TurnId, TurnOutcome};
use keel_store::{
    CommitRequest, Entry, HistoryOp, NewSession, SessionRecord, Store, StoredEntry, TurnSource,
    new_id,
};

/// Longest session title taken from the prompt's first line, in characters.
pub const TITLE_MAX_CHARS: usize = 80;

/// What a tool call left without a result says once a resumed session closes it.
pub const INTERRUPTED_RESULT: &str =
    "interrupted: keel stopped before this tool call finished; it may or may not have run";

/// Error code recorded on turns a crashed process left running.
pub const INTERRUPTED_CODE: &str = "interrupted";

/// Which session a run works in.
#[derive(Debug, Clone)]
pub enum Target {
    /// A new session (the default).
    New,
    /// The session with this id or unique id prefix (`--session`).
    Id(String),
    /// The newest session in the working folder (`--continue`).
    LatestIn(String),
}

/// Whether the run started a session or picked one up; stream-json reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStart {
    /// A session made for this run: `session.started`.
    New,
    /// An earlier session continued: `session.resumed`.
    Resumed,
}

/// The session a run works in, with its history ready for the next request.
pub struct Opened {
    /// The session.
    pub record: SessionRecord,
    /// New or resumed.
    pub start: SessionStart,
    /// Canonical history, every tool call answered.
    pub history: Vec<Arc<Message>>,
    /// The run's turn, started and owned by this process.
    pub turn: TurnId,
}

/// The session's title: the prompt's first non-empty line, shortened.
pub fn title_of(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let mut title: String = line.chars().take(TITLE_MAX_CHARS).collect();
    if line.chars().count() > TITLE_MAX_CHARS {
        title.push('…');
    }
    title
}

/// Opens the session the run targets. A resumed session's turns left running by a dead process
/// are closed as failed (their unacknowledged inputs re-queued), and its unanswered tool calls
/// are answered with an "interrupted" error (committed, so history stays valid for every later
/// reader). A session another live keel process is running a turn of is refused before its
/// history is touched. The run's turn is started here, in the same transaction as that check.
pub async fn open_session(
    store: &Store,
    target: Target,
    new: NewSession,
) -> anyhow::Result<Opened> {
    // Turns a dead process left running are closed; one a live process still runs makes
    // the session busy, and nothing is touched.
    let abandoned = TurnOutcome::Failed {
        code: INTERRUPTED_CODE.into(),
        message: "the process running this turn stopped before it ended".into(),
    };
    let id = match target {
        Target::New => {
            let record = store.create_session(new).await?;
            let (_, turn) = store
                .begin_turn(&record.id, TurnSource::Api, abandoned)
                .await?;
            return Ok(Opened {
                record,
                start: SessionStart::New,
                history: Vec::new(),
                turn: turn.id,
            });
        }
        Target::Id(typed) => store.resolve_session(&typed).await?,
        Target::LatestIn(cwd) => match store.list_sessions(Some(cwd.clone()), 1).await?.first() {
            Some(record) => record.id.clone(),
            None => anyhow::bail!(
                "no session to continue in {cwd}: run `keel exec` without --continue first"
            ),
        },
    };
    // From here on this process owns the session's running turn, so another resuming
    // process stops at the check above instead of answering this run's calls.
    let (_, turn) = store.begin_turn(&id, TurnSource::Api, abandoned).await?;
    match resume_history(store, &id).await {
        Ok((record, history)) => Ok(Opened {
            record,
            start: SessionStart::Resumed,
            history,
            turn: turn.id,
        }),
        Err(error) => {
            // The turn must not stay running: record why it ended before it began.
            let failed = TurnOutcome::Failed {
                code: "resume_failed".into(),
                message: format!("{error:#}"),
            };
            if let Err(finish) = store.finish_turn(&turn.id, failed, None).await {
                eprintln!("keel: cannot record the failed resume on its turn: {finish}");
            }
            Err(error)
        }
    }
}

/// The resumed session's record and history, every tool call answered (a call left without a
/// result is answered "interrupted", committed right after its batch).
async fn resume_history(
    store: &Store,
    id: &SessionId,
) -> anyhow::Result<(SessionRecord, Vec<Arc<Message>>)> {
    let stored = store.history(id).await?;
    let history = match close_interrupted(&stored) {
        Some(entries) => {
            let request = CommitRequest {
                session_id: id.clone(),
                turn_id: None,
                operation_id: new_id("op-"),
                expected_revision: None,
                op: HistoryOp::Reconcile {
                    entries: entries.clone(),
                },
            };
            store.commit(request).await?;
            entries.into_iter().map(|e| Arc::new(e.message)).collect()
        }
        None => stored.into_iter().map(|e| Arc::new(e.message)).collect(),
    };
    Ok((store.session(id).await?, history))
}

/// History with an "interrupted" error result after every tool call that has none, placed
/// right after the results of its own batch; `None` when every call has its result.
pub fn close_interrupted(stored: &[StoredEntry]) -> Option<Vec<Entry>> {
    let mut out = Vec::with_capacity(stored.len());
    let mut changed = false;
    let mut at = 0;
    while let Some(entry) = stored.get(at) {
        out.push(Entry {
            id: entry.id.clone(),
            message: entry.message.clone(),
        });
        at += 1;
        let Some(assistant) = entry.message.as_assistant() else {
            continue;
        };
        // A call is answered only by a result in its own batch (the results right after
        // it): providers reuse ids such as `call_0` from turn to turn.
        let mut answered: HashSet<&str> = HashSet::new();
        while let Some(result) = stored.get(at).and_then(|e| e.message.as_tool_result()) {
            answered.insert(result.tool_call_id.as_str());
            out.push(Entry {
                id: stored[at].id.clone(),
                message: stored[at].message.clone(),
            });
            at += 1;
        }
        for call in assistant.tool_calls() {
            if !answered.contains(call.id.as_str()) {
                changed = true;
                out.push(Entry::new(Message::ToolResult(ToolResultMessage::error(
                    call.id.clone(),
                    call.name.clone(),
                    INTERRUPTED_RESULT,
                ))));
            }
        }
    }
    changed.then_some(out)
}

/// Commits every message the runner hands over, in the running turn.
pub struct CommitHistory {
    /// The store.
    pub store: Store,
    /// The session.
    pub session: SessionId,
    /// The running turn.
    pub turn: TurnId,
    /// The first commit failure, if any: the run cannot report success when history it
    /// acknowledged to the model was not stored.
    pub failure: Arc<std::sync::Mutex<Option<String>>>,
}

#[async_trait]
impl HistoryChangedHook for CommitHistory {
    async fn on_history_changed(
        &self,
        _turn: &TurnContext,
        messages: &[Arc<Message>],
    ) -> Result<(), HookError> {
        let entries = messages
            .iter()
            .map(|m| Entry::new(Message::clone(m)))
            .collect();
        let request = CommitRequest {
            session_id: self.session.clone(),
            turn_id: Some(self.turn.clone()),
            operation_id: new_id("op-"),
            expected_revision: None,
            op: HistoryOp::Append { entries },
        };
        // Marked before the await: if the runner's hook timeout drops this future, the
        // run must not report success for a message that may not be stored.
        const UNFINISHED: &str = "a history commit did not finish (it timed out or was dropped)";
        let marked = {
            let mut failure = self
                .failure
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            failure
                .is_none()
                .then(|| *failure = Some(UNFINISHED.to_owned()))
                .is_some()
        };
        let result = self.store.commit(request).await;
        let mut failure = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match result {
            Ok(_) => {
                if marked {
                    *failure = None;
                }
                Ok(())
            }
            Err(error) => {
                let message = format!("cannot store history: {error}");
                if marked || failure.is_none() {
                    *failure = Some(message.clone());
                }
                Err(HookError::new(message))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use keel_protocol::{AssistantMessage, ContentBlock, MessageId, ToolCall};

    use super::*;

    fn stored(message: Message) -> StoredEntry {
        StoredEntry {
            id: MessageId::generate(),
            message,
            revision: 1,
            created_ms: 0,
        }
    }

    fn calls(ids: &[&str]) -> Message {
        let mut assistant = AssistantMessage::from_text("");
        assistant.content = ids
            .iter()
            .map(|id| {
                ContentBlock::ToolCall(ToolCall {
                    id: (*id).into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({}),
                })
            })
            .collect();
        Message::Assistant(assistant)
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage::error(id.into(), "bash", "done"))
    }

    /// `(role, tool call id or text)` of each entry.
    fn shape(entries: &[Entry]) -> Vec<(String, String)> {
        entries
            .iter()
            .map(|e| {
                let what = match &e.message {
                    Message::ToolResult(r) => format!("{} {}", r.tool_call_id, r.text()),
                    Message::Assistant(a) => a
                        .tool_calls()
                        .map(|c| c.id.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => String::new(),
                };
                (e.message.role().to_owned(), what)
            })
            .collect()
    }

    #[test]
    fn answered_history_is_left_alone() {
        let history = [
            stored(Message::user_text("go")),
            stored(calls(&["a"])),
            stored(result("a")),
        ];
        assert!(close_interrupted(&history).is_none());
    }

    #[test]
    fn missing_results_follow_their_own_batch() {
        let history = [
            stored(Message::user_text("go")),
            stored(calls(&["a", "b"])),
            stored(result("a")),
            stored(Message::user_text("more")),
            stored(calls(&["c"])),
        ];
        let fixed = close_interrupted(&history).unwrap();
        let interrupted = INTERRUPTED_RESULT;
        pretty_assertions::assert_eq!(
            shape(&fixed),
            vec![
                ("user".to_owned(), String::new()),
                ("assistant".to_owned(), "a,b".to_owned()),
                ("tool_result".to_owned(), "a done".to_owned()),
                ("tool_result".to_owned(), format!("b {interrupted}")),
                ("user".to_owned(), String::new()),
                ("assistant".to_owned(), "c".to_owned()),
                ("tool_result".to_owned(), format!("c {interrupted}")),
            ]
        );
        // Existing messages keep their ids, so the commit keeps the common prefix.
        assert_eq!(fixed[2].id, history[2].id);
    }

    #[test]
    fn a_reused_call_id_does_not_hide_a_missing_result() {
        let history = [
            stored(calls(&["call_0"])),
            stored(result("call_0")),
            stored(Message::user_text("again")),
            stored(calls(&["call_0"])),
        ];
        let fixed = close_interrupted(&history).unwrap();
        let last = fixed.last().unwrap().message.as_tool_result().unwrap();
        assert_eq!(
            (last.tool_call_id.as_str(), last.text().as_str()),
            ("call_0", INTERRUPTED_RESULT)
        );
        assert_eq!(fixed.len(), 5);
    }

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_of("\n  Fix it  \nmore"), "Fix it");
        let long = "x".repeat(TITLE_MAX_CHARS + 5);
        assert_eq!(title_of(&long).chars().count(), TITLE_MAX_CHARS + 1);
    }
}
