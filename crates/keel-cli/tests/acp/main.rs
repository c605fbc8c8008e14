//! End to end: `keel acp` driven by the ACP crate's client side, as an editor drives it,
//! against `keel-mockllm` on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod attack;
mod harness;
mod mcp;
#[path = "../support/oauth.rs"]
mod oauth;
mod raw;
mod tasks;
mod terminals;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    CancelNotification, ListSessionsRequest, LoadSessionRequest, SessionConfigOptionValue,
    SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason,
};
use harness::{
    Answer, EditorState, World, capabilities, connect, initialize, mock, new_session, option_kinds,
    prompt, request_text, run_once, text_prompt, wait_until,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_streams_asks_cancels_and_loads_again() {
    let server = mock(json!([
        {"thinking": "I will run two commands", "shell": "touch first-ran.txt"},
        {"shell": "touch second-ran.txt"},
        {"text": "All done.", "chunk_size": 3},
        {"text": "this answer streams slowly and will be cut short", "chunk_size": 1, "delay_ms": 150},
        {"text": "still here"}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let state = EditorState::answering([Answer::Pick("allow_once"), Answer::Pick("reject_once")]);
    let mut keel = world.spawn(&server, &["--permission", "ask"]);
    let st = state.clone();
    let session = connect(&mut keel, state.clone(), async |cx| {
        let init = initialize(&cx, capabilities(false)).await?;
        assert_eq!(init["protocolVersion"], json!(1));
        assert_eq!(init["agentCapabilities"]["loadSession"], json!(true));
        let session = new_session(&cx, &work).await?;
        let stop = prompt(&cx, &session, "run the two commands").await?;
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(st.message_text(), "All done.");
        assert_eq!(st.thought_text(), "I will run two commands");
        let kinds = st.kinds();
        assert!(
            kinds.contains(&"available_commands_update".to_owned()),
            "{kinds:?}"
        );
        assert!(kinds.contains(&"usage_update".to_owned()), "{kinds:?}");
        // The budget in use rides beside the window.
        let usage = st
            .json()
            .into_iter()
            .find(|u| u["sessionUpdate"] == "usage_update")
            .unwrap();
        let (limit, at) = (
            usage["_meta"]["keel"]["inputLimit"].as_u64().unwrap(),
            usage["_meta"]["keel"]["compactAt"].as_u64().unwrap(),
        );
        assert!(
            at > 0 && at <= limit && limit < usage["size"].as_u64().unwrap(),
            "{usage}"
        );
        // Each call: pending before the question, then its updates; the first completed,
        // the second (rejected) failed.
        let updates = st.json();
        let calls: Vec<&serde_json::Value> = updates
            .iter()
            .filter(|u| {
                u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update"
            })
            .collect();
        assert_eq!(calls[0]["sessionUpdate"], "tool_call");
        assert_eq!(calls[0]["kind"], "execute");
        let first_id = calls[0]["toolCallId"].clone();
        let first: Vec<&&serde_json::Value> = calls
            .iter()
            .filter(|c| c["toolCallId"] == first_id)
            .collect();
        // While the editor was asked, the call was `pending` (ACP's default status, so it
        // may be left out); the question and the call's start may reach keel in either order.
        assert!(
            first
                .iter()
                .any(|c| matches!(c["status"].as_str(), None | Some("pending"))),
            "{first:?}"
        );
        assert_eq!(first.last().unwrap()["status"], "completed");
        assert_eq!(first.last().unwrap()["title"], "Run `touch first-ran.txt`");
        let second: Vec<&&serde_json::Value> = calls
            .iter()
            .filter(|c| c["toolCallId"] != first_id)
            .collect();
        assert_eq!(second.last().unwrap()["status"], "failed");
        let asked = st.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 2);
        let kinds = option_kinds(&asked[0]);
        let question = serde_json::to_value(&asked[0].tool_call).unwrap();
        assert_eq!(
            question["rawInput"]["command"], "touch first-ran.txt",
            "{question}"
        );
        assert!(
            kinds.contains(&"allow_always".to_owned())
                && kinds.contains(&"reject_always".to_owned()),
            "{kinds:?}"
        );
        assert!(work.join("first-ran.txt").exists());
        assert!(!work.join("second-ran.txt").exists());
        assert!(
            request_text(&server, 2).contains("declined"),
            "{}",
            request_text(&server, 2)
        );

        // Cancel mid-stream: the prompt ends `cancelled` promptly.
        st.clear();
        let slow = cx.send_request(text_prompt(&session, "a long answer"));
        wait_until("the first chunk", || !st.message_text().is_empty()).await;
        let sent = Instant::now();
        cx.send_notification(CancelNotification::new(session.clone()))?;
        let stopped = slow.block_task().await?;
        assert_eq!(stopped.stop_reason, StopReason::Cancelled);
        assert!(
            sent.elapsed() < Duration::from_secs(3),
            "{:?}",
            sent.elapsed()
        );
        assert!(st.message_text().len() < "this answer streams slowly and will be cut short".len());

        // The session goes on.
        st.clear();
        assert_eq!(
            prompt(&cx, &session, "are you there?").await?,
            StopReason::EndTurn
        );
        assert_eq!(st.message_text(), "still here");
        Ok(session)
    })
    .await;
    let status = tokio::time::timeout(Duration::from_secs(5), keel.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");

    // Another editor process lists and loads it: the history is replayed.
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let mut keel = world.spawn(&server, &[]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let listed = cx
            .send_request(ListSessionsRequest::new())
            .block_task()
            .await?;
        assert!(
            listed
                .sessions
                .iter()
                .any(|s| s.session_id.0.as_ref() == session)
        );
        cx.send_request(LoadSessionRequest::new(session.clone(), work.clone()))
            .block_task()
            .await?;
        let updates = st.json();
        let users: Vec<&serde_json::Value> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "user_message_chunk")
            .collect();
        assert_eq!(users[0]["content"]["text"], "run the two commands");
        assert_eq!(users.len(), 3);
        let calls = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .count();
        assert_eq!(calls, 2);
        assert!(
            st.message_text().contains("All done.still here")
                || st.message_text().contains("still here")
        );
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_withdraws_a_question_and_the_call_never_runs() {
    let server = mock(json!([
        {"shell": "touch ran.txt"},
        {"text": "never sent"}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    state.answers.lock().unwrap().push_back(Answer::Hold);
    let st = state.clone();
    let mut keel = world.spawn(&server, &["--permission", "ask"]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = new_session(&cx, &work).await?;
        let running = cx.send_request(text_prompt(&session, "touch it"));
        wait_until("the question", || !st.asked.lock().unwrap().is_empty()).await;
        cx.send_notification(CancelNotification::new(session.clone()))?;
        let stopped = running.block_task().await?;
        assert_eq!(stopped.stop_reason, StopReason::Cancelled);
        Ok(())
    })
    .await;
    assert!(!work.join("ran.txt").exists());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editor_files_are_used_when_offered() {
    let world = World::new();
    let work = world.work();
    std::fs::write(work.join("notes.txt"), "on disk\n").unwrap();
    let server = mock(json!([
        {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt", "edits": [{"old_string": "unsaved", "new_string": "edited"}]}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": "new.txt", "content": "fresh\n"}}]},
        {"text": "done"}
    ]))
    .await;
    let state = EditorState::with_buffer(work.join("notes.txt"), "unsaved buffer\n");
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "full"],
        capabilities(true),
        state,
        "fix the notes",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    // The model read the editor's buffer, and its changes went to the editor, not the disk.
    assert!(
        request_text(&server, 1).contains("unsaved buffer"),
        "{}",
        request_text(&server, 1)
    );
    let buffers = st.buffers.lock().unwrap().clone();
    assert_eq!(buffers[&work.join("notes.txt")], "edited buffer\n");
    assert_eq!(buffers[&work.join("new.txt")], "fresh\n");
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "on disk\n"
    );
    assert!(!work.join("new.txt").exists());
    let calls = st.fs_calls.lock().unwrap().clone();
    assert_eq!(
        calls[0],
        format!("read {}", work.join("notes.txt").display())
    );
    // The edit is shown as a diff.
    let updates = st.json();
    let diff = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "diff")
        .expect("a diff");
    assert_eq!(diff["oldText"], "unsaved");
    assert_eq!(diff["newText"], "edited");
}

/// The question about an edit holds the edit: the editor can show the diff and where it
/// lands before anyone says yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_about_an_edit_carries_its_diff() {
    let world = World::new();
    let work = world.work();
    std::fs::write(work.join("calc.py"), "x = 1\ny = 2\n").unwrap();
    let server = mock(json!([
        {"tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "edits": [{"old_string": "y = 2", "new_string": "y = 3"}]}}]},
        {"text": "done"}
    ]))
    .await;
    let state = EditorState::answering([Answer::Pick("allow_once")]);
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "ask"],
        capabilities(false),
        state,
        "change y",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let asked = st.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let question = serde_json::to_value(&asked[0].tool_call).unwrap();
    let diff = question["content"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "diff")
        .unwrap_or_else(|| panic!("no diff in the question: {question}"));
    assert_eq!(diff["oldText"], "x = 1\ny = 2\n", "{question}");
    assert_eq!(diff["newText"], "x = 1\ny = 3\n", "{question}");
    let calc = work.join("calc.py").canonicalize().unwrap();
    assert_eq!(diff["path"], calc.to_str().unwrap(), "{question}");
    assert_eq!(
        question["locations"][0]["path"],
        calc.to_str().unwrap(),
        "{question}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("calc.py")).unwrap(),
        "x = 1\ny = 3\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_s_thinking_and_call_come_before_its_question_and_statuses_only_move_on() {
    let world = World::new();
    let work = world.work();
    std::fs::write(work.join("calc.py"), "y = 2\n").unwrap();
    let server = mock(json!([
        {"thinking": "y should be 3", "tool_calls": [{"id": "c-1", "name": "edit", "arguments": {"path": "calc.py", "edits": [{"old_string": "y = 2", "new_string": "y = 3"}]}}]},
        {"text": "done"}
    ]))
    .await;
    let state = EditorState::answering([Answer::Pick("allow_once")]);
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "ask"],
        capabilities(false),
        state,
        "change y",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let seen = st.before_question.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let thought = seen[0].iter().position(|k| k == "agent_thought_chunk");
    let call = seen[0].iter().position(|k| k == "tool_call");
    assert!(
        thought.is_some() && call.is_some() && thought < call,
        "before the question: {:?}",
        seen[0]
    );
    // The call's statuses, in the order the editor got them: forward only.
    let statuses: Vec<String> = st
        .json()
        .iter()
        .filter(|u| u["toolCallId"] == "c-1")
        .filter_map(
            |u| match (u["sessionUpdate"].as_str(), u["status"].as_str()) {
                (Some("tool_call"), None) => Some("pending".to_owned()),
                (_, status) => status.map(str::to_owned),
            },
        )
        .collect();
    assert_eq!(statuses, vec!["pending", "in_progress", "completed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bang_prompt_runs_in_the_shell_as_a_call_with_no_model_request() {
    let world = World::new();
    let server = mock(json!([{"text": "unused"}])).await;
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "ask"],
        capabilities(false),
        state,
        "!echo acp-$((40+2))",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(server.requests().is_empty(), "no model request for `!`");
    let updates = st.json();
    let ended = updates
        .iter()
        .find(|u| u["status"] == "completed")
        .unwrap_or_else(|| panic!("no completed call in {updates:?}"));
    assert!(ended.to_string().contains("acp-42"), "{ended}");
    assert!(
        !updates
            .iter()
            .any(|u| u["sessionUpdate"] == "session_info_update"),
        "a `!` command asks no model for a title"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_s_output_arrives_as_updates_while_it_runs() {
    let world = World::new();
    let server = mock(json!([
        {"tool_calls": [{"id": "c-1", "name": "bash", "arguments": {"command": "echo tick-$((1)); sleep 1; echo tock-$((2))"}}]},
        {"text": "done"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "full"],
        capabilities(false),
        state,
        "count",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let updates: Vec<serde_json::Value> = st
        .json()
        .into_iter()
        .filter(|u| u["toolCallId"] == "c-1")
        .collect();
    let live = updates
        .iter()
        .position(|u| u["status"].is_null() && u.to_string().contains("tick-1"))
        .unwrap_or_else(|| panic!("no live output in {updates:?}"));
    assert!(
        !updates[live].to_string().contains("tock-2"),
        "{}",
        updates[live]
    );
    let ended = updates
        .iter()
        .position(|u| u["status"] == "completed")
        .unwrap();
    assert!(live < ended, "{updates:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editor_files_are_not_used_when_not_offered() {
    let world = World::new();
    let work = world.work();
    std::fs::write(work.join("notes.txt"), "on disk\n").unwrap();
    let server = mock(json!([
        {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt", "edits": [{"old_string": "on disk", "new_string": "changed"}]}}]},
        {"text": "done"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "full"],
        capabilities(false),
        state,
        "fix the notes",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(request_text(&server, 1).contains("on disk"));
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "changed\n"
    );
    assert!(st.fs_calls.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_stream_at_once() {
    let server = mock(json!([
        {"text": "aaaaaaaaaaaaaaaaaaaa", "chunk_size": 1, "delay_ms": 40},
        {"text": "bbbbbbbbbbbbbbbbbbbb", "chunk_size": 1, "delay_ms": 40}
    ]))
    .await;
    let world = World::new();
    let other = tempfile::tempdir().unwrap();
    let (one, two) = (world.work(), std::fs::canonicalize(other.path()).unwrap());
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let mut keel = world.spawn(&server, &[]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let a = new_session(&cx, &one).await?;
        let b = new_session(&cx, &two).await?;
        let first = cx.send_request(text_prompt(&a, "first"));
        let second = cx.send_request(text_prompt(&b, "second"));
        let (first, second) = futures::join!(first.block_task(), second.block_task());
        assert_eq!(first?.stop_reason, StopReason::EndTurn);
        assert_eq!(second?.stop_reason, StopReason::EndTurn);
        // Both streamed at the same time: their chunks interleave.
        let order: Vec<String> = st
            .updates
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, n)| harness::kind(&n.update) == "agent_message_chunk")
            .map(|(_, n)| n.session_id.0.to_string())
            .collect();
        let switches = order.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(
            switches > 2,
            "the sessions ran one after the other: {order:?}"
        );
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_models_and_commands() {
    let server = mock(json!([{"text": "hello"}])).await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let mut keel = world.spawn(&server, &[]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = new_session(&cx, &work).await?;
        cx.send_request(SetSessionModeRequest::new(session.clone(), "plan"))
            .block_task()
            .await?;
        wait_until("the mode update", || {
            st.kinds().contains(&"current_mode_update".to_owned())
        })
        .await;
        let refused = cx
            .send_request(SetSessionModeRequest::new(session.clone(), "yolo"))
            .block_task()
            .await;
        assert_eq!(
            refused.unwrap_err().code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS
        );
        let options = cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "model",
                SessionConfigOptionValue::value_id("anthropic/claude-haiku-4-5"),
            ))
            .block_task()
            .await?;
        let options = serde_json::to_value(&options).unwrap();
        assert_eq!(
            options["configOptions"][1]["currentValue"],
            "anthropic/claude-haiku-4-5"
        );
        assert_eq!(options["configOptions"][0]["currentValue"], "plan");
        // The model reasons: its thinking levels are an option, and a chosen level reaches
        // the request.
        let chosen = cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "thinking",
                SessionConfigOptionValue::value_id("high"),
            ))
            .block_task()
            .await?;
        let chosen = serde_json::to_value(&chosen).unwrap();
        assert_eq!(chosen["configOptions"][2]["id"], "thinking", "{chosen}");
        assert_eq!(
            chosen["configOptions"][2]["currentValue"], "high",
            "{chosen}"
        );
        let refused = cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "thinking",
                SessionConfigOptionValue::value_id("enormous"),
            ))
            .block_task()
            .await;
        assert_eq!(
            refused.unwrap_err().code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS
        );
        st.clear();
        assert_eq!(prompt(&cx, &session, "/status").await?, StopReason::EndTurn);
        let status = st.message_text();
        assert!(
            status.contains("anthropic/claude-haiku-4-5") && status.contains("plan"),
            "{status}"
        );
        assert!(
            server.requests().is_empty(),
            "a command never reaches the model"
        );
        assert_eq!(prompt(&cx, &session, "hi").await?, StopReason::EndTurn);
        assert!(request_text(&server, 0).contains("claude-haiku-4-5"));
        let thinking = &server.requests()[0].body["thinking"];
        assert_eq!(thinking["type"], "enabled", "{thinking}");
        st.clear();
        assert_eq!(prompt(&cx, &session, "/new").await?, StopReason::EndTurn);
        assert!(st.message_text().contains("Started over"));
        st.clear();
        assert_eq!(prompt(&cx, &session, "/help").await?, StopReason::EndTurn);
        assert!(st.message_text().contains("/compact"));
        Ok(session)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_by_the_output_limit_stops_with_max_tokens() {
    let server = mock(json!([{"text": "the answer was cut", "max_tokens": true}])).await;
    let world = World::new();
    let state = Arc::new(EditorState::default());
    let stop = run_once(&world, &server, &[], capabilities(false), state, "go on").await;
    assert_eq!(stop, StopReason::MaxTokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editor_files_are_not_used_while_a_command_may_run() {
    let world = World::new();
    let work = world.work();
    std::fs::write(work.join("notes.txt"), "on disk\n").unwrap();
    let server = mock(json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 3", "run_in_background": true}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "done"}
    ]))
    .await;
    let state = EditorState::with_buffer(work.join("notes.txt"), "unsaved buffer\n");
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "full"],
        capabilities(true),
        state,
        "look",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    // A command of the model's could swap the name for a link while the editor opens it:
    // the read went to the disk, through no link.
    assert!(
        request_text(&server, 2).contains("on disk"),
        "{}",
        request_text(&server, 2)
    );
    assert!(st.fs_calls.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_in_a_prompt_reach_a_model_that_takes_them() {
    use agent_client_protocol::v1::schema::{
        ContentBlock, ImageContent, PromptRequest, TextContent,
    };
    let server = mock(json!([{"text": "a tiny picture"}])).await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let mut keel = world.spawn_env(
        &server,
        &[],
        &[
            ("ANTHROPIC_API_KEY", "test-key"),
            ("DEEPSEEK_API_KEY", "test-key"),
        ],
    );
    connect(&mut keel, state, async |cx| {
        let init = initialize(&cx, capabilities(false)).await?;
        assert_eq!(
            init["agentCapabilities"]["promptCapabilities"]["image"],
            true
        );
        let session = new_session(&cx, &work).await?;
        // Large enough not to be dropped as a stray pixel.
        let picture = format!("iVBORw0KGgoA{}", "A".repeat(4096));
        let with_image = |session: &str| {
            PromptRequest::new(
                session.to_owned(),
                vec![
                    ContentBlock::Text(TextContent::new("what is this?")),
                    ContentBlock::Image(ImageContent::new(picture.clone(), "image/png")),
                ],
            )
        };
        let answered = cx.send_request(with_image(&session)).block_task().await?;
        assert_eq!(answered.stop_reason, StopReason::EndTurn);
        let body = server.requests()[0].body.to_string();
        assert!(body.contains(&picture[..40]), "{body}");
        // A model that takes no images refuses them before anything is sent.
        cx.send_request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "model",
            SessionConfigOptionValue::value_id("deepseek/deepseek-chat"),
        ))
        .block_task()
        .await?;
        let refused = cx.send_request(with_image(&session)).block_task().await;
        assert_eq!(
            refused.unwrap_err().code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS
        );
        assert_eq!(server.requests().len(), 1);
        Ok(())
    })
    .await;
}

/// The sandbox's proxy asks the editor about a host off the list, attached to the running
/// command's call, and a refusal reaches the model with the host named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_off_the_list_is_a_question_in_ask_mode() {
    let support = keel_sandbox::support();
    let curl = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if support.landlock.is_err() || !support.namespaces.as_ref().is_ok_and(|ns| ns.network) || !curl
    {
        eprintln!(
            "skipped: this system cannot give commands a network of their own, or has no curl"
        );
        return;
    }
    let server = mock(json!([
        {"shell": "curl -sS -m 20 http://example.org/x; echo curl-ended"},
        {"text": "done"}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let state = EditorState::answering([Answer::Pick("allow_once"), Answer::Pick("reject_once")]);
    let mut keel = world.spawn(&server, &["--permission", "ask"]);
    let st = state.clone();
    connect(&mut keel, state.clone(), async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = new_session(&cx, &work).await?;
        assert_eq!(
            prompt(&cx, &session, "fetch it").await?,
            StopReason::EndTurn
        );
        let asked = st.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 2, "{asked:?}");
        let command = serde_json::to_value(&asked[0].tool_call).unwrap();
        let network = serde_json::to_value(&asked[1].tool_call).unwrap();
        assert_eq!(network["toolCallId"], command["toolCallId"], "{network}");
        assert_eq!(network["rawInput"]["host"], "example.org", "{network}");
        assert_eq!(network["rawInput"]["port"], 80, "{network}");
        Ok(())
    })
    .await;
    let sent = request_text(&server, 1);
    assert!(
        sent.contains("refused network access to example.org:80"),
        "{sent}"
    );
    assert!(sent.contains("curl-ended"), "{sent}");
    keel.kill().await.unwrap();
}
