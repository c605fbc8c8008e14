//! What `keel exec` refuses before a turn starts: bad flag values, a working folder or `-o`
//! file that cannot be used, a closed stdout, an oversized prompt. None of them may leave a
//! session behind or reach the model.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;

use crate::{Mock, assert_exit};

/// A fresh session database and a mock provider that records what reaches it.
struct Fresh {
    dir: tempfile::TempDir,
    server: keel_mockllm::MockServer,
    /// Runs the server; kept for as long as the server is used.
    _mock: Mock,
}

impl Fresh {
    fn new() -> Self {
        let mock = Mock::new();
        let server = mock.serve(r#"[{"text": "should not be asked"}]"#);
        Self {
            dir: tempfile::tempdir().unwrap(),
            server,
            _mock: mock,
        }
    }

    fn keel(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .env("KEEL_HOME", self.dir.path().join("home"))
            .env("KEEL_SESSIONS_DB", self.dir.path().join("sessions.db"))
            .env("ANTHROPIC_API_KEY", "test-key")
            .env_remove(MAX_PROMPT_ENV);
        command
    }

    /// `keel exec` against the mock provider, with `extra` flags before the prompt.
    fn exec(&self, extra: &[&str]) -> Command {
        let mut command = self.keel();
        command
            .args([
                "exec",
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--base-url",
            ])
            .arg(self.server.url())
            .args(extra);
        command
    }

    /// Nothing reached the model and no session was stored.
    fn assert_nothing_started(&self) {
        assert_eq!(self.server.requests().len(), 0, "the model was called");
        let listed = self
            .keel()
            .args(["sessions", "list", "--json"])
            .output()
            .unwrap();
        assert_exit(&listed, 0);
        assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");
    }
}

const MAX_PROMPT_ENV: &str = "KEEL_MAX_PROMPT_BYTES";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Regression: `--permission yolo` exited 3 (a configuration error) instead of 2.
#[test]
fn every_bad_flag_value_exits_2_naming_the_flag_and_what_it_accepts() {
    let fresh = Fresh::new();
    let missing = fresh.dir.path().join("missing.json");
    let missing = missing.to_str().unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--permission", "yolo"],
            vec!["--permission", "use ask, auto, full or plan"],
        ),
        (
            vec!["--sandbox", "anywhere"],
            vec![
                "--sandbox",
                "read-only, workspace-write or danger-full-access",
            ],
        ),
        (
            vec!["--output-format", "xml"],
            vec!["--output-format", "text, json, stream-json"],
        ),
        (vec!["--max-steps", "0"], vec!["--max-steps", "1..="]),
        (vec!["--max-steps", "many"], vec!["--max-steps"]),
        (
            vec!["--timeout", "soon"],
            vec!["--timeout", "90s, 5m, 1h30m"],
        ),
        (
            vec!["--timeout", "0s"],
            vec!["--timeout", "longer than zero"],
        ),
        (vec!["--model", "claude"], vec!["--model", "provider/model"]),
        (
            vec!["--model", "nope/m"],
            vec!["--model", "unknown provider `nope`"],
        ),
        (
            vec!["--base-url", "localhost:9"],
            vec!["--base-url", "http://"],
        ),
        (vec!["-c", "permission"], vec!["-c", "KEY=VALUE"]),
        (vec!["--config", missing], vec!["--config", "no such file"]),
        (vec!["--output-schema", missing], vec!["--output-schema"]),
    ];
    for (flags, expected) in cases {
        let mut command = if ["--model", "--base-url"].contains(&flags[0]) {
            let mut command = fresh.keel();
            command.arg("exec").args(&flags);
            command
        } else {
            fresh.exec(&flags)
        };
        let output = command.arg("hi").output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{flags:?}: {}",
            stderr(&output)
        );
        let text = stderr(&output);
        for part in expected {
            assert!(text.contains(part), "{flags:?}: `{part}` not in {text}");
        }
    }
    fresh.assert_nothing_started();
}

#[test]
fn a_bad_working_folder_or_output_file_fails_before_the_turn() {
    let fresh = Fresh::new();
    let file = fresh.dir.path().join("plain.txt");
    std::fs::write(&file, "x").unwrap();
    let gone = fresh.dir.path().join("gone");
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--cwd".into(), gone.display().to_string()],
            format!("keel: --cwd {}: no such folder\n", gone.display()),
        ),
        (
            vec!["--cwd".into(), file.display().to_string()],
            format!("keel: --cwd {} is not a folder\n", file.display()),
        ),
        (
            vec!["-o".into(), gone.join("answer.txt").display().to_string()],
            format!(
                "keel: cannot write -o {}: the folder {} does not exist\n",
                gone.join("answer.txt").display(),
                gone.display()
            ),
        ),
        (
            vec!["-o".into(), file.join("answer.txt").display().to_string()],
            format!(
                "keel: cannot write -o {}: {} is not a folder\n",
                file.join("answer.txt").display(),
                file.display()
            ),
        ),
        (
            vec![
                "--output-last-message".into(),
                fresh.dir.path().display().to_string(),
            ],
            format!(
                "keel: cannot write -o {}: it is not a regular file\n",
                fresh.dir.path().display()
            ),
        ),
    ];
    for (flags, expected) in cases {
        let output = fresh.exec(&[]).args(&flags).arg("hi").output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{flags:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), expected, "{flags:?}");
    }
    fresh.assert_nothing_started();
}

/// Regression: with stdout already closed, the turn ran (and cost a model call) before the
/// first write failed.
#[test]
fn a_stdout_closed_at_the_start_exits_141_before_the_turn() {
    let fresh = Fresh::new();
    for format in ["text", "json", "stream-json"] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = fresh
            .exec(&["--output-format", format, "hi"])
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(141),
            "{format}: {}",
            stderr(&output)
        );
        assert_eq!(
            stderr(&output),
            "keel: standard output is closed; the turn was not started\n"
        );
    }
    fresh.assert_nothing_started();
}

/// Regression: a 200 MB prompt on stdin was read whole (a gigabyte of memory) and sent on.
#[test]
fn an_oversized_prompt_is_refused_without_reading_it_all() {
    let fresh = Fresh::new();
    // On the command line, under a lowered cap.
    let output = fresh
        .exec(&["x".repeat(101).as_str()])
        .env(MAX_PROMPT_ENV, "100")
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "keel: the prompt is 101 bytes, over the cap of 100 bytes; set KEEL_MAX_PROMPT_BYTES \
         to raise it\n"
    );
    // From a file on stdin: its size is known.
    let big = fresh.dir.path().join("big.txt");
    std::fs::write(&big, "y".repeat(3000)).unwrap();
    let output = fresh
        .exec(&["-"])
        .env(MAX_PROMPT_ENV, "1000")
        .stdin(std::fs::File::open(&big).unwrap())
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "keel: the prompt on standard input is over the cap of 1000 bytes: it is 2.9 KiB (3000 \
         bytes); set KEEL_MAX_PROMPT_BYTES to raise it\n"
    );
    // 200 MB through a pipe under the default cap: reading stops one byte past it.
    let mut child = fresh
        .exec(&[])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'z'; 1 << 20];
        let mut sent = 0_usize;
        for _ in 0..200 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
        sent
    });
    let output = child.wait_with_output().unwrap();
    let sent = writer.join().unwrap();
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "keel: the prompt on standard input is over the cap of 16 MiB (16777216 bytes): it is \
         more than that (keel stopped reading at 16777217 bytes); set KEEL_MAX_PROMPT_BYTES to \
         raise it\n"
    );
    assert!(sent < 200 << 20, "keel read all {sent} bytes");
    let peak = children_peak_rss_kib();
    assert!(peak < 100 * 1024, "keel's memory peaked at {peak} KiB");

    // A raised cap lets a larger prompt through; a cap that is not a number is refused.
    let output = fresh
        .exec(&["z".repeat(200).as_str()])
        .env(MAX_PROMPT_ENV, "1000")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let output = fresh
        .exec(&["hi"])
        .env(MAX_PROMPT_ENV, "lots")
        .output()
        .unwrap();
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("KEEL_MAX_PROMPT_BYTES=lots"),
        "{}",
        stderr(&output)
    );
}

/// The largest resident set of any child this test process waited for, in KiB.
#[expect(unsafe_code, reason = "getrusage(2) has no safe wrapper in std")]
fn children_peak_rss_kib() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, zeroed rusage for getrusage to fill.
    let status = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    assert_eq!(status, 0);
    // SAFETY: getrusage succeeded and filled the struct (and zeroed is valid anyway).
    unsafe { usage.assume_init() }.ru_maxrss
}
