//! What the sandbox costs per command: `bash -c true` through the bash tool, unsandboxed,
//! in `workspace-write` and in `read-only`, with namespaces (where the system allows them)
//! and with Landlock alone (`KEEL_SANDBOX_NAMESPACES=off` in a second process).
//!
//! Run by hand: `cargo bench -p keel-tools --bench bash_spawn`. Each mode runs 20 warm-up
//! commands, then `KEEL_BENCH_RUNS` (default 300) interleaved with the other modes so a
//! change in machine speed hits all alike; the table gives median, mean and p90 in ms.
//! Issue 9's budget: at most 3 ms per sandboxed command at the median.
//! `KEEL_BENCH_WORKSPACE=DIR` runs the commands in DIR (a large repository) instead of an
//! empty folder.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use keel_agent::AgentTool;
use keel_tools::bash::Bash;
use keel_tools::{EnvMode, SandboxMode, ToolEnv};
use serde_json::json;

fn tool(dir: &std::path::Path, sandbox: SandboxMode) -> Bash {
    let mut env = ToolEnv::new(dir.to_path_buf());
    env.output_dir = std::env::temp_dir().join(format!("keel-bench-out-{}", std::process::id()));
    env.sandbox = sandbox;
    env.env_mode = Some(EnvMode::Scrub);
    Bash::new(Arc::new(env))
}

fn stats(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let p90 = samples[samples.len() * 9 / 10];
    (median, mean, p90)
}

fn main() {
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let landlock_only = std::env::var("KEEL_SANDBOX_NAMESPACES").is_ok_and(|v| v == "off");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // KEEL_BENCH_WORKSPACE: run in a large existing tree (the per-command scans of the
    // workspace for control files and nested repositories grow with it, up to their bound).
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let workspace = std::env::var_os("KEEL_BENCH_WORKSPACE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().to_path_buf());
    let modes = [
        SandboxMode::DangerFullAccess,
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
    ];
    let tools: Vec<Bash> = modes.iter().map(|m| tool(&workspace, *m)).collect();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut failed = vec![None; modes.len()];
    runtime.block_on(async {
        for round in 0..runs + 20 {
            for (i, tool) in tools.iter().enumerate() {
                let start = Instant::now();
                let out = tool
                    .execute(json!({"command": "true"}), common::context())
                    .await;
                let ms = start.elapsed().as_secs_f64() * 1e3;
                match out {
                    Ok(out) if !out.is_error => {
                        if round >= 20 {
                            samples[i].push(ms);
                        }
                    }
                    Ok(out) => failed[i] = Some(format!("{:?}", out.content)),
                    Err(e) => failed[i] = Some(e.message),
                }
            }
        }
    });
    let layer = if landlock_only {
        "Landlock only"
    } else {
        "namespaces + Landlock"
    };
    println!("bash -c true through the bash tool, {runs} runs each ({layer})");
    println!("| mode | median ms | mean ms | p90 ms |");
    println!("|---|---|---|---|");
    for (i, mode) in modes.iter().enumerate() {
        match &failed[i] {
            Some(why) if samples[i].is_empty() => {
                println!("| {} | did not run: {why} |||", mode.name())
            }
            _ => {
                let (median, mean, p90) = stats(samples[i].clone());
                println!("| {} | {median:.2} | {mean:.2} | {p90:.2} |", mode.name());
            }
        }
    }
}
