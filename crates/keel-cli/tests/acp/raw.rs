//! `keel acp` spoken to line by line, as a broken or vanishing editor would: malformed
//! input, unknown methods and sessions, a missing key, stdin closed mid-turn.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use crate::harness::{World, mock};

/// A keel spoken to in raw JSON lines.
struct Raw {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    seen: Vec<Value>,
}

impl Raw {
    fn new(mut child: tokio::process::Child) -> Self {
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        Self {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends a request and returns its response (notifications before it are kept).
    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&line.to_string()).await;
        self.response(json!(id)).await
    }

    async fn response(&mut self, id: Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = tokio::time::timeout_at(deadline.into(), self.lines.next_line())
                .await
                .expect("an answer in time")
                .unwrap()
                .expect("keel still running");
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|_| panic!("stdout carries only JSON-RPC: {line}"));
            if value.get("id") == Some(&id) && value.get("method").is_none() {
                return value;
            }
            self.seen.push(value);
        }
    }

    async fn initialize(&mut self) -> Value {
        self.call(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
    }
}

fn code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {response}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_gets_errors_and_the_server_keeps_serving() {
    let server = mock(json!([{"text": "still serving"}])).await;
    let world = World::new();
    let work = world.work();
    let mut raw = Raw::new(world.spawn(&server, &[]));
    raw.initialize().await;
    raw.send("this is not json").await;
    assert_eq!(code(&raw.response(Value::Null).await), -32700);
    // A byte that is not UTF-8 spoils its line only.
    let stdin = raw.stdin.as_mut().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":40,\"method\":\"session/list\",\"params\":{\"cursor\":\"a\xffb\"}}\n")
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    assert_eq!(code(&raw.response(json!(40)).await), -32602);
    raw.send(r#"[{"jsonrpc":"2.0","id":50,"method":"session/list","params":{}}]"#)
        .await;
    raw.send(r#"{"jsonrpc":"2.0","id":51,"method":"session/list","params":{}}"#)
        .await;
    let after_batch = raw.response(json!(51)).await;
    assert!(after_batch.get("result").is_some(), "{after_batch}");
    assert_eq!(
        code(&raw.call(2, "no/such_method", json!({})).await),
        -32601
    );
    assert_eq!(
        code(&raw.call(3, "session/new", json!({"cwd": 42})).await),
        -32602
    );
    assert_eq!(
        code(
            &raw.call(
                4,
                "session/new",
                json!({"cwd": "relative/dir", "mcpServers": []})
            )
            .await
        ),
        -32602
    );
    let unknown = raw
        .call(
            5,
            "session/prompt",
            json!({"sessionId": "s-nope", "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(code(&unknown), -32002, "{unknown}");
    let created = raw
        .call(6, "session/new", json!({"cwd": work, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let empty = raw
        .call(
            7,
            "session/prompt",
            json!({"sessionId": session, "prompt": []}),
        )
        .await;
    assert_eq!(code(&empty), -32602, "{empty}");
    let image = raw
        .call(8, "session/prompt", json!({"sessionId": session, "prompt": [{"type": "image", "data": "AAAA", "mimeType": "image/tiff"}]}))
        .await;
    assert_eq!(code(&image), -32602, "{image}");
    let answered = raw
        .call(
            9,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    drop(raw.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(5), raw.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_is_an_auth_method_and_a_clear_error() {
    let server = mock(json!([])).await;
    let world = World::new();
    let work = world.work();
    let mut raw = Raw::new(world.spawn_env(&server, &[], &[]));
    let init = raw.initialize().await;
    // The editor may run `keel login` in a terminal it opens, or set the variable.
    let login = &init["result"]["authMethods"][0];
    assert_eq!(login["type"], "terminal", "{init}");
    assert_eq!(login["args"], json!(["login", "anthropic"]), "{init}");
    assert_eq!(
        init["result"]["authMethods"][1]["id"], "env:ANTHROPIC_API_KEY",
        "{init}"
    );
    let created = raw
        .call(2, "session/new", json!({"cwd": work, "mcpServers": []}))
        .await;
    assert_eq!(code(&created), -32000, "{created}");
    assert!(
        created["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY")
    );
    let auth = raw
        .call(
            3,
            "authenticate",
            json!({"methodId": "env:ANTHROPIC_API_KEY"}),
        )
        .await;
    assert_eq!(code(&auth), -32000);
    let login = raw
        .call(4, "authenticate", json!({"methodId": "keel-login"}))
        .await;
    assert_eq!(code(&login), -32000, "nothing is stored yet: {login}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanishing_editor_ends_the_turn_and_the_history_stays_valid() {
    let server = mock(json!([
        {"shell": "sleep 30 && touch slept.txt"},
        {"text": "the session goes on"}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let mut raw = Raw::new(world.spawn(&server, &["--permission", "full"]));
    raw.initialize().await;
    let created = raw
        .call(2, "session/new", json!({"cwd": work, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "wait a while"}]}}).to_string()).await;
    // The command is running.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let line = tokio::time::timeout_at(deadline.into(), raw.lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if line.contains("in_progress") {
            break;
        }
    }
    let closed = Instant::now();
    drop(raw.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(10), raw.child.wait())
        .await
        .expect("keel exits when its editor goes")
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        closed.elapsed() < Duration::from_secs(6),
        "{:?}",
        closed.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ps = std::process::Command::new("pgrep")
        .args(["-f", "sleep 30 && touch slept.txt"])
        .output();
    if let Ok(ps) = ps {
        assert!(
            ps.stdout.is_empty(),
            "the command outlived keel: {}",
            String::from_utf8_lossy(&ps.stdout)
        );
    }
    // The history loads and the session continues in a new process.
    let mut raw = Raw::new(world.spawn(&server, &["--permission", "full"]));
    raw.initialize().await;
    let loaded = raw
        .call(
            2,
            "session/load",
            json!({"sessionId": session, "cwd": work, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed_call = raw
        .seen
        .iter()
        .find(|n| n["params"]["update"]["sessionUpdate"] == "tool_call")
        .cloned()
        .expect("the interrupted call is replayed");
    assert_eq!(replayed_call["params"]["update"]["status"], "failed");
    let answered = raw
        .call(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "and now?"}]}),
        )
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(!work.join("slept.txt").exists());
}

/// Protocol bounds (attack family): an editor, or whatever speaks in its place, cannot make
/// keel hold an unbounded line, echo it back whole, or open a session where it must not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_bounds_an_over_long_line_is_skipped_and_quoted_briefly() {
    let server = mock(json!([])).await;
    let world = World::new();
    let mut raw = Raw::new(world.spawn(&server, &[]));
    raw.initialize().await;
    // 9 MiB, one line: a request whose id keel never gets to read.
    let filler = "A".repeat(9 * 1024 * 1024);
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":70,"method":"session/list","params":{{"cursor":"{filler}"}}}}"#
    ))
    .await;
    let error = raw.response(Value::Null).await;
    assert_eq!(code(&error), -32700, "{error}");
    let said = error.to_string();
    assert!(
        said.len() < 1024,
        "the error quotes too much: {} bytes",
        said.len()
    );
    assert!(said.contains("acp.max_line_mib"), "{said}");
    assert!(said.contains(r#"{\"jsonrpc\":\"2.0\",\"id\":70"#), "{said}");
    let listed = raw.call(71, "session/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_bounds_home_root_and_other_folders_are_refused() {
    let server = mock(json!([{"text": "made"}])).await;
    let world = World::new();
    let work = world.work();
    let mut raw = Raw::new(world.spawn(&server, &[]));
    raw.initialize().await;
    let home = std::fs::canonicalize(world.user.path()).unwrap();
    for (id, cwd) in [(2, Path::new("/")), (3, home.as_path())] {
        let refused = raw
            .call(id, "session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        assert_eq!(code(&refused), -32602, "{refused}");
        assert!(
            refused.to_string().contains("allow-home-workspace"),
            "{refused}"
        );
    }
    let created = raw
        .call(4, "session/new", json!({"cwd": work, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    // A prefix names no session here, though `keel --session` takes one.
    let prefix = &session[..session.len() - 4];
    for (id, method) in [
        (5, "session/load"),
        (6, "session/resume"),
        (7, "session/fork"),
    ] {
        let by_prefix = raw
            .call(
                id,
                method,
                json!({"sessionId": prefix, "cwd": work, "mcpServers": []}),
            )
            .await;
        assert_eq!(code(&by_prefix), -32002, "{method}: {by_prefix}");
    }
    // Another folder would run the session with that folder's settings and files.
    let elsewhere = tempfile::tempdir().unwrap();
    for (id, method) in [
        (8, "session/load"),
        (9, "session/resume"),
        (10, "session/fork"),
    ] {
        let moved = raw
            .call(
                id,
                method,
                json!({"sessionId": session, "cwd": elsewhere.path(), "mcpServers": []}),
            )
            .await;
        assert_eq!(code(&moved), -32602, "{method}: {moved}");
        assert!(moved.to_string().contains("belongs to"), "{moved}");
    }
    let loaded = raw
        .call(
            11,
            "session/load",
            json!({"sessionId": session, "cwd": work, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_bounds_attachments_are_bounded_and_images_checked_by_their_bytes() {
    let server = mock(json!([{"text": "seen"}])).await;
    let world = World::new();
    let work = world.work();
    let mut raw = Raw::new(world.spawn(&server, &["-c", "acp.max_attachments_mib=1"]));
    raw.initialize().await;
    let created = raw
        .call(2, "session/new", json!({"cwd": work, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let svg = b64(b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>");
    let refused = raw
        .call(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": svg, "mimeType": "image/png"}]}),
        )
        .await;
    assert_eq!(code(&refused), -32602, "{refused}");
    assert!(refused.to_string().contains("not PNG"), "{refused}");
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.resize(700 * 1024, 0);
    let png = b64(&png);
    let image = || json!({"type": "image", "data": png, "mimeType": "image/png"});
    let over = raw
        .call(
            4,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look"}, image(), image()]}),
        )
        .await;
    assert_eq!(code(&over), -32602, "{over}");
    assert!(
        over.to_string().contains("acp.max_attachments_mib"),
        "{over}"
    );
    assert!(server.requests().is_empty(), "nothing reached the model");
    let answered = raw
        .call(
            5,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look"}, image()]}),
        )
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
}
