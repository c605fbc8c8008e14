//! Property tests: random scripted scenarios with random abort and steering timing.
//!
//! Invariants: every tool call has exactly one result; a message's results follow it in
//! call order; events are well nested; a turn ends in exactly one outcome.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use keel_agent::ExecutionMode;
use keel_agent::runner::TurnStart;
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{AgentEvent, ErrorCode, Message, StopReason};
use proptest::prelude::*;
use serde_json::json;

use crate::runner_support::Harness;
use crate::support::*;

#[derive(Debug, Clone)]
enum CallKind {
    Fast,
    Slow(u64),
    Sequential(u64),
    Stubborn(u64),
    Fail,
    Panic,
    Unknown,
    BadArgs,
}

#[derive(Debug, Clone)]
enum Step {
    Text { chunks: usize },
    Calls { calls: Vec<CallKind>, length: bool },
    Error { after: usize },
}

fn call_kind() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        Just(CallKind::Fast),
        (1u64..400).prop_map(CallKind::Slow),
        (1u64..400).prop_map(CallKind::Sequential),
        (1u64..2_000).prop_map(CallKind::Stubborn),
        Just(CallKind::Fail),
        Just(CallKind::Panic),
        Just(CallKind::Unknown),
        Just(CallKind::BadArgs),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1usize..6).prop_map(|chunks| Step::Text { chunks }),
        (
            prop::collection::vec(call_kind(), 1..4),
            prop::bool::weighted(0.15)
        )
            .prop_map(|(calls, length)| Step::Calls { calls, length }),
        (0usize..6).prop_map(|after| Step::Error { after }),
    ]
}

#[derive(Debug, Clone)]
struct Scenario {
    steps: Vec<Step>,
    abort_at: Option<u64>,
    steer_at: Vec<u64>,
    follow_up: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(step(), 1..5),
        prop::option::of(0u64..1_500),
        prop::collection::vec(0u64..1_500, 0..3),
        any::<bool>(),
    )
        .prop_map(|(steps, abort_at, steer_at, follow_up)| Scenario {
            steps,
            abort_at,
            steer_at,
            follow_up,
        })
}

fn responses(s: &Scenario) -> Vec<ScriptedResponse> {
    let mut out = Vec::new();
    let mut n = 0;
    for step in &s.steps {
        let response = match step {
            Step::Text { chunks } => ScriptedResponse::text("abcdefghij").chunk_size(*chunks),
            Step::Calls { calls, length } => {
                let mut r = ScriptedResponse::new().with_text("calling");
                for kind in calls {
                    n += 1;
                    let id = format!("c{n}");
                    r = match kind {
                        CallKind::Fast => r.with_tool_call(&id, "fast", json!({})),
                        CallKind::Slow(ms) => r.with_tool_call(&id, "slow", json!({"ms": ms})),
                        CallKind::Sequential(ms) => r.with_tool_call(&id, "seq", json!({"ms": ms})),
                        CallKind::Stubborn(ms) => {
                            r.with_tool_call(&id, "stubborn", json!({"ms": ms}))
                        }
                        CallKind::Fail => r.with_tool_call(&id, "fail", json!({})),
                        CallKind::Panic => r.with_tool_call(&id, "panic", json!({})),
                        CallKind::Unknown => r.with_tool_call(&id, "nope", json!({})),
                        CallKind::BadArgs => r.with_raw_tool_call(&id, "fast", "{\"ms\":"),
                    };
                }
                if *length {
                    r.stop_reason(StopReason::Length)
                } else {
                    r
                }
            }
            Step::Error { after } => {
                n += 1;
                ScriptedResponse::text("partial")
                    .with_tool_call(&format!("c{n}"), "fast", json!({}))
                    .chunk_size(2)
                    .fail_after(*after, ErrorCode::Network, "cut")
            }
        };
        out.push(response.delay(Duration::from_millis(7)));
    }
    // Steering and follow-ups may ask for more answers than the script holds; the
    // provider then fails the call, which is itself a valid scenario.
    out.push(ScriptedResponse::text("final"));
    out
}

fn tools() -> Vec<keel_agent::ToolRef> {
    vec![
        TestTool::new("fast", ExecutionMode::Parallel, Behaviour::Echo),
        TestTool::new("slow", ExecutionMode::Parallel, Behaviour::Sleep),
        TestTool::new("seq", ExecutionMode::Sequential, Behaviour::Sleep),
        TestTool::new("stubborn", ExecutionMode::Parallel, Behaviour::Stubborn),
        TestTool::new("fail", ExecutionMode::Parallel, Behaviour::Fail),
        TestTool::new("panic", ExecutionMode::Parallel, Behaviour::Panic),
    ]
}

/// Every call answered exactly once, by a result placed after its message in call order.
fn check_pairing(history: &[Arc<Message>]) -> Result<(), String> {
    let mut answered: HashMap<String, usize> = HashMap::new();
    for message in history {
        if let Some(result) = message.as_tool_result() {
            *answered.entry(result.tool_call_id.to_string()).or_default() += 1;
        }
    }
    for (i, message) in history.iter().enumerate() {
        let Some(assistant) = message.as_assistant() else {
            continue;
        };
        let ids: Vec<String> = assistant.tool_calls().map(|c| c.id.to_string()).collect();
        for id in &ids {
            if answered.get(id) != Some(&1) {
                return Err(format!("call {id} has {:?} results", answered.get(id)));
            }
        }
        let following: Vec<String> = history[i + 1..]
            .iter()
            .take(ids.len())
            .filter_map(|m| m.as_tool_result().map(|r| r.tool_call_id.to_string()))
            .collect();
        if following != ids {
            return Err(format!(
                "results {following:?} do not follow calls {ids:?} in order"
            ));
        }
    }
    Ok(())
}

/// agent_start … agent_end; steps do not overlap; messages start before they end and do
/// not interleave; every tool execution starts once and ends once inside its step.
pub(crate) fn check_nesting(events: &[AgentEvent]) -> Result<(), String> {
    let mut runs = 0;
    let mut in_run = false;
    let mut in_step = false;
    let mut open_message = false;
    let mut open_tools: Vec<String> = Vec::new();
    let mut seen_tools: Vec<String> = Vec::new();
    for event in events {
        match event {
            AgentEvent::AgentStart => {
                if in_run {
                    return Err("nested agent_start".into());
                }
                in_run = true;
                runs += 1;
            }
            AgentEvent::AgentEnd { .. } => {
                if !in_run || in_step || open_message || !open_tools.is_empty() {
                    return Err("agent_end with something open".into());
                }
                in_run = false;
            }
            AgentEvent::TurnStart => {
                if !in_run || in_step {
                    return Err("turn_start outside a run or inside a step".into());
                }
                in_step = true;
            }
            AgentEvent::TurnEnd { .. } => {
                if !in_step || open_message || !open_tools.is_empty() {
                    return Err("turn_end with something open".into());
                }
                in_step = false;
            }
            AgentEvent::MessageStart { .. } => {
                if !in_step || open_message {
                    return Err("message_start outside a step or nested".into());
                }
                open_message = true;
            }
            AgentEvent::MessageUpdate { .. } if !open_message => {
                return Err("message_update outside a message".into());
            }
            AgentEvent::MessageEnd { .. } => {
                if !open_message {
                    return Err("message_end without start".into());
                }
                open_message = false;
            }
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                let id = tool_call_id.to_string();
                if !in_step || open_message || seen_tools.contains(&id) {
                    return Err(format!("bad tool start {id}"));
                }
                seen_tools.push(id.clone());
                open_tools.push(id);
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, .. }
                if !open_tools.contains(&tool_call_id.to_string()) =>
            {
                return Err("tool update outside its execution".into());
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                let id = tool_call_id.to_string();
                let Some(pos) = open_tools.iter().position(|t| *t == id) else {
                    return Err(format!("tool end without start {id}"));
                };
                open_tools.remove(pos);
            }
            _ => {}
        }
    }
    if in_run || runs == 0 {
        return Err(format!("runs: {runs}, still open: {in_run}"));
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn agent_invariants_hold_under_random_abort_and_steering(s in scenario()) {
        let outcome: Result<(), String> = runtime().block_on(async {
            let (agent, _provider, recorder) = agent_with(responses(&s), tools(), None);
            if s.follow_up {
                agent.follow_up(user("follow-up"));
            }
            let running = agent.start(Some(vec![user("go")])).map_err(|e| e.to_string())?;
            let mut times: Vec<(u64, bool)> = s.steer_at.iter().map(|t| (*t, false)).collect();
            if let Some(at) = s.abort_at {
                times.push((at, true));
            }
            times.sort();
            let mut now = 0;
            for (at, is_abort) in times {
                tokio::time::sleep(Duration::from_millis(at - now)).await;
                now = at;
                if is_abort { agent.abort() } else { agent.steer(user("steer")) }
            }
            tokio::time::timeout(Duration::from_secs(3_600), running)
                .await
                .map_err(|_| "run did not settle".to_string())?
                .map_err(|_| "run lost".to_string())?;
            check_pairing(&agent.messages())?;
            check_nesting(&recorder.all())
        });
        prop_assert!(outcome.is_ok(), "{:?}\n{:?}", outcome, s);
    }

    #[test]
    fn a_turn_ends_in_exactly_one_outcome(s in scenario()) {
        let outcome: Result<(), String> = runtime().block_on(async {
            let mut h = Harness::new(responses(&s));
            h.tools = tools();
            for _ in &s.steer_at {
                h.host.mid_turn.lock().unwrap().push_back(vec![user("host steer")]);
            }
            if let Some(at) = s.abort_at {
                let cancel = h.cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(at)).await;
                    cancel.cancel();
                });
            }
            // `run_with` checks numbering and that exactly one terminal status is last.
            let result = h.run_with(TurnStart::Prompt(vec![user("go")])).await;
            check_pairing(&result.messages)
        });
        prop_assert!(outcome.is_ok(), "{:?}\n{:?}", outcome, s);
    }
}
