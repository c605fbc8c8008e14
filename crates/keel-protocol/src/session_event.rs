//! The typed event stream a front end subscribes to, one per session: turn status, items,
//! retry notices, permission requests, queue changes and failures.

use serde::{Deserialize, Serialize};

use crate::{
    Failure, ItemEvent, SessionId, SessionStatus, ToolCallId, TurnId, TurnOutcome, TurnSource,
    Usage,
};

/// One event of a session's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// The session.
    pub session_id: SessionId,
    /// Position in this runtime's stream of the session, from 0, without gaps.
    pub seq: u64,
    /// What happened.
    #[serde(flatten)]
    pub body: SessionEventBody,
}

/// What a session event says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionEventBody {
    /// A turn was admitted and is about to run.
    TurnStarted {
        /// The turn.
        turn_id: TurnId,
        /// Who started it.
        source: TurnSource,
    },
    /// A turn's status changed: `running` first, one terminal status last.
    TurnStatus {
        /// The turn.
        turn_id: TurnId,
        /// The status.
        status: SessionStatus,
    },
    /// A turn's items changed.
    Item {
        /// The turn.
        turn_id: TurnId,
        /// The change.
        event: ItemEvent,
    },
    /// A failed model request will be tried again.
    Retry {
        /// The turn.
        turn_id: TurnId,
        /// Retry number, from 1.
        attempt: u32,
        /// Retries allowed in all.
        max_retries: u32,
        /// Wait before the retry.
        delay_ms: u64,
        /// Why the attempt failed.
        failure: Failure,
    },
    /// A tool call waits for the user's permission.
    PermissionRequested {
        /// The turn.
        turn_id: TurnId,
        /// The question.
        request: PermissionRequest,
    },
    /// A permission request was answered (by the user, a timeout or a cancellation).
    PermissionResolved {
        /// The turn.
        turn_id: TurnId,
        /// The request.
        request_id: String,
        /// Whether the call may run.
        allowed: bool,
    },
    /// Someone other than the model asks the user something (an MCP server's form or page)
    /// while a tool call runs; answered with `answer_question`.
    QuestionAsked {
        /// The turn.
        turn_id: TurnId,
        /// The question.
        question: crate::Question,
    },
    /// A question was answered (by the user, or ended by a cancellation or the call
    /// finishing).
    QuestionResolved {
        /// The turn.
        turn_id: TurnId,
        /// The question.
        question_id: String,
        /// `accepted`, `declined` or `cancelled`.
        outcome: String,
    },
    /// The session's input queue changed; the queue as it is now.
    QueueChanged {
        /// Waiting inputs, in the order they will be delivered.
        queue: Vec<QueueEntry>,
    },
    /// A turn ended.
    TurnEnded {
        /// The turn.
        turn_id: TurnId,
        /// How it ended.
        outcome: TurnOutcome,
        /// Tokens over its model calls.
        usage: Usage,
        /// Why it failed, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<Failure>,
    },
    /// Something failed outside a turn's outcome (a lost history commit, a queue write).
    Failure {
        /// The turn, when the failure belongs to one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<TurnId>,
        /// The failure.
        failure: Failure,
    },
    /// An extension did something that changes what the model sees or what happens (a
    /// guard observation or reminder, a recovery retry, an archived output, a dropped
    /// reminder): typed data every front end can show.
    Extension {
        /// The turn, when the action belongs to one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<TurnId>,
        /// The extension's id.
        extension: String,
        /// What it did, a stable snake_case word the extension documents.
        kind: String,
        /// Details of the action (an object; empty when there are none).
        #[serde(default)]
        details: serde_json::Value,
        /// What to tell people, worded by the runtime; `None` when it is not worth a line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notice: Option<ExtensionNotice>,
    },
    /// The session's goal changed (set, charged a turn, settled, paused, cleared), inside a
    /// turn or outside one (`/goal pause`).
    Goal {
        /// The turn, when the change belongs to one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<TurnId>,
        /// The goal as it is now.
        goal: crate::GoalInfo,
    },
    /// A plan was submitted for review (plan mode): the user approves it (`/approve-plan`)
    /// or answers with feedback once its turn has ended.
    PlanReady {
        /// The turn that submitted it.
        turn_id: TurnId,
        /// The plan.
        plan: crate::PlanInfo,
    },
    /// A model response ended: its tokens and the window they count against, so front
    /// ends can show how full the context is.
    Usage {
        /// The turn.
        turn_id: TurnId,
        /// The response's tokens (its input is the whole request).
        usage: Usage,
        /// The model's context window, in tokens.
        context_window: u32,
        /// The input limit L requests are kept under (0 when unknown).
        #[serde(default)]
        input_limit: u64,
        /// Where compaction starts, T (0 when unknown).
        #[serde(default)]
        compact_at: u64,
    },
    /// A task this session started changed (made, started, ended, stopped, consumed).
    Task {
        /// The task as it is now.
        task: crate::TaskInfo,
    },
    /// The session came to rest: no turn runs or is about to start, no task of it runs, and
    /// nothing it is owed (a task's notice, a goal's next turn) is still on its way. Nothing
    /// happens in it until someone sends input. Background shell commands do not count.
    Quiescent {
        /// Inputs left waiting that no turn will take on its own (after a turn that did not
        /// complete); `Dispatch` starts one.
        queued: usize,
        /// Background shell commands of the session still running: they do not keep it
        /// busy, and end when keel does.
        #[serde(default)]
        background_commands: usize,
    },
    /// The session's title, model or permission mode changed.
    SessionUpdated {
        /// The title.
        title: String,
        /// The model as provider/model.
        model: String,
        /// The permission mode, when the runtime has one for the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<crate::PermissionMode>,
        /// The thinking level chosen for the session (`None`: the model's default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<crate::ThinkingLevel>,
    },
}

/// How much a notice matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeLevel {
    /// Neutral information.
    Info,
    /// Something the user should notice (a guard observation, a dropped reminder).
    Warn,
    /// A failure.
    Error,
}

/// What an extension says to people, one line, ready to show in any front end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionNotice {
    /// The extension's id.
    pub source: String,
    /// How much it matters.
    pub level: NoticeLevel,
    /// The line.
    pub text: String,
}

/// A question for the user about one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// Answer with this id.
    pub id: String,
    /// The call.
    pub tool_call_id: ToolCallId,
    /// The tool.
    pub tool: String,
    /// What the call does, in one line.
    pub summary: String,
    /// Why it needs approval.
    pub reasons: Vec<String>,
    /// Flagged as dangerous: "always" is not offered.
    pub safety: bool,
    /// "Always allow" choices, narrowest first; answer with the index.
    pub scopes: Vec<String>,
    /// For each scope, the exact rules "always" saves (one rule-file entry per line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// The call's arguments, whole (the summary is cut to a line), so a front end can show
    /// all of what it would run.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub arguments: serde_json::Value,
    /// What the call would change, computed by its tool without changing anything; the
    /// approval holds only while that stays true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<ToolPreview>,
}

/// What a call would change, shown before it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolPreview {
    /// A file the call creates or changes.
    File {
        /// The file, as the tool resolved it.
        path: String,
        /// The file does not exist yet.
        created: bool,
        /// Unified diff from the file's text to the new text.
        diff: String,
        /// The diff was cut at its bound.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
        /// The whole text before (empty for a new file), when small enough to carry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        /// The whole text after, when small enough to carry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        new_text: Option<String>,
    },
}

/// The user's answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum PermissionAnswer {
    /// Run this call only.
    AllowOnce,
    /// Run it and allow the scope with this index for the rest of the session.
    AllowAlways {
        /// Index into the request's `scopes`.
        scope: usize,
    },
    /// Do not run it, nor anything the scope with this index covers, for the rest of the
    /// session (saved like "always allow").
    DenyAlways {
        /// Index into the request's `scopes`.
        scope: usize,
    },
    /// Do not run it.
    Deny {
        /// What the model is told, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// Whether queued input steers the running turn or follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// Delivered before the running turn's next model request.
    Steer,
    /// Delivered after the running turn ends, as a new turn.
    FollowUp,
}

impl InputKind {
    /// The stable text: `steer`, `follow_up`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steer => "steer",
            Self::FollowUp => "follow_up",
        }
    }

    /// Parses the stable text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "steer" => Some(Self::Steer),
            "follow_up" => Some(Self::FollowUp),
            _ => None,
        }
    }
}

/// An input waiting in a session's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The input's id.
    pub id: String,
    /// Steering or a follow-up.
    pub kind: InputKind,
    /// Its text.
    pub text: String,
    /// When it was queued, ms since the epoch.
    pub created_ms: i64,
    /// Who queued it (a goal's continuation is `thread-goal`).
    #[serde(default, skip_serializing_if = "TurnSource::is_api")]
    pub source: TurnSource,
}
