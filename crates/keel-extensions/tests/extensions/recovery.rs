//! Terminal response recovery: one more chance for an empty answer after tools, then
//! `terminal_empty`.

use keel_extensions::recovery::RECOVERY_PROMPT;
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::TurnOutcome;

use crate::harness::{Harness, Setup, bash, extension_events, occurrences};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_after_tools_is_retried_once_then_fails_terminal_empty() {
    let responses = vec![
        bash("c1", "echo built"),
        ScriptedResponse::text(""),
        ScriptedResponse::text("  "),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (report, events) = h.turn(&session, "build it").await;
    match &report.outcome {
        TurnOutcome::Failed { code, .. } => {
            assert_eq!(code.as_str(), "terminal_empty");
        }
        other => panic!("expected terminal_empty, got {other:?}"),
    }
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(occurrences(&requests[1], RECOVERY_PROMPT), 0);
    assert_eq!(occurrences(&requests[2], RECOVERY_PROMPT), 1);
    let kinds: Vec<String> = extension_events(&events)
        .into_iter()
        .filter(|(e, _, _)| e == "terminal-recovery")
        .map(|(_, k, _)| k)
        .collect();
    assert_eq!(kinds, ["retry", "failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_gets_the_summary() {
    let responses = vec![
        bash("c1", "echo built"),
        ScriptedResponse::text(""),
        ScriptedResponse::text("Built it."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (report, _) = h.turn(&session, "build it").await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert_eq!(report.final_text(), "Built it.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_after_a_failed_tool_is_left_alone() {
    let responses = vec![bash("c1", "false"), ScriptedResponse::text("")];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (report, _) = h.turn(&session, "try").await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert_eq!(h.requests().len(), 2);
}
