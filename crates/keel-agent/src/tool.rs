//! The tool contract the loop executes against.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{ContentBlock, MessageId, ToolCallId, ToolDefinition};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::turn_context::TurnContext;

/// Whether a tool may run beside other calls of the same batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionMode {
    /// Safe to run concurrently (read-only tools such as read, grep, glob).
    Parallel,
    /// Must run alone; one such tool makes its whole batch run in order. The default,
    /// because a tool that declares nothing may have side effects.
    #[default]
    Sequential,
}

/// What a tool produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// What the model sees: text and image blocks.
    pub content: Vec<ContentBlock>,
    /// Structured data for front ends; never sent to a model.
    pub details: Option<serde_json::Value>,
    /// The result is an error the model should see.
    pub is_error: bool,
    /// Ask the loop not to call the model again for this batch (honoured only when every
    /// result of the batch carries it).
    pub terminate: bool,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            ..Self::default()
        }
    }

    /// An error text result.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(text)
        }
    }
}

/// A tool failed in a way the model should hear about; becomes an error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What went wrong, for the model.
    pub message: String,
}

impl ToolError {
    /// A tool error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Progress reporter handed to a running tool. Progress is lossy by design: when the
/// loop is slow to forward it, the newest updates are dropped instead of queueing without
/// bound.
#[derive(Debug, Clone)]
pub struct ToolUpdates {
    index: usize,
    sender: mpsc::Sender<(usize, serde_json::Value)>,
}

impl ToolUpdates {
    /// A reporter for call `index` of a batch, sending into `sender`.
    pub fn new(index: usize, sender: mpsc::Sender<(usize, serde_json::Value)>) -> Self {
        Self { index, sender }
    }

    /// Reports progress; returns whether it was accepted.
    pub fn send(&self, update: serde_json::Value) -> bool {
        self.sender.try_send((self.index, update)).is_ok()
    }
}

/// Everything a tool execution gets besides its arguments.
#[derive(Debug, Clone)]
pub struct ToolCallContext {
    /// The call being answered.
    pub tool_call_id: ToolCallId,
    /// Host-assigned id of the assistant message that made the call.
    pub assistant_message_id: MessageId,
    /// The turn this call belongs to, when run by a host turn.
    pub turn: Option<Arc<TurnContext>>,
    /// Fires on abort; a tool that ignores it is abandoned after the grace period.
    pub cancel: CancellationToken,
    /// Progress reporter.
    pub updates: ToolUpdates,
}

/// A tool the loop can run.
#[async_trait]
pub trait AgentTool: Send + Sync {
    /// What the model sees.
    fn definition(&self) -> &ToolDefinition;

    /// Whether it may run concurrently with other calls.
    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Sequential
    }

    /// The file a call with these arguments would change. Two calls that change the same
    /// file never overlap, even in a parallel batch.
    fn mutated_path(&self, _arguments: &serde_json::Value) -> Option<PathBuf> {
        None
    }

    /// Runs the call. Arguments were already validated against the definition's schema.
    async fn execute(
        &self,
        arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// Shared handle to a tool.
pub type ToolRef = Arc<dyn AgentTool>;

/// `path` with `.` removed and `..` folded, without touching the file system (the file may
/// not exist yet), so `a/./b` and `a/c/../b` lock as the same file.
pub(crate) fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_lexically() {
        assert_eq!(
            normalize_path(Path::new("/a/./b/../c")),
            PathBuf::from("/a/c")
        );
        assert_eq!(normalize_path(Path::new("x/y/../../z")), PathBuf::from("z"));
    }
}
