//! The tool contract the loop executes against.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{ContentBlock, MessageId, ToolCallId, ToolDefinition, ToolPreview};
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

/// The member of a progress update that carries a running call's new output.
pub const OUTPUT_UPDATE: &str = "output";

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

    /// Reports output the running call printed since its last report, which front ends
    /// show live; returns whether it was accepted (when not, send it again with what
    /// follows).
    pub fn output(&self, delta: &str) -> bool {
        self.send(serde_json::json!({ OUTPUT_UPDATE: delta }))
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

/// What a tool does beyond the session, declared by the tool itself and read by the
/// permission gate, which never judges a tool by its name. The names inside say which
/// argument of a call holds the path, URL or command the gate must weigh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolNature {
    /// Changes nothing outside the session and reads nothing of the machine's for the
    /// model (a todo list, a tool search, a task's status): runs in every mode.
    SessionOnly,
    /// Reads one file, named by argument `path`.
    ReadsFile {
        /// The argument naming the file.
        path: &'static str,
    },
    /// Lists or searches the folder named by argument `path` (`.` without one).
    SearchesFolder {
        /// The argument naming the folder.
        path: &'static str,
        /// An argument holding a glob pattern whose fixed start narrows the folder.
        pattern: Option<&'static str>,
        /// It reaches every folder beneath, not only the one named.
        recursive: bool,
    },
    /// Creates or changes one file, named by argument `path`.
    WritesFile {
        /// The argument naming the file.
        path: &'static str,
    },
    /// Reaches the network at the URL in argument `url`.
    Fetches {
        /// The argument holding the URL.
        url: &'static str,
    },
    /// Runs the command line in argument `command` as code (in the sandbox).
    RunsCommand {
        /// The argument holding the command line.
        command: &'static str,
    },
    /// Starts work that goes on by itself in later turns (a goal): the user says yes to it
    /// wherever the mode asks before acting.
    StartsWork,
    /// Acts outside keel in ways keel cannot read (an MCP server's tool): what a tool that
    /// declares nothing is taken to be.
    Opaque,
}

/// A tool the loop can run.
#[async_trait]
pub trait AgentTool: Send + Sync {
    /// What the model sees.
    fn definition(&self) -> &ToolDefinition;

    /// What it does beyond the session, for the permission gate. A tool that does not
    /// say is [`ToolNature::Opaque`]: asked about wherever the mode asks about the unknown.
    fn nature(&self) -> ToolNature {
        ToolNature::Opaque
    }

    /// Whether it may run concurrently with other calls.
    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Sequential
    }

    /// The file a call with these arguments would change. Two calls that change the same
    /// file never overlap, even in a parallel batch.
    fn mutated_path(&self, _arguments: &serde_json::Value) -> Option<PathBuf> {
        None
    }

    /// What call `call` would change, for the person asked to approve it, computed without
    /// changing anything. A tool that shows one must refuse to run that call once its
    /// target changed since: the approval was for what was shown.
    async fn preview(
        &self,
        _call: &ToolCallId,
        _arguments: &serde_json::Value,
    ) -> Option<ToolPreview> {
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
