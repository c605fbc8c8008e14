//! End to end: `keel mcp list|get|add|remove` on a throwaway KEEL_HOME and project.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pretty_assertions::assert_eq;
use serde_json::json;

/// A KEEL_HOME and a project folder (a git root, so no file above it counts).
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.git")).unwrap();
        Self { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn config(&self) -> PathBuf {
        self.home().join("config.yaml")
    }

    fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn keel(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg("mcp")
            .args(args)
            .current_dir(self.project())
            .env("KEEL_HOME", self.home())
            .env("HOME", self.dir.path())
            .env_remove("KEEL_LOG")
            .output()
            .unwrap()
    }

    /// Runs and expects success; stdout with the temporary folder shown as `<TMP>`.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.keel(args);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        text(&output.stdout).replace(&self.dir.path().display().to_string(), "<TMP>")
    }

    /// Runs and expects exit 2; its stderr.
    fn refused(&self, args: &[&str]) -> String {
        let output = self.keel(args);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
        text(&output.stderr)
    }

    /// Runs `list`-like output: each line's cells (split at runs of two spaces), after
    /// checking that the cells of the table's lines start in the same columns.
    fn table(&self, args: &[&str]) -> Vec<Vec<String>> {
        let output = self.keel(args);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let stdout = text(&output.stdout);
        let starts = |line: &str| -> Vec<usize> {
            let bytes = line.as_bytes();
            (0..bytes.len())
                .filter(|&i| bytes[i] != b' ' && (i == 0 || (i >= 2 && bytes[i - 2..i] == *b"  ")))
                .collect()
        };
        let lines: Vec<&str> = stdout.lines().collect();
        let header = starts(lines[0]);
        for line in lines.iter().filter(|l| starts(l).len() == header.len()) {
            assert_eq!(starts(line), header, "{stdout}");
        }
        let tmp = self.dir.path().display().to_string();
        lines
            .iter()
            .map(|line| {
                line.split("  ")
                    .map(str::trim)
                    .filter(|cell| !cell.is_empty())
                    .map(|cell| cell.replace(&tmp, "<TMP>"))
                    .collect()
            })
            .collect()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const USER_CONFIG: &str = "# my settings\nmodel: openai/gpt-4o # the default\n\nmcp_servers: # servers\n  old:\n    command: old-server\n\n# stricter\nsandbox: read-only\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn added_servers_keep_the_users_file_and_show_masked() {
    let world = World::new();
    write(&world.config(), USER_CONFIG);
    let added = world.ok(&[
        "add",
        "files",
        "--env",
        "API_KEY=sekrit-env",
        "--startup-timeout-sec",
        "5",
        "--",
        "npx",
        "-y",
        "@scope/server files",
    ]);
    assert_eq!(
        added,
        "Added MCP server `files` to <TMP>/home/config.yaml.\n"
    );
    let added = world.json(&[
        "add",
        "remote",
        "--json",
        "--url",
        "https://example.com/mcp",
        "--header",
        "Authorization: Bearer sekrit-header",
        "--bearer-token-env-var",
        "REMOTE_TOKEN",
    ]);
    assert_eq!(added, json!({"added": "remote"}));

    let file = std::fs::read_to_string(world.config()).unwrap();
    assert_eq!(
        file,
        "# my settings\nmodel: openai/gpt-4o # the default\n\nmcp_servers: # servers\n  old:\n    command: old-server\n  files:\n    command: npx\n    args:\n    - -y\n    - '@scope/server files'\n    env:\n      API_KEY: sekrit-env\n    startup_timeout_sec: 5.0\n  remote:\n    url: https://example.com/mcp\n    headers:\n      Authorization: Bearer sekrit-header\n    bearer_token_env_var: REMOTE_TOKEN\n\n# stricter\nsandbox: read-only\n"
    );
    let parsed: yaml_serde::Value = yaml_serde::from_str(&file).unwrap();
    assert_eq!(parsed["sandbox"], yaml_serde::Value::from("read-only"));

    assert_eq!(
        world.table(&["list"]),
        vec![
            vec!["NAME", "TRANSPORT", "SOURCE", "ENABLED", "AUTH"],
            vec![
                "files",
                "stdio: npx -y '@scope/server files'",
                "<TMP>/home/config.yaml",
                "yes",
                "-"
            ],
            vec![
                "old",
                "stdio: old-server",
                "<TMP>/home/config.yaml",
                "yes",
                "-"
            ],
            vec![
                "remote",
                "http: https://example.com/mcp",
                "<TMP>/home/config.yaml",
                "yes",
                "bearer token from $REMOTE_TOKEN"
            ],
        ]
    );
    // Paths show as `<TMP>` (see `World::ok`).
    let config = "<TMP>/home/config.yaml";
    let listed = world.json(&["list", "--json"]);
    assert_eq!(
        listed,
        json!([
            {"name": "files", "transport": "stdio", "command": "npx", "args": ["-y", "@scope/server files"],
             "url": null, "source": "config", "file": config, "trusted": true, "enabled": true, "auth": null},
            {"name": "old", "transport": "stdio", "command": "old-server", "args": [],
             "url": null, "source": "config", "file": config, "trusted": true, "enabled": true, "auth": null},
            {"name": "remote", "transport": "http", "command": null, "args": [],
             "url": "https://example.com/mcp", "source": "config", "file": config, "trusted": true, "enabled": true,
             "auth": "bearer token from $REMOTE_TOKEN"},
        ])
    );

    let shown = world.ok(&["get", "files"]);
    assert_eq!(
        shown,
        "name:            files\n\
         source:          <TMP>/home/config.yaml\n\
         enabled:         yes\n\
         transport:       stdio\n\
         command:         npx\n\
         args:            -y '@scope/server files'\n\
         env:             API_KEY=***\n\
         startup timeout: 5s\n\
         tool timeout:    120s\n"
    );
    let shown = world.ok(&["get", "remote"]);
    assert!(
        shown.contains("headers:           Authorization=***\n"),
        "{shown}"
    );
    assert!(shown.contains("$REMOTE_TOKEN"), "{shown}");
    assert!(!shown.contains("sekrit"), "{shown}");
    let shown = world.json(&["get", "remote", "--json"]);
    assert_eq!(
        shown,
        json!({"name": "remote", "transport": "http", "command": null, "args": [],
               "url": "https://example.com/mcp", "source": "config", "file": config,
               "trusted": true, "enabled": true, "auth": "bearer token from $REMOTE_TOKEN",
               "env": {}, "cwd": null,
               "headers": {"Authorization": "***"}, "bearer_token_env_var": "REMOTE_TOKEN",
               "startup_timeout_sec": 30.0, "tool_timeout_sec": 120.0})
    );
    let shown = world.json(&["get", "files", "--json"]);
    assert_eq!(shown["env"], json!({"API_KEY": "***"}));

    // Removing gives back the user's file as it was.
    assert_eq!(
        world.json(&["remove", "files", "--json"]),
        json!({"removed": "files"})
    );
    assert_eq!(
        world.ok(&["remove", "remote"]),
        "Removed MCP server `remote` from <TMP>/home/config.yaml.\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.config()).unwrap(),
        USER_CONFIG
    );
}

#[test]
fn bad_additions_are_refused_and_leave_the_file_alone() {
    let world = World::new();
    write(&world.config(), USER_CONFIG);
    let cases: &[(&[&str], &str)] = &[
        (&["add", "old", "--", "x"], "already in "),
        (
            &["add", "a__b", "--", "x"],
            "mcp_servers.a__b: `a__b` cannot name an MCP server",
        ),
        (
            &["add", "w", "--url", "ftp://example.com"],
            "mcp_servers.w.url: `ftp://example.com`: only http and https are supported",
        ),
        (
            &["add", "w", "--url", "not a url"],
            "mcp_servers.w.url: `not a url` is not a URL",
        ),
        (
            &["add", "w", "--url", "https://example.com", "--", "x"],
            "mcp_servers.w: give either `command` or `url`, not both",
        ),
        (
            &["add", "w"],
            "mcp_servers.w: give a `command` (stdio) or a `url` (HTTP)",
        ),
        (
            &["add", "w", "--env", "A=b", "--url", "https://example.com"],
            "mcp_servers.w: args, env and cwd are for a `command` server",
        ),
    ];
    for (args, message) in cases {
        let stderr = world.refused(args);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    assert!(
        world
            .refused(&["add", "old", "--", "x"])
            .contains("keel mcp remove old")
    );
    assert_eq!(
        std::fs::read_to_string(world.config()).unwrap(),
        USER_CONFIG
    );

    // An inline block is not rewritten.
    write(&world.config(), "mcp_servers: {}\n");
    let stderr = world.refused(&["add", "w", "--", "x"]);
    assert!(
        stderr.contains("config.yaml was left unchanged") && stderr.contains("flow style"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(world.config()).unwrap(),
        "mcp_servers: {}\n"
    );
}

#[test]
fn project_servers_show_as_untrusted_and_are_not_removed() {
    let world = World::new();
    assert_eq!(
        world.ok(&["list"]),
        "No MCP servers configured. Add one with `keel mcp add NAME -- COMMAND [ARGS...]` \
         (stdio) or `keel mcp add NAME --url URL` (HTTP).\n"
    );
    assert_eq!(world.json(&["list", "--json"]), json!([]));
    write(
        &world.project().join(".mcp.json"),
        r#"{"mcpServers": {"proj": {"command": "node", "args": ["s.js"], "env": {"T": "secret"}}}}"#,
    );
    assert_eq!(
        world.table(&["list"]),
        vec![
            vec!["NAME", "TRANSPORT", "SOURCE", "ENABLED", "AUTH"],
            vec![
                "proj",
                "stdio: node s.js",
                "<TMP>/project/.mcp.json (not trusted)",
                "yes",
                "-"
            ],
            vec![
                "keel does not start the servers of <TMP>/project/.mcp.json until you trust it: run `keel trust`."
            ],
        ]
    );
    let listed = world.json(&["list", "--json"]);
    assert_eq!(listed[0]["source"], json!("project"));
    assert_eq!(listed[0]["trusted"], json!(false));
    let shown = world.ok(&["get", "proj"]);
    assert!(shown.contains("env:             T=***\n"), "{shown}");

    let stderr = world.refused(&["remove", "proj"]);
    assert!(
        stderr.contains("`proj` comes from the project's") && stderr.contains(".mcp.json"),
        "{stderr}"
    );
    let stderr = world.refused(&["remove", "nope"]);
    assert!(stderr.contains("no MCP server named `nope`"), "{stderr}");
    let output = world.keel(&["get", "nope"]);
    assert_ne!(output.status.code(), Some(0));
    assert!(text(&output.stderr).contains("`nope`"));
}

#[test]
fn a_missing_home_is_created_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let world = World::new();
    world.ok(&["add", "s", "--", "server"]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&world.home()), 0o700);
    assert_eq!(mode(&world.config()), 0o600);
    assert_eq!(
        std::fs::read_to_string(world.config()).unwrap(),
        "mcp_servers:\n  s:\n    command: server\n"
    );
    // Removing keeps an existing file's permissions.
    std::fs::set_permissions(world.config(), std::fs::Permissions::from_mode(0o640)).unwrap();
    world.ok(&["remove", "s"]);
    assert_eq!(mode(&world.config()), 0o640);
}

#[test]
fn import_shows_claude_and_codex_servers_and_adds_them_only_when_told() {
    let world = World::new();
    std::fs::write(
        world.dir.path().join(".claude.json"),
        r#"{"mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-fs"], "env": {"TOKEN": "secret-value"}},
                          "old": {"type": "sse", "url": "https://old.example.com/sse"}}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(world.dir.path().join(".codex")).unwrap();
    std::fs::write(
        world.dir.path().join(".codex/config.toml"),
        "[mcp_servers.docs]\ncommand = \"docs-mcp\"\n[mcp_servers.fs]\ncommand = \"other\"\n",
    )
    .unwrap();
    // No terminal and no --yes: shown, nothing added.
    let shown = world.ok(&["import"]);
    assert!(
        shown.contains("fs  (<TMP>/.claude.json)  npx -y server-fs (with TOKEN)"),
        "{shown}"
    );
    assert!(!shown.contains("secret-value"), "{shown}");
    // An HTTP+SSE server is reached at its URL like any other.
    assert!(
        shown.contains("old  (<TMP>/.claude.json)  https://old.example.com/sse"),
        "{shown}"
    );
    assert!(
        shown.contains("skipped: an earlier file has a server of that name"),
        "{shown}"
    );
    assert!(shown.contains("keel mcp import --yes"), "{shown}");
    assert!(!world.config().exists(), "nothing is added without a yes");
    let added = world.ok(&["import", "--yes"]);
    assert!(added.contains("Added docs, fs, old to"), "{added}");
    let config = std::fs::read_to_string(world.config()).unwrap();
    assert!(
        config.contains("docs-mcp") && config.contains("server-fs"),
        "{config}"
    );
    // Again: both are there now.
    let again = world.ok(&["import", "--yes"]);
    assert!(again.contains("Nothing to add."), "{again}");
}

/// Issue 35: Claude Code's `mcp add` forms, `--transport http NAME URL` and `--transport
/// stdio NAME COMMAND ARGS` with `-e`/`-H`, add what keel's own forms add.
#[test]
fn claude_codes_add_forms_work_too() {
    let world = World::new();
    world.ok(&[
        "add",
        "--transport",
        "http",
        "remote",
        "https://mcp.example.com/mcp",
        "-H",
        "X-Team: core",
    ]);
    world.ok(&[
        "add",
        "-t",
        "stdio",
        "-e",
        "MODE=fast",
        "local",
        "--",
        "npx",
        "-y",
        "some-server",
    ]);
    let text = std::fs::read_to_string(world.config()).unwrap();
    let config: serde_json::Value = yaml_serde::from_str(&text).unwrap();
    let servers = &config["mcp_servers"];
    assert_eq!(
        servers["remote"]["url"], "https://mcp.example.com/mcp",
        "{text}"
    );
    assert_eq!(servers["remote"]["headers"]["X-Team"], "core", "{text}");
    assert_eq!(servers["local"]["command"], "npx", "{text}");
    assert_eq!(
        servers["local"]["args"],
        json!(["-y", "some-server"]),
        "{text}"
    );
    assert_eq!(servers["local"]["env"]["MODE"], "fast", "{text}");
    let stderr = world.refused(&["add", "--transport", "http", "w"]);
    assert!(stderr.contains("needs the server's URL"), "{stderr}");
    let stderr = world.refused(&["add", "--transport", "http", "w", "https://a", "b"]);
    assert!(stderr.contains("one URL"), "{stderr}");
}

/// Issue 35: `add`s at once take turns on the file: every one of them is there after.
#[test]
fn concurrent_adds_are_all_kept() {
    let world = World::new();
    let children: Vec<std::process::Child> = (0..8)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_keel"))
                .args([
                    "mcp",
                    "add",
                    &format!("s{i}"),
                    "--",
                    "server",
                    &i.to_string(),
                ])
                .current_dir(world.project())
                .env("KEEL_HOME", world.home())
                .env("HOME", world.dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(world.config()).unwrap();
    for i in 0..8 {
        assert!(text.contains(&format!("s{i}:")), "s{i} is missing:\n{text}");
    }
}

#[test]
fn adding_to_the_project_writes_its_mcp_json_and_trusts_nothing() {
    let world = World::new();
    let said = world.ok(&[
        "add", "--scope", "project", "files", "--", "npx", "-y", "srv",
    ]);
    assert!(
        said.contains("keel starts a project's servers once you trust it"),
        "{said}"
    );
    world.ok(&[
        "add",
        "-s",
        "project",
        "--transport",
        "http",
        "web",
        "https://example.com/mcp",
        "-H",
        "Authorization=Bearer ${WEB_TOKEN}",
    ]);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(world.project().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        file,
        json!({"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "srv"]},
            "web": {"type": "http", "url": "https://example.com/mcp",
                    "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}
        }})
    );
    let listed = world.json(&["list", "--json"]);
    assert_eq!(listed[0]["source"], json!("project"));
    assert_eq!(
        listed[0]["trusted"],
        json!(false),
        "writing it trusted nothing"
    );
    assert!(!world.config().exists(), "the user's file is untouched");
    let stderr = world.refused(&["add", "-s", "project", "files", "--", "other"]);
    assert!(
        stderr.contains("already has a server named `files`"),
        "{stderr}"
    );
    let stderr = world.refused(&[
        "add",
        "-s",
        "project",
        "--url",
        "https://e.com/mcp",
        "--bearer-token-env-var",
        "T",
        "x",
    ]);
    assert!(
        stderr.contains("no place for --bearer-token-env-var"),
        "{stderr}"
    );
}
