//! Behaviour tests of keel-store, gathered into one test binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crash;
mod execution;
mod prop;
mod queue;
mod queue_prop;
mod safety;
mod sessions;
mod state;
mod writer;

use keel_protocol::{Message, MessageId, UserMessage};
use keel_store::{Entry, Execution, InputKind, NewSession, OpenOptions, SessionRecord, Store};

/// Every input kind, for claims that take the whole queue.
pub const ALL_KINDS: &[InputKind] = &[InputKind::Steer, InputKind::FollowUp];

/// A store in a fresh temporary folder, opened with the default options (the writer thread).
pub async fn temp_store() -> (tempfile::TempDir, Store) {
    temp_store_with(Execution::WriterThread).await
}

/// A store in a fresh temporary folder whose SQLite work runs as `execution` says. Tests on a
/// paused clock take `InPlace`: while the runtime waits for the writer thread it is idle, and
/// a paused clock then jumps to the next timer, firing timeouts before the work is done.
pub async fn temp_store_with(execution: Execution) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        execution,
        ..OpenOptions::default()
    };
    let store = Store::open(dir.path().join("keel.db"), options)
        .await
        .unwrap();
    (dir, store)
}

/// A user message with a fixed timestamp, so equal texts make equal messages.
pub fn user(text: &str) -> Message {
    Message::User(UserMessage {
        timestamp: 0,
        ..UserMessage::text(text)
    })
}

/// An entry whose id is derived from its text.
pub fn entry(text: &str) -> Entry {
    Entry {
        id: MessageId::new(format!("m-{text}")),
        message: user(text),
    }
}

/// A session in `/work`.
pub async fn session(store: &Store) -> SessionRecord {
    store
        .create_session(NewSession {
            title: "fix the tests".into(),
            cwd: "/work".into(),
            model: "mock/mock-model".into(),
            parent_id: None,
        })
        .await
        .unwrap()
}

/// A session in `/work` whose history is `texts`, one revision each.
pub async fn session_of(store: &Store, texts: &[&str]) -> SessionRecord {
    let s = session(store).await;
    for (n, text) in texts.iter().enumerate() {
        store
            .append(&s.id, format!("op-{n}"), vec![entry(text)])
            .await
            .unwrap();
    }
    s
}

/// The texts of a history, in order.
pub fn texts(history: &[keel_store::StoredEntry]) -> Vec<String> {
    history
        .iter()
        .map(|entry| match &entry.message {
            Message::User(user) => user.content.iter().filter_map(|b| b.as_text()).collect(),
            other => format!("<{}>", other.role()),
        })
        .collect()
}
