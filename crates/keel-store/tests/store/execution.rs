//! Both executions behind the same API, from both runtime flavours.

use keel_store::{Durability, Execution, OpenOptions, Store};
use pretty_assertions::assert_eq;

use crate::{entry, session, texts};

/// Opens a store, commits, reads back and syncs; returns the history's texts.
async fn scenario(path: std::path::PathBuf, options: OpenOptions) -> Vec<String> {
    let store = Store::open(&path, options).await.unwrap();
    let s = session(&store).await;
    for (n, text) in ["fix", "the", "tests"].iter().enumerate() {
        store
            .append(&s.id, format!("op-{n}"), vec![entry(text)])
            .await
            .unwrap();
    }
    store.sync().await.unwrap();
    texts(&store.history(&s.id).await.unwrap())
}

#[test]
fn every_execution_serves_every_runtime_flavour() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = 0;
    for multi_thread in [false, true] {
        let runtime = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        }
        .enable_all()
        .build()
        .unwrap();
        for execution in [Execution::InPlace, Execution::WriterThread] {
            for durability in [Durability::Normal, Durability::Full] {
                runs += 1;
                let path = dir.path().join(format!("{runs}.db"));
                let options = OpenOptions {
                    durability,
                    execution,
                };
                assert_eq!(
                    runtime.block_on(scenario(path, options)),
                    vec!["fix", "the", "tests"],
                    "{execution:?} {durability:?} multi-thread: {multi_thread}"
                );
            }
        }
    }
}
