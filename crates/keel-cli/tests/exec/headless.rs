//! The flags Claude Code's `-p` scripts use: `--allowedTools`, `--disallowedTools`,
//! `--add-dir` and `--max-turns`.

use std::path::Path;
use std::process::Output;

use crate::{assert_exit, first_tool_result as tool_result, keel, script};

/// `keel exec` in `work` answering from `responses` (stream-json), with `extra` flags.
fn run(work: &Path, responses: &str, extra: &[&str]) -> Output {
    let scripts = tempfile::tempdir().unwrap();
    let path = script(scripts.path(), responses);
    keel()
        .args(["exec", "--output-format", "stream-json", "--cwd"])
        .arg(work)
        .arg("--mock-script")
        .arg(&path)
        .args(extra)
        .env("KEEL_HOME", work.join(".keel-home"))
        .output()
        .unwrap()
}

/// A command that writes, so ask mode asks before it.
const ECHO: &str = r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "touch flagged.txt"}}]}, {"text": "done"}]"#;

#[test]
fn allowed_tools_let_a_command_run_in_ask_mode_and_disallowed_tools_refuse_it() {
    let work = tempfile::tempdir().unwrap();
    let asked = run(work.path(), ECHO, &["--permission", "ask", "say it"]);
    assert_exit(&asked, 0);
    assert!(
        tool_result(&asked).starts_with("Blocked by permissions"),
        "{}",
        tool_result(&asked)
    );
    for flag in ["--allowedTools", "--allowed-tools"] {
        let allowed = run(
            work.path(),
            ECHO,
            &[
                "--permission",
                "ask",
                flag,
                "Read,Bash(touch:*)",
                "--",
                "say it",
            ],
        );
        assert_exit(&allowed, 0);
        assert!(
            work.path().join("flagged.txt").exists(),
            "{}",
            tool_result(&allowed)
        );
        std::fs::remove_file(work.path().join("flagged.txt")).unwrap();
    }
    // The exact form matches only those words.
    let other = run(
        work.path(),
        ECHO,
        &[
            "--permission",
            "ask",
            "--allowedTools",
            "Bash(touch other.txt)",
            "--",
            "say it",
        ],
    );
    assert!(
        tool_result(&other).starts_with("Blocked by permissions"),
        "{}",
        tool_result(&other)
    );
    // A deny beats the mode and any allow.
    let refused = run(
        work.path(),
        ECHO,
        &[
            "--permission",
            "auto",
            "--allowedTools",
            "Bash",
            "--disallowedTools",
            "Bash(touch:*)",
            "--",
            "say it",
        ],
    );
    assert_exit(&refused, 0);
    assert!(
        tool_result(&refused).starts_with("Blocked by permissions"),
        "{}",
        tool_result(&refused)
    );
}

#[test]
fn a_prompt_swallowed_by_the_tools_flag_is_refused_with_the_fix() {
    let work = tempfile::tempdir().unwrap();
    let output = run(
        work.path(),
        ECHO,
        &["--allowedTools", "Read", "fix", "the", "bug"],
    );
    assert_exit(&output, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("keel has no tool `fix`"), "{stderr}");
    assert!(stderr.contains("after `--`"), "{stderr}");
    let output = run(
        work.path(),
        ECHO,
        &["--disallowedTools", "Bash(git log", "x"],
    );
    assert_exit(&output, 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("`)` is missing"));
}

#[test]
fn an_added_folder_is_part_of_the_workspace() {
    let work = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let target = other.path().join("notes.txt");
    let responses = format!(
        r#"[{{"tool_calls": [{{"id": "c1", "name": "write", "arguments": {{"path": "{}", "content": "x"}}}}]}}, {{"text": "done"}}]"#,
        target.display()
    );
    let outside = run(
        work.path(),
        &responses,
        &["--permission", "auto", "write it"],
    );
    assert_exit(&outside, 0);
    assert!(
        !target.exists(),
        "a write outside the workspace asks, and nobody can answer"
    );
    let added = run(
        work.path(),
        &responses,
        &[
            "--permission",
            "auto",
            "--add-dir",
            other.path().to_str().unwrap(),
            "write it",
        ],
    );
    assert_exit(&added, 0);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "x",
        "{}",
        tool_result(&added)
    );
    let missing = run(
        work.path(),
        &responses,
        &["--add-dir", "/no/such/folder", "x"],
    );
    assert_exit(&missing, 2);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--add-dir /no/such/folder"));
}

#[test]
fn max_turns_is_max_steps() {
    let work = tempfile::tempdir().unwrap();
    let looping = r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "true"}}]},
        {"tool_calls": [{"id": "c2", "name": "bash", "arguments": {"command": "true"}}]},
        {"text": "done"}]"#;
    let output = run(
        work.path(),
        looping,
        &["--permission", "auto", "--max-turns", "1", "go"],
    );
    assert_exit(&output, 7);
}

/// A run whose every write was refused still ends as the model ends it: exit 0 and status
/// `succeeded` in every output format (the refusals are results the model saw), with each
/// refusal named on stderr in text and as a failed call in JSON.
#[test]
fn a_run_with_every_write_denied_exits_the_same_in_every_format() {
    let work = tempfile::tempdir().unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let responses = r#"[{"tool_calls": [{"id": "c1", "name": "write", "arguments": {"path": "a.txt", "content": "x"}}]}, {"text": "I could not write a.txt."}]"#;
    let path = script(scripts.path(), responses);
    for format in ["text", "json", "stream-json"] {
        let output = keel()
            .args([
                "exec",
                "--permission",
                "ask",
                "--output-format",
                format,
                "--cwd",
            ])
            .arg(work.path())
            .arg("--mock-script")
            .arg(&path)
            .arg("write a.txt")
            .env("KEEL_HOME", work.path().join(".keel-home"))
            .output()
            .unwrap();
        assert_exit(&output, 0);
        let stdout = String::from_utf8_lossy(&output.stdout);
        match format {
            "text" => {
                assert_eq!(stdout, "I could not write a.txt.\n");
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(stderr.contains("--permission auto"), "{stderr}");
            }
            "json" => assert!(stdout.contains(r#""status":"succeeded""#), "{stdout}"),
            _ => assert!(
                stdout.contains(r#""status":"failed""#),
                "the call failed: {stdout}"
            ),
        }
        assert!(!work.path().join("a.txt").exists());
    }
}
