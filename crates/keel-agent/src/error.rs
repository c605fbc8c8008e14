//! Errors of the agent crate.

/// Why an agent operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A run is already in progress; steer, queue a follow-up, or wait.
    #[error("the agent is already running; use steer() or follow_up(), or wait for it to finish")]
    Busy,
    /// `continue` needs a history that does not end with an assistant message.
    #[error("cannot continue: the history ends with a {role} message and nothing is queued")]
    NothingToContinue {
        /// Role of the last message (or `empty`).
        role: &'static str,
    },
    /// Two tools share a name.
    #[error("two tools are named `{name}`; tool names must be unique")]
    DuplicateTool {
        /// The name.
        name: String,
    },
    /// A tool's argument schema is not valid JSON Schema.
    #[error("the argument schema of tool `{tool}` is invalid: {reason}")]
    InvalidToolSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// The run task ended unexpectedly.
    #[error("the agent run ended unexpectedly: {0}")]
    RunLost(String),
}

impl AgentError {
    /// The protocol's code when this ends a turn: an extension's bad tool is its failure,
    /// anything else keel's own.
    pub fn failure_code(&self) -> keel_protocol::FailureCode {
        match self {
            Self::DuplicateTool { .. } | Self::InvalidToolSchema { .. } => {
                keel_protocol::FailureCode::ExtensionFailed
            }
            Self::NothingToContinue { .. } => keel_protocol::FailureCode::NothingToContinue,
            _ => keel_protocol::FailureCode::InternalError,
        }
    }

    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Busy => "agent_busy",
            Self::NothingToContinue { .. } => "nothing_to_continue",
            Self::DuplicateTool { .. } => "duplicate_tool",
            Self::InvalidToolSchema { .. } => "invalid_tool_schema",
            Self::RunLost(_) => "run_lost",
        }
    }
}
