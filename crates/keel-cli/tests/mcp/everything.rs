//! `@modelcontextprotocol/server-everything` from npm (CI installs it and names its
//! program in `KEEL_TEST_MCP_EVERYTHING`): its `echo` and `get-sum` through keel.

use super::*;

#[test]
fn server_everything_echo_and_get_sum() {
    let Ok(program) = std::env::var("KEEL_TEST_MCP_EVERYTHING") else {
        // scripts/test installs the package and requires this test; a developer running
        // the suite by hand without npm runs the rest.
        assert!(
            std::env::var_os("KEEL_REQUIRE_MCP_EVERYTHING").is_none(),
            "KEEL_REQUIRE_MCP_EVERYTHING is set but KEEL_TEST_MCP_EVERYTHING is not"
        );
        eprintln!("KEEL_TEST_MCP_EVERYTHING is not set: server-everything not installed here");
        return;
    };
    let world = World::new(&format!(
        "mcp_servers:\n  everything:\n    command: {program}\n    startup_timeout_sec: 60\n"
    ));
    let output = world.exec(
        r#"[{"tool_calls": [
              {"id": "echo", "name": "mcp__everything__echo", "arguments": {"message": "hello everything"}},
              {"id": "sum", "name": "mcp__everything__get-sum", "arguments": {"a": 20, "b": 22}},
              {"id": "long", "name": "mcp__everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3}}
            ]}, {"text": "done"}]"#,
        &[],
        "use everything",
    );
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(results["echo"].1, "completed", "{:?}", results["echo"]);
    assert!(
        results["echo"].0.contains("hello everything"),
        "{:?}",
        results["echo"]
    );
    assert_eq!(results["sum"].1, "completed", "{:?}", results["sum"]);
    assert!(results["sum"].0.contains("42"), "{:?}", results["sum"]);
    // Its progress notifications were live output of the call.
    assert_eq!(results["long"].1, "completed", "{:?}", results["long"]);
    let live: String = events(&output)
        .into_iter()
        .filter(|e| e["type"] == "item.updated" && e["item"]["type"] == "tool_call")
        .filter_map(|e| e["delta"].as_str().map(str::to_owned))
        .collect();
    // Live output is lossy by design, and the last notification may come after the
    // answer: the first steps are what a person watching sees.
    assert!(live.contains("[1/3]") && live.contains("[2/3]"), "{live}");
}

/// The server's own HTTP+SSE mode (MCP 2024-11-05): keel falls back to it after its
/// streamable POST is refused.
#[test]
fn server_everything_over_the_legacy_sse_transport() {
    let Ok(program) = std::env::var("KEEL_TEST_MCP_EVERYTHING") else {
        assert!(
            std::env::var_os("KEEL_REQUIRE_MCP_EVERYTHING").is_none(),
            "KEEL_REQUIRE_MCP_EVERYTHING is set but KEEL_TEST_MCP_EVERYTHING is not"
        );
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Kill(
        std::process::Command::new(&program)
            .arg("sse")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the SSE server did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let world = World::new(&format!(
        "mcp_servers:\n  legacy:\n    url: http://127.0.0.1:{port}/sse\n    startup_timeout_sec: 30\n"
    ));
    let output = world.exec(
        r#"[{"tool_calls": [
              {"id": "echo", "name": "mcp__legacy__echo", "arguments": {"message": "over sse"}}
            ]}, {"text": "done"}]"#,
        &[],
        "use the old server",
    );
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(results["echo"].1, "completed", "{:?}", results["echo"]);
    assert!(
        results["echo"].0.contains("over sse"),
        "{:?}",
        results["echo"]
    );
}
