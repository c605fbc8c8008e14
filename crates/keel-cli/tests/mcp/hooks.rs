//! User hooks in Claude Code's format: every event with Claude Code's JSON, exit 2 blocks,
//! a JSON deny denies, a changed input is what the tool receives, Stop can make the model
//! go on.

use super::*;

/// A hook script in the world's home that runs `body` (sh).
fn script(world: &World, name: &str, body: &str) -> String {
    let path = world.home.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn hooks_config(entries: &[(&str, &str, &str)]) -> String {
    let mut text = String::from("hooks:\n");
    let mut by_event: std::collections::BTreeMap<&str, Vec<(&str, &str)>> = Default::default();
    for (event, matcher, command) in entries {
        by_event.entry(event).or_default().push((matcher, command));
    }
    for (event, hooks) in by_event {
        text.push_str(&format!("  {event}:\n"));
        for (matcher, command) in hooks {
            text.push_str(&format!(
                "    - matcher: \"{matcher}\"\n      hooks:\n        - type: command\n          command: \"{command}\"\n"
            ));
        }
    }
    text
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

#[test]
fn every_event_fires_with_claude_codes_json() {
    let world = World::new("");
    let log = world.home.join("log");
    std::fs::create_dir_all(&log).unwrap();
    let record = script(
        &world,
        "record.sh",
        &format!("cat > {}/\"$1\".json", log.display()),
    );
    let events = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    ];
    let entries: Vec<(String, String, String)> = events
        .iter()
        .map(|e| (e.to_string(), String::new(), format!("{record} {e}")))
        .collect();
    let entries: Vec<(&str, &str, &str)> = entries
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    std::fs::write(world.home.join("config.yaml"), hooks_config(&entries)).unwrap();
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hooked"}}]}, {"text": "done"}]"#,
        &[],
        "run echo",
    );
    assert_ok(&output);
    let session = super::events(&output)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for event in &events {
        let input = read_json(&log.join(format!("{event}.json")));
        assert_eq!(input["hook_event_name"], *event, "{input}");
        assert_eq!(input["session_id"], session.as_str(), "{input}");
        assert!(
            input["cwd"].is_string() && input["transcript_path"].is_string(),
            "{input}"
        );
        assert!(input["permission_mode"].is_string(), "{input}");
    }
    let pre = read_json(&log.join("PreToolUse.json"));
    assert_eq!(pre["tool_name"], "Bash");
    assert_eq!(pre["tool_input"]["command"], "echo hooked");
    assert_eq!(pre["tool_use_id"], "c1");
    assert_eq!(pre["permission_mode"], "acceptEdits");
    let post = read_json(&log.join("PostToolUse.json"));
    assert!(
        post["tool_response"].to_string().contains("hooked"),
        "{post}"
    );
    assert_eq!(
        read_json(&log.join("UserPromptSubmit.json"))["prompt"],
        "run echo"
    );
    assert_eq!(read_json(&log.join("Stop.json"))["stop_hook_active"], false);
    // The transcript is Claude Code's JSONL, private to the user.
    let stop = read_json(&log.join("Stop.json"));
    let transcript = std::path::PathBuf::from(stop["transcript_path"].as_str().unwrap());
    assert!(
        transcript.starts_with(&world.home),
        "{}",
        transcript.display()
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&transcript).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "user", "{lines:?}");
    assert_eq!(lines[0]["message"]["content"], "run echo", "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l["message"]["content"][0]["name"] == "Bash"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["message"]["content"][0]["type"] == "tool_result"),
        "{lines:?}"
    );
    assert_eq!(
        read_json(&log.join("SessionStart.json"))["source"],
        "startup"
    );
    assert!(read_json(&log.join("SessionEnd.json"))["reason"].is_string());
}

#[test]
fn exit_2_blocks_and_a_json_deny_denies() {
    let world = World::new("");
    let block = script(&world, "block.sh", "echo 'no rm here' >&2; exit 2");
    let deny = script(
        &world,
        "deny.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not today"}}'"#,
    );
    std::fs::write(
        world.home.join("config.yaml"),
        hooks_config(&[
            ("PreToolUse", "Bash", &block),
            ("PreToolUse", "Write", &deny),
        ]),
    )
    .unwrap();
    let output = world.exec(
        r#"[{"tool_calls": [
              {"id": "rm", "name": "bash", "arguments": {"command": "touch blocked.txt"}},
              {"id": "w", "name": "write", "arguments": {"path": "denied.txt", "content": "x"}},
              {"id": "r", "name": "ls", "arguments": {}}
            ]}, {"text": "done"}]"#,
        &[],
        "try",
    );
    assert_ok(&output);
    let results = results(&output);
    assert_eq!(results["rm"].1, "failed");
    assert!(
        results["rm"].0.contains("no rm here"),
        "{:?}",
        results["rm"]
    );
    assert_eq!(results["w"].1, "failed");
    assert!(results["w"].0.contains("not today"), "{:?}", results["w"]);
    assert_eq!(results["r"].1, "completed", "a call no hook matches runs");
    assert!(!world.work.join("blocked.txt").exists());
    assert!(!world.work.join("denied.txt").exists());
}

#[test]
fn a_changed_input_is_what_the_tool_receives() {
    let world = World::new("");
    let change = script(
        &world,
        "change.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo changed > out.txt"}}}'"#,
    );
    std::fs::write(
        world.home.join("config.yaml"),
        hooks_config(&[("PreToolUse", "Bash", &change)]),
    )
    .unwrap();
    let output = world.exec(
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo original > out.txt"}}]}, {"text": "done"}]"#,
        &[],
        "write",
    );
    assert_ok(&output);
    assert_eq!(
        std::fs::read_to_string(world.work.join("out.txt")).unwrap(),
        "changed\n"
    );
}

#[test]
fn a_prompt_hook_blocks_and_a_stop_hook_makes_the_model_go_on() {
    let world = World::new("");
    let refuse = script(
        &world,
        "refuse.sh",
        r#"grep -q secret && { echo 'prompts about secrets are refused' >&2; exit 2; }; exit 0"#,
    );
    let stop = script(
        &world,
        "stop.sh",
        r#"grep -q '"stop_hook_active":false' && { echo 'run the tests first' >&2; exit 2; }; exit 0"#,
    );
    std::fs::write(
        world.home.join("config.yaml"),
        hooks_config(&[("UserPromptSubmit", "", &refuse), ("Stop", "", &stop)]),
    )
    .unwrap();
    let output = world.exec(r#"[{"text": "never asked"}]"#, &[], "tell me the secret");
    assert_ne!(output.status.code(), Some(0));
    let all = String::from_utf8_lossy(&output.stdout);
    assert!(all.contains("prompts about secrets are refused"), "{all}");
    assert!(!all.contains("never asked"));

    let output = world.exec(
        r#"[{"text": "first answer"}, {"text": "tests pass"}]"#,
        &[],
        "fix it",
    );
    assert_ok(&output);
    let result = events(&output)
        .into_iter()
        .find(|e| e["type"] == "exec.completed")
        .unwrap();
    assert_eq!(result["result"]["final_text"], "tests pass", "{result}");
}
