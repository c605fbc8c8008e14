//! The `keel-mockllm` binary: serve a script (or the benchmark workload) on loopback.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use keel_mockllm::{MockServer, Script, ServerOptions, workload};

/// A scripted model server on 127.0.0.1 for tests and benchmarks.
#[derive(Debug, Parser)]
#[command(name = "keel-mockllm", version, about)]
struct Args {
    /// JSON script: a list of responses, or {"responses": [...]}.
    #[arg(long, value_name = "FILE", conflicts_with = "workload")]
    script: Option<PathBuf>,
    /// Generate the benchmark workload instead: `steps=N,kib=B[,chunk=C]`.
    #[arg(long, value_name = "SPEC")]
    workload: Option<String>,
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append every request as a JSON line to this file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Append `{index, first_byte_ms, received_ms, done_ms}` per request to this file (Unix ms).
    #[arg(long, value_name = "FILE")]
    timings: Option<PathBuf>,
    /// End every connection after its response instead of keeping it for the next request.
    #[arg(long)]
    close_connections: bool,
}

fn parse_workload(spec: &str) -> anyhow::Result<Script> {
    let (mut steps, mut kib, mut chunk) = (10usize, 4usize, 64usize);
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .with_context(|| format!("`{part}` is not key=value"))?;
        let value: usize = value
            .parse()
            .with_context(|| format!("`{value}` in `{part}` is not a number"))?;
        match key {
            "steps" => steps = value,
            "kib" => kib = value,
            "chunk" => chunk = value.max(1),
            other => anyhow::bail!("unknown workload key `{other}` (use steps, kib, chunk)"),
        }
    }
    Ok(workload(steps, kib, chunk))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let script = match (&args.script, &args.workload) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Script::parse(&text)
                .with_context(|| format!("{} is not a valid mock script", path.display()))?
        }
        (None, Some(spec)) => parse_workload(spec)?,
        (None, None) => anyhow::bail!("give --script FILE or --workload steps=N,kib=B"),
    };
    let server = MockServer::start(
        script,
        ServerOptions {
            port: args.port,
            record: args.record,
            timings: args.timings,
            close_connections: args.close_connections,
        },
    )
    .await?;
    println!("listening on {}", server.url());
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    Ok(())
}
