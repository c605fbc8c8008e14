//! The session report: what is written, when it is not rewritten, what a rewind does to it,
//! and that a failing write never touches the call.

use keel_extensions::report::files::{self, StepRecord};
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::TurnOutcome;
use keel_protocol::ops;
use keel_runtime::ContractExt as _;

use crate::harness::{Harness, Setup, bash, extension_events};

fn calls(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("report").join("calls"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_logged_and_an_unchanged_envelope_is_not_rewritten() {
    let responses = vec![
        bash("c1", "echo one"),
        ScriptedResponse::text("first"),
        ScriptedResponse::text("second"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    h.turn(&session, "one").await;
    let dir = h.session_dir(&session);
    let envelope_path = dir.join("report").join("llm-call.json");
    let written = std::fs::metadata(&envelope_path)
        .unwrap()
        .modified()
        .unwrap();
    let envelope: files::Envelope =
        serde_json::from_slice(&std::fs::read(&envelope_path).unwrap()).unwrap();
    assert_eq!(
        envelope.system_prompt,
        files::Part::Whole("You are a test.".into())
    );
    assert!(
        matches!(&envelope.tools, files::Part::Whole(tools) if tools.iter().any(|t| t.name == "bash"))
    );
    assert_eq!(calls(&dir), 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    h.turn(&session, "two").await;
    // Same system prompt, tools and options: same hash, no rewrite.
    assert_eq!(calls(&dir), 1);
    assert_eq!(
        std::fs::metadata(&envelope_path)
            .unwrap()
            .modified()
            .unwrap(),
        written
    );
    let log = files::read_log(&dir.join("report").join("llm-calls.jsonl")).unwrap();
    let steps: Vec<(u64, usize, usize)> = log
        .iter()
        .map(|r| (r.step, r.call, r.history_prefix))
        .collect();
    assert_eq!(steps, [(1, 1, 2), (2, 2, 4), (3, 1, 7)]);
    assert!(log.iter().all(|r: &StepRecord| r.request_only.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_deletes_the_stale_envelope_and_the_steps_past_it() {
    let responses = vec![
        ScriptedResponse::text("first"),
        ScriptedResponse::text("second"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    h.turn(&session, "one").await;
    let after_first = h.store.session(&session).await.unwrap().revision;
    h.turn(&session, "two").await;
    let dir = h.session_dir(&session).join("report");
    assert_eq!(
        files::read_log(&dir.join("llm-calls.jsonl")).unwrap().len(),
        2
    );
    h.runtime
        .request(ops::RewindSession {
            session_id: session.clone(),
            revision: after_first,
        })
        .await
        .unwrap();
    assert!(!dir.join("llm-call.json").exists());
    let kept = files::read_log(&dir.join("llm-calls.jsonl")).unwrap();
    assert_eq!(kept.iter().map(|r| r.step).collect::<Vec<_>>(), [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_cannot_be_written_is_reported_and_the_turn_goes_on() {
    let responses = vec![bash("c1", "echo one"), ScriptedResponse::text("done")];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let dir = h.session_dir(&session);
    std::fs::create_dir_all(&dir).unwrap();
    // A file where the report folder should be.
    std::fs::write(dir.join("report"), "in the way").unwrap();
    let (report, events) = h.turn(&session, "go").await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    assert_eq!(h.requests().len(), 2);
    let failures: Vec<_> = extension_events(&events)
        .into_iter()
        .filter(|(e, k, _)| e == "host.session-report" && k == "write_failed")
        .collect();
    assert_eq!(failures.len(), 1, "reported once per turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_freezes_the_report_beside_its_snapshot_and_old_steps_still_rebuild() {
    let responses = vec![
        ScriptedResponse::text("first"),
        ScriptedResponse::text("second"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    h.runtime
        .set_compactor(std::sync::Arc::new(crate::harness::KeepLast));
    let session = h.session().await;
    h.turn(&session, "one").await;
    let before = h.store.session(&session).await.unwrap().revision;
    h.runtime
        .request(ops::Compact {
            session_id: session.clone(),
            instructions: None,
        })
        .await
        .unwrap();
    let dir = h.session_dir(&session);
    let frozen = dir.join("report").join(format!("compaction-{before}"));
    assert!(frozen.join("llm-call.json").is_file() && frozen.join("llm-calls.jsonl").is_file());
    assert!(!dir.join("report").join("llm-calls.jsonl").exists());
    h.turn(&session, "two").await;
    // Steps go on numbering across the compaction; the old one is found in the frozen log,
    // built on the history as it was before.
    let old = keel_extensions::report::replay::find(&dir, session.as_str(), Some(1)).unwrap();
    assert_eq!(old.revision, Some(before));
    let new = keel_extensions::report::replay::find(&dir, session.as_str(), None).unwrap();
    assert_eq!((new.record.step, new.revision), (2, None));
}
