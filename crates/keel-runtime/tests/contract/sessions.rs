//! Sessions side by side, the lifecycle operations, and the deferred contract.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::ops;
use keel_protocol::{
    ItemBody, ItemEvent, Op, SessionEventBody, SessionTarget, TurnOutcome, TurnSource,
};
use keel_runtime::{ContractExt, ConversationContract, DeferredContract};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Echo, Gate, Harness, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_run_at_once_without_cross_talk() {
    let h = Harness::start(Setup {
        model: Arc::new(Echo),
        interactive: false,
        permission: None,
        tools: Vec::new(),
        extensions: Vec::new(),
        host_extensions: Vec::new(),
        rules: None,
    })
    .await;
    let a = h.session().await;
    let b = h.session().await;
    let mut events_a = h.watch(&a).await;
    let mut events_b = h.watch(&b).await;
    let turn_a = h.submit(&a, "alpha").await;
    let turn_b = h.submit(&b, "bravo").await;
    let (ids_a, ids_b) = (turn_a.turn_id.clone(), turn_b.turn_id.clone());
    let (report_a, report_b) = tokio::join!(turn_a.wait(), turn_b.wait());
    assert_eq!(report_a.unwrap().final_text(), "echo: alpha");
    assert_eq!(report_b.unwrap().final_text(), "echo: bravo");
    events_a.turn_end(&ids_a).await;
    events_b.turn_end(&ids_b).await;
    // Each stream carries only its own session's turn and text.
    for (events, session, turn, text) in [
        (&events_a, &a, &ids_a, "echo: alpha"),
        (&events_b, &b, &ids_b, "echo: bravo"),
    ] {
        assert!(events.seen.iter().all(|e| &e.session_id == session));
        let seqs: Vec<u64> = events.seen.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (seqs[0]..seqs[0] + seqs.len() as u64).collect::<Vec<_>>()
        );
        let completed: Vec<String> = events
            .seen
            .iter()
            .filter_map(|e| match &e.body {
                SessionEventBody::Item {
                    turn_id,
                    event: ItemEvent::Completed { item },
                } => {
                    assert_eq!(turn_id, turn);
                    match &item.body {
                        ItemBody::AgentMessage { text } => Some(text.clone()),
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect();
        assert_eq!(completed, [text]);
    }
    assert_eq!(
        h.history(&a).await,
        [
            ("user".to_owned(), "alpha".to_owned()),
            ("assistant".to_owned(), "echo: alpha".to_owned())
        ]
    );
}

#[tokio::test]
async fn lifecycle_operations_change_the_session_and_wait_for_a_running_turn() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::text("first"),
        ScriptedResponse::tool_call("c1", "gate", json!({})),
        ScriptedResponse::text("second"),
    ]));
    let gate = Gate::new();
    let h = Harness::start(Setup::gated(&provider, &gate)).await;
    let session = h.session().await;
    h.submit(&session, "one").await.wait().await.unwrap();
    let updated = h
        .runtime
        .request(ops::UpdateSession {
            session_id: session.clone(),
            title: Some("Renamed".into()),
            model: None,
            mode: Some(keel_protocol::PermissionMode::Plan),
            thinking: None,
        })
        .await
        .unwrap();
    assert_eq!(updated.title, "Renamed");
    // A mode the protocol does not know never becomes an operation.
    let bad_mode = serde_json::from_value::<Op>(serde_json::json!({
        "op": "update_session", "session_id": session.as_str(), "mode": "yolo"
    }))
    .unwrap_err();
    assert!(bad_mode.to_string().contains("yolo"), "{bad_mode}");
    let fixed_model = h
        .runtime
        .request(ops::UpdateSession {
            session_id: session.clone(),
            title: None,
            model: Some("openai/gpt-5".into()),
            mode: None,
            thinking: None,
        })
        .await
        .unwrap_err();
    assert_eq!(fixed_model.code(), "unsupported");
    let revisions = h
        .runtime
        .request(ops::ListRevisions {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    // A turn is running: rewinding or deleting under it is refused.
    h.runtime
        .request(ops::UpdateSession {
            session_id: session.clone(),
            title: None,
            model: None,
            mode: Some(keel_protocol::PermissionMode::Auto),
            thinking: None,
        })
        .await
        .unwrap();
    let turn = h.submit(&session, "two").await;
    gate.wait_started().await;
    for op in [
        Op::RewindSession(ops::RewindSession {
            session_id: session.clone(),
            revision: revisions[0],
        }),
        Op::DeleteSession(ops::DeleteSession {
            session_id: session.clone(),
        }),
    ] {
        let refused = h.runtime.call(op).await.unwrap_err();
        assert_eq!(refused.code(), "turn_running");
    }
    gate.release.notify_one();
    let report = turn.wait().await.unwrap();
    assert_eq!(report.outcome, TurnOutcome::Completed);
    // Rewound to after the first turn, the next turn sees only that history.
    let first_turn_end = revisions[revisions.len() - 1];
    h.runtime
        .request(ops::RewindSession {
            session_id: session.clone(),
            revision: first_turn_end,
        })
        .await
        .unwrap();
    assert_eq!(h.history(&session).await.len(), 2);
    let forked = h
        .runtime
        .request(ops::ForkSession {
            session_id: session.clone(),
            revision: None,
        })
        .await
        .unwrap();
    assert_eq!(h.history(&forked.id).await.len(), 2);
    h.runtime
        .request(ops::DeleteSession {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    assert_eq!(
        h.runtime
            .request(ops::GetSession {
                session_id: session.clone()
            })
            .await
            .unwrap_err()
            .code(),
        "not_found"
    );
}

#[tokio::test]
async fn a_resumed_session_gets_its_interrupted_calls_answered_at_its_first_turn() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "picked up",
    )]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    // A session a crashed process left with a call and no result.
    let record = h
        .store
        .create_session(keel_store::NewSession {
            title: "crashed".into(),
            cwd: "/x".into(),
            model: "m".into(),
            parent_id: None,
        })
        .await
        .unwrap();
    let mut call = keel_protocol::AssistantMessage::from_text("");
    call.content = vec![keel_protocol::ContentBlock::ToolCall(
        keel_protocol::ToolCall {
            id: "c9".into(),
            name: "bash".into(),
            arguments: json!({"command": "make"}),
        },
    )];
    h.store
        .append(
            &record.id,
            "op-crash",
            vec![
                keel_store::Entry::new(keel_protocol::Message::user_text("build it")),
                keel_store::Entry::new(keel_protocol::Message::Assistant(call)),
            ],
        )
        .await
        .unwrap();
    let opened = h
        .runtime
        .request(ops::OpenSession {
            target: SessionTarget::Id {
                id: record.id.to_string(),
            },
        })
        .await
        .unwrap();
    assert_eq!(opened.start, keel_runtime::SessionStart::Resumed);
    // Opening reads only: the open call is still unanswered until a turn runs.
    assert_eq!(h.history(&record.id).await.len(), 2);
    h.submit(&record.id, "continue").await.wait().await.unwrap();
    let history = h.history(&record.id).await;
    assert_eq!(history[2].0, "tool_result");
    assert!(history[2].1.starts_with("interrupted"), "{history:?}");
    assert_eq!(history[3], ("user".to_owned(), "continue".to_owned()));
    assert_eq!(provider.requests()[0].messages.len(), 4);
}

#[tokio::test]
async fn the_deferred_contract_forwards_calls_made_before_it_was_bound() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "late but fine",
    )]));
    let deferred = DeferredContract::new();
    assert!(!deferred.is_bound());
    let early = {
        let deferred = deferred.clone();
        tokio::spawn(async move {
            deferred
                .request(ops::OpenSession {
                    target: SessionTarget::New {
                        title: Some("early".into()),
                    },
                })
                .await
        })
    };
    tokio::task::yield_now().await;
    assert!(!early.is_finished(), "the call waits for a runtime");
    let h = Harness::start(Setup::scripted(&provider)).await;
    deferred.bind(Arc::new(h.runtime.clone())).unwrap();
    let opened = early.await.unwrap().unwrap();
    assert_eq!(opened.record.title, "early");
    let (sink, mut rx) = keel_runtime::channel();
    let _subscription = deferred.subscribe(&opened.record.id, sink).await.unwrap();
    let turn = deferred
        .request(ops::Submit {
            session_id: opened.record.id.clone(),
            text: "hi".into(),
            images: Vec::new(),
            source: TurnSource::Channel("ci".into()),
            output_schema: None,
            time_budget_ms: None,
        })
        .await
        .unwrap();
    assert_eq!(turn.wait().await.unwrap().final_text(), "late but fine");
    let started = rx.recv().await.unwrap();
    assert!(matches!(
        started.body,
        SessionEventBody::TurnStarted { source: TurnSource::Channel(ref name), .. } if name == "ci"
    ));
    assert!(
        deferred.bind(Arc::new(h.runtime.clone())).is_err(),
        "bound once"
    );
}

/// Turn start and end handlers of one extension: the start one fails the first turn, the
/// end one panics every time.
struct Moody {
    starts: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl keel_runtime::extension::TurnStartHook for Moody {
    async fn turn_start(
        &self,
        _scope: &keel_runtime::extension::TurnScope,
    ) -> Result<(), keel_agent::HookError> {
        if self
            .starts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            == 0
        {
            panic!("the first start panics");
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl keel_runtime::extension::TurnEndHook for Moody {
    async fn turn_end(
        &self,
        _scope: &keel_runtime::extension::TurnScope,
        _outcome: &TurnOutcome,
    ) -> Result<(), keel_agent::HookError> {
        panic!("every end panics");
    }
}

#[tokio::test]
async fn a_panicking_turn_handler_fails_only_its_turn_and_the_session_goes_on() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "second try works",
    )]));
    let moody = Arc::new(Moody {
        starts: std::sync::atomic::AtomicUsize::new(0),
    });
    let mut setup = Setup::scripted(&provider);
    setup.extensions = vec![
        keel_runtime::extension::ExtensionBuilder::new("moody")
            .hook(keel_runtime::extension::Hook::TurnStart(moody.clone()))
            .hook(keel_runtime::extension::Hook::TurnEnd(moody))
            .build(),
    ];
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let first = h.submit(&session, "one").await.wait().await.unwrap();
    assert!(
        matches!(&first.outcome, TurnOutcome::Failed { code, message }
            if code.as_str() == "turn_start_failed" && message.contains("panicked")),
        "{:?}",
        first.outcome
    );
    assert_eq!(
        provider.call_count(),
        0,
        "a refused turn makes no model call"
    );
    let second = h.submit(&session, "two").await.wait().await.unwrap();
    assert_eq!(second.outcome, TurnOutcome::Completed);
    assert_eq!(second.final_text(), "second try works");
}

/// What an editor names is taken exactly: no prefix stands for an id, and a session of
/// another working folder is neither opened nor forked here.
#[tokio::test]
async fn an_exact_target_takes_no_prefix_and_no_other_folders_session() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "hello",
    )]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let open = |target: SessionTarget| h.runtime.request(ops::OpenSession { target });
    let here = open(SessionTarget::New { title: None })
        .await
        .unwrap()
        .record;
    // Written in, so closing keeps it.
    h.submit(&here.id, "hi").await.wait().await.unwrap();
    h.runtime
        .request(ops::CloseSession {
            session_id: here.id.clone(),
        })
        .await
        .unwrap();
    let exact = |id: &str| SessionTarget::Exact { id: id.to_owned() };
    assert_eq!(
        open(exact(here.id.as_str())).await.unwrap().record.id,
        here.id
    );
    let prefix = &here.id.as_str()[..here.id.as_str().len() - 3];
    assert_eq!(open(exact(prefix)).await.unwrap_err().code(), "not_found");
    let elsewhere = h
        .store
        .create_session(keel_store::NewSession {
            title: "another project".into(),
            cwd: "/another/project".into(),
            model: "m".into(),
            parent_id: None,
        })
        .await
        .unwrap();
    let refused = open(exact(elsewhere.id.as_str())).await.unwrap_err();
    assert_eq!(refused.code(), "session_in_other_folder");
    assert!(
        refused.to_string().contains("/another/project"),
        "{refused}"
    );
    let fork = h
        .runtime
        .request(ops::ForkSession {
            session_id: elsewhere.id.clone(),
            revision: None,
        })
        .await
        .unwrap_err();
    assert_eq!(fork.code(), "session_in_other_folder");
}

/// A session nobody wrote in leaves nothing when closed; a session takes its title from its
/// first prompt at once, the model may write a better one, and a fork says whose it is.
#[tokio::test]
async fn empty_sessions_vanish_and_titles_come_from_the_prompt_then_the_model() {
    use keel_runtime::ContractExt as _;
    let provider = Arc::new(keel_llm::scripted::ScriptedProvider::with_responses([
        keel_llm::scripted::ScriptedResponse::text("the parser now accepts tabs"),
    ]));
    let h = crate::harness::Harness::start(crate::harness::Setup::scripted(&provider)).await;
    let empty = h.session().await;
    h.runtime
        .request(keel_protocol::ops::CloseSession {
            session_id: empty.clone(),
        })
        .await
        .unwrap();
    assert!(
        h.runtime
            .request(keel_protocol::ops::GetSession { session_id: empty })
            .await
            .is_err(),
        "an empty session is deleted when closed"
    );
    let session = h.session().await;
    let mut watch = h.watch(&session).await;
    crate::harness::ended(
        h.submit(&session, "\n  Fix the parser: it rejects tabs\nthanks")
            .await,
    )
    .await;
    let titled = watch
        .until(|b| matches!(b, keel_protocol::SessionEventBody::SessionUpdated { .. }))
        .await;
    let keel_protocol::SessionEventBody::SessionUpdated { title, .. } = titled.body else {
        unreachable!()
    };
    assert_eq!(title, "Fix the parser: it rejects tabs");
    h.runtime
        .request(keel_protocol::ops::TitleSession {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    let written = watch
        .until(|b| matches!(b, keel_protocol::SessionEventBody::SessionUpdated { title, .. } if title != "Fix the parser: it rejects tabs"))
        .await;
    let keel_protocol::SessionEventBody::SessionUpdated { title, .. } = written.body else {
        unreachable!()
    };
    assert_eq!(title, keel_llm::scripted::TITLE_ANSWER);
    let forked = h
        .runtime
        .request(keel_protocol::ops::ForkSession {
            session_id: session.clone(),
            revision: None,
        })
        .await
        .unwrap();
    assert_eq!(
        forked.title,
        format!("Fork of {}", keel_llm::scripted::TITLE_ANSWER)
    );
    // A session with a conversation stays when closed.
    h.runtime
        .request(keel_protocol::ops::CloseSession {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    assert!(
        h.runtime
            .request(keel_protocol::ops::GetSession {
                session_id: session
            })
            .await
            .is_ok()
    );
}
