//! `keel exec --permission plan`: the plan is the final answer in every output format (the
//! plan `exit_plan_mode` froze, else the plan file, else the model's answer).

use serde_json::{Value, json};

use crate::lines;
use crate::sessions::Home;

/// A scripted call of `tool` with `arguments`.
fn call(id: &str, tool: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"id": id, "name": tool, "arguments": arguments}]})
}

const PLAN: &str = "## Summary\nCache the parsed config.\n\n## Steps\n1. Add cache.rs.\n";

#[test]
fn exec_in_plan_mode_answers_with_the_plan() {
    let home = Home::new();
    // No plan written: the model's answer.
    let first = home.exec(
        r#"[{"text": "Which config do you mean?"}]"#,
        &["--permission", "plan", "plan a cache"],
    );
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        "Which config do you mean?\n"
    );
    let session = home.only_session();
    let plan_file = keel_runtime::plan_file(home.home.path(), &session.as_str().into());
    let resume = ["--permission", "plan", "--session", session.as_str()];

    // Written but not submitted: the plan file.
    let draft = json!([
        call("c1", "write", json!({"path": plan_file, "content": "## Summary\ndraft\n"})),
        {"text": "I wrote a draft."}
    ]);
    let output = home.exec(&draft.to_string(), &[&resume[..], &["the config"]].concat());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "## Summary\ndraft\n"
    );

    // Submitted: the frozen plan, in every format (the turn ends at exit_plan_mode).
    let submitted = json!([
        call("c1", "write", json!({"path": plan_file, "content": PLAN})),
        call("c2", "exit_plan_mode", json!({})),
        {"text": "never sent"}
    ])
    .to_string();
    let text = home.exec(&submitted, &[&resume[..], &["go on"]].concat());
    assert_eq!(String::from_utf8_lossy(&text.stdout), PLAN);
    let json_run = home.exec(
        &submitted,
        &[&resume[..], &["--output-format", "json", "go on"]].concat(),
    );
    let result = &lines(&json_run.stdout)[0];
    assert_eq!(result["final_text"], PLAN);
    assert_eq!(result["status"], "succeeded");
    let stream = home.exec(
        &submitted,
        &[&resume[..], &["--output-format", "stream-json", "go on"]].concat(),
    );
    let events = lines(&stream.stdout);
    let completed = events
        .iter()
        .find(|e| e["type"] == "exec.completed")
        .unwrap();
    assert_eq!(completed["result"]["final_text"], PLAN);
    let ready = events.iter().find(|e| e["type"] == "plan.ready").unwrap();
    assert_eq!(ready["plan"]["text"], PLAN);
    // Three reviews, three frozen copies; the plan file stays where the model wrote it.
    let frozen: Vec<String> = (1..=3)
        .map(|n| {
            std::fs::read_to_string(home.home.path().join(format!("plans/{session}.{n}.md")))
                .unwrap()
        })
        .collect();
    assert_eq!(frozen, vec![PLAN; 3]);
}
