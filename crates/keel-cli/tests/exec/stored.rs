//! Stored sessions are private, exported without secrets, left alone while a turn runs, and
//! a damaged database is named as such.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Stdio;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::sessions::{Home, stderr, wait_for_messages};
use crate::{assert_exit, outside_temp, script};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Regression: `sessions.db` and its log were created 0644 in a 0755 `KEEL_HOME`.
#[test]
fn keel_home_and_the_session_database_are_private() {
    // Created by keel: the home folder 0700, every database file 0600.
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("fresh/keel-home");
    let work = tempfile::tempdir().unwrap();
    let path = script(work.path(), r#"[{"text": "stored"}]"#);
    let run = |home: &Path, extra: &[(&str, &Path)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .env("KEEL_HOME", home)
            .env_remove("KEEL_SESSIONS_DB")
            .args(["exec", "--mock-script"])
            .arg(&path)
            .arg("--cwd")
            .arg(work.path())
            .arg("keep this private");
        for (key, value) in extra {
            command.env(key, value);
        }
        let output = command.output().unwrap();
        assert_exit(&output, 0);
    };
    run(&home, &[]);
    let db = home.join("sessions.db");
    let files = |db: &Path| {
        let mut modes = vec![mode(db)];
        for suffix in ["-wal", "-shm"] {
            let side = format!("{}{suffix}", db.display());
            if Path::new(&side).exists() {
                modes.push(mode(Path::new(&side)));
            }
        }
        modes
    };
    assert_eq!(
        (mode(&home), mode(&root.path().join("fresh"))),
        (0o700, 0o700)
    );
    assert_eq!(
        files(&db),
        [0o600; 3],
        "the database, its log and the log's index"
    );

    // Left readable by an older keel: tightened on the next run.
    set_mode(&home, 0o755);
    for suffix in ["", "-wal", "-shm"] {
        set_mode(Path::new(&format!("{}{suffix}", db.display())), 0o644);
    }
    run(&home, &[]);
    assert_eq!(mode(&home), 0o700);
    assert_eq!(files(&db), [0o600; 3]);

    // KEEL_SESSIONS_DB in a folder the user chose: the folder stays as it is, the files are
    // private, and a folder keel has to create for it is private too.
    let chosen = tempfile::tempdir().unwrap();
    set_mode(chosen.path(), 0o755);
    let custom = chosen.path().join("nested/sessions.db");
    run(&home, &[("KEEL_SESSIONS_DB", &custom)]);
    assert_eq!(
        (mode(chosen.path()), mode(&chosen.path().join("nested"))),
        (0o755, 0o700)
    );
    assert_eq!(files(&custom), [0o600; 3]);
}

/// Regression: `keel sessions export` printed API keys and tokens as they were stored.
#[test]
fn export_masks_secrets_and_says_how_many() {
    let home = Home::new();
    let env_secret = "s3rv1ce-value-from-env";
    let anthropic = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    let github = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    let answer = format!(
        "found {anthropic} in .env, {github} in the remote, postgres://app:hunter22@db/prod \
         and the service value {env_secret}"
    );
    home.exec(
        &json!([{ "text": answer }]).to_string(),
        &["what is in the repo?"],
    );
    let id = home.only_session();
    let export = |format: &str| {
        // Only this secret in the environment, so the counts do not depend on the machine's.
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
            .env_clear()
            .env("KEEL_HOME", home.home.path())
            .env("MY_SERVICE_TOKEN", env_secret)
            .args(["sessions", "export", &id, "--format", format])
            .output()
            .unwrap();
        assert_exit(&output, 0);
        let note = stderr(&output);
        (String::from_utf8(output.stdout).unwrap(), note)
    };
    let masked = "found [REDACTED:anthropic_key] in .env, [REDACTED:github_token] in the remote, \
                  postgres://app:[REDACTED:url_password]@db/prod and the service value \
                  [REDACTED:env:MY_SERVICE_TOKEN]";
    let note = "keel: redacted 4 secrets from the export (1 anthropic_key, \
                1 env:MY_SERVICE_TOKEN, 1 github_token, 1 url_password)\n";

    let (json_text, json_note) = export("json");
    let document: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(
        document["history"][2]["message"]["content"][0]["text"],
        masked
    );
    assert_eq!(
        document["redactions"],
        json!({"count": 4, "kinds": {"anthropic_key": 1, "env:MY_SERVICE_TOKEN": 1,
                                     "github_token": 1, "url_password": 1}})
    );
    assert_eq!(json_note, note);
    let (markdown, markdown_note) = export("markdown");
    assert!(markdown.contains(masked), "{markdown}");
    assert_eq!(markdown_note, note);
    for secret in [env_secret, anthropic, github, "hunter22"] {
        assert!(!json_text.contains(secret) && !markdown.contains(secret));
    }
}

/// Regression: `keel sessions rewind` and `delete` changed a session while another process
/// was running its turn.
#[test]
fn rewind_and_delete_refuse_a_session_a_running_turn_holds() {
    let home = Home::new();
    home.exec(r#"[{"text": "first"}]"#, &["one"]);
    let path = script(
        home.home.path(),
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "sleep 20"}}]},
            {"text": "never"}]"#,
    );
    let stderr_path = home.home.path().join("run.stderr");
    let mut child = home
        .keel()
        .arg("exec")
        .arg("--mock-script")
        .arg(&path)
        .args(["--continue", "two"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let id = wait_for_messages(&home, 4, &stderr_path);
    for args in [
        vec!["sessions", "rewind", id.as_str(), "--to", "1"],
        vec!["sessions", "delete", id.as_str()],
    ] {
        let output = home.keel().args(&args).output().unwrap();
        assert_exit(&output, 4);
        let text = stderr(&output);
        assert!(
            text.contains("session store error (session_busy)")
                && text.contains(&format!("keel process {}", child.id())),
            "{args:?}: {text}"
        );
    }
    assert_eq!(home.messages(&id).len(), 4, "nothing was changed");
    child.kill().unwrap();
    child.wait().unwrap();

    // The turn's process is gone: it no longer holds the session.
    let rewound = home.sessions_json(&["rewind", &id, "--to", "1", "--json"]);
    assert_eq!(rewound["length"], 1);
    let deleted = home.sessions_json(&["delete", &id, "--json"]);
    assert_eq!(deleted, json!({"deleted": id}));
}

/// Regression: a damaged database showed a raw SQLite error that named no file.
#[test]
fn a_corrupt_database_is_named_with_its_path() {
    // Not a database at all.
    let home = Home::new();
    let db = home.home.path().join("sessions.db");
    std::fs::write(&db, "not a database\n".repeat(500)).unwrap();
    let expected = format!(
        "keel: session store error (database_corrupt): the session database {} is corrupt \
         (file is not a database); move it aside to start a new one, or restore it from a \
         backup\n",
        db.display()
    );
    let listed = home.keel().args(["sessions", "list"]).output().unwrap();
    assert_exit(&listed, 4);
    assert_eq!(stderr(&listed), expected);
    let path = script(home.work.path(), r#"[{"text": "never"}]"#);
    let ran = home
        .keel()
        .arg("exec")
        .arg("--mock-script")
        .arg(&path)
        .arg("hi")
        .output()
        .unwrap();
    assert_exit(&ran, 4);
    assert_eq!(stderr(&ran), expected);

    // Cut short: a session large enough to reach the main file, then half of it gone.
    let home = Home::new();
    home.exec(
        &json!([{ "text": "y".repeat(6 * 1024 * 1024) }]).to_string(),
        &["write a lot"],
    );
    let id = home.only_session();
    let db = home.home.path().join("sessions.db");
    let length = std::fs::metadata(&db).unwrap().len();
    assert!(
        length > 4 * 1024 * 1024,
        "the log was checkpointed: {length}"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(length / 2)
        .unwrap();
    let shown = home
        .keel()
        .args(["sessions", "export", &id])
        .output()
        .unwrap();
    assert_exit(&shown, 4);
    let text = stderr(&shown);
    assert!(
        text.starts_with(&format!(
            "keel: session store error (database_corrupt): the session database {} is corrupt",
            db.display()
        )),
        "{text}"
    );
}

/// What a `bash` tool call printed in a `keel exec` run started in `start` with
/// `KEEL_SESSIONS_DB=db` and `--cwd work`.
fn bash_result_with_sessions_db(start: &Path, work: &Path, db: &str, command: &str) -> String {
    let path = script(
        work,
        &json!([
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": command}}]},
            {"text": "done"}
        ])
        .to_string(),
    );
    let home = outside_temp();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .current_dir(start)
        .env("KEEL_HOME", home.path())
        .env("KEEL_SESSIONS_DB", db)
        .args([
            "exec",
            "--output-format",
            "stream-json",
            "--permission",
            "full",
        ])
        .arg("--mock-script")
        .arg(&path)
        .arg("--cwd")
        .arg(work)
        .arg("run it")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    crate::lines(&output.stdout)
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .map(|e| e["item"]["result"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Regression: a relative `KEEL_SESSIONS_DB` was hidden from commands as if it lay under
/// `--cwd`, while the store opened it in the folder keel started in, where commands could
/// read it.
#[test]
fn a_relative_sessions_db_is_hidden_where_the_store_opens_it() {
    let start = outside_temp();
    let work = tempfile::tempdir().unwrap();
    let db = start.path().join("rel.db");
    let result = bash_result_with_sessions_db(
        start.path(),
        work.path(),
        "rel.db",
        &format!("head -c 15 {}; echo; echo ran", db.display()),
    );
    assert!(db.is_file(), "the store opened {}", db.display());
    assert!(result.contains("ran"), "{result}");
    assert!(!result.contains("SQLite format"), "{result}");
}

/// Regression: an empty `KEEL_SESSIONS_DB` (the store then uses `$KEEL_HOME`) made the
/// working folder itself a credential location, so no command ran.
#[test]
fn an_empty_sessions_db_variable_hides_nothing() {
    let start = outside_temp();
    let work = tempfile::tempdir().unwrap();
    let result = bash_result_with_sessions_db(start.path(), work.path(), "", "echo ran");
    assert_eq!(result, "ran\n");
}
