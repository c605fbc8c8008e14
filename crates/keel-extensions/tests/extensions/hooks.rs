//! User hooks at the runtime's session changes: a manual compaction fires PreCompact with
//! Claude Code's JSON.

use keel_llm::scripted::ScriptedResponse;
use keel_protocol::ops;
use keel_runtime::ContractExt as _;

use crate::harness::{Harness, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_compaction_fires_pre_compact() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("pre-compact.json");
    let setup = Setup::new(vec![ScriptedResponse::text("first")]).set(&format!(
        "hooks={{PreCompact: [{{matcher: manual, hooks: [{{type: command, command: 'cat > {}'}}]}}]}}",
        file.display()
    ));
    let h = Harness::start(setup).await;
    h.runtime
        .set_compactor(std::sync::Arc::new(crate::harness::KeepLast));
    let session = h.session().await;
    h.turn(&session, "one").await;
    h.runtime
        .request(ops::Compact {
            session_id: session.clone(),
            instructions: Some("keep the decisions".into()),
        })
        .await
        .unwrap();
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "manual");
    assert_eq!(input["custom_instructions"], "keep the decisions");
    assert_eq!(input["session_id"], session.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_question_fires_notification() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("notification.json");
    let mut setup = Setup::new(vec![
        crate::harness::bash("c1", "touch asked.txt"),
        ScriptedResponse::text("done"),
    ])
    .set("permission=ask")
    .set(&format!(
        "hooks={{Notification: [{{hooks: [{{type: command, command: 'cat > {}'}}]}}]}}",
        file.display()
    ));
    setup.interactive = true;
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let abort = async {
        // The question waits for an answer; the hook has heard of it once its file is whole.
        for _ in 0..200 {
            if std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        h.runtime
            .request(ops::Abort {
                session_id: session.clone(),
            })
            .await
            .unwrap();
    };
    let ((report, _), ()) = tokio::join!(h.turn(&session, "make a file"), abort);
    assert!(
        matches!(report.outcome, keel_protocol::TurnOutcome::Aborted { .. }),
        "{:?}",
        report.outcome
    );
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "Notification");
    assert_eq!(input["notification_type"], "permission_prompt");
    assert!(
        input["message"].as_str().unwrap().contains("bash"),
        "{input}"
    );
    assert_eq!(input["session_id"], session.as_str());
}
