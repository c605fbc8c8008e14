//! `edit` and `write` show what they would change before it is approved, without changing
//! anything, and refuse to write once the file is no longer what they showed.

use keel_protocol::{ToolCallId, ToolPreview};

use super::*;

fn call() -> ToolCallId {
    // The id `run` executes with (`common::context`).
    ToolCallId::from("c1")
}

fn file_preview(preview: Option<ToolPreview>) -> (String, bool, String) {
    match preview.expect("a preview") {
        ToolPreview::File {
            path,
            created,
            diff,
            ..
        } => (path, created, diff),
    }
}

#[tokio::test]
async fn an_edit_shows_its_diff_and_writes_it_once_approved() {
    let dir = tempfile::tempdir().unwrap();
    let edit = Edit::new(env(&dir));
    let path = dir.path().join("calc.py");
    std::fs::write(&path, "def add(a, b):\n    return a + b\n").unwrap();
    let args =
        json!({"path": "calc.py", "edits": [{"old_string": "a + b", "new_string": "a - b"}]});
    let (shown, created, diff) = file_preview(edit.preview(&call(), &args).await);
    assert!(shown.ends_with("/calc.py") && !created, "{shown}");
    assert!(
        diff.contains("-    return a + b\n+    return a - b\n"),
        "{diff}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "def add(a, b):\n    return a + b\n",
        "a preview writes nothing"
    );
    run(&edit, args).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );
}

#[tokio::test]
async fn a_file_changed_after_its_preview_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let edit = Edit::new(env(&dir));
    let path = dir.path().join("test_calc.py");
    std::fs::write(&path, "assert add(1, 2) == 3\n").unwrap();
    let args =
        json!({"path": "test_calc.py", "edits": [{"old_string": "== 3", "new_string": "== 4"}]});
    assert!(edit.preview(&call(), &args).await.is_some());
    // Someone (a background command, the user) changes the file while the question waits.
    std::fs::write(&path, "assert add(1, 2) == 3\nassert add(2, 2) == 4\n").unwrap();
    let refused = run(&edit, args).await.unwrap_err();
    assert!(
        refused.contains("changed after the user was shown"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"
    );
}

#[tokio::test]
async fn a_write_shows_a_new_file_and_refuses_one_that_appeared_since() {
    let dir = tempfile::tempdir().unwrap();
    let write = Write::new(env(&dir));
    let args = json!({"path": "notes/new.md", "content": "# Notes\n"});
    let (_, created, diff) = file_preview(write.preview(&call(), &args).await);
    assert!(created);
    assert!(diff.starts_with("--- /dev/null\n"), "{diff}");
    assert!(diff.contains("+# Notes\n"), "{diff}");
    assert!(
        !dir.path().join("notes").exists(),
        "a preview makes no folder"
    );
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    std::fs::write(dir.path().join("notes/new.md"), "someone else's\n").unwrap();
    let refused = run(&write, args).await.unwrap_err();
    assert!(
        refused.contains("changed after the user was shown"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/new.md")).unwrap(),
        "someone else's\n"
    );
}

#[tokio::test]
async fn a_replacing_write_shows_its_diff_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let write = Write::new(env(&dir));
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let args = json!({"path": "a.txt", "content": "one\n# removed\n"});
    let (_, created, diff) = file_preview(write.preview(&call(), &args).await);
    assert!(!created);
    assert!(diff.contains("-two\n+# removed\n"), "{diff}");
    run(&write, args).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "one\n# removed\n"
    );
}

#[tokio::test]
async fn no_preview_for_an_edit_that_cannot_apply_or_a_file_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let tools_env = env(&dir);
    let edit = Edit::new(tools_env.clone());
    let write = Write::new(tools_env);
    std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    let missing = json!({"path": "a.txt", "edits": [{"old_string": "zzz", "new_string": "y"}]});
    assert!(edit.preview(&call(), &missing).await.is_none());
    // The call still runs (and fails) as it would have: the failed preview holds nothing.
    assert!(run(&edit, missing).await.is_err());
    let fifo = dir.path().join("pipe");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    // A named pipe is never opened to wait for a writer: this returns at once.
    assert!(
        write
            .preview(&call(), &json!({"path": "pipe", "content": "x"}))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn a_preview_never_reads_a_credential_even_if_asked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (ws, home) = (root.join("ws"), root.join("home"));
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "KEY-CANARY\n").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("key")).unwrap();
    let mut tools_env = ToolEnv::new(ws.clone());
    tools_env.home = Some(home.clone());
    tools_env.sandbox = SandboxMode::DangerFullAccess;
    let tools_env = Arc::new(tools_env);
    let edit = Edit::new(tools_env.clone());
    let write = Write::new(tools_env);
    // The gate refuses these calls; the preview does not rely on it.
    for path in [
        home.join(".ssh/id_rsa").display().to_string(),
        "~/.ssh/id_rsa".into(),
    ] {
        let args = json!({"path": path, "edits": [{"old_string": "KEY", "new_string": "X"}]});
        assert_eq!(edit.preview(&call(), &args).await, None, "{path}");
    }
    let args = json!({"path": "key", "content": "x"});
    assert_eq!(write.preview(&call(), &args).await, None);
}
