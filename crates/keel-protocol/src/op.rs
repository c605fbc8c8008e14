//! The conversation contract's operations (DESIGN §5) as typed values, in its four groups:
//! query, lifecycle, ingress and maintenance. Every front end talks to the runtime with
//! these and nothing else.

use serde::{Deserialize, Serialize};

use crate::ops;

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "target", rename_all = "snake_case")]
pub enum SessionTarget {
    /// A new session.
    New {
        /// Its title (default: the first prompt's first line).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// The session with this id or a unique prefix of it.
    Id {
        /// Id or prefix.
        id: String,
    },
    /// The session with exactly this id (no prefix), stored under the runtime's working
    /// folder: what an editor names, which must not reach another project's session.
    Exact {
        /// The whole id.
        id: String,
    },
    /// The newest session of the runtime's working folder.
    Latest,
}

/// One operation of the conversation contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Op {
    // Query.
    /// See [`ops::ListSessions`].
    ListSessions(ops::ListSessions),
    /// See [`ops::GetSession`].
    GetSession(ops::GetSession),
    /// See [`ops::GetMessages`].
    GetMessages(ops::GetMessages),
    /// See [`ops::ListRevisions`].
    ListRevisions(ops::ListRevisions),
    /// See [`ops::ListMentions`].
    ListMentions(ops::ListMentions),
    /// See [`ops::ListCommands`].
    ListCommands(ops::ListCommands),
    /// See [`ops::ListTasks`].
    ListTasks(ops::ListTasks),
    /// See [`ops::ExportSession`].
    ExportSession(ops::ExportSession),
    /// See [`ops::ContextReport`].
    ContextReport(ops::ContextReport),
    /// See [`ops::ListQueue`].
    ListQueue(ops::ListQueue),

    // Lifecycle.
    /// See [`ops::OpenSession`].
    OpenSession(ops::OpenSession),
    /// See [`ops::UpdateSession`].
    UpdateSession(ops::UpdateSession),
    /// See [`ops::ForkSession`].
    ForkSession(ops::ForkSession),
    /// See [`ops::RewindSession`].
    RewindSession(ops::RewindSession),
    /// See [`ops::Retry`].
    Retry(ops::Retry),
    /// See [`ops::TakeBack`].
    TakeBack(ops::TakeBack),
    /// See [`ops::TitleSession`].
    TitleSession(ops::TitleSession),
    /// See [`ops::DeleteSession`].
    DeleteSession(ops::DeleteSession),
    /// See [`ops::CloseSession`].
    CloseSession(ops::CloseSession),

    // Ingress.
    /// See [`ops::Submit`].
    Submit(ops::Submit),
    /// See [`ops::RunShell`].
    RunShell(ops::RunShell),
    /// See [`ops::RunCommand`].
    RunCommand(ops::RunCommand),
    /// See [`ops::Attach`].
    Attach(ops::Attach),
    /// See [`ops::Enqueue`].
    Enqueue(ops::Enqueue),
    /// See [`ops::EditQueued`].
    EditQueued(ops::EditQueued),
    /// See [`ops::CancelQueued`].
    CancelQueued(ops::CancelQueued),
    /// See [`ops::ReorderQueue`].
    ReorderQueue(ops::ReorderQueue),
    /// See [`ops::Abort`].
    Abort(ops::Abort),
    /// See [`ops::Dispatch`].
    Dispatch(ops::Dispatch),
    /// See [`ops::StopTask`].
    StopTask(ops::StopTask),
    /// See [`ops::AnswerPermission`].
    AnswerPermission(ops::AnswerPermission),
    /// See [`ops::AnswerQuestion`].
    AnswerQuestion(ops::AnswerQuestion),

    // Maintenance.
    /// See [`ops::Compact`].
    Compact(ops::Compact),
}

impl Op {
    /// Which of the contract's four groups the operation belongs to.
    pub fn group(&self) -> OpGroup {
        match self {
            Self::ListSessions(_)
            | Self::GetSession(_)
            | Self::GetMessages(_)
            | Self::ListRevisions(_)
            | Self::ListCommands(_)
            | Self::ListMentions(_)
            | Self::ListQueue(_)
            | Self::ExportSession(_)
            | Self::ContextReport(_)
            | Self::ListTasks(_) => OpGroup::Query,
            Self::OpenSession(_)
            | Self::UpdateSession(_)
            | Self::ForkSession(_)
            | Self::RewindSession(_)
            | Self::DeleteSession(_)
            | Self::TakeBack(_)
            | Self::TitleSession(_)
            | Self::CloseSession(_)
            | Self::Attach(_) => OpGroup::Lifecycle,
            Self::Submit(_)
            | Self::Retry(_)
            | Self::RunShell(_)
            | Self::RunCommand(_)
            | Self::Enqueue(_)
            | Self::EditQueued(_)
            | Self::CancelQueued(_)
            | Self::ReorderQueue(_)
            | Self::Abort(_)
            | Self::Dispatch(_)
            | Self::StopTask(_)
            | Self::AnswerPermission(_)
            | Self::AnswerQuestion(_) => OpGroup::Ingress,
            Self::Compact(_) => OpGroup::Maintenance,
        }
    }
}

/// How a session is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// For people.
    #[default]
    Markdown,
    /// The record and every message, for tools.
    Json,
}

/// A session's export with what was masked in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionExport {
    /// The transcript (JSON exports carry a `redactions` field too).
    pub text: String,
    /// How many secrets were masked.
    pub masked: usize,
    /// How many of each kind.
    pub kinds: std::collections::BTreeMap<String, usize>,
}

/// What fills a session's context window, measured once for every front end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextReport {
    /// The model's context window, in tokens.
    pub window: u32,
    /// The input limit compaction keeps requests under, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Where compaction starts (T), in tokens, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_at: Option<u64>,
    /// Compactions the session's history went through.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compactions: u64,
    /// Their summaries' estimated tokens in all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub summary_tokens: u64,
    /// What the next request would carry, part by part (system prompt, tools, your messages,
    /// answers, reasoning, tool calls, tool results), in tokens.
    pub parts: Vec<ContextPart>,
    /// Whether the counts come from keel's calibrated measurer (`false`: a rough estimate).
    pub measured: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ContextReport {
    /// The next request's tokens in all.
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|p| p.tokens).sum()
    }
}

/// One part of a context report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextPart {
    /// What it is, for people.
    pub label: String,
    /// Its tokens.
    pub tokens: u64,
}

/// The contract's four groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpGroup {
    /// Reads.
    Query,
    /// Create, update, delete.
    Lifecycle,
    /// Input and control of turns.
    Ingress,
    /// Compaction.
    Maintenance,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{InputKind, TurnSource};
    use serde_json::json;

    #[test]
    fn operations_are_tagged_json() {
        let op = Op::from(ops::Enqueue {
            session_id: "s-1".into(),
            kind: InputKind::FollowUp,
            text: "then this".into(),
            source: TurnSource::Api,
        });
        let value = serde_json::to_value(&op).unwrap();
        assert_eq!(
            value,
            json!({"op": "enqueue", "session_id": "s-1", "kind": "follow_up", "text": "then this"})
        );
        assert_eq!(serde_json::from_value::<Op>(value).unwrap(), op);
        let submit: Op = serde_json::from_value(
            json!({"op": "submit", "session_id": "s-1", "text": "hi", "source": "channel:ci"}),
        )
        .unwrap();
        assert_eq!(submit.group(), OpGroup::Ingress);
        let list: Op = serde_json::from_value(json!({"op": "list_commands"})).unwrap();
        assert_eq!(list, Op::from(ops::ListCommands {}));
        assert_eq!(
            serde_json::to_value(&list).unwrap(),
            json!({"op": "list_commands"})
        );
        assert!(
            matches!(submit, Op::Submit(ops::Submit { source: TurnSource::Channel(name), .. }) if name == "ci")
        );
    }
}

/// Something besides files a prompt can name with `@` (an MCP server's resource), for
/// completion: typed as `@` and its text, it goes with the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MentionInfo {
    /// What follows the `@` (`docs:file:///guide.md`).
    pub text: String,
    /// One line for people (its name, type, description).
    pub detail: String,
}

/// A slash command an extension offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandInfo {
    /// The name, without the slash (`review`, `frontend:build`, `server:prompt`).
    pub name: String,
    /// One line for people.
    pub description: String,
    /// What arguments it takes, for people (`<file> [focus]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// Where it comes from: `skill`, `command`, `mcp`, or an extension's id.
    pub source: String,
}
