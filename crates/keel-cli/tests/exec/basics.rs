//! What `keel exec` always did: answers, config, providers, tools behind the gate.

use pretty_assertions::assert_eq;

use crate::{Mock, assert_exit, exec_script, keel, script, temp_dir};

#[test]
fn exec_prints_the_streamed_answer() {
    let (_dir, output) = exec_script(
        r#"[{"text": "Hello from the script.", "chunk_size": 3}]"#,
        &["hi"],
    );
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "Hello from the script.\n"
    );
}

#[test]
fn the_hidden_json_flag_is_stream_json() {
    let (_dir, output) = exec_script(r#"[{"text": "ok"}]"#, &["--json", "hi"]);
    assert!(output.status.success());
    let events = crate::lines(&output.stdout);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"], i);
    }
    assert_eq!(events.first().unwrap()["type"], "exec.started");
    assert_eq!(events.last().unwrap()["type"], "exec.completed");
}

#[test]
fn a_failed_model_call_exits_4_with_its_code() {
    let (_dir, output) = exec_script(
        r#"[{"error": {"code": "auth", "message": "bad key"}}]"#,
        &["hi"],
    );
    assert_eq!(output.status.code(), Some(4));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("model_auth") && stderr.contains("bad key"),
        "{stderr}"
    );
}

#[test]
fn an_overloaded_model_is_retried_and_the_turn_recovers() {
    let (_dir, output) = exec_script(
        r#"[{"error": {"code": "overloaded", "message": "busy", "retry_after_ms": 20}}, {"text": "recovered"}]"#,
        &["hi"],
    );
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "recovered\n");
}

#[test]
fn a_bad_script_is_named_with_what_is_wrong() {
    let (_dir, output) = exec_script(r#"[{"txt": "typo"}]"#, &["hi"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("script.json") && stderr.contains("txt"),
        "{stderr}"
    );
}

#[test]
fn without_a_provider_exec_says_what_to_do() {
    let output = keel()
        .args(["exec", "hi"])
        .env("KEEL_HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    // One sentence with every fix, no code to decode.
    assert!(
        stderr.contains("--model provider/model")
            && stderr.contains("keel login")
            && !stderr.contains("configuration error ("),
        "{stderr}"
    );
}

#[test]
fn exec_talks_to_a_provider_over_http() {
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "hello from the mock", "chunk_size": 4}]"#);
    let output = keel()
        .args([
            "exec",
            "--model",
            "anthropic/claude-sonnet-4-5",
            "--base-url",
        ])
        .arg(server.url())
        .arg("hi")
        .env("ANTHROPIC_API_KEY", "test-key")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "hello from the mock\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].headers["x-api-key"], "test-key");
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-5");
}

/// `--thinking` reaches the request as the provider's reasoning setting, and a level the
/// model does not offer is refused before anything is sent.
#[test]
fn the_thinking_level_reaches_the_request_and_is_checked() {
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "thought it through"}]"#);
    let run = |model: &str, level: &str| {
        keel()
            .args(["exec", "--model", model, "--thinking", level, "--base-url"])
            .arg(server.url())
            .arg("hi")
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("OPENAI_API_KEY", "test-key")
            .output()
            .unwrap()
    };
    let output = run("anthropic/claude-sonnet-4-5", "high");
    assert_exit(&output, 0);
    assert_eq!(server.requests()[0].body["thinking"]["type"], "enabled");
    let refused = run("openai/gpt-4.1", "high");
    assert_exit(&refused, 2);
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(
        stderr.contains("does not offer the thinking level `high`"),
        "{stderr}"
    );
    let unknown = run("anthropic/claude-sonnet-4-5", "enormous");
    assert_exit(&unknown, 2);
    assert_eq!(server.requests().len(), 1);
}

/// Mistral's Magistral models stream thinking and text as lists of content parts; keel used
/// to ignore them and end with an empty answer.
#[test]
fn a_magistral_answer_in_content_parts_is_printed() {
    let mock = Mock::new();
    let server = mock.serve(
        r#"[{"thinking": "Let me think", "text": "Answer", "content_parts": true, "chunk_size": 3}]"#,
    );
    let output = keel()
        .args([
            "exec",
            "--model",
            "mistral/magistral-medium-latest",
            "--base-url",
        ])
        .arg(format!("{}/v1", server.url()))
        .arg("hi")
        .env("MISTRAL_API_KEY", "test-key")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "Answer\n");
}

#[test]
fn a_missing_api_key_is_named() {
    let output = keel()
        .args(["exec", "--model", "deepseek/deepseek-chat", "hi"])
        .env_remove("DEEPSEEK_API_KEY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("set DEEPSEEK_API_KEY")
    );
}

#[test]
fn an_unknown_provider_lists_the_known_ones() {
    let output = keel()
        .args(["exec", "--model", "nope/m", "hi"])
        .env("KEEL_HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "a bad --model value");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("unknown provider `nope`") && stderr.contains("anthropic"),
        "{stderr}"
    );
}

#[test]
fn the_model_and_providers_come_from_config_files() {
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "configured", "chunk_size": 4}]"#);
    let home_dir = temp_dir("config-home");
    let home = home_dir.path();
    std::fs::write(
        home.join("config.yaml"),
        format!(
            "model: mock/mock-model\npermission: auto\nproviders:\n  mock:\n    api: openai-completions\n    base_url: {}/v1\n    api_key_env: MOCK_API_KEY\n    models:\n      mock-model: {{context_window: 128000, max_output: 16384}}\n",
            server.url()
        ),
    )
    .unwrap();
    let output = keel()
        .args(["exec", "hi"])
        .env("KEEL_HOME", home)
        .env("MOCK_API_KEY", "k")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "configured\n");
    assert_eq!(server.requests()[0].headers["authorization"], "Bearer k");

    std::fs::write(home.join("config.yaml"), "model: mock/x\nprovders: {}\n").unwrap();
    let output = keel()
        .args(["exec", "hi"])
        .env("KEEL_HOME", home)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("config.yaml:2") && stderr.contains("provders"),
        "{stderr}"
    );

    let output = keel()
        .args(["exec", "-c", "permission=sometimes", "hi"])
        .env("KEEL_HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("-c permission=sometimes")
    );
}

#[test]
fn tools_run_behind_the_permission_gate() {
    let work_dir = temp_dir("tools-work");
    let work = work_dir.path();
    let scripts = temp_dir("tools-script");
    let script_path = script(
        scripts.path(),
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hello > out.txt && cat out.txt"}}]},
            {"text": "done"}]"#,
    );
    let run = |mode: &str| {
        keel()
            .args([
                "exec",
                "--output-format",
                "stream-json",
                "--permission",
                mode,
                "--cwd",
            ])
            .arg(work)
            .arg("--mock-script")
            .arg(&script_path)
            .arg("write a file")
            .env("KEEL_HOME", "/nonexistent")
            .output()
            .unwrap()
    };
    let tool_result = crate::first_tool_result;
    let denied = run("plan");
    assert_exit(&denied, 0);
    assert!(
        tool_result(&denied).starts_with("Blocked by permissions: [denied"),
        "{}",
        tool_result(&denied)
    );
    assert!(!work.join("out.txt").exists());
    let allowed = run("auto");
    assert!(allowed.status.success());
    assert_eq!(tool_result(&allowed), "hello\n");
    assert_eq!(
        std::fs::read_to_string(work.join("out.txt")).unwrap(),
        "hello\n"
    );
    let bad = run("sometimes");
    assert_exit(&bad, 2);
}

#[test]
fn a_durable_run_stores_its_session_too() {
    let (_dir, output) = exec_script(
        r#"[{"text": "synced"}]"#,
        &["--durable", "--output-format", "json", "keep this"],
    );
    let result = crate::result_of(&output);
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["final_text"], "synced");
    let session = result["session_id"].as_str().unwrap().to_owned();
    let listed = keel()
        .args(["sessions", "list", "--all", "--json"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&session));
}

#[test]
fn every_wire_api_runs_a_tool_step_end_to_end() {
    let mock = Mock::new();
    for api in [
        "anthropic-messages",
        "openai-completions",
        "openai-responses",
        "google-generative-ai",
    ] {
        let server = mock.serve(r#"[{"thinking": "plan", "text": "Listing.", "shell": "echo from-$((40+2))", "chunk_size": 5},
                {"text": "The shell said from-42.", "chunk_size": 5}]"#);
        let base = match api {
            "openai-completions" | "openai-responses" => format!("{}/v1", server.url()),
            _ => server.url(),
        };
        let home_dir = temp_dir(&format!("api-{api}"));
        let home = home_dir.path();
        std::fs::write(
            home.join("config.yaml"),
            format!(
                "model: mock/m\npermission: full\nproviders:\n  mock:\n    api: {api}\n    base_url: {base}\n    models:\n      m: {{context_window: 128000, max_output: 4096, capabilities: {{reasoning: true}}}}\n"
            ),
        )
        .unwrap();
        let work = tempfile::tempdir().unwrap();
        let output = keel()
            .args(["exec", "--output-format", "json", "--cwd"])
            .arg(work.path())
            .arg("run it")
            .env("KEEL_HOME", home)
            .output()
            .unwrap();
        let result = crate::result_of(&output);
        assert_eq!(result["status"], "succeeded", "{api}: {result}");
        assert_eq!(result["final_text"], "The shell said from-42.", "{api}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{api}");
        let second = requests[1].body.to_string();
        assert!(
            second.contains("from-42"),
            "{api}: the tool result went back to the model: {second}"
        );
    }
}

#[test]
fn the_sandbox_mode_comes_from_the_flag_or_the_config_and_a_bad_one_is_named() {
    let scripts = temp_dir("sandbox-script");
    let script_path = script(
        scripts.path(),
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "touch made.txt"}}]},
            {"text": "done"}]"#,
    );
    let run = |work: &std::path::Path, extra: &[&str]| {
        keel()
            .args(["exec", "--output-format", "json", "--permission", "full"])
            .args(extra)
            .arg("--cwd")
            .arg(work)
            .arg("--mock-script")
            .arg(&script_path)
            .arg("make a file")
            .output()
            .unwrap()
    };
    // Temp folders are always writable, so the workspace must live elsewhere.
    let outside_temp = crate::outside_temp;
    // read-only: the command may not write the workspace (or, where the kernel cannot
    // enforce Landlock, it does not run at all); either way nothing is made.
    let work = outside_temp();
    let output = run(work.path(), &["--sandbox", "read-only"]);
    assert_exit(&output, 0);
    assert!(!work.path().join("made.txt").exists());
    let work = outside_temp();
    let output = run(work.path(), &["-c", "sandbox=read-only"]);
    assert!(output.status.success());
    assert!(!work.path().join("made.txt").exists());
    // Full access from the config: the write happens.
    let work = outside_temp();
    let output = run(work.path(), &["-c", "sandbox=danger-full-access"]);
    assert_exit(&output, 0);
    assert!(work.path().join("made.txt").exists());
    // A bad mode is named, on the flag (bad invocation) and in the config (config error).
    let work = outside_temp();
    let output = run(work.path(), &["--sandbox", "anywhere"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown sandbox mode `anywhere`"));
    let output = run(work.path(), &["-c", "sandbox=anywhere"]);
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sandbox") && stderr.contains("anywhere"),
        "{stderr}"
    );
}

#[test]
fn a_bang_prompt_runs_in_the_shell_only_with_the_flag() {
    let (_dir, output) = exec_script(
        r#"[{"text": "the model got it"}]"#,
        &["--allow-shell-escape", "!echo shell-$((6*7))"],
    );
    assert_exit(&output, 0);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("shell-42"), "{stdout}");
    assert!(!stdout.contains("the model got it"), "{stdout}");
    // Without the flag, piped or passed text is the model's prompt, never a command.
    let (_dir, output) = exec_script(
        r#"[{"text": "the model got it"}]"#,
        &["!echo shell-$((6*7))"],
    );
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "the model got it\n"
    );
}

#[test]
fn stream_json_carries_a_command_s_output_while_it_runs() {
    let (_dir, output) = exec_script(
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo tick-$((1)); sleep 0.3; echo tock-$((2))"}}]}, {"text": "done"}]"#,
        &[
            "--permission",
            "full",
            "--output-format",
            "stream-json",
            "count",
        ],
    );
    assert_exit(&output, 0);
    let events = crate::lines(&output.stdout);
    let live: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "item.updated" && e["item"]["type"] == "tool_call")
        .filter(|e| e["delta"].is_string())
        .collect();
    let first = live
        .first()
        .unwrap_or_else(|| panic!("no live output in {events:?}"));
    assert!(
        first["delta"].as_str().unwrap().contains("tick-1"),
        "{first}"
    );
    let at = |e: &serde_json::Value| events.iter().position(|x| x == e).unwrap();
    let ended = events
        .iter()
        .position(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .unwrap();
    assert!(at(first) < ended);
}

#[test]
fn an_image_goes_with_the_prompt_and_a_file_that_is_none_is_refused() {
    let dir = temp_dir("image");
    let png = dir.path().join("shot.png");
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(64, 7);
    std::fs::write(&png, &bytes).unwrap();
    let fake = dir.path().join("fake.png");
    std::fs::write(&fake, "<svg/>").unwrap();
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "a tiny image"}]"#);
    let run = |image: &std::path::Path| {
        keel()
            .args([
                "exec",
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--base-url",
            ])
            .arg(server.url())
            .arg("--image")
            .arg(image)
            .arg("what is this?")
            .env("ANTHROPIC_API_KEY", "test-key")
            .output()
            .unwrap()
    };
    let refused = run(&fake);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(stderr.contains("not a PNG, JPEG, GIF or WebP"), "{stderr}");
    assert!(server.requests().is_empty());
    let output = run(&png);
    assert_exit(&output, 0);
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("image/png"), "{body}");
}

#[test]
fn a_failing_bang_command_fails_the_run_in_every_format() {
    for format in ["text", "json"] {
        let (_dir, output) = exec_script(
            r#"[{"text": "unused"}]"#,
            &["--allow-shell-escape", "--output-format", format, "!exit 3"],
        );
        assert_eq!(output.status.code(), Some(4), "{format}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(all.contains("command_failed"), "{format}: {all}");
    }
}
