//! The loop's own cost per step, and per streamed delta.
//!
//! Run with `cargo bench -p keel-agent --bench loop_step`. The model is the scripted
//! provider (requests not recorded) and the tool a no-op, so what is measured is the
//! loop: projection, event emission, streaming assembly, batch execution, history.
//! A counting allocator reports allocations per step and per delta.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel_agent::{
    Agent, AgentOptions, AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolOutput,
};
use keel_llm::ModelSpec;
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCall, ToolDefinition,
    ToolResultMessage,
};
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

struct Noop(ToolDefinition);

#[async_trait]
impl AgentTool for Noop {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        _arguments: serde_json::Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

fn noop() -> Arc<Noop> {
    Arc::new(Noop(ToolDefinition {
        name: "noop".into(),
        description: "does nothing".into(),
        parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
    }))
}

/// A plausible history of `n` messages: user, assistant with a call, result, …
fn history(n: usize) -> Vec<Arc<Message>> {
    (0..n)
        .map(|i| {
            Arc::new(match i % 3 {
                0 => Message::user_text(format!(
                    "question {i}: please look at src/lib.rs and explain it"
                )),
                1 => Message::Assistant(AssistantMessage {
                    content: vec![
                        ContentBlock::text("Let me read the file."),
                        ContentBlock::ToolCall(ToolCall {
                            id: format!("h{i}").into(),
                            name: "noop".into(),
                            arguments: json!({"n": i}),
                        }),
                    ],
                    stop_reason: StopReason::ToolUse,
                    ..AssistantMessage::default()
                }),
                _ => Message::ToolResult(ToolResultMessage {
                    content: vec![ContentBlock::text("fn main() {}\n".repeat(20))],
                    ..ToolResultMessage::error(format!("h{}", i - 1).into(), "noop", "")
                }),
            })
        })
        .collect()
}

struct Sample {
    per_step: Duration,
    allocs_per_step: f64,
}

async fn steps(base: usize, steps: usize, rounds: usize) -> Sample {
    let mut total = Duration::ZERO;
    let mut allocs = 0;
    for round in 0..rounds {
        let provider = ScriptedProvider::new();
        provider.stop_recording();
        for s in 0..steps - 1 {
            provider.push(
                ScriptedResponse::tool_call(&format!("r{round}s{s}"), "noop", json!({"n": s}))
                    .with_text("Running it."),
            );
        }
        provider.push(ScriptedResponse::text("Done."));
        let options = AgentOptions::new(ModelSpec::scripted(), Arc::new(provider))
            .tools(vec![noop()])
            .messages(history(base));
        let agent = Agent::new(options).unwrap();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let started = Instant::now();
        agent.prompt(vec![Message::user_text("go")]).await.unwrap();
        total += started.elapsed();
        allocs += ALLOCATIONS.load(Ordering::Relaxed) - before;
    }
    let n = (steps * rounds) as u32;
    Sample {
        per_step: total / n,
        allocs_per_step: allocs as f64 / f64::from(n),
    }
}

async fn deltas(count: usize) -> (Duration, f64) {
    let provider = ScriptedProvider::new();
    provider.stop_recording();
    provider.push(ScriptedResponse::text("0123456789".repeat(count)).chunk_size(10));
    let agent = Agent::new(AgentOptions::new(ModelSpec::scripted(), Arc::new(provider))).unwrap();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let started = Instant::now();
    agent.prompt(vec![Message::user_text("go")]).await.unwrap();
    let elapsed = started.elapsed();
    let allocs = ALLOCATIONS.load(Ordering::Relaxed) - before;
    (elapsed / count as u32, allocs as f64 / count as f64)
}

fn main() {
    let flavours: [(&str, tokio::runtime::Runtime); 2] = [
        (
            "current_thread",
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        ),
        (
            "multi_thread(2)",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ),
    ];
    for (name, runtime) in &flavours {
        println!("runtime: {name}");
        runtime.block_on(steps(10, 20, 5)); // warm-up
        for base in [10, 100, 1_000] {
            let sample = runtime.block_on(steps(base, 50, 40));
            println!(
                "  step, {base:>5} messages of history: {:>8.2} µs/step, {:>6.1} allocations/step",
                sample.per_step.as_secs_f64() * 1e6,
                sample.allocs_per_step
            );
        }
        for count in [100, 1_000, 10_000, 100_000] {
            let (per_delta, allocs) = runtime.block_on(deltas(count));
            println!(
                "  stream of {count:>6} deltas: {:>8.0} ns/delta, {:>5.2} allocations/delta",
                per_delta.as_secs_f64() * 1e9,
                allocs
            );
        }
    }
}
