//! The runaway guard: one reminder for a loop, none for searches that find nothing, and no
//! argument in anything it reports.

use keel_llm::scripted::ScriptedResponse;

use crate::harness::{Harness, Setup, bash, extension_events, occurrences};

const MARK: &str = "Runaway check";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_failing_call_three_times_brings_one_reminder_before_request_four() {
    let mut responses: Vec<ScriptedResponse> = (0..5)
        .map(|n| bash(&format!("c{n}"), "cat zebra-canary-7731.txt"))
        .collect();
    responses.push(ScriptedResponse::text("I cannot find it."));
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (report, events) = h.turn(&session, "show the file").await;
    assert_eq!(report.outcome, keel_protocol::TurnOutcome::Completed);
    let requests = h.requests();
    assert_eq!(requests.len(), 6);
    let seen: Vec<usize> = requests.iter().map(|r| occurrences(r, MARK)).collect();
    // Requests 1-3 have none; request 4 is the first with it; it is never repeated.
    assert_eq!(seen, [0, 0, 0, 1, 1, 1]);
    let reminder = &requests[3].messages.last().unwrap();
    let text = crate::harness::text_of(reminder);
    assert!(
        text.contains("temporary") && text.contains("Do not repeat the call unchanged"),
        "{text}"
    );
    assert!(text.contains("report what blocks you"), "{text}");
    let guard: Vec<(String, String)> = extension_events(&events)
        .into_iter()
        .filter(|(ext, _, _)| ext == "runaway-guard")
        .map(|(_, kind, details)| (kind, details["signal"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        guard,
        [
            ("observation".into(), "repeated_action".into()),
            ("observation".into(), "repeated_result".into()),
            ("observation".into(), "same_error_family".into()),
            ("observation".into(), "no_progress".into()),
            ("reminder".into(), "no_progress".into()),
        ]
    );
    // HMAC fingerprints only: the argument appears in no event.
    let printed = serde_json::to_string(&extension_events(&events)).unwrap();
    assert!(!printed.contains("zebra-canary-7731"), "{printed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abab_alternation_brings_one_reminder() {
    let responses = vec![
        bash("a1", "echo A"),
        bash("b1", "echo B"),
        bash("a2", "echo A"),
        bash("b2", "echo B"),
        bash("a3", "echo A"),
        ScriptedResponse::text("done"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (_, events) = h.turn(&session, "go").await;
    let seen: Vec<usize> = h.requests().iter().map(|r| occurrences(r, MARK)).collect();
    assert_eq!(seen, [0, 0, 0, 0, 1, 1]);
    let reminders: Vec<String> = extension_events(&events)
        .into_iter()
        .filter(|(ext, kind, _)| ext == "runaway-guard" && kind == "reminder")
        .map(|(_, _, d)| d["signal"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reminders, ["alternation"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_finding_nothing_three_times_brings_none() {
    let responses = vec![
        bash("g1", "grep -rn needle-one ."),
        bash("g2", "grep -rn needle-two ."),
        bash("g3", "grep -rn needle-three ."),
        bash("g4", "grep -rn needle-three ."),
        bash("g5", "grep -rn needle-three ."),
        ScriptedResponse::text("not found"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (report, events) = h.turn(&session, "find it").await;
    assert_eq!(report.outcome, keel_protocol::TurnOutcome::Completed);
    assert!(h.requests().iter().all(|r| occurrences(r, MARK) == 0));
    let guard: Vec<_> = extension_events(&events)
        .into_iter()
        .filter(|(ext, _, _)| ext == "runaway-guard")
        .collect();
    assert_eq!(guard, []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_guard_stays_silent() {
    let mut responses: Vec<ScriptedResponse> =
        (0..4).map(|n| bash(&format!("c{n}"), "false")).collect();
    responses.push(ScriptedResponse::text("ok"));
    let h = Harness::start(Setup::new(responses).set("runaway_guard.enabled=false")).await;
    let session = h.session().await;
    let (_, events) = h.turn(&session, "go").await;
    assert!(h.requests().iter().all(|r| occurrences(r, MARK) == 0));
    assert!(
        extension_events(&events)
            .iter()
            .all(|(e, _, _)| e != "runaway-guard")
    );
}
