//! User hooks at the runtime's session changes: a manual compaction fires PreCompact with
//! Claude Code's JSON.

use keel_llm::scripted::ScriptedResponse;
use keel_protocol::Op;
use keel_runtime::ConversationContract as _;

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
        .call(Op::Compact {
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
