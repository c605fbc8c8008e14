//! Background tasks through the real binary against `keel-mockllm`: `keel exec` waits for a
//! background task and answers from the turn its completion notice starts; a process killed
//! while a task runs leaves the task `lost`, and the resumed session is told so, answers the
//! interrupted call once and runs nothing twice.
//!
//! The mock answers requests strictly in the order they arrive, and a parent and its task's
//! child ask the same server: where both may be waiting at once, the script gives them the
//! same answer, so the order they arrive in does not matter.

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use keel_mockllm::{MockServer, Response, ToolCall};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::Mock;
use crate::sessions::{Home, stderr};

/// What the explore task answers (and the parent's first turn, which asks at the same time).
const FOUND: &str = "The parser lives in src/parse.rs.";
/// The follow-up turn's answer, the run's final one.
const FINAL: &str = "Done: the task found src/parse.rs.";
/// Longest a test waits for a run or a request.
const PATIENCE: Duration = Duration::from_secs(60);

/// A home whose configuration points at the mock server.
fn home_for(server: &MockServer) -> Home {
    let home = Home::new();
    let config = format!(
        "model: mock/m\nproviders:\n  mock:\n    api: openai-completions\n    base_url: {}/v1\n    models:\n      m: {{context_window: 64000, max_output: 4096}}\n",
        server.url()
    );
    std::fs::write(home.home.path().join("config.yaml"), config).unwrap();
    home
}

fn task_call(id: &str, description: &str, background: bool) -> Value {
    json!({"id": id, "name": "task", "arguments": {
        "description": description, "prompt": "Find where the parser lives.",
        "agent": "explore", "background": background}})
}

/// The parent starts a background explore task; its answer and the task's (asked at the same
/// time) are the same text, sent after a pause long enough for the parent to be past the
/// point where a notice would steer its first turn.
fn background_script() -> String {
    let found = json!({"text": FOUND, "first_delay_ms": 500});
    json!([{"tool_calls": [task_call("t1", "map the parser", true)]}, found, found]).to_string()
}

/// `keel exec --permission auto --timeout 60s ARGS… PROMPT` in the home's folder, stdout piped.
fn spawn(home: &Home, args: &[&str], prompt: &str) -> Child {
    home.keel()
        .args(["exec", "--permission", "auto", "--timeout", "60s"])
        .args(args)
        .arg(prompt)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the run's stdout lines, handing each to `on_line`, then waits for it to exit.
fn finish(mut child: Child, mut on_line: impl FnMut(&str)) -> Output {
    let stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        on_line(&line);
        seen.push(line);
    }
    let mut output = child.wait_with_output().unwrap();
    output.stdout = (seen.join("\n") + "\n").into_bytes();
    output
}

fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stderr: {}\nstdout: {}",
        stderr(output),
        String::from_utf8_lossy(&output.stdout)
    );
}

/// A request's body as text, to look for what it carries.
fn body(server: &MockServer, index: usize) -> String {
    server.requests()[index].body.to_string()
}

#[test]
fn exec_waits_for_a_background_task_and_answers_from_the_turn_its_notice_starts() {
    let mock = Mock::new();
    let server = mock.serve(&background_script());
    let home = home_for(&server);
    let child = spawn(
        &home,
        &["--output-format", "stream-json"],
        "map the parser in the background",
    );
    // The follow-up turn reads the task's output by its id, known once the task is made.
    let mut pushed = false;
    let output = finish(child, |line| {
        let event: Value = serde_json::from_str(line).unwrap();
        if !pushed && event["type"] == "task.updated" {
            pushed = true;
            let id = event["task"]["id"].as_str().unwrap().to_owned();
            server.push(Response {
                tool_calls: vec![ToolCall {
                    id: Some("o1".into()),
                    name: "task_output".into(),
                    arguments: json!({"task_id": id}),
                }],
                ..Response::default()
            });
            server.push(Response {
                text: Some(FINAL.into()),
                ..Response::default()
            });
        }
    });
    assert_exit(&output, 0);
    let events = events(&output);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let turns: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn.started")
        .map(|e| &e["turn_id"])
        .collect();
    assert_eq!(
        turns.len(),
        2,
        "the notice started a second turn: {kinds:?}"
    );
    // The first turn is closed before the second starts; the run ends with the second.
    let first_closed = kinds.iter().position(|k| *k == "turn.completed").unwrap();
    let second_started = kinds.iter().rposition(|k| *k == "turn.started").unwrap();
    assert!(first_closed < second_started, "{kinds:?}");
    assert_eq!(events[first_closed]["turn_id"], *turns[0]);
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["turn.completed", "exec.completed"]
    );
    let result = &events.last().unwrap()["result"];
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["final_text"], FINAL);
    assert_eq!(result["turn_id"], *turns[1]);
    // The task's life, as `task.updated` lines.
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "task.updated")
        .map(|e| e["task"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses[..3],
        ["queued", "running", "succeeded"],
        "{statuses:?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "task.updated"
            && e["task"]["delivered_ms"].is_i64()
            && e["task"]["agent"] == "explore"),
        "the notice was delivered"
    );
    // The follow-up turn was started by the notice and read the result.
    assert_eq!(
        server.requests().len(),
        5,
        "parent, task, parent, follow-up twice"
    );
    assert!(
        body(&server, 3).contains("<task_notice"),
        "{}",
        body(&server, 3)
    );
    let read = events
        .iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["call_id"] == "o1")
        .unwrap();
    let text = read["item"]["result"].as_str().unwrap();
    assert!(
        text.contains("<task_result") && text.contains(FOUND),
        "{text}"
    );
    // The task's session is listed under its parent, not beside it.
    let list = home.sessions_json(&["list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let parent = &list[0];
    assert_eq!(parent["id"], events[0]["session_id"]);
    assert_eq!(parent["parent_id"], Value::Null);
    let children = parent["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{list}");
    assert_eq!(children[0]["parent_id"], parent["id"]);
    assert_eq!(children[0]["title"], "map the parser");
    assert_eq!(children[0]["task"]["agent"], "explore");
    assert_eq!(children[0]["task"]["status"], "succeeded");
}

#[test]
fn text_notes_a_task_start_and_end_and_prints_the_last_answer() {
    let mock = Mock::new();
    let server = mock.serve(&background_script());
    server.push(Response {
        text: Some(FINAL.into()),
        ..Response::default()
    });
    let home = home_for(&server);
    let output = finish(
        spawn(&home, &[], "map the parser in the background"),
        |_| {},
    );
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{FINAL}\n")
    );
    let notes: Vec<String> = stderr(&output)
        .lines()
        .filter(|l| l.starts_with("[task task-"))
        .map(|l| {
            l.split_once(' ')
                .unwrap()
                .1
                .split_once(' ')
                .unwrap()
                .1
                .to_owned()
        })
        .collect();
    assert_eq!(
        notes,
        [
            "explore \"map the parser\" — running]",
            "explore \"map the parser\" — succeeded]"
        ],
        "{}",
        stderr(&output)
    );
    let text = home.keel().args(["sessions", "list"]).output().unwrap();
    let listing = String::from_utf8_lossy(&text.stdout).into_owned();
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 4, "{listing}");
    assert!(lines[0].starts_with("Sessions in "), "{listing}");
    assert!(lines[1].starts_with("UPDATED "), "{listing}");
    assert!(lines[2].contains(" s-"), "{listing}");
    let child = lines[3].trim_start();
    assert!(
        lines[3].len() - child.len() == lines[2].find(" s-").unwrap() + 1
            && child.starts_with("└ s-")
            && child.contains("map the parser")
            && child.contains("(explore task-")
            && child.ends_with(": succeeded)"),
        "{listing}"
    );
}

/// Waits until the mock has received `count` requests.
fn wait_for_requests(server: &MockServer, count: usize, child: &mut Child) {
    let deadline = Instant::now() + PATIENCE;
    while server.requests().len() < count {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "keel ended early ({status}) after {} requests",
                server.requests().len()
            );
        }
        assert!(
            Instant::now() < deadline,
            "only {} requests",
            server.requests().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_task_killed_with_its_process_is_lost_and_the_resumed_session_is_told_once() {
    let mock = Mock::new();
    // A foreground task: the parent waits in its tool call while the task's request stalls.
    let script = json!([
        {"tool_calls": [task_call("t1", "inspect the repo", false)]},
        {"fault": {"kind": "stall", "after_events": 0}}
    ]);
    let server = mock.serve(&script.to_string());
    let home = home_for(&server);
    let mut child = spawn(&home, &["--output-format", "stream-json"], "inspect it");
    wait_for_requests(&server, 2, &mut child);
    // SIGKILL: nothing of keel's runs after it.
    child.kill().unwrap();
    let killed = child.wait_with_output().unwrap();
    assert_eq!(killed.status.signal(), Some(9));
    let session = events(&killed)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Listed before anything reopens the session, the task is not shown running.
    let list = home.sessions_json(&["list", "--json"]);
    assert_eq!(list[0]["children"][0]["task"]["status"], "lost", "{list}");

    server.push(Response {
        text: Some("The task was lost; I will look myself.".into()),
        ..Response::default()
    });
    let resumed = finish(
        spawn(
            &home,
            &["--output-format", "stream-json", "--session", &session],
            "carry on",
        ),
        |_| {},
    );
    assert_exit(&resumed, 0);
    let result = events(&resumed).pop().unwrap();
    assert_eq!(
        result["result"]["final_text"],
        "The task was lost; I will look myself."
    );

    // The task is lost; its session is still listed under the parent, once.
    let list = home.sessions_json(&["list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let children = list[0]["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "the task ran once: {list}");
    assert_eq!(children[0]["task"]["status"], "lost");
    // The resumed turn's request says so; nothing else was asked (the task was not re-run).
    assert_eq!(server.requests().len(), 3);
    let request = body(&server, 2);
    assert!(
        request.contains("was lost") && request.contains("inspect the repo"),
        "{request}"
    );
    // The interrupted call is answered once; the history holds the task call once.
    let messages = home.messages(&session);
    let calls = messages
        .iter()
        .filter(|(role, text)| role == "assistant" && text.contains("call t1"))
        .count();
    let answers: Vec<&String> = messages
        .iter()
        .filter(|(role, _)| role == "tool_result")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(calls, 1, "{messages:?}");
    assert_eq!(answers.len(), 1, "{messages:?}");
    assert!(answers[0].starts_with("interrupted:"), "{messages:?}");
    assert_eq!(
        messages.last().unwrap(),
        &(
            "assistant".to_owned(),
            "The task was lost; I will look myself.".to_owned()
        )
    );
}

#[test]
fn the_timeout_covers_a_background_task_and_stops_it() {
    let mock = Mock::new();
    // The parent's own command runs while the task asks, so the task's request (which
    // stalls) comes first and the parent's answer second.
    let script = json!([
        {"tool_calls": [task_call("t1", "map the parser", true),
            {"id": "b1", "name": "bash", "arguments": {"command": "sleep 1"}}]},
        {"fault": {"kind": "stall", "after_events": 0}},
        {"text": "Started the task."}
    ]);
    let server = mock.serve(&script.to_string());
    let home = home_for(&server);
    let started = Instant::now();
    let output = finish(
        home.keel()
            .args(["exec", "--permission", "auto", "--timeout", "3s"])
            .args(["--output-format", "stream-json", "map it"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        |_| {},
    );
    assert_exit(&output, 6);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let events = events(&output);
    let result = &events.last().unwrap()["result"];
    assert_eq!(result["status"], "timeout", "{result}");
    assert_eq!(result["error"]["code"], "timeout");
    let last = events
        .iter()
        .filter(|e| e["type"] == "task.updated")
        .map(|e| e["task"]["status"].as_str().unwrap())
        .next_back();
    assert_eq!(last, Some("canceled"));
    let list = home.sessions_json(&["list", "--json"]);
    assert_eq!(
        list[0]["children"][0]["task"]["status"], "canceled",
        "{list}"
    );
}
