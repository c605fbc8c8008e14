#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use super::*;

fn entry(command: &str) -> Mapping {
    let mut entry = Mapping::new();
    entry.insert("command".into(), command.into());
    entry
}

#[test]
fn an_entry_goes_at_the_end_of_the_block_with_its_indentation() {
    let text = "model: a/b\nmcp_servers: # mine\n    one:\n        command: x\n\n# next\nsandbox: read-only\n";
    let out = with_entry(text, "two", &entry("y z")).unwrap();
    assert_eq!(
        out,
        "model: a/b\nmcp_servers: # mine\n    one:\n        command: x\n    two:\n      command: y z\n\n# next\nsandbox: read-only\n"
    );
}

#[test]
fn a_missing_block_is_appended_and_an_empty_one_filled() {
    assert_eq!(
        with_entry("model: a/b", "s", &entry("x")).unwrap(),
        "model: a/b\nmcp_servers:\n  s:\n    command: x\n"
    );
    assert_eq!(
        with_entry("mcp_servers:", "s", &entry("x")).unwrap(),
        "mcp_servers:\n  s:\n    command: x\n"
    );
    assert_eq!(
        with_entry("", "true", &entry("x")).unwrap(),
        "mcp_servers:\n  'true':\n    command: x\n"
    );
}

#[test]
fn an_inline_block_is_refused() {
    assert!(with_entry("mcp_servers: {}\n", "s", &entry("x")).is_err());
    assert!(without_entry("mcp_servers: {s: {command: x}}\n", "s").is_err());
}

#[test]
fn removing_takes_the_key_line_and_everything_under_it() {
    let text = "mcp_servers:\n  a:\n    command: x\n    args:\n    - |\n      one\n\n      two\n  # b follows\n  'b':\n    url: http://h\nother: 1\n";
    assert_eq!(
        without_entry(text, "a").unwrap().unwrap(),
        "mcp_servers:\n  # b follows\n  'b':\n    url: http://h\nother: 1\n"
    );
    assert_eq!(
        without_entry(text, "b").unwrap().unwrap(),
        "mcp_servers:\n  a:\n    command: x\n    args:\n    - |\n      one\n\n      two\n  # b follows\nother: 1\n"
    );
    assert_eq!(without_entry(text, "c").unwrap(), None);
    assert_eq!(without_entry("other: 1\n", "a").unwrap(), None);
}

#[test]
fn apply_keeps_comments_and_checks_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("home").join("config.yaml");
    apply(
        &file,
        &Change::Add {
            name: "a",
            entry: &entry("x"),
        },
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let dir_mode = std::fs::metadata(file.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);

    std::fs::write(
        &file,
        "# top\nmcp_servers:\n  a:\n    command: x # why\nsandbox: read-only\n",
    )
    .unwrap();
    apply(
        &file,
        &Change::Add {
            name: "b",
            entry: &entry("y"),
        },
    )
    .unwrap();
    apply(&file, &Change::Remove { name: "a" }).unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "# top\nmcp_servers:\n  b:\n    command: y\nsandbox: read-only\n"
    );
    assert_eq!(servers_in(&file).unwrap().len(), 1);
    apply(&file, &Change::Remove { name: "b" }).unwrap();
    assert!(servers_in(&file).unwrap().is_empty());
    // Nothing is left behind beside the file.
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn an_edit_that_reads_back_wrong_is_refused_and_the_file_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    // A tagged section key this editor does not see as the block (appending would
    // duplicate the key), and a file written as one flow mapping.
    for text in [
        "!!str mcp_servers:\n  a:\n    command: x\n",
        "{model: a/b}\n",
    ] {
        std::fs::write(&file, text).unwrap();
        let error = apply(
            &file,
            &Change::Add {
                name: "b",
                entry: &entry("y"),
            },
        )
        .unwrap_err();
        assert!(error.to_string().contains("left unchanged"), "{error}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

#[test]
fn a_project_file_gets_the_server_and_keeps_the_rest_as_written() {
    let entry: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"command": "npx", "args": ["-y", "srv"]}"#).unwrap();
    let fresh = add_to_project_file(None, "files", &entry).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&fresh).unwrap();
    assert_eq!(parsed["mcpServers"]["files"]["args"][1], "srv");

    let written = "{\n  \"zeta\": 1,\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"}\n  },\n  \"alpha\": true\n}\n";
    let updated = add_to_project_file(Some(written), "files", &entry).unwrap();
    assert!(updated.starts_with("{\n  \"zeta\": 1,"), "{updated}");
    assert!(updated.ends_with("  \"alpha\": true\n}\n"), "{updated}");
    let parsed: serde_json::Value = serde_json::from_str(&updated).unwrap();
    assert_eq!(parsed["mcpServers"]["a"]["command"], "a");
    assert_eq!(parsed["mcpServers"]["files"]["command"], "npx");

    let without = add_to_project_file(Some("{\"other\": []}"), "files", &entry).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&without).unwrap();
    assert_eq!(parsed["other"], serde_json::json!([]));
    assert_eq!(parsed["mcpServers"]["files"]["command"], "npx");

    let error = add_to_project_file(Some(&updated), "files", &entry).unwrap_err();
    assert!(
        error.contains("already has a server named `files`"),
        "{error}"
    );
    assert!(
        add_to_project_file(Some("{nope"), "files", &entry)
            .unwrap_err()
            .contains("not JSON")
    );
    assert!(add_to_project_file(Some("{\"mcpServers\": []}"), "x", &entry).is_err());
}
