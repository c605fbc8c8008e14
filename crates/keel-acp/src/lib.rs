//! `keel acp`: keel as an Agent Client Protocol agent for editors, JSON-RPC over stdio. It
//! submits operations through the conversation contract and turns session events into
//! `session/update`s; it keeps no engine logic and no timers that guess state.
//! It imports only keel-protocol and keel-runtime.
#![forbid(unsafe_code)]

mod commands;
mod elicit;
mod files;
mod input;
mod mcp;
mod modes;
mod permission;
mod prompt;
mod replay;
mod server;
mod session;
mod tasks;
mod terminal;
mod tools;
mod translate;

use std::path::PathBuf;
use std::sync::Arc;

use keel_runtime::{Prepared, RuntimeError, RuntimeOptions};

pub use server::serve;

/// Builds a runtime's [`Prepared`] from options (keel's harness extensions added by the
/// binary).
pub type Prepare = Arc<dyn Fn(RuntimeOptions) -> Result<Prepared, RuntimeError> + Send + Sync>;

/// What `keel acp` serves with.
#[derive(Clone)]
pub struct ServeOptions {
    /// The options every folder's runtime starts from (flags and config); each session's
    /// `cwd` replaces the working folder.
    pub base: RuntimeOptions,
    /// Makes a runtime's [`Prepared`] from options.
    pub prepare: Prepare,
    /// How the session store is opened.
    pub store: keel_runtime::storage::OpenOptions,
    /// The folder keel was started in: what `initialize` checks the model against.
    pub launch_cwd: PathBuf,
    /// Where the socket for terminal relays goes (`$KEEL_HOME/run`); `None`: no terminals.
    pub run_dir: Option<PathBuf>,
    /// Bounds on what the editor may send (`acp:` in the configuration).
    pub limits: keel_runtime::settings::extend::AcpConfig,
}

/// Why `keel acp` stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// The connection failed (not a clean end of input).
    #[error("the ACP connection failed: {0}")]
    Connection(String),
}

impl AcpError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Connection(_) => "acp_connection_failed",
        }
    }
}
