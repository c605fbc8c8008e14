//! Exit codes and the statuses behind them: timeout, step limit, structured output,
//! signals, a closed stdout, bad invocations.

use std::io::BufRead as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{assert_exit, exec_script, keel, lines, result_of};

/// A model that takes a long time to answer.
const SLOW: &str = r#"[{"text": "too late", "first_delay_ms": 30000}]"#;

#[test]
fn a_timeout_aborts_the_turn_with_exit_6() {
    let started = Instant::now();
    let (_dir, output) = exec_script(
        SLOW,
        &["--output-format", "json", "--timeout", "300ms", "hi"],
    );
    assert_exit(&output, 6);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the turn was aborted"
    );
    let result = result_of(&output);
    assert_eq!(result["status"], "timeout");
    assert_eq!(result["error"]["code"], "timeout");
}

#[test]
fn the_step_limit_stops_a_looping_model_with_exit_7() {
    let call = |id: &str| json!({"tool_calls": [{"id": id, "name": "bash", "arguments": {"command": "true"}}]});
    let script = json!([call("c1"), call("c2"), call("c3"), call("c4"), {"text": "never"}]);
    let (_dir, output) = exec_script(
        &script.to_string(),
        &["--output-format", "stream-json", "--max-steps", "2", "loop"],
    );
    assert_exit(&output, 7);
    let events = lines(&output.stdout);
    let calls = events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .count();
    assert_eq!(calls, 2, "two steps ran");
    let failed = &events[events.len() - 2];
    assert_eq!(failed["type"], "turn.failed");
    assert_eq!(failed["status"], "limit_exceeded");
    assert_eq!(failed["error"]["code"], "step_limit_exceeded");
    assert_eq!(events.last().unwrap()["result"]["status"], "limit_exceeded");
}

#[test]
fn structured_output_must_match_the_schema() {
    let schema_dir = tempfile::tempdir().unwrap();
    let schema = schema_dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}"#,
    )
    .unwrap();
    let schema_arg = schema.to_str().unwrap();
    let run = |answer: &str| {
        let script = json!([{ "text": answer }]).to_string();
        exec_script(
            &script,
            &[
                "--output-format",
                "json",
                "--output-schema",
                schema_arg,
                "count",
            ],
        )
        .1
    };

    let valid = run(r#"{"n": 3}"#);
    assert_eq!(valid.status.code(), Some(0));
    let result = result_of(&valid);
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["structured_output"], json!({"n": 3}));

    let invalid = run(r#"{"n": "three"}"#);
    assert_eq!(invalid.status.code(), Some(4));
    let result = result_of(&invalid);
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"]["code"], "structured_output_invalid");
    assert_eq!(result["final_text"], r#"{"n": "three"}"#);

    let prose = run("three");
    assert_eq!(prose.status.code(), Some(4));
    assert_eq!(
        result_of(&prose)["error"]["code"],
        "structured_output_invalid"
    );

    std::fs::write(&schema, r#"{"type": 12}"#).unwrap();
    let bad_schema = run("{}");
    assert_eq!(
        bad_schema.status.code(),
        Some(2),
        "a bad schema is a bad invocation"
    );
}

/// Starts a slow stream-json run and waits for its first line, so signal handlers are in
/// place.
fn slow_child() -> (
    tempfile::TempDir,
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::script(dir.path(), SLOW);
    let mut child = keel()
        .args(["exec", "--output-format", "stream-json", "--mock-script"])
        .arg(&path)
        .arg("hi")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains("exec.started"), "{first}");
    (dir, child, stdout)
}

#[test]
fn sigterm_and_sigint_cancel_the_turn_with_exit_130() {
    for signal in ["-TERM", "-INT"] {
        let (_dir, mut child, mut stdout) = slow_child();
        let killed = std::process::Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{signal}");
        let events = lines(&rest);
        let result = &events.last().unwrap()["result"];
        assert_eq!(result["status"], "cancelled", "{signal}");
        assert_eq!(result["error"]["code"], "cancelled");
    }
}

#[test]
fn a_closed_stdout_exits_141_without_a_panic() {
    // stream-json: the reader goes away mid-turn, and the turn stops.
    let (_dir, mut child, stdout) = slow_child();
    drop(stdout);
    let started = Instant::now();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the turn was stopped"
    );

    // text: the answer meets a closed pipe.
    let dir = tempfile::tempdir().unwrap();
    let path = crate::script(
        dir.path(),
        r#"[{"text": "nobody reads this", "first_delay_ms": 300}]"#,
    );
    let mut child = keel()
        .args(["exec", "--mock-script"])
        .arg(&path)
        .arg("hi")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_invocations_exit_2() {
    for args in [
        vec!["exec", "--bogus", "hi"],
        vec!["exec", "--max-steps", "0", "hi"],
        vec!["exec", "--timeout", "soon", "hi"],
        vec!["exec", "--output-format", "xml", "hi"],
    ] {
        let output = keel().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

/// A turn whose only answer had no text and no tool call used to exit 0 with status
/// `succeeded` and an empty answer.
#[test]
fn an_empty_only_answer_fails_with_empty_response() {
    let (_dir, output) = exec_script(
        r#"[{"thinking": "Let me think"}]"#,
        &["--output-format", "json", "hi"],
    );
    assert_exit(&output, 4);
    let result = result_of(&output);
    assert_eq!(result["status"], "failed");
    assert_eq!(
        result["error"],
        json!({
            "code": "empty_response",
            "message": "the model ended its first response with no text and no tool call (it only reasoned)",
            "retryable": false,
        })
    );

    let (_dir, output) = exec_script("[{}]", &["hi"]);
    assert_exit(&output, 4);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("empty_response"), "{stderr}");
}

/// A background shell command does not hold the run: the run ends when the session is at
/// rest, says it stops the command, and the command's process group is gone after it.
#[test]
fn a_background_command_does_not_hold_the_run_and_ends_with_it() {
    let script = json!([
        {"tool_calls": [{"id": "b1", "name": "bash",
            "arguments": {"command": "sleep 600", "run_in_background": true}}]},
        {"text": "started it"}
    ]);
    let (_dir, output) = exec_script(
        &script.to_string(),
        &[
            "--output-format",
            "stream-json",
            "--permission",
            "full",
            "go",
        ],
    );
    assert_exit(&output, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stopping 1 background command still running"),
        "{stderr}"
    );
    let events = lines(&output.stdout);
    let started = events
        .iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .expect("the command's result");
    let pgid = started["item"]["details"]["pgid"]
        .as_i64()
        .or_else(|| {
            let text = started["item"]["result"].as_str()?;
            let after = text.split("process group ").nth(1)?;
            after.split(')').next()?.parse().ok()
        })
        .expect("the process group");
    // Killed at once; only a zombie may wait a moment for this machine's init to reap it.
    let ps = std::process::Command::new("ps")
        .args(["-eo", "pgid=,stat="])
        .output()
        .unwrap();
    let alive = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter_map(|line| {
            line.split_once(char::is_whitespace)
                .map(|(g, s)| (g.trim().to_owned(), s.trim().to_owned()))
        })
        .any(|(group, stat)| group == pgid.to_string() && !stat.starts_with('Z'));
    assert!(!alive, "process group {pgid} outlived the run");
    assert_eq!(events.last().unwrap()["result"]["final_text"], "started it");
}
