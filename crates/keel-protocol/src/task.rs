//! Background tasks (SPEC §14): a child session doing delegated work for its parent, its
//! states and what front ends are told about it.

use serde::{Deserialize, Serialize};

use crate::SessionId;

/// Where a task stands. The last four are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Waiting for a free slot (at most `tasks.max_concurrent` run at once).
    Queued,
    /// Its child session's turn runs.
    Running,
    /// Asked to stop; its turn is being aborted.
    Stopping,
    /// Its turn completed.
    Succeeded,
    /// Its turn failed.
    Failed,
    /// Stopped before it ended.
    Canceled,
    /// The process running it stopped before it ended (found on restart).
    Lost,
}

impl TaskStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 7] = [
        Self::Queued,
        Self::Running,
        Self::Stopping,
        Self::Succeeded,
        Self::Failed,
        Self::Canceled,
        Self::Lost,
    ];

    /// The stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
            Self::Lost => "lost",
        }
    }

    /// Parses the stable text form.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether the task has ended and will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Canceled | Self::Lost
        )
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// The task's id (`task-…`).
    pub id: String,
    /// The session that started it (its parent).
    pub session_id: SessionId,
    /// The child session doing the work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<SessionId>,
    /// The task this one follows up (`task_append` on an ended task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    /// What it is for, in a few words.
    pub description: String,
    /// Its role: `explore`, `worker`, `verifier` or a custom agent's name.
    pub agent: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// Whether the parent went on without waiting for it.
    pub background: bool,
    /// Why it failed, was canceled or lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes of progress output so far.
    pub output_bytes: u64,
    /// When it was made, ms since the epoch.
    pub created_ms: i64,
    /// When its turn started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<i64>,
    /// When a completion notice reached the parent (delivery only, not consumption).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_ms: Option<i64>,
    /// When the parent's reading of its result was committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_ms: Option<i64>,
}

impl TaskInfo {
    /// A task just made by `session_id`: `queued`, background, with nothing run, delivered or
    /// read yet and no child session.
    pub fn new(
        id: impl Into<String>,
        session_id: SessionId,
        description: impl Into<String>,
        agent: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            session_id,
            child_session_id: None,
            parent_task_id: None,
            description: description.into(),
            agent: agent.into(),
            status: TaskStatus::Queued,
            background: true,
            error: None,
            output_bytes: 0,
            created_ms: 0,
            started_ms: None,
            ended_ms: None,
            delivered_ms: None,
            consumed_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_four_are_terminal() {
        for status in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_string(&status).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        let terminal: Vec<_> = TaskStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                TaskStatus::Succeeded,
                TaskStatus::Failed,
                TaskStatus::Canceled,
                TaskStatus::Lost
            ]
        );
        assert_eq!(TaskStatus::parse("done"), None);
    }
}
