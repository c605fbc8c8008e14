//! Replaying the guard over a stored session (`keel debug replay-guard`): each turn's steps
//! go through the same fingerprints and counts as when it ran, under a fresh key per turn,
//! and every step's signals and counts come back for printing.

use std::sync::Arc;

use keel_agent::StepSummary;
use keel_protocol::Message;

use super::fingerprint::Key;
use super::print_step;
use super::state::{GuardState, Verdict};

/// One replayed step.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplayedStep {
    /// Step number within the turn, from 1 (steps with tool calls only).
    pub step: u32,
    /// The tools it called, in order.
    pub tools: Vec<String>,
    /// How many of its results were errors.
    pub errors: usize,
    /// What the guard made of it.
    pub verdict: Verdict,
}

/// One replayed turn.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplayedTurn {
    /// The turn's id, when history names it.
    pub turn_id: Option<String>,
    /// Its steps.
    pub steps: Vec<ReplayedStep>,
}

/// Replays `turns` (each the history messages a turn added, in order) with the reminder
/// threshold `threshold`; `None` when no key can be drawn.
pub fn replay(
    turns: &[(Option<String>, Vec<Arc<Message>>)],
    threshold: u32,
) -> Option<Vec<ReplayedTurn>> {
    let mut out = Vec::new();
    for (turn_id, messages) in turns {
        let key = Key::random()?;
        let mut state = GuardState::new(threshold);
        let mut steps = Vec::new();
        let mut number = 0;
        for step in steps_of(messages) {
            let (calls, batch) = print_step(&key, &step);
            if calls.is_empty() {
                continue;
            }
            number += 1;
            let verdict = state.step(&calls, batch);
            let tools = step
                .message
                .as_deref()
                .and_then(Message::as_assistant)
                .map(|a| a.tool_calls().map(|c| c.name.clone()).collect())
                .unwrap_or_default();
            let errors = step
                .tool_results
                .iter()
                .filter(|m| m.as_tool_result().is_some_and(|r| r.is_error))
                .count();
            steps.push(ReplayedStep {
                step: number,
                tools,
                errors,
                verdict,
            });
        }
        out.push(ReplayedTurn {
            turn_id: turn_id.clone(),
            steps,
        });
    }
    Some(out)
}

/// The steps of a turn's messages: each assistant message with the tool results after it.
pub fn steps_of(messages: &[Arc<Message>]) -> Vec<StepSummary> {
    let mut steps: Vec<StepSummary> = Vec::new();
    for message in messages {
        match &**message {
            Message::Assistant(_) => steps.push(StepSummary {
                message: Some(message.clone()),
                tool_results: Vec::new(),
            }),
            Message::ToolResult(_) => {
                if let Some(step) = steps.last_mut() {
                    step.tool_results.push(message.clone());
                }
            }
            _ => {}
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage};
    use serde_json::json;

    fn step(n: usize, command: &str, failed: bool) -> Vec<Arc<Message>> {
        let mut answer = AssistantMessage::from_text("");
        answer.content = vec![ContentBlock::ToolCall(ToolCall {
            id: format!("c{n}").into(),
            name: "bash".into(),
            arguments: json!({"command": command}),
        })];
        let result = ToolResultMessage {
            tool_call_id: format!("c{n}").into(),
            tool_name: "bash".into(),
            content: vec![ContentBlock::text("error: secret-argument-xyz not found")],
            details: None,
            is_error: failed,
            timestamp: 1,
        };
        vec![
            Arc::new(Message::Assistant(answer)),
            Arc::new(Message::ToolResult(result)),
        ]
    }

    #[test]
    fn a_stored_turn_replays_step_by_step_without_raw_arguments() {
        let messages: Vec<Arc<Message>> = (0..3)
            .flat_map(|n| step(n, "cat secret-argument-xyz", true))
            .collect();
        let replayed = replay(&[(Some("t-1".into()), messages)], 3).unwrap();
        let steps = &replayed[0].steps;
        assert_eq!(steps.len(), 3);
        assert!(steps[0].verdict.counts.is_empty());
        assert!(!steps[1].verdict.observed.is_empty());
        assert!(steps[2].verdict.remind.is_some());
        let printed = serde_json::to_string(&replayed).unwrap();
        assert!(!printed.contains("secret-argument-xyz"), "{printed}");
    }
}
