//! keel-mcp's errors, each with a stable code.

/// Why a server or a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server could not be started or did not complete the handshake.
    #[error("MCP server `{server}` did not start: {reason}")]
    Start {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// The server is not running (failed, restarting, stopped).
    #[error("MCP server `{server}` is not running: {state}")]
    NotRunning {
        /// The server.
        server: String,
        /// What it is doing instead.
        state: String,
    },
    /// A request did not answer in time.
    #[error("MCP server `{server}` did not answer {what} within {seconds} s")]
    Timeout {
        /// The server.
        server: String,
        /// The request.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// The server wants a login (or more access) before it answers.
    #[error("MCP server `{server}` {advice}")]
    AuthRequired {
        /// The server.
        server: String,
        /// What to do, naming the command.
        advice: String,
    },
    /// The server answered with an error, or the connection ended during the request.
    #[error("MCP server `{server}`: {reason}")]
    Request {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
}

impl McpError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Start { .. } => "mcp_start_failed",
            Self::NotRunning { .. } => "mcp_not_running",
            Self::Timeout { .. } => "mcp_timeout",
            Self::Request { .. } => "mcp_request_failed",
            Self::AuthRequired { .. } => "mcp_auth_required",
        }
    }
}
