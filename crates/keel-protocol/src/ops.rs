//! One type per operation of the conversation contract, each what its `Op` variant carries:
//! front ends build these, and the runtime gives each its own reply type.

use serde::{Deserialize, Serialize};

use crate::{
    ExportFormat, ImageBlock, InputKind, PermissionAnswer, PermissionMode, SessionId,
    SessionTarget, ThinkingChoice, TurnSource,
};

/// Sessions that have a conversation, newest first; only those of `cwd` when given. A
/// session nobody wrote in yet is not listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListSessions {
    /// Working folder filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Most sessions returned.
    pub limit: usize,
}

/// One session's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetSession {
    /// The session.
    pub session_id: SessionId,
}

/// Canonical history at the head, or at an earlier revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetMessages {
    /// The session.
    pub session_id: SessionId,
    /// A committed revision; `None` for the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
}

/// The session's committed revisions, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListRevisions {
    /// The session.
    pub session_id: SessionId,
}

/// The slash commands extensions offer (skills, custom commands, MCP prompts, and
/// extension commands such as `/mcp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListCommands {}

/// What besides files a session's prompt can name with `@` (the resources of the MCP
/// servers it may use).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListMentions {
    /// The session.
    pub session_id: SessionId,
}

/// The tasks a session started, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListTasks {
    /// The session.
    pub session_id: SessionId,
}

/// A session's transcript for people (Markdown) or tools (JSON), with every secret
/// masked: what may be written to a file or shared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportSession {
    /// The session.
    pub session_id: SessionId,
    /// Markdown or JSON.
    #[serde(default)]
    pub format: ExportFormat,
}

/// What fills the session's context window: its next request measured by part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextReport {
    /// The session.
    pub session_id: SessionId,
}

/// The session's waiting inputs, in delivery order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListQueue {
    /// The session.
    pub session_id: SessionId,
}

/// Creates a session, or opens (resumes) a stored one: turns a dead process left
/// running are closed and its unanswered tool calls answered "interrupted".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenSession {
    /// Which session.
    pub target: SessionTarget,
}

/// Changes a session's title, model or permission mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpdateSession {
    /// The session.
    pub session_id: SessionId,
    /// New title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// New model as provider/model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// New permission mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// New thinking level (among those the model offers), or `default` for the model's
    /// own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingChoice>,
}

/// Copies a session's history (up to a revision) into a new session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForkSession {
    /// The session.
    pub session_id: SessionId,
    /// Revision to fork at; `None` for the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
}

/// Moves a session's history back to an earlier revision (a new commit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewindSession {
    /// The session.
    pub session_id: SessionId,
    /// Revision to return to.
    pub revision: u64,
}

/// Asks the last message the user typed again: history goes back to just before it (a
/// new commit; the old answer stays in earlier revisions) and a turn starts with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retry {
    /// The session.
    pub session_id: SessionId,
}

/// Takes back the last message the user typed when nothing answered it (an interrupt
/// before the first word): history goes back to just before it, and the reply is its
/// text for the composer. Changes nothing when it was answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TakeBack {
    /// The session.
    pub session_id: SessionId,
}

/// Asks the session's model, once and off any turn's path, for a short title of the
/// conversation so far; the title changes (`session_updated`) when the answer comes. A
/// title the user chose, a failed call or no conversation leave the title as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TitleSession {
    /// The session.
    pub session_id: SessionId,
}

/// Deletes a session and its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeleteSession {
    /// The session.
    pub session_id: SessionId,
}

/// Closes a session in this runtime (its running turn is aborted and committed first);
/// its history stays, and opening it again resumes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloseSession {
    /// The session.
    pub session_id: SessionId,
}

/// Starts a turn with this input; refused while a turn runs (steer or queue instead).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submit {
    /// The session.
    pub session_id: SessionId,
    /// The user's input.
    pub text: String,
    /// Images sent with it (the model must take images).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageBlock>,
    /// Who sends it.
    #[serde(default)]
    pub source: TurnSource,
    /// The final answer must be JSON valid against this JSON Schema (its text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<String>,
    /// The turn has this many milliseconds; the model is told what is left before each
    /// request (the caller enforces the limit itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_budget_ms: Option<u64>,
}

/// Runs a command the user typed (`!command`) in the session's shell, under its sandbox and
/// the gate's denials (typing it is the approval: nothing is asked), as a turn of one call
/// and no model request. With `remember`, the command and its output join history as
/// context for the next prompt. Refused while a turn runs. Only text a person typed may
/// become this operation: never a command's, a skill's or an MCP prompt's expansion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunShell {
    /// The session.
    pub session_id: SessionId,
    /// The command, without the `!`.
    pub command: String,
    /// Whether the command and its output join the conversation (`!`) or not (`!!`).
    pub remember: bool,
}

impl RunShell {
    /// Text a person typed as a `!` command: the command (trimmed; maybe empty) and whether it
    /// is kept (`!`) or not (`!!`). A Markdown image (`![…]`) and a row of `!!!` are not
    /// commands. The one rule every front end applies.
    pub fn typed(text: &str) -> Option<(String, bool)> {
        let rest = text.strip_prefix('!')?;
        let (command, remember) = match rest.strip_prefix('!') {
            Some(rest) => (rest, false),
            None => (rest, true),
        };
        (!command.starts_with(['!', '['])).then(|| (command.trim().to_owned(), remember))
    }
}

/// Runs an extension's slash command: a prompt command starts a turn with its
/// expansion (refused while a turn runs); other commands answer with text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCommand {
    /// The session.
    pub session_id: SessionId,
    /// The command's name, without the slash.
    pub name: String,
    /// What followed the name.
    #[serde(default)]
    pub arguments: String,
}

/// Hands an extension something for one session (`kind` names it: `mcp_servers`, the
/// MCP servers an editor gives a session, by name, in the shape of `mcp_servers:`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attach {
    /// The session.
    pub session_id: SessionId,
    /// What is handed over.
    pub kind: String,
    /// Its value.
    pub value: serde_json::Value,
}

/// Queues input: steering reaches the running turn before its next model request, a
/// follow-up starts a turn after it. With no turn running, a turn starts now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enqueue {
    /// The session.
    pub session_id: SessionId,
    /// Steer or follow-up.
    pub kind: InputKind,
    /// The input.
    pub text: String,
    /// Who sends it; a turn started from the queue is started by its first input's sender.
    #[serde(default, skip_serializing_if = "TurnSource::is_api")]
    pub source: TurnSource,
}

/// Changes a waiting input's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditQueued {
    /// The session.
    pub session_id: SessionId,
    /// The input.
    pub input_id: String,
    /// The new text.
    pub text: String,
}

/// Withdraws a waiting input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelQueued {
    /// The session.
    pub session_id: SessionId,
    /// The input.
    pub input_id: String,
}

/// Puts the waiting inputs in this order (every waiting id exactly once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReorderQueue {
    /// The session.
    pub session_id: SessionId,
    /// The ids in their new order.
    pub order: Vec<String>,
}

/// Aborts the running turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Abort {
    /// The session.
    pub session_id: SessionId,
}

/// Starts a turn from the waiting inputs (after a restart or an abort left some).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispatch {
    /// The session.
    pub session_id: SessionId,
    /// Who starts it.
    #[serde(default)]
    pub source: TurnSource,
}

/// Stops a task (its child session's turn is aborted); an ended task stays as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopTask {
    /// The task.
    pub task_id: String,
}

/// Answers a pending permission request of the running turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerPermission {
    /// The session.
    pub session_id: SessionId,
    /// The request.
    pub request_id: String,
    /// The answer.
    pub answer: PermissionAnswer,
}

/// Answers a question asked of the user during the session's running turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerQuestion {
    /// The session.
    pub session_id: SessionId,
    /// The question.
    pub question_id: String,
    /// The answer.
    pub answer: crate::QuestionAnswer,
}

/// Compacts the session's history into a checkpoint summary (DESIGN §12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compact {
    /// The session.
    pub session_id: SessionId,
    /// What the summary should keep or stress (`/compact TEXT`); quoted to the model
    /// as untrusted text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// Each operation type becomes the `Op` variant of its name.
macro_rules! into_op {
    ($($name:ident),* $(,)?) => {
        $(impl From<$name> for crate::Op {
            fn from(op: $name) -> Self {
                Self::$name(op)
            }
        })*
    };
}

into_op!(
    ListSessions,
    GetSession,
    GetMessages,
    ListRevisions,
    ListCommands,
    ListMentions,
    ListTasks,
    ExportSession,
    ContextReport,
    ListQueue,
    OpenSession,
    UpdateSession,
    ForkSession,
    RewindSession,
    Retry,
    TakeBack,
    TitleSession,
    DeleteSession,
    CloseSession,
    Submit,
    RunShell,
    RunCommand,
    Attach,
    Enqueue,
    EditQueued,
    CancelQueued,
    ReorderQueue,
    Abort,
    Dispatch,
    StopTask,
    AnswerPermission,
    AnswerQuestion,
    Compact,
);
