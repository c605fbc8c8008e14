//! Measuring and planning a long history, per step (issue 12: under 5 ms for 1,000
//! messages). Run: `cargo bench -p keel-context --bench context`.
//!
//! A step adds two messages (an answer with a tool call, its 8 KiB result) to a history of
//! 1,000, then sizes the request and plans archiving both ways, as `host.context` does
//! before every model call. "cold" measures every message afresh (the first call of a
//! process); "warm" is every later step.

use std::sync::Arc;
use std::time::Instant;

use keel_context::archive::{self, ArchiveConfig, Goal};
use keel_context::measure::{MeasureCache, Size};
use keel_protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCall, ToolResultMessage,
};

fn round(i: usize) -> [Arc<Message>; 2] {
    let mut call = AssistantMessage::from_text(format!("Step {i}: running the next command."));
    call.content.push(ContentBlock::ToolCall(ToolCall {
        id: format!("call-{i}").into(),
        name: "bash".into(),
        arguments: serde_json::json!({"command": format!("cargo test -p crate_{i}")}),
    }));
    call.stop_reason = StopReason::ToolUse;
    let line = format!("test module_{i}::case ... ok (0.{i:03}s) src/lib.rs:{i}\n");
    let output: String = line.repeat(8 * 1024 / line.len() + 1);
    let result = ToolResultMessage {
        tool_call_id: format!("call-{i}").into(),
        tool_name: "bash".into(),
        content: vec![ContentBlock::text(output)],
        details: None,
        is_error: false,
        timestamp: 0,
    };
    [
        Arc::new(Message::Assistant(call)),
        Arc::new(Message::ToolResult(result)),
    ]
}

fn step(history: &[Arc<Message>], cache: &MeasureCache, config: &ArchiveConfig) -> Size {
    let size = cache.total(history);
    let a = archive::plan(history, cache, config, Goal::WaterMark);
    let b = archive::plan(
        history,
        cache,
        config,
        Goal::Save(Size::new(size.tokens / 2, 0)),
    );
    std::hint::black_box((a, b));
    size
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let config = ArchiveConfig::default();
    let mut history: Vec<Arc<Message>> = vec![Arc::new(Message::user_text("Fix the tests."))];
    let mut i = 0;
    while history.len() < 1_000 {
        history.extend(round(i));
        i += 1;
    }
    let mut cold = Vec::new();
    for _ in 0..20 {
        let cache = MeasureCache::default();
        let start = Instant::now();
        step(&history, &cache, &config);
        cold.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let cache = MeasureCache::default();
    let size = step(&history, &cache, &config);
    let mut warm = Vec::new();
    for _ in 0..200 {
        history.extend(round(i));
        i += 1;
        history.drain(1..3);
        let start = Instant::now();
        step(&history, &cache, &config);
        warm.push(start.elapsed().as_secs_f64() * 1e3);
        cache.prune();
    }
    println!(
        "history of {} messages, {} estimated tokens, {} bytes",
        history.len(),
        size.tokens,
        size.bytes
    );
    println!(
        "cold step (every message measured): median {:.3} ms",
        median(cold)
    );
    println!(
        "warm step (two new messages):       median {:.3} ms",
        median(warm)
    );
}
