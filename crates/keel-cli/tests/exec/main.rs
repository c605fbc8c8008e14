//! End to end: the real `keel` binary runs a turn from a mock script or against
//! `keel-mockllm`, in every output format and to every exit code it can reach.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod basics;
mod checks;
mod config;
mod context;
mod crash;
mod exits;
mod extensions;
mod first_run;
mod formats;
mod goals;
mod headless;
mod logs;
mod plan;
mod redaction;
mod runtime;
mod sessions;
mod spawner;
mod storage;
mod stored;
mod tasks;

use std::process::Command;

fn keel() -> Command {
    // Tests that do not look at sessions share one throwaway database.
    static SHARED: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let shared = SHARED.get_or_init(|| tempfile::tempdir().unwrap());
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
    command
        .env("KEEL_HOME", "/nonexistent")
        .env("KEEL_SESSIONS_DB", shared.path().join("sessions.db"))
        // A developer's own log setting must not reach the output tests compare.
        .env_remove("KEEL_LOG");
    command
}

fn script(dir: &std::path::Path, json: &str) -> std::path::PathBuf {
    let path = dir.join("script.json");
    std::fs::write(&path, json).unwrap();
    path
}

fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("keel-exec-{name}-"))
        .tempdir()
        .unwrap()
}

/// Parses JSON lines.
fn lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `keel exec --mock-script <script> <extra…>` in a fresh working folder.
fn exec_script(script_json: &str, extra: &[&str]) -> (tempfile::TempDir, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), script_json);
    let output = keel()
        .arg("exec")
        .arg("--cwd")
        .arg(dir.path())
        .arg("--mock-script")
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    (dir, output)
}

/// Asserts the run exited with `code`, showing its stderr otherwise.
fn assert_exit(output: &std::process::Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The result of a `stream-json` run's first completed tool call (empty when none).
fn first_tool_result(output: &std::process::Output) -> String {
    lines(&output.stdout)
        .into_iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .map(|e| e["item"]["result"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// The one `exec.result` object of a `--output-format json` run.
fn result_of(output: &std::process::Output) -> serde_json::Value {
    let mut all = lines(&output.stdout);
    assert_eq!(
        all.len(),
        1,
        "one result object; stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    all.remove(0)
}

/// A folder outside the system temp folders, which sandboxed commands may write (so without
/// namespaces keel could not hide a database there, and a read-only sandbox would not keep
/// a workspace there from being written): the build's temp folder, or keel's cache folder in
/// the real home when the build itself lies in the system temp folder.
fn outside_temp() -> tempfile::TempDir {
    let target = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = target.canonicalize().unwrap_or(target);
    let system = std::env::temp_dir();
    let system = system.canonicalize().unwrap_or(system);
    let root = if target.starts_with(&system) || target.starts_with("/tmp") {
        let home = std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
        let root = home.join(".cache/keel/test-fixtures");
        std::fs::create_dir_all(&root).unwrap();
        root
    } else {
        target
    };
    tempfile::tempdir_in(root).unwrap()
}

/// A runtime for `keel-mockllm` servers started in the test process.
struct Mock(keel_mockllm::Background);

impl Mock {
    fn new() -> Self {
        Self(keel_mockllm::Background::new().unwrap())
    }

    /// A server answering from `script_json`.
    fn serve(&self, script_json: &str) -> keel_mockllm::MockServer {
        self.0.serve(script_json).unwrap()
    }
}
