//! The `keel-mockllm` binary: prints its port, serves the workload, records requests.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A chat-completions request declaring a `bash` tool.
const TOOLS: &str = r#"{"model":"m","stream":true,"messages":[],"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]}"#;

/// Starts the mock and returns it with the URL it printed.
fn start(command: &mut Command) -> (Killed, String) {
    let mut child = Killed(command.stdout(Stdio::piped()).spawn().unwrap());
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect(&line)
        .to_owned();
    (child, url)
}

/// Sends one request that asks the mock to close the connection, and reads until it does.
fn post(url: &str, path: &str, body: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).unwrap();
    send(&mut stream, addr, path, body, "connection: close\r\n");
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

fn send(stream: &mut TcpStream, addr: &str, path: &str, body: &str, extra: &str) {
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
}

/// Reads one chunked response: its head, then the decoded body up to the last chunk.
fn read_chunked(reader: &mut BufReader<TcpStream>) -> (String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = String::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).unwrap();
        let size = usize::from_str_radix(size.trim_end(), 16).expect(&size);
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        assert_eq!(&chunk[size..], b"\r\n", "a chunk ends with CRLF");
        if size == 0 {
            return (head, body);
        }
        body.push_str(std::str::from_utf8(&chunk[..size]).unwrap());
    }
}

#[test]
fn serves_the_workload_and_records_requests() {
    let dir = std::env::temp_dir().join(format!("keel-mockllm-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("requests.jsonl");
    let timings = dir.join("timings.jsonl");
    let _ = std::fs::remove_file(&record);
    let _ = std::fs::remove_file(&timings);
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel-mockllm"));
    command
        .args(["--workload", "steps=2,kib=1,chunk=32", "--record"])
        .arg(&record)
        .arg("--timings")
        .arg(&timings);
    let (_child, url) = start(&mut command);
    let tools = TOOLS;
    let first = post(&url, "/v1/chat/completions", tools);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        first.contains("Step 0")
            && first.contains(r#"\"command\":\"ls\""#)
            && first.contains("[DONE]"),
        "{first}"
    );
    let second = post(&url, "/v1/chat/completions", tools);
    assert!(second.contains("echo step 1"));
    let last = post(&url, "/v1/chat/completions", tools);
    assert!(last.contains("All 2 steps are done."));
    let exhausted = post(&url, "/v1/chat/completions", tools);
    assert!(
        exhausted.starts_with("HTTP/1.1 500") && exhausted.contains("no response for request 3"),
        "{exhausted}"
    );
    let lines = std::fs::read_to_string(&record).unwrap().lines().count();
    assert_eq!(lines, 4);
    // A timing line is written once the response has ended, which can be just after the
    // client saw the end of it, so lines of connections served one after the other may be
    // written in either order: readers sort them by index.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut timed: Vec<serde_json::Value> = loop {
        let timed: Vec<serde_json::Value> = std::fs::read_to_string(&timings)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        if timed.len() >= 4 || std::time::Instant::now() > deadline {
            break timed;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(timed.len(), 4, "{timed:?}");
    timed.sort_by_key(|t| t["index"].as_u64());
    for (i, t) in timed.iter().enumerate() {
        assert_eq!(t["index"], i, "{timed:?}");
        let first = t["first_byte_ms"].as_f64().unwrap();
        let received = t["received_ms"].as_f64().unwrap();
        let done = t["done_ms"].as_f64().unwrap();
        assert!(
            first > 1.7e12 && received >= first && done >= received,
            "{timed:?}"
        );
    }
}

/// Real providers keep a connection open between requests; so does the mock for a normal
/// stream, sent chunked, while a client that asks to close gets a close-delimited body.
#[test]
fn a_normal_stream_keeps_its_connection_for_the_next_request() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel-mockllm"));
    command.args(["--workload", "steps=1,kib=1,chunk=32"]);
    let (_child, url) = start(&mut command);
    let addr = url.trim_start_matches("http://").to_owned();
    let tools = TOOLS;
    let stream = TcpStream::connect(&addr).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    send(&mut writer, &addr, "/v1/chat/completions", tools, "");
    let (head, body) = read_chunked(&mut reader);
    assert!(
        head.starts_with("HTTP/1.1 200") && head.contains("transfer-encoding: chunked"),
        "{head}"
    );
    assert!(!head.contains("connection: close"), "{head}");
    assert!(
        body.contains("Step 0") && body.ends_with("data: [DONE]\n\n"),
        "{body}"
    );
    // The same connection carries the next requests, even sent before their answers
    // (pipelined): the second gets the final answer, the third an error status, which ends
    // the connection.
    send(&mut writer, &addr, "/v1/chat/completions", tools, "");
    send(&mut writer, &addr, "/v1/chat/completions", tools, "");
    let (_, body) = read_chunked(&mut reader);
    assert!(body.contains("All 1 steps are done."), "{body}");
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    assert!(
        rest.starts_with("HTTP/1.1 500") && rest.contains("connection: close"),
        "{rest}"
    );
}

/// An HTTP/1.0 client, or one whose `Connection` header lists `close`, gets a body delimited
/// by the end of the connection.
#[test]
fn clients_that_cannot_keep_the_connection_get_it_closed() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel-mockllm"));
    command.args(["--workload", "steps=1,kib=1,chunk=32"]);
    let (_child, url) = start(&mut command);
    let addr = url.trim_start_matches("http://").to_owned();
    for (version, extra) in [
        ("HTTP/1.0", ""),
        ("HTTP/1.1", "connection: keep-alive, Close\r\n"),
    ] {
        let mut stream = TcpStream::connect(&addr).unwrap();
        write!(
            stream,
            "POST /v1/chat/completions {version}\r\nhost: {addr}\r\n{extra}content-length: {}\r\n\r\n{TOOLS}",
            TOOLS.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(
            response.contains("connection: close") && !response.contains("transfer-encoding"),
            "{version} {extra}: {response}"
        );
    }
}

/// `--close-connections`: every response ends its connection, as before keep-alive.
#[test]
fn close_connections_ends_every_connection() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel-mockllm"));
    command.args([
        "--workload",
        "steps=1,kib=1,chunk=32",
        "--close-connections",
    ]);
    let (_child, url) = start(&mut command);
    let addr = url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).unwrap();
    send(&mut stream, &addr, "/v1/chat/completions", TOOLS, "");
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200") && response.contains("connection: close"),
        "{response}"
    );
    assert!(response.contains("Step 0") && response.ends_with("data: [DONE]\n\n"));
}

#[test]
fn a_bad_script_is_named() {
    let dir = std::env::temp_dir().join(format!("keel-mockllm-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.json");
    std::fs::write(&script, r#"[{"fault": {"kind": "meltdown"}}]"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_keel-mockllm"))
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("script.json") && stderr.contains("meltdown"),
        "{stderr}"
    );
}
