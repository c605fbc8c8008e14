//! SSE parse and decode throughput on long recorded streams, and allocations per delta.
//!
//! Run with `cargo bench -p keel-llm --bench decode`. Each API's stream is produced by
//! `keel-mockllm`'s encoder (a long answer streamed in 16-character deltas), then fed in
//! 16 KiB reads through the whole consumer path: SSE parser, wire decoder, and the
//! assembler that folds events into the message.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use keel_llm::sse::SseParser;
use keel_llm::{AssistantBuilder, ModelEntry, api};
use keel_mockllm::encode::{Block, Plan, Stop, WireApi, frames};
use keel_mockllm::script::Usage;
use serde_json::json;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

#[expect(
    unsafe_code,
    reason = "a counting allocator must implement GlobalAlloc"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const READ: usize = 16 * 1024;

fn stream(api: WireApi, text_bytes: usize) -> Vec<u8> {
    let text: String = "Streaming markdown with `code`, **bold** text and lists.\n"
        .chars()
        .cycle()
        .take(text_bytes)
        .collect();
    let plan = Plan {
        model: "bench".into(),
        blocks: vec![
            Block::Thinking("Planning the answer. ".repeat(200)),
            Block::Text(text),
            Block::Call {
                id: "c1".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls -la"}).to_string(),
            },
        ],
        chunk: 16,
        content_parts: false,
        stop: Stop::ToolUse,
        usage: Usage {
            input: 1000,
            output: 5000,
            ..Usage::default()
        },
    };
    frames(api, &plan).concat().into_bytes()
}

fn model(api: &str) -> ModelEntry {
    serde_json::from_value(json!({
        "provider": "bench", "id": "bench", "api": api, "base_url": "http://127.0.0.1",
        "context_window": 100000, "max_output": 4096
    }))
    .unwrap()
}

/// Returns (MB/s, deltas, allocations per delta, allocations per delta in the second half).
fn run(api_name: &str, bytes: &[u8]) -> (f64, usize, f64, f64) {
    let model = model(api_name);
    let mut parser = SseParser::new();
    let mut decoder = api::decoder(&model);
    let mut builder = AssistantBuilder::new();
    let mut sse = Vec::new();
    let mut out = Vec::new();
    let mut deltas = 0usize;
    let half = bytes.len() / 2;
    let (mut half_deltas, mut half_allocs) = (0usize, 0u64);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let started = Instant::now();
    for (i, chunk) in bytes.chunks(READ).enumerate() {
        if i * READ >= half && half_deltas == 0 {
            half_deltas = deltas;
            half_allocs = ALLOCATIONS.load(Ordering::Relaxed);
        }
        parser.feed(chunk, &mut sse);
        for event in sse.drain(..) {
            decoder.event(&event, &mut out);
        }
        for event in out.drain(..) {
            if event.is_visible_output() {
                deltas += 1;
            }
            builder.apply(&event).unwrap();
        }
    }
    decoder.finish(&mut out);
    for event in out.drain(..) {
        builder.apply(&event).unwrap();
    }
    let elapsed = started.elapsed();
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let message = builder.finish();
    assert!(message.text().len() > 1000);
    let second_half = (ALLOCATIONS.load(Ordering::Relaxed) - half_allocs) as f64
        / (deltas - half_deltas).max(1) as f64;
    (
        bytes.len() as f64 / 1e6 / elapsed.as_secs_f64(),
        deltas,
        allocs as f64 / deltas.max(1) as f64,
        second_half,
    )
}

fn main() {
    for (api, name) in [
        (WireApi::Anthropic, "anthropic-messages"),
        (WireApi::Completions, "openai-completions"),
        (WireApi::Responses, "openai-responses"),
        (WireApi::Google, "google-generative-ai"),
    ] {
        let bytes = stream(api, 2 * 1024 * 1024);
        run(name, &bytes); // warm-up
        let mut best = (0.0, 0, 0.0, 0.0);
        for _ in 0..3 {
            let sample = run(name, &bytes);
            if sample.0 > best.0 {
                best = sample;
            }
        }
        let (mbps, deltas, allocs, late) = best;
        println!(
            "{name:<22} {:>6.1} MB stream, {deltas:>7} deltas: {mbps:>7.1} MB/s, {allocs:>5.2} allocations/delta ({late:.2} in the second half)",
            bytes.len() as f64 / 1e6
        );
    }
    // SSE parsing alone, on the Anthropic stream.
    let bytes = stream(WireApi::Anthropic, 2 * 1024 * 1024);
    let mut best = 0.0f64;
    for _ in 0..3 {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        let started = Instant::now();
        for chunk in bytes.chunks(READ) {
            parser.feed(chunk, &mut events);
            events.clear();
        }
        best = best.max(bytes.len() as f64 / 1e6 / started.elapsed().as_secs_f64());
    }
    println!("sse parser alone       {best:>7.1} MB/s");
}
