//! Background tasks in an editor: the task's start and end reach it as notices (thought
//! lines for an editor that takes no `notice` updates), and the turn the task's completion
//! notice starts after the prompt ended streams to it like any other.

use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use serde_json::json;

use crate::harness::{EditorState, World, capabilities, connect, initialize, mock, new_session};
use crate::harness::{prompt, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_is_told_as_it_starts_and_ends_and_its_notice_turn_streams() {
    // The parent's answer and the task's are asked at the same time: the same text, so the
    // order the mock takes them in does not matter.
    let found = json!({"text": "The parser lives in src/parse.rs.", "first_delay_ms": 300});
    let server = mock(json!([
        {"tool_calls": [{"id": "t1", "name": "task", "arguments": {
            "description": "map the parser", "prompt": "Find where the parser lives.",
            "agent": "explore", "background": true}}]},
        found,
        found,
        {"text": "The task found the parser."}
    ]))
    .await;
    let world = World::new();
    let work = world.work();
    let state = Arc::new(EditorState::default());
    let mut keel = world.spawn(&server, &["--permission", "auto"]);
    let st = state.clone();
    connect(&mut keel, state.clone(), async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = new_session(&cx, &work).await?;
        let stop = prompt(&cx, &session, "map the parser in the background").await?;
        assert_eq!(stop, StopReason::EndTurn);
        wait_until("the follow-up turn's answer", || {
            st.message_text().contains("The task found the parser.")
        })
        .await;
        Ok(())
    })
    .await;
    // Told in the answer as keel's lines (this editor shows no notices), never as thinking.
    assert!(!state.thought_text().contains("task-"));
    let thoughts = state.message_text();
    let told: Vec<&str> = thoughts
        .lines()
        .filter_map(|l| l.strip_prefix("> keel: ⧉ task-"))
        .map(|l| l.split_once(' ').unwrap().1)
        .collect();
    assert_eq!(
        told,
        [
            "explore \"map the parser\" — running",
            "explore \"map the parser\" — succeeded"
        ],
        "{thoughts}"
    );
    assert_eq!(server.requests().len(), 4);
}
