//! Durable sessions: every run is stored, `--continue` and `--session` resume it, and
//! `keel sessions` lists, shows, forks, rewinds, exports and deletes.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::{Mock, lines, script};

/// A fresh KEEL_HOME (holding the session database) and working folder.
pub(crate) struct Home {
    pub(crate) home: tempfile::TempDir,
    pub(crate) work: tempfile::TempDir,
}

impl Home {
    pub(crate) fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn keel(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .env("KEEL_HOME", self.home.path())
            .env_remove("KEEL_SESSIONS_DB")
            .current_dir(self.work.path());
        command
    }

    fn cwd(&self) -> PathBuf {
        self.work.path().canonicalize().unwrap()
    }

    /// `keel exec --mock-script` with `responses`, then `extra` arguments.
    pub(crate) fn exec(&self, responses: &str, extra: &[&str]) -> Output {
        let path = script(self.home.path(), responses);
        let output = self
            .keel()
            .arg("exec")
            .arg("--mock-script")
            .arg(&path)
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        output
    }

    /// `keel sessions …` that must succeed, parsed as JSON.
    pub(crate) fn sessions_json(&self, args: &[&str]) -> Value {
        let output = self.keel().arg("sessions").args(args).output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    pub(crate) fn only_session(&self) -> String {
        let list = self.sessions_json(&["list", "--json"]);
        assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
        list[0]["id"].as_str().unwrap().to_owned()
    }

    /// `(role, text)` of each stored message but the hidden reminders keel adds to prompts.
    pub(crate) fn messages(&self, id: &str) -> Vec<(String, String)> {
        let shown = self.sessions_json(&["show", id, "--json"]);
        shown["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["message"]["hidden"] != true)
            .map(|entry| summarize(&entry["message"]))
            .collect()
    }
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A message as `(role, its text blocks and tool calls)`.
fn summarize(message: &Value) -> (String, String) {
    let role = message["role"].as_str().unwrap_or("?").to_owned();
    let mut parts = Vec::new();
    for block in message["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => parts.push(block["text"].as_str().unwrap_or("").to_owned()),
            Some("toolCall" | "tool_call") => {
                parts.push(format!("call {}", block["id"].as_str().unwrap_or("")));
            }
            _ => {}
        }
    }
    if message["is_error"] == true || message["isError"] == true {
        parts.push("(error)".into());
    }
    (role, parts.join(" | "))
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn list_shows_this_folders_sessions_under_a_header_and_all_of_them_with_all() {
    let home = Home::new();
    home.exec(r#"[{"text": "done"}]"#, &["Fix the parser"]);
    let text = |dir: &std::path::Path, args: &[&str]| {
        let output = home
            .keel()
            .current_dir(dir)
            .args(["sessions", "list"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        String::from_utf8(output.stdout).unwrap()
    };
    let here = text(home.work.path(), &[]);
    let lines: Vec<&str> = here.lines().collect();
    assert!(lines[0].starts_with("Sessions in "), "{here}");
    assert!(lines[0].contains("--all"), "{here}");
    assert!(
        lines[1].starts_with("UPDATED ") && lines[1].ends_with("TITLE"),
        "{here}"
    );
    assert!(
        lines[2].starts_with("just now") && lines[2].ends_with("Fix the parser"),
        "{here}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let there = text(elsewhere.path(), &[]);
    assert!(there.starts_with("No sessions in "), "{there}");
    assert!(there.contains("keel sessions list --all"), "{there}");
    let json = home
        .keel()
        .current_dir(elsewhere.path())
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&json.stdout).trim(), "[]");
    let all = text(elsewhere.path(), &["--all"]);
    assert!(all.starts_with("Sessions of every folder"), "{all}");
    assert!(
        all.contains(&format!("in {}", home.cwd().display())),
        "the folder is named: {all}"
    );
    let named = text(
        elsewhere.path(),
        &["--cwd", home.work.path().to_str().unwrap()],
    );
    assert!(named.contains("Fix the parser"), "{named}");
    let both = home
        .keel()
        .args(["sessions", "list", "--all", "--cwd", "."])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2), "--all and --cwd conflict");
}

#[test]
fn a_session_is_stored_and_listed() {
    let home = Home::new();
    let output = home.exec(
        r#"[{"text": "fixed"}]"#,
        &["--output-format", "stream-json", "Fix the bug\nin main.rs"],
    );
    let events = lines(&output.stdout);
    assert_eq!(events[1]["type"], "session.started");
    assert!(home.home.path().join("sessions.db").is_file());
    let list = home.sessions_json(&["list", "--json"]);
    let row = &list[0];
    assert_eq!(row["id"], events[0]["session_id"]);
    assert_eq!(row["title"], "Fix the bug");
    assert_eq!(row["cwd"], home.cwd().display().to_string());
    assert_eq!(row["model"], "scripted/scripted-model");
    assert!(row["updated"].as_i64().unwrap() > 0);
    let id = home.only_session();
    assert_eq!(
        home.messages(&id),
        pairs(&[("user", "Fix the bug\nin main.rs"), ("assistant", "fixed")])
    );
    let export = home.sessions_json(&["export", &id, "--format", "json"]);
    assert_eq!(export["turns"][0]["status"], "completed");
}

#[test]
fn continue_sends_the_old_history_in_the_next_request() {
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "the first answer"}, {"text": "the second answer"}]"#);
    let home = Home::new();
    let run = |extra: &[&str]| {
        let output = home
            .keel()
            .args([
                "exec",
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--base-url",
            ])
            .arg(server.url())
            .args(["--output-format", "stream-json"])
            .args(extra)
            .env("ANTHROPIC_API_KEY", "test-key")
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        lines(&output.stdout)
    };
    let first = run(&["the first question"]);
    let second = run(&["--continue", "the second question"]);
    assert_eq!(first[1]["type"], "session.started");
    assert_eq!(second[1]["type"], "session.resumed");
    assert_eq!(first[0]["session_id"], second[0]["session_id"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].body["messages"].to_string();
    for text in [
        "the first question",
        "the first answer",
        "the second question",
    ] {
        assert!(sent.contains(text), "{text} missing from {sent}");
    }
}

#[test]
fn session_prefix_resumes_that_session() {
    let home = Home::new();
    home.exec(r#"[{"text": "one"}]"#, &["first"]);
    let id = home.only_session();
    let prefix = &id[2..7];
    let output = home.exec(
        r#"[{"text": "two"}]"#,
        &[
            "--session",
            prefix,
            "--output-format",
            "stream-json",
            "second",
        ],
    );
    let events = lines(&output.stdout);
    assert_eq!(events[1]["type"], "session.resumed");
    assert_eq!(events[1]["session_id"], id.as_str());
    assert_eq!(
        home.messages(&id),
        pairs(&[
            ("user", "first"),
            ("assistant", "one"),
            ("user", "second"),
            ("assistant", "two"),
        ])
    );
}

#[test]
fn fork_and_rewind_work_on_revisions() {
    let home = Home::new();
    home.exec(r#"[{"text": "one"}]"#, &["first"]);
    home.exec(r#"[{"text": "two"}]"#, &["--continue", "second"]);
    let id = home.only_session();
    // Each turn commits the prompt's hidden reminder block, the prompt and the answer.
    let forked = home.sessions_json(&["fork", &id, "--at", "3", "--json"]);
    let fork_id = forked["id"].as_str().unwrap();
    assert_ne!(fork_id, id);
    let first_turn = pairs(&[("user", "first"), ("assistant", "one")]);
    assert_eq!(home.messages(fork_id), first_turn);
    assert_eq!(home.messages(&id).len(), 4);

    let rewound = home.sessions_json(&["rewind", &id, "--to", "3", "--json"]);
    assert_eq!(rewound["length"], 3);
    assert_eq!(home.messages(&id), first_turn);
    // Rewinding is undoable: back to the old head.
    home.sessions_json(&["rewind", &id, "--to", "6", "--json"]);
    assert_eq!(home.messages(&id).len(), 4);

    let deleted = home.sessions_json(&["delete", fork_id, "--json"]);
    assert_eq!(deleted["deleted"], fork_id);
    assert_eq!(home.only_session(), id);
}

/// Fork, rewind and delete go through a runtime of the session's folder that keeps
/// sessions only: it needs no model or API key, takes the home folder, and still works once
/// the folder is gone.
/// (That it starts no MCP server is `a_runtime_that_runs_no_turn_starts_no_server`.)
#[test]
fn session_maintenance_needs_no_model_or_key() {
    let home = Home::new();
    home.exec(r#"[{"text": "one"}]"#, &["first"]);
    let id = home.only_session();
    // The configured model needs a key nobody set.
    std::fs::write(
        home.home.path().join("config.yaml"),
        "model: openai/gpt-4o\n",
    )
    .unwrap();
    // The session's folder is the home folder here, which a runtime that runs turns refuses
    // as a workspace; one that only keeps sessions changes no file there.
    let run = |args: &[&str]| {
        home.keel()
            .arg("sessions")
            .args(args)
            .env("HOME", home.work.path())
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap()
    };
    let forked = run(&["fork", &id, "--json"]);
    assert!(forked.status.success(), "{}", stderr(&forked));
    let fork: Value = serde_json::from_slice(&forked.stdout).unwrap();
    let rewound = run(&["rewind", &id, "--to", "0", "--json"]);
    assert!(rewound.status.success(), "{}", stderr(&rewound));
    let rewound: Value = serde_json::from_slice(&rewound.stdout).unwrap();
    assert_eq!(rewound["length"], 0);
    // The folder is gone; its sessions can still be deleted.
    let Home {
        home: keel_home,
        work,
    } = home;
    let work_path = work.path().to_path_buf();
    drop(work);
    assert!(!work_path.exists());
    let deleted = Command::new(env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_HOME", keel_home.path())
        .env_remove("KEEL_SESSIONS_DB")
        .env_remove("OPENAI_API_KEY")
        .current_dir(keel_home.path())
        .args(["sessions", "delete", fork["id"].as_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{}", stderr(&deleted));
}

#[test]
fn export_writes_markdown_and_json() {
    let home = Home::new();
    home.exec(r#"[{"text": "the answer"}]"#, &["Explain the code"]);
    let id = home.only_session();
    let output = home
        .keel()
        .args(["sessions", "export", &id, "--format", "markdown"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let markdown = String::from_utf8(output.stdout).unwrap();
    assert!(markdown.starts_with("# Explain the code\n"), "{markdown}");
    assert!(
        markdown.contains("## User\n\nExplain the code"),
        "{markdown}"
    );
    assert!(
        markdown.contains("## Assistant\n\nthe answer"),
        "{markdown}"
    );
    let json = home.sessions_json(&["export", &id, "--format", "json"]);
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["session"]["id"], id.as_str());
    let history = json["history"].as_array().unwrap();
    // The prompt's hidden reminder block, the prompt, the answer.
    assert_eq!(history.len(), 3);
    assert_eq!(history[0]["message"]["hidden"], true);
}

/// Waits until the session database shows `count` messages in the only session; on a
/// timeout the message shows what the running child wrote to `stderr_path`.
pub(crate) fn wait_for_messages(
    home: &Home,
    count: usize,
    stderr_path: &std::path::Path,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = home.sessions_json(&["list", "--json"]);
        if let Some(id) = list[0]["id"].as_str()
            && home.messages(id).len() >= count
        {
            return id.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the session never reached {count} messages; sessions: {list}; the run's stderr: {}",
            std::fs::read_to_string(stderr_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_tool_call_interrupted_by_sigkill_is_closed_on_resume() {
    let home = Home::new();
    let path = script(
        home.home.path(),
        r#"[{"tool_calls": [
              {"id": "c1", "name": "bash", "arguments": {"command": "echo quick"}},
              {"id": "c2", "name": "bash", "arguments": {"command": "sleep 5"}}]},
            {"text": "never"}]"#,
    );
    let mut child = home
        .keel()
        .arg("exec")
        .arg("--mock-script")
        .arg(&path)
        .arg("run the tools")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(home.home.path().join("run.stderr")).unwrap())
        .spawn()
        .unwrap();
    let id = wait_for_messages(&home, 2, &home.home.path().join("run.stderr"));
    // While that process still runs its turn, the session is busy: nothing is touched.
    let path = script(home.home.path(), r#"[{"text": "too early"}]"#);
    let busy = home
        .keel()
        .arg("exec")
        .arg("--mock-script")
        .arg(&path)
        .args(["--continue", "go on"])
        .output()
        .unwrap();
    assert_eq!(busy.status.code(), Some(4), "{}", stderr(&busy));
    assert!(
        stderr(&busy).contains("is in use") && stderr(&busy).contains(&child.id().to_string()),
        "{}",
        stderr(&busy)
    );
    assert_eq!(home.messages(&id).len(), 2);
    child.kill().unwrap();
    child.wait().unwrap();

    home.exec(r#"[{"text": "recovered"}]"#, &["--continue", "go on"]);
    let messages = home.messages(&id);
    assert_eq!(messages.len(), 6, "{messages:?}");
    assert_eq!(
        &messages[..2],
        &pairs(&[
            ("user", "run the tools"),
            ("assistant", "call c1 | call c2")
        ])[..]
    );
    assert!(
        messages[2..4].iter().all(|(role, _)| role == "tool_result"),
        "{messages:?}"
    );
    let interrupted = messages
        .iter()
        .filter(|(_, text)| text.starts_with("interrupted:") && text.ends_with("(error)"))
        .count();
    assert!(interrupted >= 1, "{messages:?}");
    assert_eq!(
        &messages[4..],
        &pairs(&[("user", "go on"), ("assistant", "recovered")])[..]
    );
    let export = home.sessions_json(&["export", &id, "--format", "json"]);
    assert_eq!(export["turns"][0]["status"], "failed");
    assert_eq!(export["turns"][0]["error_code"], "interrupted");
    assert_eq!(export["turns"][1]["status"], "completed");
}

#[test]
fn bad_session_ids_are_usage_errors() {
    let home = Home::new();
    home.exec(r#"[{"text": "one"}]"#, &["first"]);
    let id = home.only_session();
    let mock = script(home.home.path(), r#"[{"text": "unused"}]"#)
        .display()
        .to_string();
    let cases: [(&[&str], &str); 5] = [
        (
            &["sessions", "show", "s-nope0000"],
            "no session matches `s-nope0000`",
        ),
        (&["sessions", "show", "ab"], "too short"),
        (
            &["sessions", "rewind", &id, "--to", "99"],
            "no revision matches",
        ),
        (&["sessions", "delete", "zzzzzz"], "no session matches"),
        (
            &[
                "exec",
                "--mock-script",
                &mock,
                "--session",
                "s-nope0000",
                "hi",
            ],
            "no session matches",
        ),
    ];
    for (args, message) in cases {
        let output = home.keel().args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    // Sessions exist, but none in this folder.
    let elsewhere = tempfile::tempdir().unwrap();
    let output = home
        .keel()
        .args(["exec", "--mock-script", &mock, "--continue", "hi", "--cwd"])
        .arg(elsewhere.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("no session to continue"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_bad_setting_is_refused_before_a_session_or_turn_is_started() {
    let home = Home::new();
    let path = script(home.home.path(), r#"[{"text": "never"}]"#);
    let output = home
        .keel()
        .arg("exec")
        .arg("--mock-script")
        .arg(&path)
        .arg("hello")
        .env("KEEL_LLM_IDLE_TIMEOUT_MS", "abc")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("KEEL_LLM_IDLE_TIMEOUT_MS"),
        "{}",
        stderr(&output)
    );
    let list = home.sessions_json(&["list", "--json"]);
    assert_eq!(list, serde_json::json!([]), "nothing was started");
}

/// `show` numbers each message with the revision that added it (what `rewind --to` and
/// `fork --at` take) and leaves keel's notes to the model out unless asked; so does the
/// Markdown export.
#[test]
fn show_prints_revisions_and_hides_keel_s_notes_unless_raw() {
    let home = Home::new();
    home.exec(r#"[{"text": "an answer"}]"#, &["explain the code"]);
    let id = home.only_session();
    let show = |extra: &[&str]| {
        let output = home
            .keel()
            .args(["sessions", "show", &id])
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        String::from_utf8(output.stdout).unwrap()
    };
    let plain = show(&[]);
    assert!(!plain.contains("system-reminder"), "{plain}");
    assert!(plain.contains("user: explain the code"), "{plain}");
    assert!(
        plain
            .lines()
            .any(|l| l.starts_with('r') && l.contains("assistant: an answer")),
        "{plain}"
    );
    assert!(plain.contains("--raw shows them"), "{plain}");
    let raw = show(&["--raw"]);
    assert!(raw.contains("system-reminder"), "{raw}");
    let output = home
        .keel()
        .args(["sessions", "export", &id])
        .output()
        .unwrap();
    let markdown = String::from_utf8(output.stdout).unwrap();
    assert!(!markdown.contains("system-reminder"), "{markdown}");
    assert!(markdown.contains("explain the code"), "{markdown}");
}
