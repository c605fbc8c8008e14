//! Plan mode with the scripted model: every mutation refused but the session's plan file,
//! the per-turn reminder, `exit_plan_mode` ending the turn for review, and `/approve-plan`
//! switching the mode and starting the turn that carries the plan out.

use std::path::{Path, PathBuf};

use keel_llm::scripted::ScriptedResponse;
use keel_protocol::{Message, SessionEventBody, SessionId, TurnOutcome};
use keel_runtime::TurnReport;
use keel_tools::permission::Mode;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Harness, Setup, occurrences, request_text};

async fn planning() -> Harness {
    let mut setup = Setup::new(Vec::new());
    setup.permission = Some(Mode::Plan);
    Harness::start(setup).await
}

fn plan_of(h: &Harness, session: &SessionId) -> PathBuf {
    keel_runtime::plan_file(&h.home, session)
}

fn cwd(h: &Harness) -> PathBuf {
    h.cwd.clone()
}

/// `(tool, is_error, text)` of each tool result of the turn, in order.
fn results(report: &TurnReport) -> Vec<(String, bool, String)> {
    report
        .messages
        .iter()
        .filter_map(|m| match &**m {
            Message::ToolResult(r) => Some((r.tool_name.clone(), r.is_error, r.text())),
            _ => None,
        })
        .collect()
}

fn write(id: &str, path: &Path, content: &str) -> ScriptedResponse {
    ScriptedResponse::tool_call(id, "write", json!({"path": path, "content": content}))
}

fn exit(id: &str) -> ScriptedResponse {
    ScriptedResponse::tool_call(id, "exit_plan_mode", json!({}))
}

const PLAN_TEXT: &str = "# Plan\n\n## Summary\nAdd a cache.\n\n## Steps\n1. Write cache.rs.\n";

#[tokio::test]
async fn every_mutation_is_refused_but_the_plan_file() {
    let h = planning().await;
    let session = h.session().await;
    let other = h.session().await;
    let plan = plan_of(&h, &session);
    let ws = cwd(&h);
    std::fs::write(ws.join("keep.txt"), "kept").unwrap();
    let traversal = format!("{}/../../keel-home/plans/x.md", ws.display());
    let calls = [
        ("write", json!({"path": "new.txt", "content": "x"})),
        (
            "edit",
            json!({"path": "keep.txt", "edits": [{"old_string": "kept", "new_string": "gone"}]}),
        ),
        ("bash", json!({"command": "echo x > f"})),
        ("bash", json!({"command": "rm keep.txt"})),
        ("bash", json!({"command": "touch t"})),
        (
            "bash",
            json!({"command": format!("echo x > {}", plan.display())}),
        ),
        (
            "write",
            json!({"path": plan_of(&h, &other), "content": "## Summary\nnot mine"}),
        ),
        ("write", json!({"path": traversal, "content": "x"})),
        (
            "write",
            json!({"path": h.home.join("plans/../config.yaml"), "content": "permission: full"}),
        ),
        ("write", json!({"path": plan, "content": PLAN_TEXT})),
    ];
    let mut response = ScriptedResponse::new();
    for (n, (tool, arguments)) in calls.iter().enumerate() {
        response = response.with_tool_call(&format!("c{n}"), tool, arguments.clone());
    }
    h.provider.push(response);
    h.provider.push(ScriptedResponse::text("done"));
    let (report, _) = h.turn(&session, "plan a cache").await;
    let results = results(&report);
    assert_eq!(results.len(), calls.len());
    let (refused, written) = results.split_at(calls.len() - 1);
    for ((tool, error, text), (_, arguments)) in refused.iter().zip(&calls) {
        assert!(
            *error && text.starts_with("Blocked by permissions"),
            "{tool} {arguments}: {text}"
        );
    }
    assert!(!written[0].1, "{:?}", written[0]);
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), PLAN_TEXT);
    assert_eq!(
        std::fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "kept"
    );
    let mut left: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["keep.txt"]);
    let mut plans: Vec<String> = std::fs::read_dir(h.home.join("plans"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    plans.sort();
    assert_eq!(plans, vec![format!("{session}.md")]);
    assert!(!h.home.join("config.yaml").exists());
}

#[tokio::test]
async fn a_link_planted_at_the_plan_path_does_not_redirect_the_write() {
    let h = planning().await;
    let session = h.session().await;
    let plan = plan_of(&h, &session);
    let target = cwd(&h).join("target.txt");
    std::fs::write(&target, "untouched").unwrap();
    std::fs::create_dir_all(plan.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&target, &plan).unwrap();
    h.provider.push(write("c1", &plan, PLAN_TEXT));
    h.provider.push(ScriptedResponse::text("done"));
    let (report, _) = h.turn(&session, "plan").await;
    let (_, error, text) = &results(&report)[0];
    assert!(
        *error && text.starts_with("Blocked by permissions"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    assert!(std::fs::symlink_metadata(&plan).unwrap().is_symlink());
}

#[tokio::test]
async fn exit_plan_mode_needs_a_summary_and_then_ends_the_turn() {
    let h = planning().await;
    let session = h.session().await;
    let plan = plan_of(&h, &session);
    h.provider.push(exit("c1"));
    h.provider
        .push(write("c2", &plan, "Some notes first.\n## Summary\n"));
    h.provider.push(exit("c3"));
    h.provider.push(write("c4", &plan, PLAN_TEXT));
    h.provider.push(exit("c5"));
    // Never asked for: the turn ends with the frozen plan.
    h.provider
        .push(ScriptedResponse::text("should not be sent"));
    let (report, events) = h.turn(&session, "plan a cache").await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert_eq!(h.requests().len(), 5, "no request after exit_plan_mode");
    assert_eq!(h.provider.remaining(), 1);
    let results = results(&report);
    let missing = &results[0];
    assert!(
        missing.1 && missing.2.contains("There is no plan file"),
        "{missing:?}"
    );
    let unsummarised = &results[2];
    assert!(
        unsummarised.1
            && unsummarised.2.contains(
                "does not start with a `## Summary` section: it begins with `Some notes first.`"
            ),
        "{unsummarised:?}"
    );
    let frozen = h.home.join(format!("plans/{session}.1.md"));
    let submitted = &results[4];
    assert!(
        !submitted.1 && submitted.2.contains("frozen in"),
        "{submitted:?}"
    );
    assert_eq!(std::fs::read_to_string(&frozen).unwrap(), PLAN_TEXT);
    let ready: Vec<keel_protocol::PlanInfo> = events
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::PlanReady { plan, .. } => Some(plan.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        ready,
        vec![keel_protocol::PlanInfo {
            text: PLAN_TEXT.to_owned(),
            path: plan.display().to_string(),
            frozen_path: frozen.display().to_string(),
        }]
    );
    // Every request carried the rules and the plan file's path, and offered the tool.
    let first = &h.requests()[0];
    let text = request_text(first);
    assert!(text.contains("Plan mode is on"), "{text}");
    assert!(text.contains(&plan.display().to_string()), "{text}");
    assert!(first.tools.iter().any(|t| t.name == "exit_plan_mode"));
}

#[tokio::test]
async fn approval_switches_the_mode_and_starts_implementing() {
    let h = planning().await;
    let session = h.session().await;
    let plan = plan_of(&h, &session);
    // Nothing to approve yet, and plan is no mode to carry a plan out in.
    let early = h.command(&session, "approve-plan", "").await.unwrap_err();
    assert!(early.to_string().contains("no plan is ready"), "{early}");
    h.provider.push(write("c1", &plan, PLAN_TEXT));
    h.provider.push(exit("c2"));
    h.turn(&session, "plan a cache").await;
    let refused = h
        .command(&session, "approve-plan", "plan")
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("auto, ask or full"),
        "{refused}"
    );
    // Feedback is a prompt like any other, still in plan mode.
    h.provider.push(ScriptedResponse::text("Which cache size?"));
    h.turn(&session, "keep it small").await;
    let feedback = h.requests().last().cloned().unwrap();
    let reminded = occurrences(&feedback, "Plan mode is on");
    assert_eq!(reminded, 2, "one reminder a turn");
    // Approved: auto mode, and a turn that may now write the workspace.
    h.provider.push(ScriptedResponse::tool_call(
        "c3",
        "write",
        json!({"path": "cache.rs", "content": "// cache"}),
    ));
    h.provider.push(ScriptedResponse::text("implemented"));
    let (report, events) = h
        .command(&session, "approve-plan", "")
        .await
        .unwrap()
        .expect("a turn");
    assert_eq!(report.final_text(), "implemented");
    assert!(!results(&report)[0].1, "{:?}", results(&report));
    assert_eq!(
        std::fs::read_to_string(cwd(&h).join("cache.rs")).unwrap(),
        "// cache"
    );
    let modes: Vec<Option<keel_protocol::PermissionMode>> = events
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::SessionUpdated { mode, .. } => Some(*mode),
            _ => None,
        })
        .collect();
    assert!(
        modes.contains(&Some(keel_protocol::PermissionMode::Auto)),
        "{modes:?}"
    );
    let request = h.requests().last().cloned().unwrap();
    let text = request_text(&request);
    assert!(text.contains("I approve the plan frozen in"), "{text}");
    assert!(text.contains("Add a cache."), "{text}");
    assert_eq!(
        occurrences(&request, "Plan mode is on"),
        reminded,
        "no reminder out of plan mode"
    );
    assert!(!request.tools.iter().any(|t| t.name == "exit_plan_mode"));
    // Out of plan mode there is nothing left to approve, and the plan file is keel's again.
    let again = h.command(&session, "approve-plan", "").await.unwrap_err();
    assert!(again.to_string().contains("not in plan mode"), "{again}");
    h.provider.push(write("c4", &plan, "## Summary\nchanged"));
    h.provider.push(ScriptedResponse::text("ok"));
    let (report, _) = h.turn(&session, "change the plan").await;
    assert!(results(&report)[0].1);
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), PLAN_TEXT);
}
