//! `keel config`: show (values and where they came from), edit (kept only when valid) and
//! schema; a misspelt key names the nearest valid one.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};

use crate::assert_exit;

/// `keel` with `KEEL_HOME` in `home` and the working folder `home/work`.
fn keel(home: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
    command
        .env("KEEL_HOME", home.join("keel"))
        .env_remove("VISUAL")
        .env_remove("EDITOR")
        .current_dir(home.join("work"))
        .stdin(Stdio::null());
    command
}

fn setup(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    std::fs::create_dir_all(home.path().join("keel")).unwrap();
    if !config.is_empty() {
        std::fs::write(home.path().join("keel/config.yaml"), config).unwrap();
    }
    home
}

#[test]
fn show_names_the_file_and_line_or_override_of_each_value() {
    let home = setup("durable: true\nsandbox:\n  network:\n    allow: [example.com]\n");
    let file = home.path().join("keel/config.yaml").display().to_string();
    let output = keel(home.path())
        .args(["config", "show", "-c", "permission=plan"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let text = String::from_utf8(output.stdout).unwrap();
    let row = |key: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("{key}: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(row("durable"), ["durable", "true", &format!("{file}:1")]);
    assert_eq!(
        row("permission"),
        ["permission", "plan", "-c", "permission=plan"]
    );
    assert_eq!(
        row("sandbox.network.allow"),
        [
            "sandbox.network.allow",
            "[\"example.com\"]",
            &format!("{file}:4")
        ]
    );
    assert_eq!(row("sandbox.mode"), ["sandbox.mode", "(unset)", "default"]);
    let json = keel(home.path())
        .args(["config", "show", "--json"])
        .output()
        .unwrap();
    assert_exit(&json, 0);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["durable"]["value"], true);
    assert_eq!(json["durable"]["source"], format!("{file}:1"));
    assert_eq!(json["runaway_guard.enabled"]["source"], "default");
}

#[test]
fn a_misspelt_key_names_the_nearest_one_everywhere_the_file_is_read() {
    let home = setup("model: anthropic/claude-sonnet-4-5\npermision: auto\n");
    for args in [
        &["exec", "hi"][..],
        &["config", "show"],
        &["doctor", "--offline"],
    ] {
        let output = keel(home.path()).args(args).output().unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            all.contains("config.yaml:2") && all.contains("did you mean `permission`?"),
            "{args:?}: {all}"
        );
        assert_ne!(output.status.code(), Some(0), "{args:?}");
    }
}

#[test]
fn edit_keeps_a_valid_file_and_refuses_an_invalid_one() {
    let home = setup("");
    let editor = home.path().join("editor.sh");
    let good = home.path().join("good.yaml");
    std::fs::write(&good, "permission: auto\n").unwrap();
    std::fs::write(&editor, "#!/bin/sh\ncat \"$KEEL_TEST_CONTENT\" >> \"$1\"\n").unwrap();
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = keel(home.path())
        .args(["config", "edit"])
        .env("EDITOR", &editor)
        .env("KEEL_TEST_CONTENT", &good)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let file = home.path().join("keel/config.yaml");
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.starts_with("# yaml-language-server: $schema=config.schema.json"),
        "{saved}"
    );
    assert!(saved.ends_with("permission: auto\n"), "{saved}");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("keel/config.schema.json")).unwrap(),
    )
    .unwrap();
    assert!(schema["properties"]["permission"].is_object(), "{schema}");
    // A broken edit: the file stays as it was and says where the edit is.
    let bad = home.path().join("bad.yaml");
    std::fs::write(&bad, "sandbox: wide-open\n").unwrap();
    let output = keel(home.path())
        .args(["config", "edit"])
        .env("VISUAL", &editor)
        .env("KEEL_TEST_CONTENT", &bad)
        .output()
        .unwrap();
    assert_exit(&output, 3);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("{}:", file.display())), "{stderr}");
    assert!(stderr.contains("wide-open"), "{stderr}");
    assert!(stderr.contains("is unchanged"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), saved);
}

#[test]
fn schema_is_json_schema_of_every_key() {
    let home = setup("");
    let output = keel(home.path())
        .args(["config", "schema"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let schema: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        schema["$schema"]
            .as_str()
            .unwrap()
            .contains("json-schema.org")
    );
    for key in ["model", "permission", "sandbox", "mcp_servers", "tui"] {
        assert!(schema["properties"][key].is_object(), "{key}");
    }
}
