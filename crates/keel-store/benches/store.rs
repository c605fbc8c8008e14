//! Store benchmark, run by hand: `cargo bench -p keel-store`.
//!
//! Measures commits per second for single-message appends of typical messages (a user prompt,
//! an assistant reply with a tool call, a 2 KiB tool result, in turn), the time to read back a
//! 10,000-message session, and the mean single-message append to a session of 10 and of 10,000
//! messages (they should be about equal: no commit statement may walk the whole session).
//!
//! Each is measured for both executions: in place on a current-thread runtime (`keel exec`),
//! and on the writer thread from a current-thread and from a multi-thread runtime (interactive
//! front ends). For a current-thread runtime it also measures what a front end's render loop
//! would feel: the longest gap between the ticks of a 1 ms timer task while commits run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keel_protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCall, ToolResultMessage,
};
use keel_store::{Durability, Entry, Execution, NewSession, OpenOptions, Store};

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

/// Commits timed while a ticker task measures how long the runtime goes without running it.
const TICKED_COMMITS: usize = 500;

async fn run(durability: Durability, execution: Execution) {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        durability,
        execution,
    };
    let store = Store::open(dir.path().join("bench.db"), options)
        .await
        .unwrap();
    let durability = format!("{durability:?}");
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
        "{durability}: {APPENDS} single-message appends in {elapsed:.2?}: {:.0} commits/s",
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
        "{durability}: appends to a 10-message session: {:.2?} each (mean of 100)",
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
        "{durability}: read back {LONG_SESSION} messages in {:.1} ms (best of 5)",
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
        "{durability}: appends to the {LONG_SESSION}-message session: {:.2?} each (mean of 100)",
        started.elapsed() / 100
    );
}

/// The longest time a 1 ms ticker task waited beyond its period while `TICKED_COMMITS`
/// commits ran on the same runtime.
async fn render_stall(durability: Durability, execution: Execution) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        durability,
        execution,
    };
    let store = Store::open(dir.path().join("stall.db"), options)
        .await
        .unwrap();
    let session = store
        .create_session(NewSession {
            cwd: "/bench".into(),
            ..NewSession::default()
        })
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ticking = Arc::clone(&stop);
    let ticker = tokio::spawn(async move {
        let mut worst = Duration::ZERO;
        let mut last = Instant::now();
        while !ticking.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let now = Instant::now();
            worst = worst.max(now - last);
            last = now;
        }
        worst
    });
    for n in 0..TICKED_COMMITS {
        store
            .append(&session.id, format!("op{n}"), vec![Entry::new(typical(n))])
            .await
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let worst = ticker.await.unwrap();
    worst.saturating_sub(Duration::from_millis(1))
}

fn main() {
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    };
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for durability in [Durability::Normal, Durability::Full] {
        println!("-- in place, current-thread runtime (keel exec)");
        current().block_on(run(durability, Execution::InPlace));
        println!("-- writer thread, current-thread runtime");
        current().block_on(run(durability, Execution::WriterThread));
        println!("-- writer thread, multi-thread runtime");
        multi.block_on(run(durability, Execution::WriterThread));
        for execution in [Execution::InPlace, Execution::WriterThread] {
            let stall = current().block_on(render_stall(durability, execution));
            println!(
                "{durability:?}, {execution:?}: a 1 ms ticker on the same current-thread runtime \
                 waited up to {stall:.2?} extra during {TICKED_COMMITS} commits"
            );
        }
    }
}
