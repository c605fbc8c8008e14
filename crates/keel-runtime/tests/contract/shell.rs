//! `!command` (`RunShell`): a command the user typed runs as a turn of one call and no model
//! request, under the gate's denials; `!` keeps it as context, `!!` does not.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::{
    ItemBody, ItemEvent, Message, SessionEventBody, ToolCallStatus, TurnOutcome, ops,
};
use keel_runtime::ContractExt as _;

use crate::harness::{Harness, Setup, ended};

async fn run(h: &Harness, session: &keel_protocol::SessionId, command: &str, remember: bool) {
    let turn = h
        .runtime
        .request(ops::RunShell {
            session_id: session.clone(),
            command: command.into(),
            remember,
        })
        .await
        .unwrap();
    assert_eq!(ended(turn).await.outcome, TurnOutcome::Completed);
}

/// The one call item a shell turn showed: its arguments, status and result.
fn shown(events: &[keel_protocol::SessionEvent]) -> (serde_json::Value, ToolCallStatus, String) {
    let mut started = false;
    for event in events {
        if let SessionEventBody::Item { event, .. } = &event.body {
            match event {
                ItemEvent::Started { item } => {
                    assert!(matches!(
                        &item.body,
                        ItemBody::ToolCall { status: ToolCallStatus::InProgress, arguments, .. }
                            if arguments.get("command").is_some()
                    ));
                    started = true;
                }
                ItemEvent::Completed { item } => {
                    assert!(started, "the item starts before it completes");
                    if let ItemBody::ToolCall {
                        arguments,
                        status,
                        result,
                        ..
                    } = &item.body
                    {
                        return (arguments.clone(), *status, result.clone().unwrap());
                    }
                }
                _ => {}
            }
        }
    }
    panic!("no call item in {events:?}")
}

#[tokio::test]
async fn a_typed_command_runs_with_no_model_request_and_only_bang_keeps_it() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "it printed hello",
    )]));
    let h = Harness::start(Setup::scripted(&provider)).await;
    let session = h.session().await;
    let mut watch = h.watch(&session).await;
    run(&h, &session, "  echo hello-from-the-shell  ", true).await;
    watch
        .until(|b| matches!(b, SessionEventBody::TurnEnded { .. }))
        .await;
    let (arguments, status, result) = shown(&watch.seen);
    assert_eq!(arguments["command"], "echo hello-from-the-shell");
    assert_eq!(status, ToolCallStatus::Completed);
    assert!(result.contains("hello-from-the-shell"), "{result}");
    assert!(provider.requests().is_empty(), "no model request for `!`");
    let stored = h.store.history(&session).await.unwrap();
    let [entry] = stored.as_slice() else {
        panic!("one message: {stored:?}")
    };
    let Message::User(user) = &entry.message else {
        panic!("a user message")
    };
    let kept = user.shell.as_ref().unwrap();
    assert_eq!(kept.command, "echo hello-from-the-shell");
    assert_eq!(kept.exit_code, Some(0));
    assert!(
        user.shell_output()
            .unwrap()
            .contains("hello-from-the-shell")
    );

    // `!!` runs the same way and leaves history as it was.
    watch.drain();
    watch.seen.clear();
    run(&h, &session, "echo not-kept", false).await;
    watch
        .until(|b| matches!(b, SessionEventBody::TurnEnded { .. }))
        .await;
    assert!(shown(&watch.seen).2.contains("not-kept"));
    assert_eq!(h.store.history(&session).await.unwrap().len(), 1);

    // The next prompt's request carries the kept command and its output, not the other.
    ended(h.submit(&session, "what did it print?").await).await;
    let requests = provider.requests();
    let sent = serde_json::to_string(&requests[0].messages).unwrap();
    assert!(sent.contains("hello-from-the-shell"), "{sent}");
    assert!(!sent.contains("not-kept"), "{sent}");
    assert!(
        !sent.contains("\"shell\""),
        "the marker is keel's, not the model's"
    );

    // `/retry` asks the typed prompt again, never the command.
    provider.push(ScriptedResponse::text("again"));
    let retried = h
        .runtime
        .request(ops::Retry {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    ended(retried).await;
    let last = provider.requests().pop().unwrap();
    let sent = serde_json::to_string(&last.messages).unwrap();
    assert!(sent.contains("what did it print?"), "{sent}");
}

#[tokio::test]
async fn the_gate_s_denials_hold_for_a_typed_command_and_nothing_else_is_asked() {
    let provider = Arc::new(ScriptedProvider::new());
    let mut setup = Setup::scripted(&provider);
    setup.interactive = true;
    setup.rules = Some("deny:\n  - command_prefix: git push\n");
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let mut watch = h.watch(&session).await;
    run(&h, &session, "git push", true).await;
    watch
        .until(|b| matches!(b, SessionEventBody::TurnEnded { .. }))
        .await;
    let (_, status, result) = shown(&watch.seen);
    assert_eq!(status, ToolCallStatus::Failed, "{result}");
    assert!(result.starts_with("not run:"), "{result}");
    assert!(
        !watch
            .seen
            .iter()
            .any(|e| matches!(e.body, SessionEventBody::PermissionRequested { .. })),
        "typing the command was the approval"
    );
    let work = h.store.session(&session).await.unwrap().cwd;
    assert!(
        !std::path::Path::new(&work)
            .join("made-by-shell.txt")
            .exists()
    );
    // An empty command is refused by name.
    let empty = h
        .runtime
        .request(ops::RunShell {
            session_id: session.clone(),
            command: "   ".into(),
            remember: true,
        })
        .await
        .unwrap_err();
    assert!(
        empty.to_string().contains("no command after `!`"),
        "{empty}"
    );
}
