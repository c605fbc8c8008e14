//! End to end: the real `keel` binary with MCP servers (the in-repo test server
//! `keel-mcptest` over stdio and streamable HTTP, and `@modelcontextprotocol/server-everything`
//! when CI installed it), deferred disclosure, skills, custom commands and user hooks.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod bounds;
mod disclosure;
mod everything;
mod hooks;
mod servers;
mod skills;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The test server, built beside `keel` by the workspace build.
fn mcptest() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_keel")).with_file_name("keel-mcptest");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (`cargo build -p keel-mcptest`)",
        path.display()
    );
    path
}

/// A keel home and a project folder for one test.
struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
}

impl World {
    fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(work.join(".git")).unwrap();
        std::fs::write(home.join("config.yaml"), config).unwrap();
        Self {
            _dir: dir,
            home,
            work,
        }
    }

    /// Writes the scripted model's `responses`; returns the script's path.
    fn script(&self, responses: &str) -> String {
        let script = self.home.join("script.json");
        std::fs::write(&script, responses).unwrap();
        script.display().to_string()
    }

    /// `keel exec --output-format stream-json --cwd WORK ARGS… PROMPT`, with `envs` set.
    fn run(&self, envs: &[(&str, &str)], args: &[&str], prompt: &str) -> Output {
        self.command()
            .envs(envs.iter().copied())
            .args(["exec", "--output-format", "stream-json", "--cwd"])
            .arg(&self.work)
            .args(args)
            .arg(prompt)
            .output()
            .unwrap()
    }

    /// `keel exec` in the project with the scripted `responses`, stream-json, auto mode.
    fn exec(&self, responses: &str, extra: &[&str], prompt: &str) -> Output {
        let script = self.script(responses);
        let mut args = vec!["--permission", "auto", "--mock-script", &script];
        args.extend_from_slice(extra);
        self.run(&[], &args, prompt)
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .env("KEEL_HOME", &self.home)
            .env("KEEL_SESSIONS_DB", self.home.join("sessions.db"))
            .env_remove("KEEL_LOG");
        command
    }
}

/// The config of one stdio test server named `test`, with extra arguments.
fn stdio_config(args: &[&str], extra: &str) -> String {
    format!(
        "mcp_servers:\n  test:\n    command: {}\n    args: {}\n{extra}",
        mcptest().display(),
        serde_json::to_string(args).unwrap()
    )
}

/// Configuration for the mock model server at `url` with a 64k window, then `extra`.
fn mock_model(url: &str, extra: &str) -> String {
    format!(
        "model: mock/m\nproviders:\n  mock:\n    api: openai-completions\n    base_url: {url}/v1\n    models:\n      m: {{context_window: 64000, max_output: 4096}}\n{extra}"
    )
}

/// The JSON lines of a stream-json run.
fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The completed tool calls of a run, by call id: (result text, status).
fn results(output: &Output) -> std::collections::BTreeMap<String, (String, String)> {
    events(output)
        .into_iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .map(|e| {
            (
                e["item"]["call_id"].as_str().unwrap_or_default().to_owned(),
                (
                    e["item"]["result"].as_str().unwrap_or_default().to_owned(),
                    e["item"]["status"].as_str().unwrap_or_default().to_owned(),
                ),
            )
        })
        .collect()
}

/// The extension events of a run from `extension`.
fn extension_events(output: &Output, extension: &str) -> Vec<Value> {
    events(output)
        .into_iter()
        .filter(|e| e["type"] == "extension.event" && e["extension"] == extension)
        .collect()
}

fn assert_ok(output: &Output) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
}
