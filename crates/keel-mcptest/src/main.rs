//! `keel-mcptest`: an MCP server for the integration tests of keel's MCP client. It serves a
//! fixed set of tools, resources and a prompt over stdio, or over streamable HTTP on loopback.
#![forbid(unsafe_code)]

mod catalog;
mod handler;
mod http;
mod state;
mod tools;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use rmcp::ServiceExt as _;

use crate::handler::McpTest;
use crate::state::Shared;

/// An MCP test server: stdio by default, streamable HTTP at /mcp with --http.
#[derive(Debug, Parser)]
#[command(name = "keel-mcptest", version, about)]
struct Args {
    /// Serve streamable HTTP on this address (e.g. 127.0.0.1:0) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// (HTTP) answer 401 unless the request has `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "TOKEN")]
    require_bearer: Option<String>,
    /// (HTTP) answer 401 unless the request has this header with this value; repeatable.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_header)]
    require_header: Vec<(String, String)>,
    /// Wait this long before answering `initialize` (stdio: before serving at all).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    slow_start: u64,
    /// Also offer N generated tools `tool_000`..
    #[arg(long, value_name = "N", default_value_t = 0)]
    tools: usize,
    /// Also offer a tool of this name (answering like `echo`); repeatable.
    #[arg(long, value_name = "NAME")]
    extra_tool: Vec<String>,
    /// The server name reported in `initialize`.
    #[arg(long, default_value = "keel-mcptest")]
    name: String,
    /// Count starts and crashes in DIR/starts and DIR/crashes.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

fn parse_header(spec: &str) -> Result<(String, String), String> {
    let (name, value) = spec
        .split_once('=')
        .ok_or_else(|| format!("`{spec}` is not NAME=VALUE"))?;
    hyper::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("`{name}` is not a header name"))?;
    Ok((name.to_owned(), value.to_owned()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let slow_start = Duration::from_millis(args.slow_start);
    let mut shared = Shared::new(
        args.name,
        args.tools,
        // stdio waits before it serves, so the handshake itself need not wait again
        if args.http.is_some() {
            slow_start
        } else {
            Duration::ZERO
        },
        args.state_dir,
    );
    shared.extra_tools = args.extra_tool;
    shared.record("starts");
    let shared = Arc::new(shared);

    match args.http {
        Some(addr) => {
            let required = http::Required {
                bearer: args.require_bearer,
                headers: args.require_header,
            };
            http::serve(addr, shared, required).await
        }
        None => {
            tokio::time::sleep(slow_start).await;
            let running = McpTest::new(shared)
                .serve(rmcp::transport::stdio())
                .await
                .context("the MCP handshake on stdio failed")?;
            running
                .waiting()
                .await
                .context("the MCP service on stdio failed")?;
            Ok(())
        }
    }
}
