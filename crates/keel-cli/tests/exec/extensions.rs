//! The harness's extensions through the real binary: their events in stream-json, the
//! request report rebuilt byte for byte, the feedback bundle, the guard's replay, and the
//! session folder going with its session.

use std::process::Output;

use serde_json::Value;

use crate::sessions::{Home, stderr};
use crate::{Mock, lines};

/// `keel exec` against the mock at `url` as DeepSeek (chat completions), in `home`.
fn exec_http(home: &Home, url: &str, api: &str, extra: &[&str]) -> Output {
    let (model, base) = match api {
        "anthropic" => ("anthropic/claude-sonnet-4-5", url.to_owned()),
        _ => ("deepseek/deepseek-chat", format!("{url}/v1")),
    };
    home.keel()
        .args(["exec", "--model", model, "--base-url", &base])
        .args(extra)
        .env("DEEPSEEK_API_KEY", "sk-report-canary-5150")
        .env("ANTHROPIC_API_KEY", "sk-report-canary-5150")
        .output()
        .unwrap()
}

/// A scripted bash call for `--mock-script`.
fn bash(id: &str, command: &str) -> String {
    serde_json::json!({"tool_calls": [{"id": id, "name": "bash", "arguments": {"command": command}}]})
        .to_string()
}

#[test]
fn extension_events_are_stream_json_lines() {
    let home = Home::new();
    let script = format!(
        "[{}, {}, {}, {{\"text\": \"gave up\"}}]",
        bash("c1", "cat nothing-here.txt"),
        bash("c2", "cat nothing-here.txt"),
        bash("c3", "cat nothing-here.txt")
    );
    let output = home.exec(&script, &["--output-format", "stream-json", "find it"]);
    let events: Vec<Value> = lines(&output.stdout)
        .into_iter()
        .filter(|e| e["type"] == "extension.event")
        .collect();
    let kinds: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["extension"].as_str().unwrap().to_owned(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("runaway-guard".into(), "observation".into()))
            && kinds.contains(&("runaway-guard".into(), "reminder".into())),
        "{kinds:?}"
    );
    let reminder = events.iter().find(|e| e["kind"] == "reminder").unwrap();
    assert_eq!(reminder["details"]["signal"], "no_progress");
    assert!(reminder["session_id"].is_string() && reminder["turn_id"].is_string());
    // Every line is numbered in one sequence with the rest.
    let sequences: Vec<u64> = lines(&output.stdout)
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert!(sequences.windows(2).all(|w| w[1] == w[0] + 1));
}

#[test]
fn a_stored_request_is_rebuilt_byte_for_byte_for_every_step_and_api() {
    for api in ["completions", "anthropic"] {
        let mock = Mock::new();
        let server = mock.serve(
            r#"[{"shell": "echo one"}, {"shell": "seq 1 30000"}, {"text": "done", "chunk_size": 2}]"#,
        );
        let home = Home::new();
        // A time budget adds a request-only reminder to every request.
        let output = exec_http(&home, &server.url(), api, &["--timeout", "120s", "count"]);
        assert!(output.status.success(), "{api}: {}", stderr(&output));
        let id = home.only_session();
        let sent = server.requests();
        assert_eq!(sent.len(), 3);
        for (n, request) in sent.iter().enumerate() {
            let step = (n + 1).to_string();
            let replayed = home
                .keel()
                .args([
                    "sessions",
                    "replay-request",
                    &id,
                    "--step",
                    &step,
                    "--exact",
                ])
                .output()
                .unwrap();
            assert!(replayed.status.success(), "{}", stderr(&replayed));
            // Without --exact the same request, secrets masked (none here).
            let masked = home
                .keel()
                .args(["sessions", "replay-request", &id, "--step", &step])
                .output()
                .unwrap();
            assert_eq!(
                serde_json::from_slice::<serde_json::Value>(&masked.stdout).unwrap(),
                serde_json::from_slice::<serde_json::Value>(&request.raw_body).unwrap()
            );
            assert!(
                replayed.stdout == request.raw_body,
                "{api} step {step} differs:\nsent     {}\nreplayed {}",
                String::from_utf8_lossy(&request.raw_body),
                String::from_utf8_lossy(&replayed.stdout)
            );
        }
        // The report holds no key.
        let report = home.home.path().join("sessions").join(&id).join("report");
        for entry in walk(&report) {
            let text = std::fs::read_to_string(&entry).unwrap();
            assert!(
                !text.contains("sk-report-canary-5150"),
                "{}",
                entry.display()
            );
        }
        let missing = home
            .keel()
            .args(["sessions", "replay-request", &id, "--step", "9"])
            .output()
            .unwrap();
        assert_eq!(missing.status.code(), Some(2));
        assert!(stderr(&missing).contains("step 9 is not in the report (it has steps 1 to 3)"));
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_feedback_bundle_holds_no_file_name_and_no_file_content() {
    let home = Home::new();
    std::fs::write(
        home.work.path().join("quarterly-merger-plan.txt"),
        "CONFIDENTIAL-CONTENT-4417\n",
    )
    .unwrap();
    let script = r#"[
        {"tool_calls": [{"id": "r1", "name": "read", "arguments": {"path": "quarterly-merger-plan.txt"}}]},
        {"tool_calls": [{"id": "r2", "name": "read", "arguments": {"path": "missing-secret-roadmap.md"}}]},
        {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "head -c 100000 /dev/zero | tr '\\0' y; echo CONFIDENTIAL-CONTENT-4417"}}]},
        {"text": "The plan says CONFIDENTIAL-CONTENT-4417."}
    ]"#;
    home.exec(script, &["summarise quarterly-merger-plan.txt"]);
    let id = home.only_session();
    let bundle = home.home.path().join("bundle.json");
    let output = home
        .keel()
        .args(["feedback", &id, "-o"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&bundle).unwrap();
    let work = home.work.path().canonicalize().unwrap();
    for secret in [
        "quarterly-merger-plan",
        "missing-secret-roadmap",
        "CONFIDENTIAL-CONTENT-4417",
        "summarise",
        &id,
        &work.display().to_string(),
        &home.home.path().display().to_string(),
    ] {
        assert!(!text.contains(secret), "the bundle holds {secret}:\n{text}");
    }
    let value: Value = serde_json::from_str(&text).unwrap();
    let session = &value["sessions"][0];
    assert_eq!(session["tools"]["read"]["calls"], 2);
    assert_eq!(session["tools"]["read"]["errors"], 1);
    assert_eq!(session["tools"]["read"]["error_families"]["not_found"], 1);
    let artifacts: Vec<&Value> = session["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "artifact")
        .collect();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(
        artifacts[0]["bytes"],
        100_000 + "CONFIDENTIAL-CONTENT-4417\n".len()
    );
    let preview = home
        .keel()
        .args(["feedback", &id, "--preview"])
        .output()
        .unwrap();
    let shown = String::from_utf8(preview.stdout).unwrap();
    assert!(
        shown.contains("no message text") && shown.contains("no file or folder names"),
        "{shown}"
    );
    assert!(!shown.contains("quarterly"));
}

#[test]
fn the_guard_replays_over_a_stored_session() {
    let home = Home::new();
    let script = format!(
        "[{}, {}, {}, {{\"text\": \"no\"}}]",
        bash("c1", "cat secret-argument-9931.txt"),
        bash("c2", "cat secret-argument-9931.txt"),
        bash("c3", "cat secret-argument-9931.txt")
    );
    home.exec(&script, &["look"]);
    let id = home.only_session();
    let output = home
        .keel()
        .args(["debug", "replay-guard", &id])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let steps: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("step"))
        .collect();
    assert_eq!(steps.len(), 3, "{text}");
    assert!(steps[0].ends_with(" -"), "{}", steps[0]);
    assert!(
        steps[1].contains("repeated_action=2") && steps[1].contains("observe:"),
        "{}",
        steps[1]
    );
    assert!(steps[2].contains("REMIND: no_progress"), "{}", steps[2]);
    assert!(!text.contains("secret-argument-9931"));
    let json = home
        .keel()
        .args(["debug", "replay-guard", &id, "--json"])
        .output()
        .unwrap();
    let value: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        value[0]["steps"][2]["verdict"]["remind"]["signal"],
        "no_progress"
    );
    assert!(!String::from_utf8_lossy(&json.stdout).contains("secret-argument-9931"));
}

#[test]
fn deleting_a_session_removes_its_folder() {
    let home = Home::new();
    home.exec(
        &format!("[{}, {{\"text\": \"counted\"}}]", bash("c1", "seq 1 40000")),
        &["count"],
    );
    let id = home.only_session();
    let folder = home.home.path().join("sessions").join(&id);
    assert!(folder.join("artifacts").is_dir() && folder.join("report").is_dir());
    let output = home
        .keel()
        .args(["sessions", "delete", &id])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!folder.exists());
}

/// A cloned repository's own config must not silence the guard, lift the output budget,
/// turn reminders off or switch source references on: none of that is a project's to
/// choose until the user trusts it.
#[test]
fn an_untrusted_project_cannot_switch_the_harness_off() {
    let home = Home::new();
    let keel_dir = home.work.path().join(".keel");
    std::fs::create_dir_all(&keel_dir).unwrap();
    std::fs::write(
        keel_dir.join("config.yaml"),
        "runaway_guard: {enabled: false, threshold: 99}\noutput_budget: {inline_kib: 100000, head_kib: 40000, tail_kib: 40000}\ndisable_system_reminder_models: [\"*\"]\nsource_references: true\n",
    )
    .unwrap();
    let script = format!(
        "[{}, {}, {}, {}, {{\"text\": \"done\"}}]",
        bash("c1", "cat absent.txt"),
        bash("c2", "cat absent.txt"),
        bash("c3", "cat absent.txt"),
        bash("c4", "head -c 300000 /dev/zero | tr '\\\\0' z")
    );
    let output = home.exec(&script, &["--output-format", "stream-json", "go"]);
    let warning = stderr(&output);
    for key in [
        "runaway_guard",
        "output_budget",
        "disable_system_reminder_models",
        "source_references",
    ] {
        assert!(
            warning.contains(key),
            "{key} not reported as ignored: {warning}"
        );
    }
    let events = lines(&output.stdout);
    let extension = |name: &str, kind: &str| {
        events
            .iter()
            .any(|e| e["type"] == "extension.event" && e["extension"] == name && e["kind"] == kind)
    };
    assert!(extension("runaway-guard", "reminder"));
    assert!(extension("host.output-budget", "archived"));
    // Reminders stay on for every model: the prompt's hidden block is there.
    let id = home.only_session();
    let shown = home.sessions_json(&["show", &id, "--json"]);
    let first = &shown["messages"][0]["message"];
    assert_eq!(first["hidden"], true);
    assert!(
        first["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("You are keel"),
        "{first}"
    );
}
