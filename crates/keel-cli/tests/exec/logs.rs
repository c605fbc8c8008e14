//! Diagnostic logs: `KEEL_LOG` and `--log-file` show the libraries' spans and events, and
//! without them nothing changes.

use std::os::unix::fs::PermissionsExt as _;

use pretty_assertions::assert_eq;

use crate::{Mock, assert_exit, keel, script};

const ANSWER: &str = r#"[{"text": "logged"}]"#;

#[test]
fn keel_log_with_a_log_file_writes_the_turns_spans_there_and_nothing_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), ANSWER);
    let log = dir.path().join("keel.log");
    let run = || {
        // The flag after the subcommand: it is global.
        keel()
            .args(["exec", "--cwd"])
            .arg(dir.path())
            .arg("--mock-script")
            .arg(&path)
            .arg("--log-file")
            .arg(&log)
            .arg("hi")
            .env("KEEL_LOG", "debug")
            .output()
            .unwrap()
    };
    let output = run();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "logged\n");
    assert_eq!(String::from_utf8(output.stderr).unwrap(), "");
    let text = std::fs::read_to_string(&log).unwrap();
    for wanted in [
        "keel_agent::runner: new",
        ":step{step=1}: keel_agent::run: close time.busy=",
        "keel_agent::runner: turn ended outcome=Completed",
    ] {
        assert!(text.contains(wanted), "{wanted:?} missing from:\n{text}");
    }
    assert!(
        text.lines().all(|line| line.contains("turn{session=s-")
            || line.contains("keel_store::schema")
            || line.contains("keel_startup")),
        "every line but start-up's (the store's opening among them) is inside the turn's span:\n{text}"
    );
    assert_eq!(
        std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o600
    );

    assert_exit(&run(), 0);
    let again = std::fs::read_to_string(&log).unwrap();
    assert!(again.starts_with(&text), "the file is appended to");
    assert_eq!(again.matches("turn ended").count(), 2);
}

#[test]
fn a_log_file_alone_gets_keels_debug_lines_including_each_model_request() {
    let mock = Mock::new();
    let server = mock.serve(ANSWER);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keel.log");
    let output = keel()
        .arg("--log-file")
        .arg(&log)
        .args([
            "exec",
            "--model",
            "anthropic/claude-sonnet-4-5",
            "--base-url",
        ])
        .arg(server.url())
        .arg("hi")
        .env("ANTHROPIC_API_KEY", "test-key")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stderr).unwrap(), "");
    let text = std::fs::read_to_string(&log).unwrap();
    for wanted in [
        "keel_llm::http: sending the model request provider=anthropic model=claude-sonnet-4-5 api=\"anthropic-messages\"",
        "keel_llm::http: the model answered status=200",
    ] {
        assert!(text.contains(wanted), "{wanted:?} missing from:\n{text}");
    }
    assert!(!text.contains("test-key"), "the key is never logged");
}

#[test]
fn keel_log_alone_writes_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), ANSWER);
    let output = keel()
        .args(["exec", "--mock-script"])
        .arg(&path)
        .arg("hi")
        .env("KEEL_LOG", "keel_agent=debug")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "logged\n");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("keel_agent::runner: turn ended outcome=Completed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("keel_store"),
        "the filter applies: {stderr}"
    );
}

#[test]
fn an_invalid_keel_log_or_log_file_is_a_usage_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), ANSWER);
    let output = keel()
        .args(["exec", "--mock-script"])
        .arg(&path)
        .arg("hi")
        .env("KEEL_LOG", "keel_llm=loud")
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("keel: KEEL_LOG=\"keel_llm=loud\" is not a valid log filter ("),
        "{stderr}"
    );

    let output = keel()
        .args([
            "--log-file",
            "/nonexistent/keel.log",
            "exec",
            "--mock-script",
        ])
        .arg(&path)
        .arg("hi")
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr
            .starts_with("keel: --log-file /nonexistent/keel.log: cannot open it for appending: "),
        "{stderr}"
    );
}

#[test]
fn keel_trace_times_start_up_on_stderr_and_leaves_stdout_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), ANSWER);
    let output = keel()
        .args(["exec", "--cwd"])
        .arg(dir.path())
        .arg("--mock-script")
        .arg(&path)
        .arg("hi")
        .env("KEEL_TRACE", "1")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "logged\n");
    let trace = String::from_utf8(output.stderr).unwrap();
    let phases: Vec<&str> = trace
        .lines()
        .filter_map(|line| line.split_once("s ")?.1.split_once(": close time.busy="))
        .map(|(phase, _)| phase)
        .collect();
    assert_eq!(
        phases,
        [
            "settings and assembly",
            "runtime start",
            "session open",
            "turn admission",
            "turn preparation"
        ],
        "{trace}"
    );
    // Nothing but start-up's phases (a scripted model sends no request to mark): no other
    // log line comes with it.
    assert_eq!(trace.lines().count(), 5, "{trace}");
}
