//! Capability leases with MCP (DESIGN §10): a server whose tools change mid-turn does not
//! change what the turn offers; the next turn sees the change.

use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{Message, ops};
use keel_runtime::ContractExt as _;
use serde_json::json;

use crate::harness::{Harness, Setup, request_text, text_of};

/// The test server, built beside the test binaries by the workspace build.
fn mcptest() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("keel-mcptest");
    assert!(
        path.exists(),
        "{} is missing: build the workspace",
        path.display()
    );
    path
}

/// What `/mcp` answers for `session`.
async fn mcp_status(h: &Harness, session: &keel_protocol::SessionId) -> String {
    match h
        .runtime
        .request(ops::RunCommand {
            session_id: session.clone(),
            name: "mcp".into(),
            arguments: String::new(),
        })
        .await
        .unwrap()
    {
        keel_runtime::CommandOutcome::Text(text) => text,
        other => panic!("unexpected {other:?}"),
    }
}

fn tool_names(request: &keel_llm::LlmRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn echo_description(request: &keel_llm::LlmRequest) -> String {
    request
        .tools
        .iter()
        .find(|t| t.name == "mcp__test__echo")
        .map(|t| t.description.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_changed_mid_turn_reaches_the_next_turn_only() {
    let responses = vec![
        ScriptedResponse::tool_call("m1", "mcp__test__mutate", json!({})),
        ScriptedResponse::tool_call("a1", "mcp__test__added_later", json!({})),
        ScriptedResponse::text("first turn done"),
        ScriptedResponse::tool_call("a2", "mcp__test__added_later", json!({})),
        ScriptedResponse::text("second turn done"),
    ];
    let setup = Setup::new(responses)
        .set(&format!("mcp_servers.test.command={}", mcptest().display()))
        .set("permission=auto");
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let (first, _) = h.turn(&session, "change the server").await;
    // The server's list change arrives as a notification and is listed again in the
    // background; wait until the manager holds it (`/mcp` counts the tools).
    let mut listed = String::new();
    for _ in 0..200 {
        listed = mcp_status(&h, &session).await;
        if listed.contains("12 tool(s)") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(listed.contains("12 tool(s)"), "{listed}");
    let (second, _) = h.turn(&session, "use the new tool").await;
    let requests = h.requests();
    assert_eq!(requests.len(), 5);
    // Turn one: the server announced a new tool list after `mutate`, but the turn keeps
    // the tools it leased (no `added_later`, the old description).
    for request in &requests[..3] {
        assert!(!tool_names(request).contains(&"mcp__test__added_later".to_owned()));
        assert!(
            !echo_description(request).contains("echo v2"),
            "{}",
            echo_description(request)
        );
    }
    let refused: Vec<String> = first
        .messages
        .iter()
        .filter(|m| matches!(m.as_ref(), Message::ToolResult(r) if r.tool_call_id.as_str() == "a1"))
        .map(|m| text_of(m))
        .collect();
    assert!(refused[0].contains("does not exist"), "{refused:?}");
    // Turn two leases the new revision.
    assert!(tool_names(&requests[3]).contains(&"mcp__test__added_later".to_owned()));
    assert!(echo_description(&requests[3]).contains("echo v2"));
    let answered: Vec<String> = second
        .messages
        .iter()
        .filter(|m| matches!(m.as_ref(), Message::ToolResult(r) if r.tool_call_id.as_str() == "a2"))
        .map(|m| text_of(m))
        .collect();
    assert_eq!(answered, ["added later"], "{}", request_text(&requests[4]));
}

/// A runtime that keeps sessions only (`keel sessions fork/rewind/delete`) starts none of
/// the configured servers, where a runtime that runs turns starts them at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_runs_no_turn_starts_no_server() {
    let listed = |sessions_only: bool| async move {
        let mut setup = Setup::new(Vec::new())
            .set(&format!("mcp_servers.test.command={}", mcptest().display()));
        setup.sessions_only = sessions_only;
        let h = Harness::start(setup).await;
        let record = h
            .store
            .create_session(keel_store::NewSession {
                title: "kept".into(),
                cwd: h.cwd.display().to_string(),
                model: String::new(),
                parent_id: None,
            })
            .await
            .unwrap();
        mcp_status(&h, &record.id).await
    };
    assert!(listed(false).await.contains("- test:"), "started at once");
    let kept = listed(true).await;
    assert!(!kept.contains("- test:"), "{kept}");
}
