//! keel's built-in tools, the permission gate, protected paths, shell environment cleaning
//! and the sandbox (DESIGN §13, §16, §17). The gate reads commands with keel-shell.
//! It imports only keel-protocol, keel-shell and keel-agent, and must not import keel-runtime,
//! keel-context, keel-mcp, keel-extensions, keel-tui, keel-acp or keel-cli.
#![forbid(unsafe_code)]

pub mod args;
pub mod bash;
pub mod env;
pub mod files;
pub mod gitlinks;
pub mod lines;
pub mod netproxy;
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
pub fn builtin_tools(env: Arc<ToolEnv>) -> Vec<ToolRef> {
    let tools: Vec<ToolRef> = vec![
        Arc::new(search::GrepTool::new(env.clone())),
        Arc::new(search::GlobTool::new(env.clone())),
        Arc::new(search::LsTool::new(env.clone())),
        Arc::new(files::read::Read::new(env.clone())),
        Arc::new(files::write::Write::new(env.clone())),
        Arc::new(files::edit::Edit::new(env.clone())),
        Arc::new(bash::Bash::new(env.clone())),
        Arc::new(todo::TodoWrite::new()),
        Arc::new(fetch::WebFetch::new(env.clone())),
    ];
    tools
}
