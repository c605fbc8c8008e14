//! Crash safety: `keel exec` killed with SIGKILL at seeded pseudo-random moments of a multi-step
//! session, then resumed with `--continue`. After every kill the session database passes
//! `PRAGMA integrity_check`, the stored history is a prefix of what the full run stores, nothing
//! the killed process's stream-json output acknowledged is missing, and after the resume every
//! tool call has exactly one result.
//!
//! `KEEL_CRASH_KILLS` (default 32), `KEEL_CRASH_SEED` and `KEEL_CRASH_THREADS` change the loop;
//! `scripts/crash-bench` runs it for 1,000 kill points.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_protocol::{Message, SessionId};
use keel_store::{OpenOptions, Store, StoredEntry, TurnStatus};
use serde_json::Value;

/// Steps of the killed session, each some streamed text and one `bash` call.
const STEPS: usize = 4;
const PROMPT: &str = "walk through the steps";
const FINAL_TEXT: &str = "All steps done.";
const RESUME_PROMPT: &str = "carry on";
const SIGKILL: i32 = 9;
/// What a resumed session's closed tool call says (`exec::persist::INTERRUPTED_RESULT`).
const INTERRUPTED: &str =
    "interrupted: keel stopped before this tool call finished; it may or may not have run";

fn step_text(step: usize) -> String {
    format!("Step {step}: reading the files and planning the next edit.")
}

/// The killed session's script: `STEPS` tool steps, then a final answer.
fn session_script() -> String {
    let mut responses: Vec<Value> = (1..=STEPS)
        .map(|step| {
            serde_json::json!({
                "text": step_text(step),
                "chunk_size": 8,
                "delay_ms": 3,
                "tool_calls": [{"id": format!("c{step}"), "name": "bash",
                    "arguments": {"command": format!("sleep 0.05; echo step {step}")}}],
            })
        })
        .collect();
    responses.push(serde_json::json!({"text": FINAL_TEXT, "chunk_size": 4, "delay_ms": 3}));
    Value::Array(responses).to_string()
}

/// The resuming run's script: one more tool step, then an answer.
fn resume_script() -> String {
    serde_json::json!([
        {"text": "Resuming.", "tool_calls": [{"id": "r1", "name": "bash",
            "arguments": {"command": "echo resumed"}}]},
        {"text": "Finished after the crash."},
    ])
    .to_string()
}

/// A stored message as one comparable line.
/// The summaries of the messages a user sees: hidden reminder messages left out.
fn visible(history: &[StoredEntry]) -> Vec<String> {
    history
        .iter()
        .filter(|e| !e.message.as_user().is_some_and(|u| u.hidden))
        .map(|e| summary(&e.message))
        .collect()
}

fn summary(message: &Message) -> String {
    if let Some(result) = message.as_tool_result() {
        let error = if result.is_error { " (error)" } else { "" };
        return format!(
            "tool_result {}: {}{error}",
            result.tool_call_id,
            result.text()
        );
    }
    if let Some(assistant) = message.as_assistant() {
        let calls: Vec<String> = assistant
            .tool_calls()
            .map(|c| format!("call {} {}", c.id, c.name))
            .collect();
        return format!("assistant {} [{}]", assistant.text(), calls.join(", "));
    }
    let value = serde_json::to_value(message).unwrap();
    let text: Vec<&str> = value["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect();
    format!("{} {}", message.role(), text.join(""))
}

fn user(text: &str) -> String {
    format!("user {text}")
}

fn assistant(text: &str, call: Option<&str>) -> String {
    let calls = call.map(|id| format!("call {id} bash")).unwrap_or_default();
    format!("assistant {text} [{calls}]")
}

fn result(call: &str, text: &str) -> String {
    format!("tool_result {call}: {text}")
}

/// Everything the uninterrupted session stores, in order.
fn full_history() -> Vec<String> {
    let mut all = vec![user(PROMPT)];
    for step in 1..=STEPS {
        let call = format!("c{step}");
        all.push(assistant(&step_text(step), Some(&call)));
        all.push(result(&call, &format!("step {step}\n")));
    }
    all.push(assistant(FINAL_TEXT, None));
    all
}

/// How many leading messages of `full_history` the printed events prove were committed.
///
/// The runner prints an event before it commits the message the event describes, so an event
/// proves only what was committed before the work it reports began: a started tool call proves
/// its assistant message (tools run after the message is stored), the start of step `k`'s text
/// proves every earlier step's tool result (the next request follows their commit), and
/// `turn.completed` proves the whole history.
fn acknowledged(events: &[Value]) -> usize {
    let mut count = 0;
    let mut answers = 0;
    for event in events {
        let item = &event["item"];
        let proved = match (event["type"].as_str(), item["type"].as_str()) {
            (Some("turn.completed" | "exec.completed"), _) => full_history().len(),
            (Some("item.started"), Some("agent_message")) => {
                answers += 1;
                // The prompt, then both messages of each step before this one.
                1 + 2 * (answers - 1)
            }
            (Some("item.started"), Some("tool_call")) => {
                let call = item["call_id"].as_str().unwrap();
                let step: usize = call.trim_start_matches('c').parse().unwrap();
                2 * step
            }
            _ => 0,
        };
        count = count.max(proved);
    }
    count
}

/// Complete JSON lines of what the killed process printed (a torn last line is dropped).
fn printed_events(stdout: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(stdout);
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// One trial's folders: the session database and the working folder.
struct Trial {
    dir: tempfile::TempDir,
    work: PathBuf,
}

impl Trial {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(dir.path().join("session.json"), session_script()).unwrap();
        std::fs::write(dir.path().join("resume.json"), resume_script()).unwrap();
        Self { dir, work }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("sessions.db")
    }

    fn exec(&self, script: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .env("KEEL_HOME", "/nonexistent")
            .env("KEEL_SESSIONS_DB", self.db())
            .arg("exec")
            .arg("--cwd")
            .arg(&self.work)
            .arg("--mock-script")
            .arg(self.dir.path().join(script))
            .args(["--output-format", "stream-json"])
            .args(extra);
        command
    }

    /// Runs the session, sending SIGKILL after `delay` unless it ended first; returns whether
    /// the kill landed, and the events printed before it.
    fn run_and_kill(&self, delay: Duration) -> (bool, Vec<Value>) {
        let mut child = self
            .exec("session.json", &[PROMPT])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            stdout.read_to_end(&mut bytes).unwrap();
            bytes
        });
        let deadline = Instant::now() + delay;
        let mut ended = false;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            if child.try_wait().unwrap().is_some() {
                ended = true;
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(2)));
        }
        if !ended {
            // It may still end between the check and the kill; the status tells.
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        let killed = status.signal() == Some(SIGKILL);
        if !killed {
            assert!(
                status.success(),
                "the uninterrupted session failed: {status}"
            );
        }
        (killed, printed_events(&reader.join().unwrap()))
    }
}

/// The database as a crash left it, and what the checks found.
struct Inspect {
    sessions: Vec<SessionId>,
    history: Vec<StoredEntry>,
    running_turns: usize,
    turns: usize,
}

fn inspect(runtime: &tokio::runtime::Runtime, db: &Path) -> Option<Inspect> {
    if !db.exists() {
        return None;
    }
    runtime.block_on(async {
        let store = Store::open(db, OpenOptions::default()).await.unwrap();
        let integrity = store.integrity_check().await.unwrap();
        assert_eq!(integrity, "ok", "PRAGMA integrity_check");
        let sessions: Vec<SessionId> = store
            .list_sessions(None, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert!(
            sessions.len() <= 1,
            "one run made {} sessions",
            sessions.len()
        );
        let Some(id) = sessions.first() else {
            return Some(Inspect {
                sessions,
                history: Vec::new(),
                running_turns: 0,
                turns: 0,
            });
        };
        let record = store.session(id).await.unwrap();
        let revisions = store.commit_revisions(id).await.unwrap();
        let contiguous: Vec<u64> = (1..=revisions.len() as u64).collect();
        assert_eq!(
            revisions, contiguous,
            "commit revisions are contiguous from 1"
        );
        assert_eq!(record.revision, revisions.len() as u64, "head revision");
        let history = store.history(id).await.unwrap();
        let mut last = 0;
        for entry in &history {
            assert!(
                entry.revision >= last && entry.revision <= record.revision,
                "entry revisions are ordered and committed: {} after {last}, head {}",
                entry.revision,
                record.revision
            );
            last = entry.revision;
        }
        let turns = store.turns(id).await.unwrap();
        let running_turns = turns
            .iter()
            .filter(|t| t.status == TurnStatus::Running)
            .count();
        Some(Inspect {
            sessions,
            turns: turns.len(),
            history,
            running_turns,
        })
    })
}

/// What one kill point left behind, for the summary.
#[derive(Debug, Default)]
struct Outcome {
    killed: bool,
    stored: usize,
    acknowledged: usize,
    closed_calls: usize,
}

/// Kills the session after `delay`, checks what is left, resumes and checks the end result.
fn kill_and_resume(runtime: &tokio::runtime::Runtime, delay: Duration) -> Outcome {
    let trial = Trial::new();
    let (killed, events) = trial.run_and_kill(delay);
    let expected = full_history();
    let proved = acknowledged(&events);
    let context = format!("killed after {delay:?}, {} events printed", events.len());

    let found = inspect(runtime, &trial.db());
    let Some(found) = found.filter(|f| !f.sessions.is_empty()) else {
        // Killed before the session existed: nothing may have been acknowledged.
        assert!(
            !events.iter().any(|e| e["type"] == "session.started"),
            "{context}: session.started printed but no session stored"
        );
        return Outcome {
            killed,
            ..Outcome::default()
        };
    };
    // The conversation, without the hidden reminders keel adds to prompts.
    let stored: Vec<String> = visible(&found.history);
    assert!(
        stored.len() <= expected.len() && stored[..] == expected[..stored.len()],
        "{context}: stored history is not a prefix of the full one:\n{stored:#?}"
    );
    assert!(
        stored.len() >= proved,
        "{context}: the output acknowledged {proved} messages, the store has {}:\n{stored:#?}",
        stored.len()
    );
    if !killed {
        assert_eq!(
            stored, expected,
            "{context}: the finished run stored everything"
        );
        assert_eq!(found.running_turns, 0);
        return Outcome {
            killed,
            stored: stored.len(),
            acknowledged: proved,
            closed_calls: 0,
        };
    }

    // Resume: the killed turn is closed, an unanswered call gets its "interrupted" result.
    let output = trial
        .exec("resume.json", &["--continue", RESUME_PROMPT])
        .output()
        .unwrap();
    if found.history.is_empty() && found.turns == 0 && !output.status.success() {
        // Killed after the session was made and before anything was written in it: it
        // has no conversation, so there is nothing to continue.
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("no session to continue"),
            "{context}: {stderr}"
        );
        return Outcome {
            killed,
            ..Outcome::default()
        };
    }
    assert!(
        output.status.success(),
        "{context}: resume failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let resumed = printed_events(&output.stdout);
    assert_eq!(resumed[1]["type"], "session.resumed", "{context}");
    assert_eq!(
        resumed[0]["session_id"].as_str(),
        Some(found.sessions[0].as_str())
    );
    let after = inspect(runtime, &trial.db()).unwrap();
    assert_eq!(after.sessions, found.sessions, "{context}");
    assert_eq!(after.running_turns, 0, "{context}: a turn is left running");
    assert_eq!(after.turns, found.turns + 1, "{context}");
    for (before, now) in found.history.iter().zip(&after.history) {
        assert_eq!(
            before.id, now.id,
            "{context}: the resume kept the stored prefix"
        );
    }

    let mut want = stored.clone();
    let unanswered = found
        .history
        .last()
        .and_then(|e| e.message.as_assistant())
        .map(|a| a.tool_calls().map(|c| c.id.to_string()).collect::<Vec<_>>())
        .unwrap_or_default();
    for call in &unanswered {
        want.push(format!("{} (error)", result(call, INTERRUPTED)));
    }
    want.extend([
        user(RESUME_PROMPT),
        assistant("Resuming.", Some("r1")),
        result("r1", "resumed\n"),
        assistant("Finished after the crash.", None),
    ]);
    let final_history: Vec<String> = visible(&after.history);
    pretty_assertions::assert_eq!(final_history, want, "{}", context);
    every_call_has_one_result(&after.history, &context);
    Outcome {
        killed,
        stored: stored.len(),
        acknowledged: proved,
        closed_calls: unanswered.len(),
    }
}

fn every_call_has_one_result(history: &[StoredEntry], context: &str) {
    let mut calls: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (index, entry) in history.iter().enumerate() {
        if let Some(assistant) = entry.message.as_assistant() {
            for call in assistant.tool_calls() {
                let slot = calls.entry(call.id.to_string()).or_default();
                slot.0 += 1;
                assert!(slot.0 == 1, "{context}: call {} made twice", call.id);
            }
        }
        if let Some(result) = entry.message.as_tool_result() {
            let slot = calls
                .get_mut(result.tool_call_id.as_str())
                .unwrap_or_else(|| {
                    panic!(
                        "{context}: result {index} answers no earlier call {}",
                        result.tool_call_id
                    )
                });
            slot.1 += 1;
        }
    }
    for (id, (_, results)) in calls {
        assert_eq!(results, 1, "{context}: call {id} has {results} results");
    }
}

/// A small seeded generator (splitmix64), so every run kills at the same moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A fraction in [0, 1).
    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn sigkill_at_random_moments_then_resume_loses_nothing() {
    let kills_wanted = env_number("KEEL_CRASH_KILLS", 32) as usize;
    let seed = env_number("KEEL_CRASH_SEED", 0x6b65_656c);
    let threads = env_number("KEEL_CRASH_THREADS", 2).max(1);
    let started = Instant::now();

    // The uninterrupted session: its stored history is exactly the expected one, and its
    // length in time is the range the kills are spread over.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let clock = Instant::now();
    let (killed, _) = Trial::new().run_and_kill(Duration::from_secs(60));
    let span = clock.elapsed();
    assert!(!killed);
    let outcome = kill_and_resume(&runtime, Duration::from_secs(60));
    assert!(!outcome.killed && outcome.stored == full_history().len());

    let per_thread = kills_wanted.div_ceil(threads as usize);
    let workers: Vec<_> = (0..threads)
        .map(|index| {
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let mut rng = Rng(seed ^ index.wrapping_mul(0x1234_5678_9abc_def1));
                let mut outcomes = Vec::new();
                // Kills that land after the process ended do not count; give up eventually.
                let mut attempts = 0;
                while outcomes.iter().filter(|o: &&Outcome| o.killed).count() < per_thread
                    && attempts < per_thread * 3
                {
                    attempts += 1;
                    let delay = span.mul_f64(rng.fraction());
                    outcomes.push(kill_and_resume(&runtime, delay));
                }
                outcomes
            })
        })
        .collect();
    let outcomes: Vec<Outcome> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();

    let kills: Vec<&Outcome> = outcomes.iter().filter(|o| o.killed).collect();
    let mut by_length = BTreeMap::new();
    for outcome in &kills {
        *by_length.entry(outcome.stored).or_insert(0) += 1;
    }
    let closed: usize = kills.iter().map(|o| o.closed_calls).sum();
    let acknowledged: usize = kills.iter().map(|o| o.acknowledged).sum();
    let stored: usize = kills.iter().map(|o| o.stored).sum();
    eprintln!(
        "crash summary: {} kill points ({} runs ended first), {closed} interrupted tool calls \
closed, {stored} messages stored at the kills ({acknowledged} acknowledged by the output), \
stored messages per kill {by_length:?}, session span {span:?}, total {:?}",
        kills.len(),
        outcomes.len() - kills.len(),
        started.elapsed()
    );
    assert!(
        kills.len() >= kills_wanted,
        "only {} of {kills_wanted} kills landed in a running session",
        kills.len()
    );
}
