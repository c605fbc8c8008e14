//! Crash test: a child process (this test binary, re-run with an environment switch) commits in
//! a loop and prints each acknowledged revision; the parent kills it with SIGKILL at random
//! moments, reopens the file and checks it is sound, that nothing acknowledged was lost and that
//! history is a valid prefix.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_protocol::MessageId;
use keel_store::{Entry, NewSession, OpenOptions, Store};

use crate::{texts, user};

const CHILD_SWITCH: &str = "KEEL_STORE_CRASH_CHILD_DB";
const KILL_POINTS: usize = 32;

/// The child side: does nothing in a normal run.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_SWITCH) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = Store::open(&path, OpenOptions::default()).await.unwrap();
        let session = match store.list_sessions(None, 1).await.unwrap().pop() {
            Some(session) => session,
            None => store
                .create_session(NewSession {
                    cwd: "/crash".into(),
                    ..NewSession::default()
                })
                .await
                .unwrap(),
        };
        let mut next = session.revision + 1;
        loop {
            let entries = vec![Entry {
                id: MessageId::new(format!("m{next}")),
                message: user(&format!("msg {next}")),
            }];
            let receipt = store
                .append(&session.id, format!("op{next}"), entries)
                .await
                .unwrap();
            println!("ack {}", receipt.revision);
            next = receipt.revision + 1;
        }
    });
}

/// xorshift64*, seeded from the clock: random kill moments without an RNG crate.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[test]
fn acknowledged_commits_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel.db");
    let exe = std::env::current_exe().unwrap();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let mut all_acks = 0usize;
    for point in 0..KILL_POINTS {
        let mut child = Command::new(&exe)
            .args([
                "crash::crash_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_SWITCH, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let acks = Arc::new(Mutex::new(Vec::<u64>::new()));
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn({
            let acks = Arc::clone(&acks);
            move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(revision) = line.strip_prefix("ack ").and_then(|r| r.parse().ok()) {
                        acks.lock().unwrap().push(revision);
                    }
                }
            }
        });
        std::thread::sleep(Duration::from_millis(30 + next_random(&mut seed) % 150));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        let acks = acks.lock().unwrap().clone();
        all_acks += acks.len();

        runtime.block_on(async {
            let store = Store::open(&path, OpenOptions::default()).await.unwrap();
            assert_eq!(
                store.integrity_check().await.unwrap(),
                "ok",
                "kill point {point}"
            );
            let Some(session) = store.list_sessions(None, 1).await.unwrap().pop() else {
                assert!(acks.is_empty(), "acknowledged commits without a session");
                return;
            };
            let head = session.revision;
            if let Some(last) = acks.iter().max() {
                assert!(
                    *last <= head,
                    "kill point {point}: revision {last} was acknowledged, head is {head}"
                );
            }
            let revisions = store.commit_revisions(&session.id).await.unwrap();
            assert_eq!(
                revisions,
                (1..=head).collect::<Vec<_>>(),
                "kill point {point}"
            );
            let history = store.history(&session.id).await.unwrap();
            let expected: Vec<String> = (1..=head).map(|n| format!("msg {n}")).collect();
            assert_eq!(texts(&history), expected, "kill point {point}");
        });
    }
    eprintln!(
        "{KILL_POINTS} kill points, {all_acks} acknowledged commits, {:?}",
        started.elapsed()
    );
    assert!(
        all_acks > KILL_POINTS,
        "only {all_acks} commits were acknowledged in all"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "crash test took {:?}",
        started.elapsed()
    );
}
