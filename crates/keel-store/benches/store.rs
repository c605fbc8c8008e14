//! Store benchmark, run by hand: `cargo bench -p keel-store`.
//!
//! Measures commits per second for single-message appends of typical messages (a user prompt,
//! an assistant reply with a tool call, a 2 KiB tool result, in turn), the time to read back a
//! 10,000-message session, and the mean single-message append to a session of 10 and of 10,000
//! messages (they should be about equal: no commit statement may walk the whole session).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use keel_protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCall, ToolResultMessage,
};
use keel_store::{Durability, Entry, NewSession, Store};

const APPENDS: usize = 2_000;
const LONG_SESSION: usize = 10_000;

fn typical(n: usize) -> Message {
    match n % 3 {
        0 => Message::user_text(format!(
            "Please fix the failing test number {n} in crates/keel-store."
        )),
        1 => Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::text("I will look at the test first."),
                ContentBlock::ToolCall(ToolCall {
                    id: format!("call_{n}").into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({"command": "cargo test -p keel-store 2>&1 | tail -40"}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
            ..AssistantMessage::from_text("")
        }),
        _ => Message::ToolResult(ToolResultMessage {
            tool_call_id: format!("call_{n}").into(),
            tool_name: "bash".into(),
            content: vec![ContentBlock::text(
                "test result: ok. 20 passed; 0 failed\n".repeat(55),
            )],
            details: None,
            is_error: false,
            timestamp: keel_protocol::now_ms(),
        }),
    }
}

async fn run(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("bench.db"), durability)
        .await
        .unwrap();
    let session = store
        .create_session(NewSession {
            cwd: "/bench".into(),
            ..NewSession::default()
        })
        .await
        .unwrap();
    let started = Instant::now();
    for n in 0..APPENDS {
        store
            .append(&session.id, format!("op{n}"), vec![Entry::new(typical(n))])
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    println!(
        "{durability:?}: {APPENDS} single-message appends in {elapsed:.2?}: {:.0} commits/s",
        APPENDS as f64 / elapsed.as_secs_f64()
    );

    let short = store
        .create_session(NewSession {
            cwd: "/bench".into(),
            ..NewSession::default()
        })
        .await
        .unwrap();
    let entries = (0..10).map(|n| Entry::new(typical(n))).collect();
    store.append(&short.id, "seed", entries).await.unwrap();
    let started = Instant::now();
    for n in 0..100 {
        store
            .append(&short.id, format!("more{n}"), vec![Entry::new(typical(n))])
            .await
            .unwrap();
    }
    println!(
        "{durability:?}: appends to a 10-message session: {:.2?} each (mean of 100)",
        started.elapsed() / 100
    );

    let long = store
        .create_session(NewSession {
            cwd: "/bench".into(),
            ..NewSession::default()
        })
        .await
        .unwrap();
    for batch in 0..LONG_SESSION / 100 {
        let entries = (0..100)
            .map(|n| Entry::new(typical(batch * 100 + n)))
            .collect();
        store
            .append(&long.id, format!("batch{batch}"), entries)
            .await
            .unwrap();
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let history = store.history(&long.id).await.unwrap();
        assert_eq!(history.len(), LONG_SESSION);
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "{durability:?}: read back {LONG_SESSION} messages in {:.1} ms (best of 5)",
        best * 1e3
    );
    let started = Instant::now();
    for n in 0..100 {
        store
            .append(&long.id, format!("more{n}"), vec![Entry::new(typical(n))])
            .await
            .unwrap();
    }
    println!(
        "{durability:?}: appends to the {LONG_SESSION}-message session: {:.2?} each (mean of 100)",
        started.elapsed() / 100
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(Durability::Normal));
    runtime.block_on(run(Durability::Full));
}
