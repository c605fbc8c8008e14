//! keel's built-in tools, the permission gate, shell environment cleaning and the sandbox.
//!
//! Every tool implements [`keel_agent::AgentTool`]: a JSON Schema the loop validates
//! arguments against, a declared execution mode (read-only tools run in parallel), bounded
//! output for the model and structured details for front ends.

mod args;
pub mod bash;
pub mod env;
pub mod files;
pub mod gitlinks;
pub mod lines;
pub mod output;
pub mod permission;
pub mod protect;
pub mod redact;
pub mod search;

pub use env::{EnvMode, SandboxMode, ToolEnv};
pub use output::{Artifact, OutputLimits};

pub mod fetch;
pub mod todo;

use std::sync::Arc;

use keel_agent::ToolRef;

/// The built-in tools over `env`: grep, glob, ls, read, write, edit, bash, todowrite and
/// web_fetch.
pub fn builtin_tools(env: Arc<ToolEnv>) -> Result<Vec<ToolRef>, String> {
    let tools: Vec<ToolRef> = vec![
        Arc::new(search::GrepTool::new(env.clone())),
        Arc::new(search::GlobTool::new(env.clone())),
        Arc::new(search::LsTool::new(env.clone())),
        Arc::new(files::read::Read::new(env.clone())),
        Arc::new(files::write::Write::new(env.clone())),
        Arc::new(files::edit::Edit::new(env.clone())),
        Arc::new(bash::Bash::new(env.clone())),
        Arc::new(todo::TodoWrite::new()),
        Arc::new(fetch::WebFetch::new(env.clone())?),
    ];
    Ok(tools)
}
