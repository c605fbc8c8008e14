//! What the trust check of issue 27 adds to start-up: finding the project (its root, whose
//! files count, whether the folder is trusted), reading a trusted project's hook and MCP
//! settings and working out what their command lines run (the paths protected while they
//! are trusted, and what runs any project code), as `Prepared::new` does once per runtime.
//!
//! Run by hand: `cargo bench -p keel-extensions --bench trust_check`. The project has a
//! trusted `.claude/settings.json` with two hooks (`sh scripts/lint.sh`, `npm run check`)
//! and a trusted `.mcp.json` with two servers (`python3 tools/server.py --config
//! conf/server.toml`, `npx -y @scope/server`), inside a git repository three folders above
//! the working folder. `KEEL_BENCH_RUNS` (default 2000) timed runs after 100 warm-up ones;
//! the table gives median, mean and p90 in µs. Issue 27's budget: 1 ms.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use keel_runtime::extension::HostInfo;
use keel_runtime::settings::{Config, Project};

fn project(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("repo");
    for folder in [
        ".git",
        ".claude",
        "scripts",
        "tools",
        "conf",
        "crates/app/src",
    ] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    std::fs::write(root.join("scripts/lint.sh"), "exit 0\n").unwrap();
    std::fs::write(root.join("tools/server.py"), "pass\n").unwrap();
    std::fs::write(root.join("conf/server.toml"), "x = 1\n").unwrap();
    std::fs::write(root.join("package.json"), "{}\n").unwrap();
    std::fs::write(
        root.join(".claude/settings.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "sh scripts/lint.sh"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "npm run check"}]}]}}"#,
    )
    .unwrap();
    std::fs::write(
        root.join(".mcp.json"),
        r#"{"mcpServers": {"tools": {"command": "python3", "args": ["tools/server.py", "--config", "conf/server.toml"]},
            "files": {"command": "npx", "args": ["-y", "@scope/server"]}}}"#,
    )
    .unwrap();
    root.join("crates/app/src")
}

fn main() {
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().unwrap();
    let cwd = project(&std::fs::canonicalize(dir.path()).unwrap());
    let keel_home = dir.path().join("keel-home");
    std::fs::create_dir_all(&keel_home).unwrap();
    let config = Config::default();
    let once = || {
        let (project, _) = Project::find(&cwd, Some(&keel_home));
        let host = HostInfo {
            cwd: cwd.clone(),
            project,
            keel_home: Some(keel_home.clone()),
            // As trusted, so every command line is read.
            trust_project_mcp: true,
            ..HostInfo::default()
        };
        let (_, _, hooks) = keel_extensions::extend::hooks::settings(&config, &host);
        let (specs, _) = keel_mcp::servers(&config, &host);
        let (servers, _) = keel_mcp::reach(&specs, &host);
        assert!(!hooks.is_empty() && !servers.is_empty());
        std::hint::black_box((hooks, servers));
    };
    for _ in 0..100 {
        once();
    }
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            once();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
    println!(
        "trust check at start-up ({runs} runs): median {:.0} µs, mean {mean:.0} µs, p90 {:.0} µs (budget 1000 µs)",
        at(0.5),
        at(0.9)
    );
}
