//! The least a coding harness can do, as the floor the long-run benchmark measures keel
//! against: send the conversation to a chat-completions endpoint, read the streamed answer,
//! run each `bash` call it asks for and send the output back, until an answer asks for none.
//!
//! It has no sandbox, no permission gate, no session store and no async runtime: blocking
//! std sockets over one kept-alive HTTP/1.1 connection, `bash -c` in a process group of
//! its own with stdout and stderr on one pipe (as keel's bash runs it), and the answer's
//! text written to stdout as it streams.
//!
//! usage: null-harness BASE_URL PROMPT   (BASE_URL like http://127.0.0.1:PORT/v1; loopback
//! plain HTTP only, which is all the mock serves)
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, ExitCode, Stdio};

use serde_json::{Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(base), Some(prompt)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: null-harness BASE_URL PROMPT");
        return ExitCode::from(2);
    };
    match run(base, prompt) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("null-harness: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `host:port` and the path prefix of a plain-HTTP base URL.
fn split_url(base: &str) -> Result<(String, String), String> {
    let rest = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("{base}: only http:// URLs are served by the mock"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    Ok((
        authority.to_owned(),
        format!("/{}", path.trim_end_matches('/')),
    ))
}

fn run(base: &str, prompt: &str) -> Result<(), String> {
    let (authority, prefix) = split_url(base)?;
    let stream = TcpStream::connect(&authority).map_err(|e| format!("{authority}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let tools = json!([{
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"]
            }
        }
    }]);
    let mut messages = vec![json!({"role": "user", "content": prompt})];
    let stdout = std::io::stdout();
    loop {
        let body = json!({
            "model": "mock-model",
            "stream": true,
            "messages": messages,
            "tools": tools,
        })
        .to_string();
        write!(
            writer,
            "POST {prefix}/chat/completions HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .and_then(|()| writer.write_all(body.as_bytes()))
        .map_err(|e| format!("sending the request: {e}"))?;
        let answer = read_answer(&mut reader, &mut stdout.lock())?;
        if answer.calls.is_empty() {
            return Ok(());
        }
        let calls: Vec<Value> = answer
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        messages.push(json!({"role": "assistant", "content": answer.text, "tool_calls": calls}));
        for call in &answer.calls {
            let output = run_call(call);
            messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": output}));
        }
    }
}

/// A tool call as it streamed in.
#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// One streamed answer.
#[derive(Default)]
struct Answer {
    text: String,
    calls: Vec<Call>,
}

/// Reads one chunked event-stream response, writing its text to `out` as it comes.
fn read_answer(reader: &mut BufReader<TcpStream>, out: &mut impl Write) -> Result<Answer, String> {
    let mut line = String::new();
    let read_line = |reader: &mut BufReader<TcpStream>, line: &mut String| {
        line.clear();
        match reader.read_line(line) {
            Ok(0) => Err("the server closed the connection".to_owned()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    };
    read_line(reader, &mut line)?;
    if !line.starts_with("HTTP/1.1 200") {
        return Err(format!("the server answered {}", line.trim()));
    }
    let mut chunked = false;
    loop {
        read_line(reader, &mut line)?;
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
    }
    if !chunked {
        return Err("the answer is not a chunked event stream".to_owned());
    }
    let mut answer = Answer::default();
    let mut pending = String::new();
    loop {
        read_line(reader, &mut line)?;
        let size = usize::from_str_radix(line.trim(), 16)
            .map_err(|_| format!("bad chunk size {:?}", line.trim()))?;
        let mut chunk = vec![0u8; size + 2];
        reader
            .read_exact(&mut chunk)
            .map_err(|e| format!("reading a chunk: {e}"))?;
        if size == 0 {
            return Ok(answer);
        }
        pending.push_str(&String::from_utf8_lossy(&chunk[..size]));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            for data in event.lines().filter_map(|l| l.strip_prefix("data: ")) {
                if data != "[DONE]" {
                    take_delta(data, &mut answer, out)?;
                }
            }
        }
    }
}

/// Folds one `chat.completion.chunk` into the answer.
fn take_delta(data: &str, answer: &mut Answer, out: &mut impl Write) -> Result<(), String> {
    let chunk: Value = serde_json::from_str(data).map_err(|e| format!("a bad event: {e}"))?;
    let Some(delta) = chunk.pointer("/choices/0/delta") else {
        return Ok(());
    };
    if let Some(text) = delta.get("content").and_then(Value::as_str)
        && !text.is_empty()
    {
        answer.text.push_str(text);
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    for call in delta
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let index = usize::try_from(index).map_err(|e| e.to_string())?;
        if answer.calls.len() <= index {
            answer.calls.resize_with(index + 1, Call::default);
        }
        let slot = &mut answer.calls[index];
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            slot.id = id.to_owned();
        }
        if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
            slot.name = name.to_owned();
        }
        if let Some(piece) = call.pointer("/function/arguments").and_then(Value::as_str) {
            slot.arguments.push_str(piece);
        }
    }
    Ok(())
}

/// Runs one call's command as `bash -c`, its output (stdout and stderr in order) as text.
fn run_call(call: &Call) -> String {
    let command = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|a| a.get("command").and_then(Value::as_str).map(str::to_owned));
    let Some(command) = command else {
        return format!("no command in {}", call.arguments);
    };
    let spawned = std::io::pipe().and_then(|(mut read, write)| {
        let mut child = Command::new("/bin/bash")
            .args(["-c", &command])
            .stdin(Stdio::null())
            .stdout(write.try_clone()?)
            .stderr(write)
            .process_group(0)
            .spawn()?;
        let mut output = Vec::new();
        read.read_to_end(&mut output)?;
        let status = child.wait()?;
        Ok((output, status))
    });
    match spawned {
        Ok((output, status)) if status.success() => String::from_utf8_lossy(&output).into_owned(),
        Ok((output, status)) => format!("{}\n[{status}]", String::from_utf8_lossy(&output)),
        Err(error) => format!("cannot run bash: {error}"),
    }
}
