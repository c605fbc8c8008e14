//! What `keel exec` gets from the runtime it runs on: the extension switches of the
//! configuration, and retry notices as typed events.

use crate::{Mock, assert_exit, exec_script, keel, lines};

/// The tool names of the one request `keel exec` sent, run with `extra` in `dir`.
fn tools_sent(dir: &std::path::Path, extra: &[&str]) -> (Vec<String>, String) {
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "ok", "chunk_size": 4}]"#);
    let output = keel()
        .args([
            "exec",
            "--model",
            "anthropic/claude-sonnet-4-5",
            "--base-url",
        ])
        .arg(server.url())
        .arg("--cwd")
        .arg(dir)
        .args(extra)
        .arg("hi")
        .env("ANTHROPIC_API_KEY", "test-key")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let requests = server.requests();
    let names = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (names, String::from_utf8(output.stderr).unwrap())
}

#[test]
fn the_configuration_switches_extensions_off_and_their_tools_go() {
    let dir = tempfile::tempdir().unwrap();
    let (all, _) = tools_sent(dir.path(), &[]);
    assert!(
        all.contains(&"web_fetch".to_owned()) && all.contains(&"todowrite".to_owned()),
        "{all:?}"
    );
    let (fewer, _) = tools_sent(dir.path(), &["-c", "extensions.disabled=[web-fetch]"]);
    let expected: Vec<String> = all.into_iter().filter(|t| t != "web_fetch").collect();
    assert_eq!(fewer, expected);
}

#[test]
fn an_unknown_extension_id_is_a_configuration_error_that_names_it() {
    let (_dir, output) = exec_script(
        r#"[{"text": "never"}]"#,
        &["-c", "extensions.enabled=[no-such-thing]", "hi"],
    );
    assert_exit(&output, 3);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("no-such-thing") && stderr.contains("extensions"),
        "{stderr}"
    );
}

#[test]
fn a_host_builtin_cannot_be_switched_off() {
    let (_dir, output) = exec_script(
        r#"[{"text": "never"}]"#,
        &["-c", "extensions.disabled=[host.permission]", "hi"],
    );
    assert_exit(&output, 3);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("host.permission") && stderr.contains("host built-in"),
        "{stderr}"
    );
}

/// A project's own (untrusted) config may take capabilities away, never add them.
#[test]
fn an_untrusted_project_may_switch_extensions_off_but_not_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    std::fs::write(
        dir.path().join(".keel/config.yaml"),
        "extensions:\n  disabled: [todo]\n  enabled: [web-fetch]\n",
    )
    .unwrap();
    let (tools, stderr) = tools_sent(dir.path(), &["-c", "extensions.disabled=[web-fetch]"]);
    assert!(!tools.contains(&"todowrite".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"web_fetch".to_owned()), "{tools:?}");
    assert!(tools.contains(&"bash".to_owned()), "{tools:?}");
    assert!(stderr.contains("extensions.enabled"), "{stderr}");
}

#[test]
fn a_retry_is_a_typed_event_in_every_format() {
    let script = r#"[{"error": {"code": "overloaded", "message": "busy", "retry_after_ms": 20}}, {"text": "recovered"}]"#;
    let (_dir, output) = exec_script(script, &["--output-format", "stream-json", "hi"]);
    assert_exit(&output, 0);
    let events = lines(&output.stdout);
    let retries: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "retry.scheduled")
        .collect();
    assert_eq!(retries.len(), 1, "{events:#?}");
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(retries[0]["error"]["code"], "model_overloaded");
    assert_eq!(retries[0]["error"]["retryable"], true);
    let (_dir, text) = exec_script(script, &["hi"]);
    assert_exit(&text, 0);
    let stderr = String::from_utf8(text.stderr).unwrap();
    assert!(
        stderr.contains("[retry 1/") && stderr.contains("busy"),
        "{stderr}"
    );
}
