//! Commands shown in the editor's terminals: the editor runs keel's relay, never the
//! command, and the command still runs in keel's sandbox.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::StopReason;
use serde_json::json;

use crate::harness::{
    EditorState, World, connect, initialize, mock, new_session, prompt, request_text, run_once,
    wait_until, with_terminals,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_show_in_the_editors_terminal_and_stay_sandboxed() {
    let world = World::new();
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escaped.txt");
    let server = mock(json!([
        {"shell": "echo out-line; echo err-line >&2; exit 3"},
        {"shell": format!("echo x > {}", escape.display())},
        {"text": "done"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let work = world.work();
    let mut keel = world.spawn(&server, &["--permission", "full"]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, with_terminals()).await?;
        let session = new_session(&cx, &work).await?;
        assert_eq!(prompt(&cx, &session, "run it").await?, StopReason::EndTurn);
        // The terminal shows the command as it runs, which may outlast the turn by a moment
        // (a fast command ends before its terminal is up): wait for both terminals to end
        // while the editor is still connected.
        wait_until("the terminals end", || {
            let terminals = st.terminals.lock().unwrap();
            terminals.len() == 2 && terminals.values().all(|t| t.exit.borrow().is_some())
        })
        .await;
        wait_until("the terminal in the tool call", || {
            st.json()
                .iter()
                .filter(|u| u["sessionUpdate"] == "tool_call_update")
                .filter_map(|u| u["content"].as_array().cloned())
                .flatten()
                .any(|c| c["type"] == "terminal" && c["terminalId"] == "term-1")
        })
        .await;
        Ok(())
    })
    .await;
    // Each call's terminal reaches the editor before the call's end does, fast as the
    // command is.
    let updates = st.json();
    for call in updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .filter_map(|u| u["toolCallId"].as_str())
    {
        let of_call = |u: &&serde_json::Value| u["toolCallId"] == call;
        let terminal = updates.iter().position(|u| {
            of_call(&u)
                && u["content"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "terminal"))
        });
        let ended = updates.iter().position(|u| {
            of_call(&u) && matches!(u["status"].as_str(), Some("completed" | "failed"))
        });
        assert!(
            terminal.is_some() && terminal < ended,
            "call {call}: terminal at {terminal:?}, end at {ended:?}: {updates:#?}"
        );
    }
    let created = st.created.lock().unwrap().clone();
    assert_eq!(created.len(), 2, "{created:?}");
    // The editor ran the relay, not the command.
    assert_eq!(created[0][0], env!("CARGO_BIN_EXE_keel"));
    assert_eq!(created[0][1], "acp-relay");
    assert!(!created[0].iter().any(|a| a.contains("echo")));
    let terminals = st.terminals.lock().unwrap().clone();
    let first = &terminals["term-1"];
    assert_eq!(first.text(), "out-line\nerr-line\n");
    assert_eq!(*first.exit.borrow(), Some(Some(3)));
    // The model still got the output; the sandbox still kept the write in the workspace.
    assert!(request_text(&server, 1).contains("out-line"));
    assert!(!escape.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_terminal_stops_the_command() {
    let world = World::new();
    let work = world.work();
    let server = mock(json!([
        {"shell": "sleep 30; touch late.txt"},
        {"text": "stopped"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    *state.kill_after.lock().unwrap() = Some(Duration::from_millis(300));
    let started = Instant::now();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "full"],
        with_terminals(),
        state,
        "wait",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(
        request_text(&server, 1).contains("aborted")
            || request_text(&server, 1).contains("stopped"),
        "{}",
        request_text(&server, 1)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!work.join("late.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_that_takes_nothing_cannot_fill_keels_memory() {
    let world = World::new();
    let server = mock(json!([
        {"shell": "head -c 300000000 /dev/zero | tr '\\0' a | wc -c"},
        {"text": "done"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    state
        .stuck_terminals
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let work = world.work();
    let mut keel = world.spawn(&server, &["--permission", "full"]);
    let pid = keel.id().unwrap();
    connect(&mut keel, state, async |cx| {
        initialize(&cx, with_terminals()).await?;
        let session = new_session(&cx, &work).await?;
        assert_eq!(prompt(&cx, &session, "flood").await?, StopReason::EndTurn);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let peak_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        // 300 MB went through a terminal that took none of it: the copy for the terminal
        // is capped, so keel stays small.
        assert!(peak_kib < 200 * 1024, "peak RSS {peak_kib} KiB");
        Ok(())
    })
    .await;
    assert!(request_text(&server, 1).contains("300000000"));
}
