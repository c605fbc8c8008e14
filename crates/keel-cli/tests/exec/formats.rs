//! The three output formats, `-o FILE` and prompts from standard input.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::Stdio;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{assert_exit, exec_script, keel, lines, result_of};

/// Reasoning, one tool call, then the answer.
const TOOL_TURN: &str = r#"[
    {"thinking": "look first", "text": "working", "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hi"}}]},
    {"text": "the answer", "chunk_size": 4}
]"#;

#[test]
fn stream_json_is_one_enveloped_event_per_line_from_started_to_completed() {
    let (_dir, output) = exec_script(TOOL_TURN, &["--output-format", "stream-json", "go"]);
    assert_exit(&output, 0);
    let events = lines(&output.stdout);
    let first = &events[0];
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["schema_version"], 1, "{event}");
        assert_eq!(event["sequence"], i, "no gaps: {event}");
        assert!(event["timestamp_ms"].as_i64().unwrap() > 0, "{event}");
        for id in ["run_id", "session_id", "turn_id"] {
            assert!(event[id].as_str().is_some_and(|s| !s.is_empty()), "{event}");
            assert_eq!(event[id], first[id]);
        }
    }
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds[..3],
        ["exec.started", "session.started", "turn.started"]
    );
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["turn.completed", "exec.completed"]
    );

    let completed: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .map(|e| &e["item"])
        .collect();
    let item_types: BTreeSet<&str> = completed
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        item_types,
        BTreeSet::from(["agent_message", "reasoning", "tool_call"])
    );
    let started: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["type"] == "item.started")
        .map(|e| e["item"]["id"].as_str().unwrap())
        .collect();
    let ended: BTreeSet<&str> = completed
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(started, ended, "every started item completes");
    let call = completed.iter().find(|i| i["type"] == "tool_call").unwrap();
    // The tool's details ride along for front ends (a duration varies run to run).
    assert_eq!(call["details"]["exit_code"], 0);
    let mut call = (*call).clone();
    call.as_object_mut().unwrap().remove("details");
    assert_eq!(
        call,
        json!({"id": call["id"], "type": "tool_call", "call_id": "c1", "tool_name": "bash",
               "arguments": {"command": "echo hi"}, "result": "hi\n", "status": "completed"})
    );
    let messages: Vec<&str> = completed
        .iter()
        .filter(|i| i["type"] == "agent_message")
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["working", "the answer"]);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "item.updated" && e["delta"] == "the "),
        "answer deltas stream"
    );

    let result = &events.last().unwrap()["result"];
    assert_eq!(result["type"], "exec.result");
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["final_text"], "the answer");
    assert_eq!(result["session_id"], first["session_id"]);
    assert!(result["error"].is_null());
    let turn_completed = &events[events.len() - 2];
    assert_eq!(turn_completed["usage"], result["usage"]);
    assert!(turn_completed["duration_ms"].is_u64());
}

#[test]
fn json_prints_one_result_object() {
    let (_dir, output) = exec_script(TOOL_TURN, &["--output-format", "json", "go"]);
    assert_eq!(output.status.code(), Some(0));
    let mut result = result_of(&output);
    for volatile in ["run_id", "session_id", "turn_id", "duration_ms"] {
        assert!(!result[volatile].is_null(), "{volatile}");
        result[volatile] = json!("-");
    }
    assert_eq!(
        result,
        json!({
            "type": "exec.result", "schema_version": 1, "run_id": "-", "status": "succeeded",
            "final_text": "the answer", "session_id": "-", "turn_id": "-",
            "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0,
                      "cost": {"input": 0.0, "output": 0.0, "cache_read": 0.0,
                               "cache_write": 0.0, "total": 0.0}},
            "duration_ms": "-", "error": null
        })
    );
}

#[test]
fn text_prints_only_the_final_answer_and_progress_goes_to_stderr() {
    let (_dir, output) = exec_script(TOOL_TURN, &["go"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "the answer\n");
    let stderr = String::from_utf8(output.stderr).unwrap();
    // A command shows its text as it runs.
    assert!(stderr.contains("[bash `echo hi`]"), "{stderr}");
}

#[test]
fn text_says_why_a_call_failed_and_how_to_let_it_run() {
    let (_dir, output) = exec_script(
        r#"[{"tool_calls": [{"id": "c1", "name": "write", "arguments": {"path": "notes.txt", "content": "x"}}]}, {"text": "done"}]"#,
        &["--permission", "ask", "go"],
    );
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("[write notes.txt: "), "{stderr}");
    assert!(stderr.contains("pass --permission auto"), "{stderr}");
}

#[test]
fn a_failed_turn_in_stream_json_ends_with_turn_failed() {
    let (_dir, output) = exec_script(
        r#"[{"error": {"code": "auth", "message": "bad key"}}]"#,
        &["--output-format", "stream-json", "hi"],
    );
    assert_eq!(output.status.code(), Some(4));
    let events = lines(&output.stdout);
    let failed = &events[events.len() - 2];
    assert_eq!(failed["type"], "turn.failed");
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["error"],
        json!({"code": "model_auth", "message": "bad key", "retryable": false})
    );
    let result = &events.last().unwrap()["result"];
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"], failed["error"]);
}

#[test]
fn dash_o_writes_the_last_message_atomically() {
    let out_dir = tempfile::tempdir().unwrap();
    let file = out_dir.path().join("answer.txt");
    std::fs::write(&file, "old").unwrap();
    let file_arg = file.to_str().unwrap().to_owned();
    let (_dir, output) = exec_script(TOOL_TURN, &["-o", &file_arg, "go"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "the answer");
    let left: Vec<_> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["answer.txt"], "no temporary file is left behind");
}

#[test]
fn the_prompt_comes_from_stdin_with_a_dash_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::script(dir.path(), r#"[{"text": "read it"}]"#);
    for args in [vec!["-"], vec![]] {
        let mut child = keel()
            .args(["exec", "--output-format", "json", "--mock-script"])
            .arg(&path)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"a prompt from a pipe")
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(result_of(&output)["final_text"], "read it");
    }
    let output = keel()
        .args(["exec", "--mock-script"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "an empty prompt is a bad invocation"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("the prompt is empty"));
}

/// Lines are written as the response streams, not held until it ends: the response has
/// sixty one-character chunks 300 ms apart (18 s in all), and its first delta must be on
/// stdout within 10 s.
#[test]
fn stream_json_lines_arrive_while_the_response_is_still_streaming() {
    use std::io::BufRead as _;

    let dir = tempfile::tempdir().unwrap();
    let text = "x".repeat(60);
    let path = crate::script(
        dir.path(),
        &json!([{"text": text, "chunk_size": 1, "delay_ms": 300}]).to_string(),
    );
    let mut child = keel()
        .arg("exec")
        .arg("--mock-script")
        .arg(&path)
        .args(["--output-format", "stream-json", "go"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let event: serde_json::Value = serde_json::from_str(&line).unwrap();
            if event["type"] == "item.updated" && tx.send(event).is_err() {
                break;
            }
        }
    });
    let delta = rx.recv_timeout(std::time::Duration::from_secs(10));
    child.kill().unwrap();
    child.wait().unwrap();
    let delta = delta.expect("no streamed delta reached stdout while the response streamed");
    assert_eq!(delta["delta"], "x", "{delta}");
}

/// Regression: two tool calls with one id came out as one garbled stream-json item (its
/// arguments the two calls' run together) and history held two results for one id.
#[test]
fn two_tool_calls_with_one_id_get_an_item_each() {
    let script = json!([
        {"tool_calls": [
            {"id": "dup", "name": "bash", "arguments": {"command": "echo one"}},
            {"id": "dup", "name": "bash", "arguments": {"command": "echo two"}}]},
        {"text": "done"}
    ]);
    let (_dir, output) = exec_script(
        &script.to_string(),
        &["--output-format", "stream-json", "go"],
    );
    assert_exit(&output, 0);
    let events = lines(&output.stdout);
    let mut calls: Vec<serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .map(|e| e["item"].clone())
        .collect();
    calls.sort_by_key(|item| item["call_id"].as_str().unwrap().to_owned());
    for call in &mut calls {
        call.as_object_mut().unwrap().remove("details");
    }
    assert_ne!(calls[0]["id"], calls[1]["id"], "two items");
    assert_eq!(
        calls,
        [
            json!({"id": calls[0]["id"], "type": "tool_call", "call_id": "dup",
                   "tool_name": "bash", "arguments": {"command": "echo one"},
                   "result": "one\n", "status": "completed"}),
            json!({"id": calls[1]["id"], "type": "tool_call", "call_id": "dup~2",
                   "tool_name": "bash", "arguments": {"command": "echo two"},
                   "result": "Duplicate tool call id `dup` in this turn; this call was not run \
                              (it was renamed `dup~2` so that every call keeps its own result). \
                              Issue it again with a new id.",
                   "status": "failed"}),
        ]
    );
    let started = events
        .iter()
        .filter(|e| e["type"] == "item.started" && e["item"]["type"] == "tool_call")
        .count();
    assert_eq!(started, 2);

    // The stored history pairs each call with its own result.
    let session = events[0]["session_id"].as_str().unwrap();
    let shown = keel()
        .args(["sessions", "show", session, "--json"])
        .output()
        .unwrap();
    assert_exit(&shown, 0);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let ids: Vec<String> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|entry| {
            let message = &entry["message"];
            match message["role"].as_str() {
                Some("assistant") => message["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|b| b["id"].as_str().map(|id| format!("call {id}")))
                    .collect(),
                Some("tool_result") => {
                    vec![format!(
                        "result {}",
                        message["tool_call_id"].as_str().unwrap()
                    )]
                }
                _ => Vec::new(),
            }
        })
        .collect();
    assert_eq!(
        ids,
        ["call dup", "call dup~2", "result dup", "result dup~2"]
    );
}
