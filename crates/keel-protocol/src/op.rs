//! The conversation contract's operations (DESIGN §5) as typed values, in its four groups:
//! query, lifecycle, ingress and maintenance. Every front end talks to the runtime with
//! these and nothing else.

use serde::{Deserialize, Serialize};

use crate::{
    ImageBlock, InputKind, PermissionAnswer, PermissionMode, SessionId, ThinkingChoice, TurnSource,
};

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
    /// Sessions, newest first; only those of `cwd` when given.
    ListSessions {
        /// Working folder filter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// Most sessions returned.
        limit: usize,
    },
    /// One session's record.
    GetSession {
        /// The session.
        session_id: SessionId,
    },
    /// Canonical history at the head, or at an earlier revision.
    GetMessages {
        /// The session.
        session_id: SessionId,
        /// A committed revision; `None` for the head.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revision: Option<u64>,
    },
    /// The session's committed revisions, oldest first.
    ListRevisions {
        /// The session.
        session_id: SessionId,
    },
    /// The slash commands extensions offer (skills, custom commands, MCP prompts, and
    /// extension commands such as `/mcp`).
    ListCommands,
    /// The tasks a session started, oldest first.
    ListTasks {
        /// The session.
        session_id: SessionId,
    },
    /// A session's transcript for people (Markdown) or tools (JSON), with every secret
    /// masked: what may be written to a file or shared.
    ExportSession {
        /// The session.
        session_id: SessionId,
        /// Markdown or JSON.
        #[serde(default)]
        format: ExportFormat,
    },
    /// What fills the session's context window: its next request measured by part.
    ContextReport {
        /// The session.
        session_id: SessionId,
    },
    /// The session's waiting inputs, in delivery order.
    ListQueue {
        /// The session.
        session_id: SessionId,
    },

    // Lifecycle.
    /// Creates a session, or opens (resumes) a stored one: turns a dead process left
    /// running are closed and its unanswered tool calls answered "interrupted".
    OpenSession {
        /// Which session.
        target: SessionTarget,
    },
    /// Changes a session's title, model or permission mode.
    UpdateSession {
        /// The session.
        session_id: SessionId,
        /// New title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// New model as provider/model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// New permission mode.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<PermissionMode>,
        /// New thinking level (among those the model offers), or `default` for the model's
        /// own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<ThinkingChoice>,
    },
    /// Copies a session's history (up to a revision) into a new session.
    ForkSession {
        /// The session.
        session_id: SessionId,
        /// Revision to fork at; `None` for the head.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revision: Option<u64>,
    },
    /// Moves a session's history back to an earlier revision (a new commit).
    RewindSession {
        /// The session.
        session_id: SessionId,
        /// Revision to return to.
        revision: u64,
    },
    /// Asks the last message the user typed again: history goes back to just before it (a
    /// new commit; the old answer stays in earlier revisions) and a turn starts with it.
    Retry {
        /// The session.
        session_id: SessionId,
    },
    /// Takes back the last message the user typed when nothing answered it (an interrupt
    /// before the first word): history goes back to just before it, and the reply is its
    /// text for the composer. Changes nothing when it was answered.
    TakeBack {
        /// The session.
        session_id: SessionId,
    },
    /// Deletes a session and its history.
    DeleteSession {
        /// The session.
        session_id: SessionId,
    },
    /// Closes a session in this runtime (its running turn is aborted and committed first);
    /// its history stays, and opening it again resumes it.
    CloseSession {
        /// The session.
        session_id: SessionId,
    },

    // Ingress.
    /// Starts a turn with this input; refused while a turn runs (steer or queue instead).
    Submit {
        /// The session.
        session_id: SessionId,
        /// The user's input.
        text: String,
        /// Images sent with it (the model must take images).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageBlock>,
        /// Who sends it.
        #[serde(default)]
        source: TurnSource,
        /// The final answer must be JSON valid against this JSON Schema (its text).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_schema: Option<String>,
        /// The turn has this many milliseconds; the model is told what is left before each
        /// request (the caller enforces the limit itself).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_budget_ms: Option<u64>,
    },
    /// Runs an extension's slash command: a prompt command starts a turn with its
    /// expansion (refused while a turn runs); other commands answer with text.
    RunCommand {
        /// The session.
        session_id: SessionId,
        /// The command's name, without the slash.
        name: String,
        /// What followed the name.
        #[serde(default)]
        arguments: String,
    },
    /// Hands an extension something for one session (`kind` names it: `mcp_servers`, the
    /// MCP servers an editor gives a session, by name, in the shape of `mcp_servers:`).
    Attach {
        /// The session.
        session_id: SessionId,
        /// What is handed over.
        kind: String,
        /// Its value.
        value: serde_json::Value,
    },
    /// Queues input: steering reaches the running turn before its next model request, a
    /// follow-up starts a turn after it. With no turn running, a turn starts now.
    Enqueue {
        /// The session.
        session_id: SessionId,
        /// Steer or follow-up.
        kind: InputKind,
        /// The input.
        text: String,
        /// Who sends it; a turn started from the queue is started by its first input's sender.
        #[serde(default, skip_serializing_if = "TurnSource::is_api")]
        source: TurnSource,
    },
    /// Changes a waiting input's text.
    EditQueued {
        /// The session.
        session_id: SessionId,
        /// The input.
        input_id: String,
        /// The new text.
        text: String,
    },
    /// Withdraws a waiting input.
    CancelQueued {
        /// The session.
        session_id: SessionId,
        /// The input.
        input_id: String,
    },
    /// Puts the waiting inputs in this order (every waiting id exactly once).
    ReorderQueue {
        /// The session.
        session_id: SessionId,
        /// The ids in their new order.
        order: Vec<String>,
    },
    /// Aborts the running turn.
    Abort {
        /// The session.
        session_id: SessionId,
    },
    /// Starts a turn from the waiting inputs (after a restart or an abort left some).
    Dispatch {
        /// The session.
        session_id: SessionId,
        /// Who starts it.
        #[serde(default)]
        source: TurnSource,
    },
    /// Stops a task (its child session's turn is aborted); an ended task stays as it is.
    StopTask {
        /// The task.
        task_id: String,
    },
    /// Answers a pending permission request of the running turn.
    AnswerPermission {
        /// The session.
        session_id: SessionId,
        /// The request.
        request_id: String,
        /// The answer.
        answer: PermissionAnswer,
    },

    // Maintenance.
    /// Compacts the session's history into a checkpoint summary (DESIGN §12).
    Compact {
        /// The session.
        session_id: SessionId,
        /// What the summary should keep or stress (`/compact TEXT`); quoted to the model
        /// as untrusted text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instructions: Option<String>,
    },
}

impl Op {
    /// Which of the contract's four groups the operation belongs to.
    pub fn group(&self) -> OpGroup {
        match self {
            Self::ListSessions { .. }
            | Self::GetSession { .. }
            | Self::GetMessages { .. }
            | Self::ListRevisions { .. }
            | Self::ListCommands
            | Self::ListQueue { .. }
            | Self::ExportSession { .. }
            | Self::ContextReport { .. }
            | Self::ListTasks { .. } => OpGroup::Query,
            Self::OpenSession { .. }
            | Self::UpdateSession { .. }
            | Self::ForkSession { .. }
            | Self::RewindSession { .. }
            | Self::DeleteSession { .. }
            | Self::TakeBack { .. }
            | Self::CloseSession { .. }
            | Self::Attach { .. } => OpGroup::Lifecycle,
            Self::Submit { .. }
            | Self::Retry { .. }
            | Self::RunCommand { .. }
            | Self::Enqueue { .. }
            | Self::EditQueued { .. }
            | Self::CancelQueued { .. }
            | Self::ReorderQueue { .. }
            | Self::Abort { .. }
            | Self::Dispatch { .. }
            | Self::StopTask { .. }
            | Self::AnswerPermission { .. } => OpGroup::Ingress,
            Self::Compact { .. } => OpGroup::Maintenance,
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
    /// What the next request would carry, part by part (system prompt, tools, your messages,
    /// answers, reasoning, tool calls, tool results), in tokens.
    pub parts: Vec<ContextPart>,
    /// Whether the counts come from keel's calibrated measurer (`false`: a rough estimate).
    pub measured: bool,
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
    use serde_json::json;

    #[test]
    fn operations_are_tagged_json() {
        let op = Op::Enqueue {
            session_id: "s-1".into(),
            kind: InputKind::FollowUp,
            text: "then this".into(),
            source: TurnSource::Api,
        };
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
        assert!(
            matches!(submit, Op::Submit { source: TurnSource::Channel(name), .. } if name == "ci")
        );
    }
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
