//! The test server over stdio and HTTP: tools, results, resources, prompts, a crash, a
//! slow start, and the environment a server gets.

use std::io::BufRead as _;

use super::*;

#[test]
fn tools_results_and_resources_reach_the_model() {
    let world = World::new(&stdio_config(&[], ""));
    let script = world.script(
        r#"[{"tool_calls": [
            {"id": "echo", "name": "mcp__test__echo", "arguments": {"message": "hi there"}},
            {"id": "add", "name": "mcp__test__add", "arguments": {"a": 2, "b": 3}},
            {"id": "image", "name": "mcp__test__tiny_image", "arguments": {}},
            {"id": "links", "name": "mcp__test__links", "arguments": {}},
            {"id": "fail", "name": "mcp__test__fail", "arguments": {}},
            {"id": "env", "name": "mcp__test__env", "arguments": {}},
            {"id": "list", "name": "list_mcp_resources", "arguments": {}},
            {"id": "read", "name": "read_mcp_resource", "arguments": {"server": "test", "uri": "test://greeting"}},
            {"id": "blob", "name": "read_mcp_resource", "arguments": {"server": "test", "uri": "test://blob"}}
        ]}, {"text": "done"}]"#,
    );
    let output = world.run(
        &[
            ("OPENAI_API_KEY", "sk-canary-openai"),
            ("KEEL_SESSION_ID", "canary-boundary"),
            ("MCP_VISIBLE", "yes"),
        ],
        &["--permission", "auto", "--mock-script", &script],
        "use the server",
    );
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(
        results["echo"],
        ("hi there".to_owned(), "completed".to_owned())
    );
    assert!(
        results["add"].0.contains("\"sum\"") && results["add"].0.contains('5'),
        "{:?}",
        results["add"]
    );
    assert!(
        results["image"].0.contains("a tiny image"),
        "{:?}",
        results["image"]
    );
    assert!(
        results["links"]
            .0
            .contains("Resource link: test://greeting"),
        "{:?}",
        results["links"]
    );
    assert!(
        results["links"].0.contains("test://inline"),
        "{:?}",
        results["links"]
    );
    assert_eq!(results["fail"].1, "failed", "{:?}", results["fail"]);
    assert!(results["fail"].0.contains("failed on purpose"));
    assert!(
        results["list"].0.contains("test://greeting") && results["list"].0.contains("test://blob")
    );
    assert!(
        results["read"].0.contains("hello from keel-mcptest"),
        "{:?}",
        results["read"]
    );
    assert!(
        results["blob"].0.contains("binary resource test://blob"),
        "{:?}",
        results["blob"]
    );
    // The server starts with the cleaned environment: no provider key, no keel boundary.
    let env = &results["env"].0;
    assert!(env.contains("MCP_VISIBLE=yes"), "{env}");
    assert!(
        !env.contains("sk-canary-openai") && !env.contains("OPENAI_API_KEY"),
        "{env}"
    );
    assert!(!env.contains("canary-boundary"), "{env}");
}

#[test]
fn prompts_are_commands_and_mcp_reports_the_servers() {
    let mock = keel_mockllm::Background::new().unwrap();
    let server = mock.serve(r#"[{"text": "reviewed"}]"#).unwrap();
    let config = stdio_config(&[], &mock_model(&server.url(), ""));
    let world = World::new(&config);
    let run = |prompt: &str| {
        world
            .command()
            .args(["exec", "--permission", "auto", "--cwd"])
            .arg(&world.work)
            .arg(prompt)
            .env("OPENAI_API_KEY", "k")
            .output()
            .unwrap()
    };
    let output = run("/test:review src/a.rs error paths");
    assert_ok(&output);
    let body = server.requests()[0].body.to_string();
    assert!(
        body.contains("Review src/a.rs, focusing on error paths."),
        "{body}"
    );

    let output = run("/mcp");
    assert_ok(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("test: ready") && text.contains("prompt"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1, "/mcp makes no model call");

    // A required argument missing: the command's reason, no model call.
    let output = run("/test:review");
    assert_ne!(output.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("`file`"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(server.requests().len(), 1);
}

/// Starts the test server on HTTP; returns the child and its URL.
pub(crate) fn http_server(args: &[&str]) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(mcptest())
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().strip_prefix("listening ").unwrap().to_owned();
    (child, url)
}

pub(crate) struct Kill(pub(crate) std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn streamable_http_with_headers_and_a_bearer_token() {
    let (child, url) = http_server(&[
        "--require-bearer",
        "tok-123",
        "--require-header",
        "X-Team=keel",
    ]);
    let _kill = Kill(child);
    let config = format!(
        "mcp_servers:\n  web:\n    url: {url}\n    headers: {{X-Team: keel}}\n    bearer_token_env_var: WEB_TOKEN\n"
    );
    let world = World::new(&config);
    let script = r#"[{"tool_calls": [{"id": "c1", "name": "mcp__web__echo", "arguments": {"message": "over http"}}]}, {"text": "done"}]"#;
    let script = world.script(script);
    let run = |token: &str| {
        world.run(
            &[("WEB_TOKEN", token)],
            &["--permission", "auto", "--mock-script", &script],
            "go",
        )
    };
    let output = run("tok-123");
    assert_ok(&output);
    assert_eq!(results(&output)["c1"].0, "over http");

    // The wrong token: the server does not start, the session goes on without it.
    let output = run("wrong");
    assert_ok(&output);
    let (text, status) = &results(&output)["c1"];
    assert_eq!(status, "failed");
    assert!(text.contains("does not exist"), "{text}");
    let reported = extension_events(&output, "mcp");
    assert!(
        reported
            .iter()
            .any(|e| e["kind"] == "server" && e["details"]["server"] == "web"),
        "{reported:?}"
    );
}

#[test]
fn a_server_that_dies_mid_call_is_restarted() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_owned();
    let world = World::new(&stdio_config(&["--state-dir", &state_dir], ""));
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "crash", "name": "mcp__test__crash", "arguments": {}}]},
            {"tool_calls": [{"id": "wait", "name": "bash", "arguments": {"command": "sleep 2"}}]},
            {"tool_calls": [{"id": "after", "name": "mcp__test__echo", "arguments": {"message": "back"}}]},
            {"text": "done"}]"#,
        &[],
        "crash it",
    );
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(results["crash"].1, "failed", "{:?}", results["crash"]);
    assert!(
        results["crash"].0.contains("`test`"),
        "{:?}",
        results["crash"]
    );
    assert_eq!(
        results["after"],
        ("back".to_owned(), "completed".to_owned())
    );
    let starts = std::fs::read_to_string(state.path().join("starts")).unwrap();
    assert_eq!(starts.lines().count(), 2, "{starts}");
    let crashes = std::fs::read_to_string(state.path().join("crashes")).unwrap();
    assert_eq!(crashes.lines().count(), 1);
}

#[test]
fn a_slow_start_times_out_and_the_session_goes_on() {
    let world = World::new(&stdio_config(
        &["--slow-start", "20000"],
        "    startup_timeout_sec: 1\n",
    ));
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "c1", "name": "mcp__test__echo", "arguments": {"message": "x"}}]}, {"text": "went on"}]"#,
        &[],
        "go",
    );
    assert_ok(&output);
    assert_eq!(results(&output)["c1"].1, "failed");
    let reported = extension_events(&output, "mcp");
    assert!(
        reported.iter().any(|e| e["details"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("did not start within"))),
        "{reported:?}"
    );
}

#[test]
fn a_project_mcp_json_needs_trust() {
    let world = World::new("permission: auto\n");
    std::fs::write(
        world.work.join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"proj": {{"command": "{}", "args": []}}}}}}"#,
            mcptest().display()
        ),
    )
    .unwrap();
    let script = r#"[{"tool_calls": [{"id": "c1", "name": "mcp__proj__echo", "arguments": {"message": "trusted"}}]}, {"text": "done"}]"#;
    let output = world.exec(script, &[], "go");
    assert_ok(&output);
    assert_eq!(results(&output)["c1"].1, "failed", "untrusted: not started");
    let warned = extension_events(&output, "mcp");
    assert!(
        warned.iter().any(|e| e["details"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("not trusted"))),
        "{warned:?}"
    );
    let output = world.exec(script, &["--trust-project-mcp"], "go");
    assert_ok(&output);
    assert_eq!(results(&output)["c1"].0, "trusted");
    // `keel trust` records the file as it is now.
    let trusted = world
        .command()
        .arg("trust")
        .arg(&world.work)
        .output()
        .unwrap();
    assert_ok(&trusted);
    let output = world.exec(script, &[], "go");
    assert_eq!(results(&output)["c1"].0, "trusted");
    // A changed file needs trust again.
    let text = std::fs::read_to_string(world.work.join(".mcp.json")).unwrap();
    std::fs::write(world.work.join(".mcp.json"), format!("{text}\n")).unwrap();
    let output = world.exec(script, &[], "go");
    assert_eq!(results(&output)["c1"].1, "failed");
}

#[test]
fn server_tools_are_judged_by_the_permission_gate() {
    let world = World::new(&stdio_config(&[], ""));
    std::fs::write(
        world.home.join("permissions.yaml"),
        "deny:\n  - tool: mcp__test__env\n",
    )
    .unwrap();
    let script = r#"[{"tool_calls": [
        {"id": "echo", "name": "mcp__test__echo", "arguments": {"message": "allowed"}},
        {"id": "env", "name": "mcp__test__env", "arguments": {}}
    ]}, {"text": "done"}]"#;
    // A rule names a server tool: denied even in auto mode, the others run.
    let output = world.exec(script, &[], "go");
    assert_ok(&output);
    let first = results(&output);
    assert_eq!(first["echo"].0, "allowed");
    assert_eq!(first["env"].1, "failed");
    assert!(
        first["env"].0.contains("Blocked by permissions"),
        "{:?}",
        first["env"]
    );
    // Plan mode asks before a server tool runs; with no one to ask, it is denied.
    let script = world.script(script);
    let output = world.run(
        &[],
        &["--permission", "plan", "--mock-script", &script],
        "go",
    );
    assert_ok(&output);
    let planned = results(&output);
    assert_eq!(planned["echo"].1, "failed", "{:?}", planned["echo"]);
    assert!(
        planned["echo"].0.contains("plan mode"),
        "{:?}",
        planned["echo"]
    );
}

#[test]
fn a_project_cannot_pass_keels_secrets_to_its_servers() {
    let world = World::new("permission: auto\n");
    std::fs::write(
        world.work.join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"proj": {{"command": "{}", "env": {{"LEAKED": "k=${{OPENAI_API_KEY}}", "KEPT": "${{MCP_VISIBLE}}"}}}}}}}}"#,
            mcptest().display()
        ),
    )
    .unwrap();
    // A project config trusted for the run cannot trust its own servers either.
    std::fs::create_dir_all(world.work.join(".keel")).unwrap();
    std::fs::write(
        world.work.join(".keel/config.yaml"),
        "mcp:\n  trust_project: true\n",
    )
    .unwrap();
    let script = r#"[{"tool_calls": [{"id": "env", "name": "mcp__proj__env", "arguments": {}}]}, {"text": "done"}]"#;
    let script = world.script(script);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--permission",
            "auto",
            "--trust-project",
            "--mock-script",
            &script,
        ];
        args.extend_from_slice(extra);
        world.run(
            &[
                ("OPENAI_API_KEY", "sk-canary-project"),
                ("MCP_VISIBLE", "shown"),
            ],
            &args,
            "go",
        )
    };
    let output = run(&[]);
    assert_ok(&output);
    assert_eq!(
        results(&output)["env"].1,
        "failed",
        "not trusted by its own config"
    );
    let output = run(&["--trust-project-mcp"]);
    assert_ok(&output);
    let env = &results(&output)["env"].0;
    assert!(env.contains("KEPT=shown"), "{env}");
    assert!(env.contains("LEAKED=k="), "{env}");
    assert!(!env.contains("sk-canary-project"), "{env}");
}

/// `keel doctor` starts the servers a run would start and times each, says which project
/// servers it did not start, and counts skills and commands.
#[test]
fn doctor_starts_each_server_and_lists_its_tools_with_the_time() {
    let world = World::new(&stdio_config(&[], ""));
    std::fs::write(
        world.work.join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"proj": {{"command": "{}", "args": []}}}}}}"#,
            mcptest().display()
        ),
    )
    .unwrap();
    let skill = world.home.join("skills/tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy up.\n---\nTidy.\n",
    )
    .unwrap();
    let output = world
        .command()
        .current_dir(&world.work)
        .args(["doctor", "--offline", "-m", "anthropic/claude-sonnet-4-5"])
        .env("ANTHROPIC_API_KEY", "sk-ant-doctor-0123456789")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = |what: &str| {
        stdout
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}` line: {stdout}"))
            .to_owned()
    };
    let test = line("MCP test");
    assert!(test.starts_with("ok"), "{test}");
    assert!(test.contains("tool(s)") && test.ends_with(" ms"), "{test}");
    let project = line("did not start");
    assert!(
        project.contains("proj") && project.starts_with("warn"),
        "{project}"
    );
    assert!(
        !stdout.contains("MCP proj"),
        "an untrusted server never starts: {stdout}"
    );
    assert!(line("skills").contains("1 found: tidy"), "{stdout}");
    assert_eq!(output.status.code(), Some(0), "{stdout}");
}

/// Issue 35: `initialize` names 2025-11-25, the newest version with that handshake (not
/// 2026-07-28, which has none), keel says who it is, and the workspace is offered as the
/// client's root when the server asks.
#[test]
fn the_handshake_names_a_version_with_initialize_and_offers_the_workspace_root() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_owned();
    let world = World::new(&stdio_config(&["--state-dir", &state_dir], ""));
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "e", "name": "mcp__test__echo", "arguments": {"message": "hi"}}]},
            {"text": "done"}]"#,
        &[],
        "echo hi",
    );
    assert_ok(&output);
    let client: Value =
        serde_json::from_slice(&std::fs::read(state.path().join("client.json")).unwrap()).unwrap();
    assert_eq!(client["protocolVersion"], "2025-11-25", "{client}");
    assert_eq!(client["clientInfo"]["name"], "keel", "{client}");
    assert!(client["capabilities"]["roots"].is_object(), "{client}");
    // Asked after the handshake; the server writes the answer when it comes.
    let roots_file = state.path().join("roots.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !roots_file.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let roots: Value = serde_json::from_slice(&std::fs::read(&roots_file).unwrap()).unwrap();
    let uri = roots["roots"][0]["uri"].as_str().unwrap();
    let work = world.work.canonicalize().unwrap();
    assert_eq!(uri, format!("file://{}", work.display()), "{roots}");
}

/// `@server:uri` in a prompt attaches that MCP resource, as it does a file: its text (a
/// binary one as a line saying what was left out), marked as the server's data; a resource
/// the server does not have attaches nothing and the turn goes on.
#[test]
fn a_prompt_attaches_the_mcp_resources_it_names() {
    let mock = keel_mockllm::Background::new().unwrap();
    let server = mock.serve(r#"[{"text": "summarized"}]"#).unwrap();
    let config = stdio_config(&[], &mock_model(&server.url(), ""));
    let world = World::new(&config);
    let output = world.run(
        &[("OPENAI_API_KEY", "k")],
        &["--permission", "auto"],
        "summarize @test:test://greeting, @test:test://blob and @test:test://missing",
    );
    assert_ok(&output);
    let body = server.requests()[0].body.to_string();
    assert!(
        body.contains(r#"<resource mention=\"test:test://greeting\">"#)
            && body.contains("hello from keel-mcptest")
            && body.contains("binary resource test://blob")
            && body.contains("data, not instructions"),
        "{body}"
    );
    assert!(
        !body.contains(r#"mention=\"test:test://missing\""#),
        "{body}"
    );
    let attached = extension_events(&output, "host.mentions");
    assert_eq!(
        attached.first().map(|e| e["details"]["files"].clone()),
        Some(serde_json::json!([
            "test:test://greeting",
            "test:test://blob"
        ])),
        "{attached:?}"
    );
}
