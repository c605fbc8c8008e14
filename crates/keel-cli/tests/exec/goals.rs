//! `keel exec --goal`: the real binary works on a goal over several turns of a mock script,
//! and its exit status says how the goal ended.

use serde_json::{Value, json};

use crate::{assert_exit, exec_script, lines, result_of};

/// A text answer that cost `input` tokens, as a mock-script entry.
fn costly(text: &str, input: u64) -> Value {
    let usage = keel_protocol::Usage {
        input,
        ..keel_protocol::Usage::default()
    };
    json!({"text": text, "usage": usage})
}

fn script(responses: &[Value]) -> String {
    Value::Array(responses.to_vec()).to_string()
}

#[test]
fn a_goal_runs_until_its_budget_is_spent_and_exits_7() {
    let responses = [costly("one", 100), costly("two", 100), costly("three", 100)];
    let (_dir, output) = exec_script(
        &script(&responses),
        &[
            "--goal",
            "count to three",
            "--goal-budget",
            "250",
            "--output-format",
            "json",
        ],
    );
    assert_exit(&output, 7);
    let result = result_of(&output);
    assert_eq!(result["status"], "limit_exceeded");
    assert_eq!(result["error"]["code"], "goal_budget_limited");
    assert_eq!(result["final_text"], "three");
    assert_eq!(result["usage"]["input"], 300);
    let goal = &result["goal"];
    assert_eq!(goal["status"], "budget_limited");
    assert_eq!(goal["objective"], "count to three");
    assert_eq!(goal["token_budget"], 250);
    assert_eq!(goal["counters"]["goal_turns"], 3);
}

#[test]
fn a_goal_without_limits_stops_at_the_configured_turns() {
    // Without --goal-budget or --goal-turns the configured defaults bound the goal; the
    // flag overrides them for this goal.
    let responses: Vec<Value> = (0..6).map(|n| costly(&format!("turn {n}"), 10)).collect();
    let (_dir, output) = exec_script(
        &script(&responses),
        &[
            "--goal",
            "keep going",
            "--output-format",
            "json",
            "-c",
            "goals.max_turns=4",
        ],
    );
    assert_exit(&output, 7);
    let goal = &result_of(&output)["goal"];
    assert_eq!(goal["max_turns"], 4);
    assert_eq!(goal["token_budget"], 500_000);
    assert_eq!(goal["counters"]["goal_turns"], 4);
    let (_dir, output) = exec_script(
        &script(&responses),
        &[
            "--goal",
            "keep going",
            "--goal-turns",
            "2",
            "--output-format",
            "json",
        ],
    );
    assert_exit(&output, 7);
    let result = result_of(&output);
    assert_eq!(result["error"]["code"], "goal_budget_limited");
    assert_eq!(result["goal"]["max_turns"], 2);
    assert_eq!(result["goal"]["counters"]["goal_turns"], 2);
}

#[test]
fn a_goal_the_evaluator_accepts_exits_0_after_every_turn_streamed() {
    let complete = |id: &str, evidence: &str| {
        json!({"tool_calls": [{"id": id, "name": "update_goal",
            "arguments": {"status": "complete", "evidence": evidence}}]})
    };
    let verdict = |met: bool, evidence: &str| json!({"text": json!({"met": met, "evidence": evidence}).to_string()});
    let responses = [
        complete("c1", "it is done"),
        verdict(false, "nothing shows it"),
        json!({"text": "I will show it."}),
        complete("c2", "echo printed done"),
        verdict(true, "the output shows it"),
        json!({"text": "All done."}),
    ];
    let (_dir, output) = exec_script(
        &script(&responses),
        &["--goal", "say done", "--output-format", "stream-json"],
    );
    assert_exit(&output, 0);
    let events = lines(&output.stdout);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .filter(|k| k.starts_with("turn.") || k.starts_with("exec.") || k.starts_with("session."))
        .collect();
    assert_eq!(
        kinds,
        [
            "exec.started",
            "session.started",
            "turn.started",
            "turn.completed",
            "turn.started",
            "turn.completed",
            "exec.completed"
        ]
    );
    // Each turn's lines carry its own id.
    let turn_ids: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "turn.started")
        .map(|e| e["turn_id"].as_str().unwrap())
        .collect();
    assert_eq!(turn_ids.len(), 2);
    assert_ne!(turn_ids[0], turn_ids[1]);
    let result = &events.last().unwrap()["result"];
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["final_text"], "All done.");
    assert_eq!(result["turn_id"], turn_ids[1]);
    assert_eq!(result["goal"]["status"], "complete");
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "goal.updated")
        .map(|e| e["goal"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.first(), Some(&"active"));
    assert_eq!(statuses.last(), Some(&"complete"));
}

#[test]
fn three_identical_replies_pause_the_goal_and_exit_4() {
    let responses = [
        json!({"text": "Still working."}),
        json!({"text": "Still working."}),
        json!({"text": "Still working."}),
    ];
    let (_dir, output) = exec_script(&script(&responses), &["--goal", "loop forever"]);
    assert_exit(&output, 4);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("goal_paused"), "{stderr}");
    assert!(stderr.contains("[goal paused: loop forever"), "{stderr}");
    // Text output: the last answer.
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
}

#[test]
fn goal_flags_are_checked_before_anything_runs() {
    let (_dir, output) = exec_script("[]", &["--goal", "x", "--goal-budget", "lots"]);
    assert_exit(&output, 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a token count"));
    let (_dir, output) = exec_script("[]", &["--goal-budget", "5K", "a prompt"]);
    assert_exit(&output, 2);
    let (_dir, output) = exec_script("[]", &["--goal-budget", "5K"]);
    assert_exit(&output, 2);
    let (_dir, output) = exec_script("[]", &["--goal", "x", "a prompt"]);
    assert_exit(&output, 2);
}

/// Attack family "unbounded goals": a goal the model sets itself ("say hi" once became 31
/// turns) stops at the configured limits whatever it asks for, and in `ask` mode it cannot
/// set one without the user.
#[test]
fn a_models_own_goal_stops_at_the_default_turns_and_needs_a_yes_in_ask_mode() {
    let create = json!({"tool_calls": [{"id": "g", "name": "create_goal", "arguments":
        {"objective": "say hi", "max_turns": 1000, "token_budget": 100_000_000, "verification": "none"}}]});
    let mut responses = vec![create.clone()];
    responses.extend((0..30).map(|n| costly(&format!("hi {n}"), 10)));
    let (_dir, output) = exec_script(
        &script(&responses),
        &["--output-format", "json", "--permission", "auto", "say hi"],
    );
    assert_exit(&output, 7);
    let goal = &result_of(&output)["goal"];
    assert_eq!(goal["max_turns"], 20);
    assert_eq!(goal["token_budget"], 500_000);
    assert_eq!(goal["counters"]["goal_turns"], 20);
    let (_dir, output) = exec_script(
        &script(&[create, json!({"text": "no goal then"})]),
        &["--output-format", "json", "--permission", "ask", "say hi"],
    );
    assert_exit(&output, 0);
    let result = result_of(&output);
    assert!(result["goal"].is_null(), "{result}");
    assert_eq!(result["final_text"], "no goal then");
}

#[test]
fn text_shows_each_goal_line_once_and_the_last_answer_when_a_limit_ends_the_goal() {
    let responses = [costly("one", 10), costly("two", 10), costly("three", 10)];
    let (_dir, output) = exec_script(
        &script(&responses),
        &["--goal", "count", "--goal-turns", "2"],
    );
    assert_exit(&output, 7);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "two\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let banners: Vec<&str> = stderr.lines().filter(|l| l.starts_with("[goal ")).collect();
    let mut unique = banners.clone();
    unique.dedup();
    assert_eq!(banners, unique, "{stderr}");
    assert!(stderr.contains("turn 2/2"), "{stderr}");
    assert!(stderr.contains("goal_budget_limited"), "{stderr}");
}
