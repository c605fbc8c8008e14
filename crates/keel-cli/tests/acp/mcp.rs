//! The editor's MCP servers: `mcpServers` of `session/new` run for the session (the
//! workspace's `keel-mcptest` on stdio), their tools reach the model, their prompts are
//! commands, and a server keel cannot run refuses the session.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, EnvVariable, ListSessionsRequest, McpServer, McpServerHttp,
    McpServerStdio, NewSessionRequest, StopReason,
};
use serde_json::json;

use crate::harness::{EditorState, World, capabilities, connect, initialize, mock, prompt};

/// The MCP test server, built next to keel (`cargo build -p keel-mcptest`).
fn mcptest() -> PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_keel")).with_file_name("keel-mcptest");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p keel-mcptest`",
        path.display()
    );
    path
}

/// The last `available_commands_update`'s commands among `updates`, as
/// `/name hint: description`.
fn offered(updates: Vec<serde_json::Value>) -> Vec<String> {
    let last = updates
        .into_iter()
        .rfind(|u| u["sessionUpdate"] == "available_commands_update")
        .expect("an available_commands_update");
    last["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let hint = c["input"]["hint"]
                .as_str()
                .map(|h| format!(" {h}"))
                .unwrap_or_default();
            format!(
                "/{}{hint}: {}",
                c["name"].as_str().unwrap(),
                c["description"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_mcp_server_serves_tools_prompts_and_status() {
    let server = mock(json!([
        {"tool_calls": [{"name": "mcp__test__echo", "arguments": {"message": "hi"}}]},
        {"text": "echoed"},
        {"text": "reviewed"}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let mut keel = world.spawn(&server, &["--permission", "full"]);
    connect(&mut keel, state, async |cx| {
        let init = initialize(&cx, capabilities(false)).await?;
        assert_eq!(
            init["agentCapabilities"]["mcpCapabilities"],
            json!({"http": true, "sse": true})
        );
        // Its state folder's path marks its process, to see it stop with the session.
        let marker = world.work().join("mcptest-state");
        std::fs::create_dir_all(&marker).unwrap();
        let stdio = McpServerStdio::new("test", mcptest())
            .args(vec!["--state-dir".into(), marker.display().to_string()])
            .env(vec![EnvVariable::new("KEEL_MCPTEST_UNUSED", "1")]);
        let session = cx
            .send_request(NewSessionRequest::new(&work).mcp_servers(vec![McpServer::Stdio(stdio)]))
            .block_task()
            .await?
            .session_id
            .0
            .to_string();

        // The model calls the server's tool; its result reaches the editor.
        assert_eq!(prompt(&cx, &session, "echo hi").await?, StopReason::EndTurn);
        let updates = st.json();
        let done = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
            .unwrap_or_else(|| panic!("no completed call in {updates:?}"));
        assert_eq!(
            done["content"],
            json!([{"type": "content", "content": {"type": "text", "text": "hi"}}]),
            "{done}"
        );
        assert_eq!(st.message_text(), "echoed");

        // By the next prompt at the latest (the server may have come up before the first)
        // the editor is offered the server's prompt, after keel's own commands; `/mcp`
        // answers with the server list without a model request.
        let mut updates = st.json();
        st.clear();
        assert_eq!(prompt(&cx, &session, "/mcp").await?, StopReason::EndTurn);
        updates.extend(st.json());
        let commands = offered(updates);
        assert_eq!(commands[0], "/help: List keel's commands");
        let review = commands
            .iter()
            .position(|c| c == "/test:review <file> [focus]: Asks for a review of one file.")
            .unwrap_or_else(|| panic!("no test:review in {commands:?}"));
        let compact = commands
            .iter()
            .position(|c| c.starts_with("/compact"))
            .unwrap();
        assert!(compact < review, "{commands:?}");
        assert!(
            commands
                .iter()
                .any(|c| c.starts_with("/mcp [reload | login NAME | logout NAME]: ")),
            "{commands:?}"
        );
        let status = st.message_text();
        assert!(
            status.contains("- test: ") && status.contains("stdio"),
            "{status}"
        );
        assert_eq!(server.requests().len(), 2);

        // A prompt command is a turn with its expansion.
        st.clear();
        assert_eq!(
            prompt(&cx, &session, "/test:review main.rs").await?,
            StopReason::EndTurn
        );
        assert_eq!(st.message_text(), "reviewed");
        let sent = server.requests()[2].body.to_string();
        assert!(sent.contains("Review main.rs."), "{sent}");
        // Nothing changed: the commands are not offered again.
        assert!(
            !st.kinds().contains(&"available_commands_update".to_owned()),
            "{:?}",
            st.kinds()
        );

        // A command that fails (a required argument missing) is an invalid-params error.
        let failed = prompt(&cx, &session, "/test:review").await.unwrap_err();
        assert_eq!(
            failed.code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS,
            "{failed:?}"
        );

        // Closing the session stops the server the editor gave it.
        let running = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                .any(|cmd| String::from_utf8_lossy(&cmd).contains(&marker.display().to_string()))
        };
        assert!(running(), "the editor's server runs during the session");
        cx.send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while running() {
            assert!(
                std::time::Instant::now() < deadline,
                "the editor's server outlived its session"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keel_cannot_run_refuses_the_session() {
    let server = mock(json!([])).await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let mut keel = world.spawn(&server, &[]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let refused = |servers: Vec<McpServer>| {
            let cx = cx.clone();
            let request = NewSessionRequest::new(&work).mcp_servers(servers);
            async move {
                cx.send_request(request)
                    .block_task()
                    .await
                    .expect_err("the session is refused")
            }
        };
        let bad_url = refused(vec![
            McpServer::Stdio(McpServerStdio::new("fine", mcptest())),
            McpServer::Http(McpServerHttp::new("docs", "ftp://example.com/mcp")),
        ])
        .await;
        assert_eq!(
            bad_url.code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS
        );
        assert!(
            bad_url.message.contains("mcp_servers.docs")
                && bad_url.message.contains("only http and https"),
            "{bad_url:?}"
        );
        let bad_name = refused(vec![McpServer::Stdio(McpServerStdio::new(
            "my server",
            mcptest(),
        ))])
        .await;
        assert_eq!(
            bad_name.code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS
        );
        assert!(bad_name.message.contains("`my server`"), "{bad_name:?}");
        let twice = refused(vec![
            McpServer::Stdio(McpServerStdio::new("dup", mcptest())),
            McpServer::Stdio(McpServerStdio::new("dup", mcptest())),
        ])
        .await;
        assert_eq!(twice.code, agent_client_protocol::ErrorCode::INVALID_PARAMS);
        assert!(twice.message.contains("`dup` is named twice"), "{twice:?}");
        // The refused sessions were not kept.
        let listed = cx
            .send_request(ListSessionsRequest::new())
            .block_task()
            .await?;
        assert!(listed.sessions.is_empty(), "{:?}", listed.sessions);
        Ok(())
    })
    .await;
}

/// Attack family "MCP names": two servers whose tools map to one name (`a` + `_deploy`,
/// `a_` + `deploy`): neither is offered, and the editor is told, naming both servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_name_two_servers_map_to_is_offered_by_neither() {
    let server = mock(json!([
        {"text": "ready"},
        {"tool_calls": [{"name": "mcp__a___deploy", "arguments": {"message": "whose?"}}]},
        {"text": "no such tool"}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let mut keel = world.spawn(&server, &["--permission", "full"]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let stdio = |name: &str, tool: &str| {
            McpServer::Stdio(
                McpServerStdio::new(name, mcptest()).args(vec!["--extra-tool".into(), tool.into()]),
            )
        };
        let session = cx
            .send_request(
                NewSessionRequest::new(&work)
                    .mcp_servers(vec![stdio("a", "_deploy"), stdio("a_", "deploy")]),
            )
            .block_task()
            .await?
            .session_id
            .0
            .to_string();
        assert_eq!(
            prompt(&cx, &session, "get ready").await?,
            StopReason::EndTurn
        );
        // Both servers are up by the next turn.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        assert_eq!(prompt(&cx, &session, "deploy").await?, StopReason::EndTurn);
        let updates = st.json();
        let failed = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed");
        assert!(failed.is_some(), "{updates:?}");
        let all = serde_json::to_string(&updates).unwrap();
        assert!(
            all.contains("no tool is offered as mcp__a___deploy")
                && all.contains("server a's `_deploy`")
                && all.contains("server a_'s `deploy`"),
            "{all}"
        );
        Ok(())
    })
    .await;
}

/// `/mcp login NAME` from the editor: the server that asked for a login gets one through
/// the user's browser (here a script following the redirects), and starts again with it;
/// no model request is made.
#[tokio::test(flavor = "multi_thread")]
async fn an_editor_logs_in_to_a_server_with_slash_mcp_login() {
    let model = mock(json!([])).await;
    let oauth = crate::oauth::Server::start(crate::oauth::Hostile::None);
    let world = World::new();
    std::fs::write(
        world.home.path().join("config.yaml"),
        format!("mcp_servers:\n  guarded:\n    url: {}/mcp\n", oauth.base),
    )
    .unwrap();
    let browser = world.home.path().join("browser");
    std::fs::write(
        &browser,
        "#!/bin/sh\nexec curl -s -o /dev/null -L --max-redirs 3 --max-time 20 \"$1\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let browser = browser.display().to_string();
    let mut keel = world.spawn_env(
        &model,
        &[],
        &[("ANTHROPIC_API_KEY", "test-key"), ("BROWSER", &browser)],
    );
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = cx
            .send_request(NewSessionRequest::new(&work))
            .block_task()
            .await?
            .session_id
            .0
            .to_string();
        assert_eq!(prompt(&cx, &session, "/mcp").await?, StopReason::EndTurn);
        let status = st.message_text();
        assert!(
            status.contains("guarded: needs you to log in")
                && status.contains("/mcp login guarded"),
            "{status}"
        );
        st.clear();
        assert_eq!(
            prompt(&cx, &session, "/mcp login guarded").await?,
            StopReason::EndTurn
        );
        let said = st.message_text();
        assert!(
            said.contains("`guarded` logs in at 127.0.0.1") && said.contains("/authorize?"),
            "{said}"
        );
        // The login finishes in the background; the server starts again with its token.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            st.clear();
            prompt(&cx, &session, "/mcp").await?;
            if st.message_text().contains("guarded: ready, 1 tool(s)") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never ready: {}",
                st.message_text()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(model.requests().is_empty(), "no model request");
        Ok(())
    })
    .await;
}

/// A server's form during a call goes to the editor, never the model: the editor's answer
/// is what the server gets (server-everything's own form, installed by CI), and a value
/// that does not fit the form is refused before it reaches the server.
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_form_is_asked_of_the_editor_and_its_answer_reaches_the_server() {
    let Ok(program) = std::env::var("KEEL_TEST_MCP_EVERYTHING") else {
        assert!(
            std::env::var_os("KEEL_REQUIRE_MCP_EVERYTHING").is_none(),
            "KEEL_REQUIRE_MCP_EVERYTHING is set but KEEL_TEST_MCP_EVERYTHING is not"
        );
        return;
    };
    let call = |id: &str| json!({"tool_calls": [{"id": id, "name": "mcp__everything__trigger-elicitation-request", "arguments": {}}]});
    let model =
        mock(json!([call("form"), {"text": "filled"}, call("bad"), {"text": "refused"}])).await;
    let world = World::new();
    std::fs::write(
        world.home.path().join("config.yaml"),
        format!(
            "mcp_servers:\n  everything:\n    command: {program}\n    startup_timeout_sec: 60\n"
        ),
    )
    .unwrap();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    *state.elicit_answer.lock().unwrap() = Some(json!({
        "action": "accept",
        "content": {"name": "Ada Lovelace", "integer": 7, "untitledSingleSelectEnum": "Joey"}
    }));
    let st = state.clone();
    let mut keel = world.spawn_env(&model, &[], &[("ANTHROPIC_API_KEY", "test-key")]);
    connect(&mut keel, state, async |cx| {
        use agent_client_protocol::v1::schema::{
            ElicitationCapabilities, ElicitationFormCapabilities,
        };
        let caps = capabilities(false)
            .elicitation(ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()));
        initialize(&cx, caps).await?;
        let session = cx
            .send_request(NewSessionRequest::new(&work))
            .block_task()
            .await?
            .session_id
            .0
            .to_string();
        assert_eq!(
            prompt(&cx, &session, "fill the form").await?,
            StopReason::EndTurn
        );
        let asked = st.elicited.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}: {}", st.message_text());
        assert_eq!(asked[0]["mode"], "form");
        assert_eq!(asked[0]["sessionId"], session.as_str());
        assert_eq!(asked[0]["toolCallId"], "form");
        assert!(
            asked[0]["message"]
                .as_str()
                .unwrap()
                .contains("`everything`")
        );
        let schema = &asked[0]["requestedSchema"];
        assert_eq!(schema["required"], json!(["name"]));
        assert_eq!(schema["properties"]["integer"]["maximum"], json!(100));
        assert_eq!(
            schema["properties"]["titledSingleSelectEnum"]["oneOf"][1]["title"],
            "Green Lantern"
        );
        // The second time the editor answers a value the form does not allow.
        *st.elicit_answer.lock().unwrap() =
            Some(json!({"action": "accept", "content": {"name": "Ada", "integer": 4242}}));
        assert_eq!(prompt(&cx, &session, "again").await?, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let requests = model.requests();
    let seen = |index: usize| requests[index].body.to_string();
    let filled = seen(1);
    assert!(
        filled.contains("Name: Ada Lovelace") && filled.contains("Favorite Integer: 7"),
        "the server got the editor's answer: {filled}"
    );
    let refused = seen(3);
    assert!(
        refused.contains("cancelled") && !refused.contains("4242"),
        "a value out of the form's range never reached the server: {refused}"
    );
}
