//! The one table that maps extension events onto the runner's hooks (DESIGN §3).
//!
//! Seven events are runner hooks of the same name; `turn_start` and `turn_end` are called by
//! the runtime around the turn. `on_tool_execution_start` is not in the table: only the host
//! wires it.

use keel_agent::runner::TurnHooks;

use super::{ExtensionEvent, Hook, TurnEndHook, TurnStartHook};
use std::sync::Arc;

/// Where an event is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seam {
    /// The runner's hook of this name.
    Runner(&'static str),
    /// Called by the runtime around the turn.
    Host,
}

/// Every extension event and where it is delivered.
pub const TABLE: [(ExtensionEvent, Seam); 9] = [
    (
        ExtensionEvent::OnLlmCallPrepared,
        Seam::Runner("on_llm_call_prepared"),
    ),
    (
        ExtensionEvent::BeforeLlmCall,
        Seam::Runner("before_llm_call"),
    ),
    (ExtensionEvent::AfterLlmCall, Seam::Runner("after_llm_call")),
    (
        ExtensionEvent::BeforeToolCall,
        Seam::Runner("before_tool_call"),
    ),
    (
        ExtensionEvent::AfterToolCall,
        Seam::Runner("after_tool_call"),
    ),
    (
        ExtensionEvent::OnHistoryChanged,
        Seam::Runner("on_history_changed"),
    ),
    (ExtensionEvent::OnStepEnd, Seam::Runner("on_step_end")),
    (ExtensionEvent::TurnStart, Seam::Host),
    (ExtensionEvent::TurnEnd, Seam::Host),
];

/// Where `event` is delivered.
pub fn seam(event: ExtensionEvent) -> Seam {
    TABLE
        .iter()
        .find(|(e, _)| *e == event)
        .map_or(Seam::Host, |(_, seam)| *seam)
}

/// The runtime's own seams around a turn.
#[derive(Default, Clone)]
pub struct HostHooks {
    /// Called before the turn.
    pub turn_start: Vec<Arc<dyn TurnStartHook>>,
    /// Called after the turn.
    pub turn_end: Vec<Arc<dyn TurnEndHook>>,
}

/// Mounts one handler where the table says.
pub fn mount(hook: Hook, runner: &mut TurnHooks, host: &mut HostHooks) {
    match hook {
        Hook::OnLlmCallPrepared(h) => runner.on_llm_call_prepared.push(h),
        Hook::BeforeLlmCall(h) => runner.before_llm_call.push(h),
        Hook::AfterLlmCall(h) => runner.after_llm_call.push(h),
        Hook::BeforeToolCall(h) => runner.before_tool_call.push(h),
        Hook::AfterToolCall(h) => runner.after_tool_call.push(h),
        Hook::OnHistoryChanged(h) => runner.on_history_changed.push(h),
        Hook::OnStepEnd(h) => runner.on_step_end.push(h),
        Hook::TurnStart(h) => host.turn_start.push(h),
        Hook::TurnEnd(h) => host.turn_end.push(h),
    }
}

/// How many handlers each runner seam and host seam holds, by the table's names.
pub fn counts(runner: &TurnHooks, host: &HostHooks) -> Vec<(&'static str, usize)> {
    vec![
        ("on_llm_call_prepared", runner.on_llm_call_prepared.len()),
        ("before_llm_call", runner.before_llm_call.len()),
        ("after_llm_call", runner.after_llm_call.len()),
        ("before_tool_call", runner.before_tool_call.len()),
        ("after_tool_call", runner.after_tool_call.len()),
        ("on_history_changed", runner.on_history_changed.len()),
        ("on_step_end", runner.on_step_end.len()),
        (
            "on_tool_execution_start",
            runner.on_tool_execution_start.len(),
        ),
        ("turn_start", host.turn_start.len()),
        ("turn_end", host.turn_end.len()),
    ]
}
