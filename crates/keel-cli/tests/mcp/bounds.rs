//! Attack family "MCP names and processes": what a badly behaved server (or a project
//! that names one) must not get: a call stuck behind an answer keel dropped, a process that
//! outlives keel, an environment the model's commands can read, a trust that was never
//! given. (Two servers' tools on one name: `tests/acp/mcp.rs`, where a session's second
//! turn sees both servers up.)

use std::time::Duration;

use super::*;

/// The pids of processes whose command line is exactly `args`.
fn pids_of(args: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .filter(|pid| {
            !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        })
        .collect()
}

/// A call whose answer is 20 MiB fails at once saying it was too large, and `server` still
/// answers the next call.
fn too_large_then_on(config: &str, server: &str) {
    let world = World::new(config);
    let call = |id: &str, tool: &str, arguments: serde_json::Value| serde_json::json!({"tool_calls": [{"id": id, "name": format!("mcp__{server}__{tool}"), "arguments": arguments}]});
    let script = serde_json::json!([
        call("h", "huge", serde_json::json!({"mib": 20})),
        call("e", "echo", serde_json::json!({"message": "after"})),
        {"text": "done"}
    ]);
    let output = world.exec(&script.to_string(), &["--timeout", "60s"], "fetch it all");
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(results["h"].1, "failed");
    assert!(
        results["h"].0.contains("more than the 16 MiB keel reads"),
        "{:?}",
        results["h"]
    );
    assert_eq!(results["e"].0, "after");
}

#[test]
fn mcp_processes_an_answer_over_the_limit_is_called_too_large() {
    too_large_then_on(&stdio_config(&[], ""), "test");
}

#[test]
fn mcp_processes_an_http_answer_over_the_limit_is_called_too_large() {
    let (child, url) = super::servers::http_server(&[]);
    let _server = super::servers::Kill(child);
    too_large_then_on(&format!("mcp_servers:\n  web:\n    url: {url}\n"), "web");
}

#[test]
fn mcp_processes_a_servers_daemon_goes_with_keel() {
    let world = World::new(&stdio_config(&[], ""));
    let daemon = ["sleep", "303.75"];
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "d", "name": "mcp__test__daemon", "arguments": {"seconds": "303.75"}}]},
            {"text": "done"}]"#,
        &[],
        "start it",
    );
    assert_ok(&output);
    assert_eq!(results(&output)["d"].0, "started sleep 303.75");
    for _ in 0..100 {
        if pids_of(&daemon).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = pids_of(&daemon);
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    panic!("the server's setsid daemon outlived keel: {left:?}");
}

#[test]
fn mcp_processes_commands_cannot_read_a_servers_environment() {
    let world = World::new(&stdio_config(
        &[],
        "    env:\n      SERVER_ONLY: canary-server-environment\n",
    ));
    // `full`: the gate lets the command through, so the sandbox alone must hold.
    let script = world.script(
        r#"[{"tool_calls": [{"id": "e", "name": "mcp__test__echo", "arguments": {"message": "up"}}]},
            {"tool_calls": [{"id": "b", "name": "bash", "arguments": {"command": "python3 -c \"import glob\ndef r(p):\n try: return open(p, 'rb').read()\n except OSError: return b''\nprint(sum(b'canary-server' in r(p) for p in glob.glob('/proc/[0-9]*/env' + 'iron')))\""}}]},
            {"text": "done"}]"#,
    );
    let output = world.run(
        &[],
        &["--permission", "full", "--mock-script", &script],
        "look around",
    );
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(results["e"].0, "up");
    assert!(!results["b"].0.contains("canary-server-environment"));
    assert_eq!(
        (results["b"].0.trim(), results["b"].1.as_str()),
        ("0", "completed"),
        "a command found the server's environment"
    );
}

#[test]
fn mcp_trust_a_linked_mcp_json_is_reported_as_not_trusted() {
    let world = World::new("permission: auto\n");
    let elsewhere = world.home.join("servers.json");
    std::fs::write(
        &elsewhere,
        format!(
            r#"{{"mcpServers": {{"proj": {{"command": "{}", "args": []}}}}}}"#,
            mcptest().display()
        ),
    )
    .unwrap();
    std::os::unix::fs::symlink(&elsewhere, world.work.join(".mcp.json")).unwrap();
    let trusted = world
        .command()
        .arg("trust")
        .arg(&world.work)
        .output()
        .unwrap();
    assert_ok(&trusted);
    let said = String::from_utf8_lossy(&trusted.stdout);
    let line = said
        .lines()
        .find(|l| l.contains(".mcp.json"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(line.starts_with("not trusted"), "{said}");
    assert!(line.contains("a link"), "{said}");
    let status = world
        .command()
        .args(["trust", "--status"])
        .arg(&world.work)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.lines()
            .any(|l| l.contains(".mcp.json") && l.starts_with("not trusted")),
        "{said}"
    );
    // And it is not started.
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "c", "name": "mcp__proj__echo", "arguments": {"message": "x"}}]}, {"text": "done"}]"#,
        &[],
        "go",
    );
    assert_eq!(results(&output)["c"].1, "failed");
}
