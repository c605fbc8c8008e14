//! The feedback bundle walks a session's child sessions too, and a file it cannot read goes
//! into the manifest instead of failing it.

use keel_protocol::Message;
use keel_store::{CommitRequest, Entry, HistoryOp, NewSession, new_id};

use crate::harness::{Harness, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_sessions_are_summarised_under_their_parent_and_unreadable_files_listed() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = Harness::start(Setup::new(Vec::new())).await;
    let parent = h.session().await;
    let child = h
        .store
        .create_session(NewSession {
            title: "explore the parser".into(),
            cwd: "/work/secret-project".into(),
            model: "scripted/scripted-model".into(),
            parent_id: Some(parent.clone()),
        })
        .await
        .unwrap();
    h.store
        .commit(CommitRequest {
            session_id: child.id.clone(),
            turn_id: None,
            operation_id: new_id("op-"),
            expected_revision: None,
            op: HistoryOp::Append {
                entries: vec![Entry::new(Message::user_text("look at parser.rs"))],
            },
        })
        .await
        .unwrap();
    let folder = h.session_dir(&child.id).join("artifacts");
    std::fs::create_dir_all(&folder).unwrap();
    let locked = folder.join("bash-locked-name.log");
    std::fs::write(&locked, "output\n").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::create_dir_all(h.session_dir(&child.id).join("inspector")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", folder.join("planted-link.log")).unwrap();
    let sessions = h.session_dir(&parent).parent().unwrap().to_path_buf();
    let bundle = keel_extensions::feedback::collect(&h.store, &parent, &sessions)
        .await
        .unwrap();
    assert_eq!(bundle.sessions.len(), 2);
    assert_eq!(bundle.sessions[1].parent.as_deref(), Some("session-1"));
    assert_eq!(bundle.sessions[1].messages["user"], 1);
    assert_eq!(bundle.manifest.skipped_folders, 1);
    // The link is never followed; the locked file is unreadable unless we run as root.
    let root = std::fs::read(&locked).is_ok();
    let mut errors: Vec<&str> = bundle.manifest.unreadable.iter().map(|u| u.error).collect();
    errors.sort_unstable();
    let expected: &[&str] = if root {
        &["not_a_file"]
    } else {
        &["not_a_file", "permission_denied"]
    };
    assert_eq!(errors, expected);
    assert!(!serde_json::to_string(&bundle).unwrap().contains("root:"));
    let text = serde_json::to_string(&bundle).unwrap();
    for secret in [
        "parser",
        "secret-project",
        "locked-name",
        parent.as_str(),
        child.id.as_str(),
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}
