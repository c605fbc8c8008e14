//! The `keel-mcptest` binary, driven with raw JSON-RPC over stdio and raw HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_keel-mcptest");
/// Generous for a loaded machine; a healthy run answers in milliseconds.
const PATIENCE: Duration = Duration::from_secs(10);

/// A server on stdio; killed when dropped.
struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl StdioServer {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        // A reader thread lets every read time out instead of hanging the test.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        let line = self.lines.recv_timeout(PATIENCE).expect("no line in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Sends request `id` and returns its answer, collecting anything else that came first.
    fn request(&mut self, id: u64, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut others = Vec::new();
        loop {
            let message = self.next();
            if message["id"] == json!(id) {
                return (message, others);
            }
            others.push(message);
        }
    }

    fn initialize(&mut self) -> Value {
        let (answer, _) = self.request(
            0,
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}
            }),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    fn tool_names(&mut self, id: u64) -> Vec<String> {
        let (answer, _) = self.request(id, "tools/list", json!({}));
        answer["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[test]
fn stdio_handshake_lists_tools_and_echoes() {
    let mut server = StdioServer::start(&["--name", "alpha", "--tools", "3"]);
    let init = server.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "alpha");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);

    let names = server.tool_names(1);
    for name in [
        "echo", "add", "sleep", "crash", "mutate", "tool_000", "tool_002",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "tool_003"));

    let (answer, _) = server.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi there"}}),
    );
    assert_eq!(
        answer["result"]["content"],
        json!([{"type": "text", "text": "hi there"}])
    );

    let (answer, _) = server.request(
        3,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 40}}),
    );
    assert_eq!(answer["result"]["structuredContent"], json!({"sum": 42}));

    let (answer, _) = server.request(4, "tools/call", json!({"name": "echo", "arguments": {}}));
    assert_eq!(answer["error"]["code"], -32602);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message")
    );

    let (answer, _) = server.request(5, "tools/call", json!({"name": "nope"}));
    assert_eq!(answer["error"]["code"], -32602);
}

#[test]
fn stdio_mutate_announces_the_new_tool_list() {
    let mut server = StdioServer::start(&[]);
    server.initialize();
    assert!(!server.tool_names(1).iter().any(|n| n == "added_later"));

    let (answer, before) = server.request(2, "tools/call", json!({"name": "mutate"}));
    assert_eq!(answer["result"]["isError"], false);
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "no list_changed before the answer: {before:?}"
    );

    let (answer, _) = server.request(3, "tools/list", json!({}));
    let tools = answer["result"]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["description"], "echo v2");
    assert!(tools.iter().any(|t| t["name"] == "added_later"));
}

#[test]
fn stdio_crash_exits_3_and_counts_starts_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    let mut server = StdioServer::start(&["--state-dir", state]);
    server.initialize();
    server.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "crash"}}),
    );
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let count = |file: &str| {
        std::fs::read_to_string(dir.path().join(file))
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!((count("starts"), count("crashes")), (1, 1));
}

/// A server on HTTP; killed when dropped.
struct HttpServer(Child);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// POSTs an `initialize` with `headers` and returns the whole response.
fn post_initialize(addr: &str, headers: &str) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}
    })
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nconnection: close\r\n{headers}\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn http_requires_the_bearer_token_and_header() {
    let mut child = Command::new(BIN)
        .args(["--http", "127.0.0.1:0", "--require-bearer", "s3cret"])
        .args(["--require-header", "X-Team=keel", "--name", "beta"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = HttpServer(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();

    let unauthorized = "HTTP/1.1 401";
    assert!(post_initialize(&addr, "").starts_with(unauthorized));
    assert!(post_initialize(&addr, "x-team: keel\r\n").starts_with(unauthorized));
    let wrong = "x-team: keel\r\nauthorization: Bearer nope\r\n";
    assert!(post_initialize(&addr, wrong).starts_with(unauthorized));
    let right = "x-team: keel\r\nauthorization: Bearer s3cret\r\n";
    let response = post_initialize(&addr, right);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""name":"beta""#), "{response}");
}
