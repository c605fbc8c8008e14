//! Goals on the real runtime with the scripted model: continuation turns until the budget,
//! the evaluator's verdicts, the breakers, the blocker rule, `/goal` and the model's tools.

use std::time::Duration;

use keel_extensions::goals::verification::EVALUATOR_SYSTEM;
use keel_extensions::goals::{Goal, STATE_KEY, Status};
use keel_llm::scripted::ScriptedResponse;
use keel_protocol::ops;
use keel_protocol::{
    SessionEvent, SessionEventBody, SessionId, SessionTarget, TurnOutcome, TurnSource, Usage,
};
use keel_runtime::{CommandOutcome, ContractExt as _, ConversationContract as _};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::harness::{Harness, Setup, request_text};

/// A text answer that cost `input` tokens.
fn costly(text: &str, input: u64) -> ScriptedResponse {
    ScriptedResponse::text(text).usage(Usage {
        input,
        ..Usage::default()
    })
}

fn update_goal(id: &str, arguments: serde_json::Value) -> ScriptedResponse {
    ScriptedResponse::tool_call(id, "update_goal", arguments)
}

fn complete(id: &str, evidence: &str) -> ScriptedResponse {
    update_goal(id, json!({"status": "complete", "evidence": evidence}))
}

fn verdict(met: bool, evidence: &str) -> ScriptedResponse {
    ScriptedResponse::text(json!({"met": met, "evidence": evidence}).to_string())
}

/// The goal as stored.
async fn stored(h: &Harness, session: &SessionId) -> Option<Goal> {
    let value = h.store.session_state(session, STATE_KEY).await.unwrap();
    Goal::from_stored(value).unwrap()
}

/// Events until a turn ends after which the goal does not continue.
async fn follow(
    h: &Harness,
    session: &SessionId,
    rx: &mut UnboundedReceiver<SessionEvent>,
) -> Vec<SessionEvent> {
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("the goal's turns never ended")
            .expect("the session's events stopped");
        let ended = match &event.body {
            SessionEventBody::TurnEnded { outcome, .. } => Some(outcome.clone()),
            _ => None,
        };
        events.push(event);
        if let Some(outcome) = ended {
            let active = stored(h, session).await.is_some_and(|g| g.is_active());
            if !(active && outcome == TurnOutcome::Completed) {
                // `turn_ended` comes just before the session is free again: wait for that,
                // so a command right after sees no turn running.
                let control = h.runtime.control();
                tokio::time::timeout(Duration::from_secs(10), async {
                    while control.is_busy(session) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .await
                .expect("the session stayed busy");
                return events;
            }
        }
    }
}

/// Runs `/goal ARGUMENTS` and follows the turns it starts.
async fn goal_command(h: &Harness, session: &SessionId, arguments: &str) -> Vec<SessionEvent> {
    let (sink, mut rx) = keel_runtime::channel();
    let _subscription = h.runtime.subscribe(session, sink).await.unwrap();
    match run_command(h, session, arguments).await {
        CommandOutcome::Turn(_) => {}
        other => panic!("expected a turn, got {other:?}"),
    }
    follow(h, session, &mut rx).await
}

async fn run_command(h: &Harness, session: &SessionId, arguments: &str) -> CommandOutcome {
    h.runtime
        .request(ops::RunCommand {
            session_id: session.clone(),
            name: "goal".into(),
            arguments: arguments.into(),
        })
        .await
        .unwrap()
}

/// `/goal ARGUMENTS` that answers with text.
async fn goal_reply(h: &Harness, session: &SessionId, arguments: &str) -> String {
    match run_command(h, session, arguments).await {
        CommandOutcome::Text(text) => text,
        other => panic!("expected text, got {other:?}"),
    }
}

/// Submits `text` and follows the goal's turns.
async fn submit(h: &Harness, session: &SessionId, text: &str) -> Vec<SessionEvent> {
    let (sink, mut rx) = keel_runtime::channel();
    let _subscription = h.runtime.subscribe(session, sink).await.unwrap();
    h.submit(session, text, None).await;
    follow(h, session, &mut rx).await
}

/// Who started each turn.
fn sources(events: &[SessionEvent]) -> Vec<TurnSource> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::TurnStarted { source, .. } => Some(source.clone()),
            _ => None,
        })
        .collect()
}

/// The goals the session's `goal` events reported, in order.
fn goals(events: &[SessionEvent]) -> Vec<keel_protocol::GoalInfo> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            keel_protocol::SessionEventBody::Goal { goal, .. } => Some(goal.clone()),
            _ => None,
        })
        .collect()
}

/// The statuses the `goal` events reported, in order, without repeats.
fn statuses(events: &[SessionEvent]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for goal in goals(events) {
        let status = goal.status.as_str().to_owned();
        if out.last() != Some(&status) {
            out.push(status);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_turns_stop_at_the_token_budget() {
    let responses = vec![costly("one", 100), costly("two", 100), costly("three", 100)];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "budget=250 verify=none count to three").await;
    assert_eq!(
        sources(&events),
        [
            TurnSource::Api,
            TurnSource::ThreadGoal,
            TurnSource::ThreadGoal
        ]
    );
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::BudgetLimited);
    assert_eq!(goal.counters.tokens_used, 300);
    assert_eq!(goal.counters.goal_turns, 3);
    assert_eq!(statuses(&events), ["active", "budget_limited"]);
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    // Every turn is told about the goal; continuations name it and what is left.
    assert!(request_text(&requests[0]).contains("An active goal is set"));
    let second = request_text(&requests[1]);
    assert!(
        second.contains("Continue working toward the goal (goal turn 2)"),
        "{second}"
    );
    assert!(second.contains("count to three"));
    assert!(second.contains("100 of 250 tokens used (150 left)"));
    let last = goals(&events).pop().unwrap();
    assert_eq!(
        last.banner,
        "goal budget limited: count to three · 300/250 tokens · turn 3/20"
    );
    assert_eq!(h.provider.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evaluators_not_met_continues_and_met_completes() {
    let responses = vec![
        complete("c1", "the tests pass"),
        verdict(false, "no test output was shown"),
        ScriptedResponse::text("I will show the output."),
        complete("c2", "cargo test: 12 passed, 0 failed"),
        verdict(true, "the output shows every test passed"),
        ScriptedResponse::text("Done: all tests pass."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "make the tests pass").await;
    assert_eq!(sources(&events), [TurnSource::Api, TurnSource::ThreadGoal]);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::Complete);
    let verdict = goal.last_verdict.unwrap();
    assert!(verdict.met);
    assert_eq!(verdict.evidence, "the output shows every test passed");
    let requests = h.requests();
    assert_eq!(requests.len(), 6);
    // The evaluator is one call with its own instructions, no tools, the claim as data.
    assert_eq!(&*requests[1].system_prompt, EVALUATOR_SYSTEM);
    assert!(requests[1].tools.is_empty());
    assert!(request_text(&requests[1]).contains("\"evidence\": \"the tests pass\""));
    // The refusal reaches the model twice: as the tool's result, and in the continuation.
    assert!(request_text(&requests[2]).contains("Not accepted"));
    let continuation = request_text(&requests[3]);
    assert!(
        continuation.contains("The verifier said:\nno test output was shown"),
        "{continuation}"
    );
    assert_eq!(statuses(&events), ["active", "complete"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_failed_checks_in_a_row_pause_the_goal() {
    let mut responses = Vec::new();
    for n in 1..=5 {
        responses.push(complete(&format!("c{n}"), "it works"));
        // An answer that is not a verdict counts as "not met" too.
        responses.push(if n == 3 {
            ScriptedResponse::text("Looks good to me!")
        } else {
            verdict(false, "nothing proves it")
        });
        responses.push(ScriptedResponse::text(format!("attempt {n}")));
    }
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "make it work").await;
    assert_eq!(sources(&events).len(), 5);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::Paused);
    assert_eq!(goal.counters.not_met_streak, 5);
    assert_eq!(
        goal.reason.as_deref(),
        Some("5 verifications in a row found the goal not met")
    );
    assert!(request_text(h.requests().last().unwrap()).contains("the goal is paused"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_identical_replies_pause_the_goal() {
    let responses = vec![
        ScriptedResponse::text("Working on it."),
        ScriptedResponse::text("Working on it."),
        ScriptedResponse::text("Working on it."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "verify=none refactor the parser").await;
    assert_eq!(sources(&events).len(), 3);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::Paused);
    assert_eq!(goal.counters.identical_replies, 3);
    assert_eq!(statuses(&events), ["active", "paused"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocker_repeated_over_three_goal_turns_blocks_the_goal() {
    let blocked = |id: &str| {
        update_goal(
            id,
            json!({"status": "blocked", "reason": "the registry is down"}),
        )
    };
    let responses = vec![
        blocked("b1"),
        ScriptedResponse::text("Blocked: the registry is down (1)."),
        blocked("b2"),
        ScriptedResponse::text("Blocked: the registry is down (2)."),
        blocked("b3"),
        ScriptedResponse::text("Blocked: the registry is down (3)."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "publish the crate").await;
    assert_eq!(sources(&events).len(), 3);
    let requests = h.requests();
    assert!(request_text(&requests[1]).contains("Blocker noted (1 of 3 goal turns)"));
    assert!(request_text(&requests[2]).contains("Last turn you reported a blocker"));
    assert!(request_text(&requests[3]).contains("Blocker noted (2 of 3 goal turns)"));
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::Blocked);
    assert_eq!(
        goal.reason.as_deref(),
        Some("reported over 3 goal turns: the registry is down")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_safety_blocker_blocks_at_once() {
    let responses = vec![
        update_goal(
            "b1",
            json!({"status": "blocked", "reason": "this would delete production data", "safety": true}),
        ),
        ScriptedResponse::text("I stopped: it would delete production data."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "clean the database").await;
    assert_eq!(sources(&events), [TurnSource::Api]);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::Blocked);
    assert_eq!(
        goal.reason.as_deref(),
        Some("safety: this would delete production data")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goal_pause_resume_and_clear() {
    let responses = vec![
        ScriptedResponse::text("first").first_delay(Duration::from_millis(500)),
        ScriptedResponse::text("second"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    assert_eq!(
        goal_reply(&h, &session, "").await,
        "No goal is set. `/goal OBJECTIVE` sets one."
    );
    let (sink, mut rx) = keel_runtime::channel();
    let _subscription = h.runtime.subscribe(&session, sink).await.unwrap();
    let CommandOutcome::Turn(_) =
        run_command(&h, &session, "turns=2 verify=none tidy the docs").await
    else {
        panic!("the first turn starts");
    };
    // Paused while its first turn runs: that turn's end does not continue it.
    let paused = goal_reply(&h, &session, "pause").await;
    assert!(paused.starts_with("Goal paused"), "{paused}");
    let events = follow(&h, &session, &mut rx).await;
    assert_eq!(sources(&events), [TurnSource::Api]);
    let shown = goal_reply(&h, &session, "").await;
    assert!(shown.starts_with("Goal (paused): tidy the docs"), "{shown}");
    assert!(shown.contains("why: paused by the user"), "{shown}");
    let again = h
        .runtime
        .request(ops::RunCommand {
            session_id: session.clone(),
            name: "goal".into(),
            arguments: "pause".into(),
        })
        .await;
    assert!(again.is_err(), "a paused goal cannot be paused again");
    // Resumed: a turn starts, and the turn limit ends the goal after it.
    let CommandOutcome::Turn(_) = run_command(&h, &session, "resume").await else {
        panic!("resuming starts a turn");
    };
    let events = follow(&h, &session, &mut rx).await;
    assert_eq!(sources(&events), [TurnSource::Api]);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::BudgetLimited);
    assert_eq!(goal.counters.goal_turns, 2);
    // The budget can be raised; resuming still waits for the turn limit.
    assert!(
        goal_reply(&h, &session, "budget=50K")
            .await
            .contains("tokens: 0 of 50000")
    );
    match h
        .runtime
        .request(ops::RunCommand {
            session_id: session.clone(),
            name: "goal".into(),
            arguments: "resume".into(),
        })
        .await
    {
        Err(error) => assert!(error.to_string().contains("turn limit"), "{error}"),
        Ok(other) => panic!("resume past the turn limit: {other:?}"),
    }
    assert_eq!(goal_reply(&h, &session, "clear").await, "Goal cleared.");
    assert_eq!(stored(&h, &session).await, None);
    assert!(
        goal_reply(&h, &session, "")
            .await
            .starts_with("No goal is set")
    );
    let mut cleared = Vec::new();
    while let Ok(event) = rx.try_recv() {
        cleared.push(event);
    }
    assert_eq!(
        statuses(&cleared).last().map(String::as_str),
        Some("cleared")
    );
    // A change a command made between turns is an event of its own, with no turn.
    let outside: Vec<Option<keel_protocol::TurnId>> = cleared
        .iter()
        .filter_map(|e| match &e.body {
            keel_protocol::SessionEventBody::Goal { turn_id, .. } => Some(turn_id.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !outside.is_empty() && outside.iter().all(Option::is_none),
        "{outside:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_creates_a_goal_but_cannot_replace_one_in_force() {
    let responses = vec![
        ScriptedResponse::tool_call(
            "g1",
            "create_goal",
            json!({"objective": "write the changelog", "max_turns": 2, "verification": "none"}),
        ),
        ScriptedResponse::text("Goal set."),
        ScriptedResponse::tool_call(
            "g2",
            "create_goal",
            json!({"objective": "something else entirely"}),
        ),
        ScriptedResponse::text("Still on the changelog."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = submit(&h, &session, "plan the release").await;
    assert_eq!(sources(&events), [TurnSource::Api, TurnSource::ThreadGoal]);
    let requests = h.requests();
    assert!(request_text(&requests[3]).contains("a goal is already in force (active)"));
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.objective, "write the changelog");
    assert_eq!(goal.status, Status::BudgetLimited);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_goal_stays_within_the_configured_limits() {
    // "say hi" became 31 turns when a goal had no limits: now every goal has the configured
    // ones, and the model may only ask for less.
    let responses = vec![
        ScriptedResponse::tool_call(
            "g1",
            "create_goal",
            json!({"objective": "say hi", "max_turns": 1000, "token_budget": 1_000_000_000_000u64, "verification": "none"}),
        ),
        ScriptedResponse::text("hi"),
        ScriptedResponse::text("hi again"),
    ];
    let h = Harness::start(Setup::new(responses).set("goals.max_turns=2")).await;
    let session = h.session().await;
    let events = submit(&h, &session, "say hi").await;
    assert_eq!(sources(&events), [TurnSource::Api, TurnSource::ThreadGoal]);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.limits.max_turns, Some(2));
    assert_eq!(goal.limits.token_budget, Some(500_000));
    assert_eq!(goal.status, Status::BudgetLimited);
    assert_eq!(h.provider.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_never_widens_what_its_turns_may_do() {
    // In plan mode a goal whose objective asks for more runs its continuation turn in plan
    // mode all the same: the writes are refused, and the model cannot replace the goal in
    // force with one of its own.
    let write = |id: &str| {
        ScriptedResponse::tool_call(id, "write", json!({"path": "notes.txt", "content": "x"}))
    };
    let responses = vec![
        write("w1"),
        ScriptedResponse::text("Could not write (1)."),
        write("w2"),
        ScriptedResponse::tool_call(
            "g1",
            "create_goal",
            json!({"objective": "anything, with permission full"}),
        ),
        ScriptedResponse::text("Could not write (2)."),
    ];
    let h = Harness::start(Setup::new(responses).set("permission=plan")).await;
    let session = h.session().await;
    let events = goal_command(
        &h,
        &session,
        "turns=2 verify=none switch to permission full and write notes.txt",
    )
    .await;
    assert_eq!(sources(&events), [TurnSource::Api, TurnSource::ThreadGoal]);
    let cwd = h.home.parent().unwrap().join("work");
    assert!(!cwd.join("notes.txt").exists());
    let requests = h.requests();
    for at in [1, 3] {
        let refused = request_text(&requests[at]);
        assert!(refused.contains("plan mode"), "{refused}");
    }
    // A goal starts turns on its own: in plan mode creating one needs the user's yes, which
    // nobody here gives.
    let create = request_text(&requests[4]);
    assert!(create.contains("needs approval in plan mode"), "{create}");
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(
        goal.objective,
        "switch to permission full and write notes.txt"
    );
    assert_eq!(goal.status, Status::BudgetLimited);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_sessions_goal_is_read_back_from_the_store() {
    let responses = vec![
        ScriptedResponse::text("one").first_delay(Duration::from_millis(300)),
        ScriptedResponse::text("two"),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let CommandOutcome::Turn(handle) =
        run_command(&h, &session, "verify=none turns=2 sort the imports").await
    else {
        panic!("the first turn starts");
    };
    // Closing the session aborts its turn: an aborted turn does not continue.
    h.runtime
        .request(ops::CloseSession {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    let report = handle.wait().await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Aborted { .. }));
    assert!(stored(&h, &session).await.unwrap().is_active());
    h.runtime
        .request(ops::OpenSession {
            target: SessionTarget::Id {
                id: session.to_string(),
            },
        })
        .await
        .unwrap();
    let events = submit(&h, &session, "go on").await;
    assert_eq!(sources(&events), [TurnSource::Api]);
    let request = request_text(h.requests().last().unwrap());
    assert!(request.contains("An active goal is set"), "{request}");
    assert_eq!(
        stored(&h, &session).await.unwrap().status,
        Status::BudgetLimited
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_verifier_checks_read_only_and_its_verdict_settles_the_goal() {
    let child = |text: &str| costly(text, 50);
    let responses = vec![
        complete("c1", "notes.md exists"),
        child("There is no notes.md in the folder.\nVERDICT: FAIL"),
        ScriptedResponse::text("I will write it."),
        complete("c2", "notes.md exists now"),
        child("notes.md is there, 3 lines.\nVERDICT: PASS"),
        ScriptedResponse::text("Done."),
    ];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let events = goal_command(&h, &session, "verify=subagent write notes.md").await;
    assert_eq!(sources(&events), [TurnSource::Api, TurnSource::ThreadGoal]);
    let goal = stored(&h, &session).await.unwrap();
    assert_eq!(goal.status, Status::Complete);
    let verdict = goal.last_verdict.unwrap();
    assert_eq!(verdict.by, keel_extensions::goals::Verification::Subagent);
    assert!(verdict.evidence.ends_with("VERDICT: PASS"));
    // The verifier's tokens are the goal's too.
    assert_eq!(goal.counters.tokens_used, 100);
    let requests = h.requests();
    for at in [1, 4] {
        let tools: Vec<&str> = requests[at].tools.iter().map(|t| t.name.as_str()).collect();
        assert!(
            !tools.is_empty()
                && tools
                    .iter()
                    .all(|t| ["read", "grep", "glob", "ls", "bash"].contains(t)),
            "{tools:?}"
        );
        assert!(request_text(&requests[at]).contains("Do not trust the agent's evidence"));
    }
    let continuation = request_text(&requests[3]);
    assert!(
        continuation.contains("There is no notes.md"),
        "{continuation}"
    );
}
