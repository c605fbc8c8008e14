//! `@path` in a typed prompt: the file goes with it where the model could read it without
//! a question; anything else stays a mention.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};

use crate::harness::{Harness, Setup, ended};

#[tokio::test]
async fn a_mentioned_file_goes_with_the_prompt_and_a_credential_does_not() {
    let provider = Arc::new(ScriptedProvider::with_responses([ScriptedResponse::text(
        "read them",
    )]));
    // Ask mode: reading outside the workspace is a question there.
    let mut setup = Setup::scripted(&provider);
    setup.permission = Some(keel_tools::permission::Mode::Ask);
    let h = Harness::start(setup).await;
    let session = h.session().await;
    let work = std::path::PathBuf::from(h.store.session(&session).await.unwrap().cwd);
    std::fs::write(work.join("notes.txt"), "the answer is forty-two\n").unwrap();
    let outside = work.parent().unwrap().join("elsewhere.txt");
    std::fs::write(&outside, "outside words\n").unwrap();
    let prompt = format!(
        "compare @notes.txt with @{} and @missing.txt",
        outside.display()
    );
    ended(h.submit(&session, &prompt).await).await;
    let sent = serde_json::to_string(&provider.requests()[0].messages).unwrap();
    assert!(sent.contains("the answer is forty-two"), "{sent}");
    assert!(sent.contains("<file path=\\\"notes.txt\\\">"), "{sent}");
    assert!(
        !sent.contains("outside words"),
        "a file outside the workspace asks first in ask mode"
    );
    // The user's message stays as typed: the file rides beside it, hidden.
    let stored = h.store.history(&session).await.unwrap();
    let typed = stored
        .iter()
        .find_map(|e| match &e.message {
            keel_protocol::Message::User(u) if !u.hidden => Some(u.joined_text()),
            _ => None,
        })
        .unwrap();
    assert_eq!(typed, prompt);
}
