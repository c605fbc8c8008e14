//! End to end: the real `keel` TUI in tmux against `keel-mockllm`, driven the way a person
//! does (`send-keys`) and read back from the screen (`capture-pane`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Mock(keel_mockllm::Background);

impl Mock {
    fn new() -> Self {
        Self(keel_mockllm::Background::new().unwrap())
    }

    fn serve(&self, script: &serde_json::Value) -> keel_mockllm::MockServer {
        self.0.serve(&script.to_string()).unwrap()
    }
}

/// One keel in its own tmux server.
struct Tui {
    socket: String,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

impl Tui {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self {
            socket: format!("keel-tui-test-{}-{n}", std::process::id()),
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    fn tmux(&self) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket, "-f", "/dev/null"]);
        command
    }

    /// Starts `keel ARGS` against `server` in a 100×40 window.
    fn start(&self, server: &keel_mockllm::MockServer, args: &[&str]) {
        self.start_with(server, args, "");
    }

    /// [`Self::start`] with more variables (`HOME=…`) in keel's environment.
    fn start_with(&self, server: &keel_mockllm::MockServer, args: &[&str], vars: &str) {
        let mut line = format!(
            "cd {} && env {vars} KEEL_HOME={} ANTHROPIC_API_KEY=test-key OPENAI_API_KEY=test-key TERM=xterm-256color {} --model anthropic/claude-sonnet-4-5 --base-url {}",
            shell_quote(&self.work.path().to_string_lossy()),
            shell_quote(&self.home.path().to_string_lossy()),
            shell_quote(env!("CARGO_BIN_EXE_keel")),
            server.url()
        );
        for arg in args {
            line.push(' ');
            line.push_str(&shell_quote(arg));
        }
        self.start_line(&line);
    }

    /// Starts the shell command `line` (keel's own environment and arguments) in a 100×40
    /// window, kept open after keel exits so its last screen can be read.
    fn start_line(&self, line: &str) {
        let line = format!("{line}; echo KEEL-EXITED-$?; sleep 600");
        // A server killed a moment ago may still hold its socket: try again briefly.
        for _ in 0..40 {
            let status = self
                .tmux()
                .args([
                    "new-session",
                    "-d",
                    "-s",
                    "t",
                    "-x",
                    "100",
                    "-y",
                    "40",
                    &line,
                ])
                .status()
                .expect("tmux must be installed (CI installs it)");
            if status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tmux cannot start a session");
    }

    fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-J", "-t", "t", "-S", "-500"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |s| s.contains(needle))
    }

    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what:?}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn type_text(&self, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "t", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn db(&self) -> PathBuf {
        self.home.path().join("sessions.db")
    }

    fn work(&self) -> &Path {
        self.work.path()
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

fn request_text(server: &keel_mockllm::MockServer, index: usize) -> String {
    server
        .requests()
        .get(index)
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

#[test]
fn a_prompt_streams_and_finishes() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": "## Plan\n\nFirst **this**, then `that`.\n\n- step one\n- step two\n", "chunk_size": 4, "delay_ms": 5}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["write a plan"]);
    let screen = tui.wait_for("• step two");
    assert!(screen.contains("› write a plan"), "{screen}");
    assert!(screen.contains("First this, then that."), "{screen}");
    // The turn is over: the spinner is gone and the composer is back.
    tui.wait_until("idle", |s| {
        !s.contains("esc to interrupt") && s.contains("ask keel to do something")
    });
    tui.keys(&["C-d"]);
    let screen = tui.wait_for("KEEL-EXITED-0");
    assert!(screen.contains("keel --session s-"), "{screen}");
}

#[test]
fn enter_during_a_turn_steers_the_next_request() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"shell": "sleep 2", "first_delay_ms": 50},
        {"text": "steered answer"}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["--permission", "full", "start working"]);
    tui.wait_for("Bash sleep 2");
    tui.type_text("also check the README");
    tui.keys(&["Enter"]);
    tui.wait_for("steered answer");
    let second = request_text(&server, 1);
    assert!(second.contains("also check the README"), "{second}");
    assert_eq!(
        server.requests().len(),
        2,
        "the steer joined the running turn"
    );
}

#[test]
fn alt_enter_queues_a_follow_up_for_after_the_turn() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": "first answer, slowly", "chunk_size": 2, "delay_ms": 60},
        {"text": "the follow-up answer"}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["first question"]);
    tui.wait_for("esc to interrupt");
    tui.type_text("and then this");
    tui.keys(&["M-Enter"]);
    tui.wait_for("queued for after this turn");
    let screen = tui.wait_for("the follow-up answer");
    assert!(screen.contains("first answer, slowly"), "{screen}");
    assert_eq!(server.requests().len(), 2);
    let first = request_text(&server, 0);
    assert!(
        !first.contains("and then this"),
        "the follow-up waited for the turn: {first}"
    );
    assert!(request_text(&server, 1).contains("and then this"));
}

#[test]
fn esc_interrupts_and_the_session_stays_usable() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": "this answer takes forever to arrive", "chunk_size": 1, "delay_ms": 400},
        {"text": "after the interrupt"}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["a long one"]);
    tui.wait_for("● this");
    let pressed = Instant::now();
    tui.keys(&["Escape"]);
    tui.wait_for("interrupted");
    let took = pressed.elapsed();
    // Generous for a loaded CI machine; the bench measures the real figure.
    assert!(took < Duration::from_secs(3), "{took:?}");
    tui.type_text("next question");
    tui.keys(&["Enter"]);
    tui.wait_for("after the interrupt");
}

#[test]
fn model_compact_and_sessions_commands_work() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": "an answer to compact"},
        {"text": keel_context::checkpoint::sample_summary("the user said hello")}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["say hello"]);
    tui.wait_for("an answer to compact");
    tui.type_text("/model openai/gpt-5-mini");
    tui.keys(&["Enter"]);
    tui.wait_for("openai/gpt-5-mini · auto mode");
    // Back to a model the mock answers as.
    tui.type_text("/model anthropic/claude-sonnet-4-5");
    tui.keys(&["Enter"]);
    tui.wait_until("the model back", |s| {
        !s.contains("openai/gpt-5-mini · auto mode")
    });
    tui.type_text("/compact keep the greeting");
    tui.keys(&["Enter"]);
    tui.wait_for("conversation compacted");
    tui.type_text("/sessions");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("(enter: resume");
    assert!(
        screen.contains("hello"),
        "the session is listed by its title: {screen}"
    );
    tui.keys(&["Escape"]);
}

#[test]
fn a_permission_prompt_answered_with_2_is_remembered() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"shell": "touch notes.txt"},
        {"text": "first done"},
        {"shell": "touch notes.txt"},
        {"text": "second done"}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["--permission", "ask", "make notes"]);
    let screen = tui.wait_for("Allow bash?");
    assert!(screen.contains("touch notes.txt"), "{screen}");
    // "Always" is one step, and the option says for what.
    assert!(
        screen.contains("Yes, and always allow the command `touch notes.txt`"),
        "{screen}"
    );
    tui.keys(&["2"]);
    tui.wait_for("first done");
    let rules = std::fs::read_to_string(tui.home.path().join("permissions.yaml")).unwrap();
    assert!(
        rules.contains("allow:") && rules.contains("touch"),
        "{rules}"
    );
    assert!(tui.work().join("notes.txt").exists());
    // The same call again asks nothing.
    tui.type_text("again");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("second done");
    assert_eq!(screen.matches("Allow bash?").count(), 0, "{screen}");
}

#[test]
fn the_text_before_calls_shows_before_them_and_calls_keep_their_order() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": "Let me check two things.", "chunk_size": 3, "delay_ms": 5, "tool_calls": [
            {"name": "bash", "arguments": {"command": "sleep 1; echo first-output"}},
            {"name": "read", "arguments": {"path": "notes.txt"}}
        ]},
        {"text": "all done"}
    ]));
    let tui = Tui::new();
    std::fs::write(tui.work().join("notes.txt"), "second-output\n").unwrap();
    tui.start(&server, &["--permission", "full", "check both"]);
    // While the slow first call runs, the text is already above it.
    let screen = tui.wait_for("Bash sleep 1");
    let text = screen.find("Let me check two things.");
    let bash = screen.find("Bash sleep 1");
    assert!(text.is_some() && text < bash, "{screen}");
    let screen = tui.wait_for("all done");
    let at = |needle: &str| {
        screen
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing:\n{screen}"))
    };
    assert!(
        at("Let me check two things.") < at("Bash sleep 1"),
        "{screen}"
    );
    assert!(at("Bash sleep 1") < at("first-output"), "{screen}");
    assert!(at("first-output") < at("Read notes.txt"), "{screen}");
    assert!(at("Read notes.txt") < at("all done"), "{screen}");
}

#[test]
fn a_bang_command_runs_in_the_shell_with_no_model_request_and_bang_bang_is_not_kept() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([{"text": "I see what it printed"}]));
    let tui = Tui::new();
    tui.start(&server, &[]);
    tui.wait_for("ask keel to do something");
    // The shell expands it: the command ran, it was not echoed back.
    tui.type_text("!echo bang-$((6*7))");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("bang-42");
    assert!(screen.contains("!echo bang-$((6*7))"), "{screen}");
    tui.type_text("!!echo quiet-$((2+3))");
    tui.keys(&["Enter"]);
    tui.wait_for("quiet-5");
    assert!(server.requests().is_empty(), "no model request for `!`");
    tui.type_text("what did it print?");
    tui.keys(&["Enter"]);
    tui.wait_for("I see what it printed");
    let requests = server.requests();
    let sent = requests[0].body.to_string();
    assert!(sent.contains("bang-42"), "{sent}");
    assert!(!sent.contains("quiet-5"), "`!!` is not kept: {sent}");
    // Up recalls the command as typed.
    tui.keys(&["Up", "Up"]);
    tui.wait_for("› !!echo quiet");
}

#[test]
fn a_command_s_output_shows_while_it_runs() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo tick-$((1)); sleep 3; echo tock-$((2))"}}]},
        {"text": "both ticks seen"}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["--permission", "full", "count the ticks"]);
    // The first line is on screen while the command still runs.
    let screen = tui.wait_for("tick-1");
    assert!(!screen.contains("tock-2"), "{screen}");
    assert!(!screen.contains("both ticks seen"), "{screen}");
    let screen = tui.wait_for("both ticks seen");
    assert!(screen.contains("tock-2"), "{screen}");
}

#[test]
fn sent_prompts_come_back_with_up_in_a_later_session_of_the_folder() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([{"text": "noted"}]));
    let tui = Tui::new();
    tui.start(&server, &["remember the tabs fix"]);
    tui.wait_for("noted");
    tui.keys(&["C-d"]);
    tui.wait_for("KEEL-EXITED-0");
    let _ = tui.tmux().arg("kill-server").status();
    // A new session of the same folder: Up recalls the earlier prompt.
    tui.start(&server, &[]);
    tui.wait_for("ask keel to do something");
    tui.keys(&["Up"]);
    tui.wait_for("› remember the tabs fix");
}

#[test]
fn a_resize_mid_stream_leaves_no_stale_frame() {
    let text: Vec<String> = (0..30)
        .map(|i| format!("Paragraph {i}: {}", "lorem ipsum dolor sit amet ".repeat(6)))
        .collect();
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": text.join("\n\n"), "chunk_size": 20, "delay_ms": 10}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["--", "go"]);
    tui.wait_for("Paragraph 3:");
    let resize = |width: &str| {
        let status = tui
            .tmux()
            .args(["resize-window", "-t", "t", "-x", width, "-y", "40"])
            .status()
            .unwrap();
        assert!(status.success());
    };
    resize("60");
    tui.wait_for("Paragraph 12:");
    resize("120");
    let screen = tui.wait_until("the whole answer and the idle composer", |s| {
        s.contains("Paragraph 29:") && s.contains("ask keel to do something")
    });
    // Every paragraph once, in order, and no old frame of the panel in the scrollback.
    let mut last = None;
    for i in 0..30 {
        let needle = format!("Paragraph {i}:");
        assert_eq!(screen.matches(&needle).count(), 1, "{needle}\n{screen}");
        let at = screen.find(&needle);
        assert!(at > last, "{needle} out of order\n{screen}");
        last = at;
    }
    assert!(!screen.contains("esc to interrupt"), "{screen}");
    assert!(!screen.contains("steer the turn"), "{screen}");
    assert_eq!(
        screen.matches("ask keel to do something").count(),
        1,
        "{screen}"
    );
}

#[test]
fn continue_resumes_the_latest_session() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([
        {"text": "remember the number 42"},
        {"text": "it was 42"}
    ]));
    let tui = Tui::new();
    tui.start(&server, &["pick a number"]);
    tui.wait_for("remember the number 42");
    // The first turn of a new session asks the model for a title, off the turn's path.
    tui.wait_until("the title request", |_| server.title_requests().len() == 1);
    tui.keys(&["C-d"]);
    tui.wait_for("KEEL-EXITED-0");
    let _ = tui.tmux().arg("kill-server").status();
    assert!(tui.db().exists() || tui.home.path().exists());
    // A launch that is left at once leaves no session behind, and says nothing of one.
    tui.start(&server, &[]);
    tui.wait_for("ask keel to do something");
    tui.keys(&["C-d"]);
    let screen = tui.wait_for("KEEL-EXITED-0");
    assert!(!screen.contains("resumes this session"), "{screen}");
    let _ = tui.tmux().arg("kill-server").status();
    let listed = Command::new(env!("CARGO_BIN_EXE_keel"))
        .current_dir(tui.work())
        .env("KEEL_HOME", tui.home.path())
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(listed.matches("\"id\"").count(), 1, "{listed}");
    assert!(listed.contains(keel_mockllm::TITLE_ANSWER), "{listed}");
    tui.start(&server, &["--continue"]);
    let screen = tui.wait_for("resumed session");
    assert!(
        screen.contains("remember the number 42"),
        "the history is shown again: {screen}"
    );
    tui.type_text("what was it?");
    tui.keys(&["Enter"]);
    tui.wait_for("it was 42");
    let second = request_text(&server, 1);
    assert!(
        second.contains("pick a number"),
        "the old history was sent: {second}"
    );
}

#[test]
fn without_a_terminal_keel_points_to_exec() {
    let output = Command::new(env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_HOME", "/nonexistent")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("keel exec"), "{stderr}");
}

/// Issue 27: the trust question says what trusting a project's files lets run: which
/// commands run any code of the project, and which files the model may then not change.
#[test]
fn the_trust_question_names_what_the_project_runs() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([{"text": "ready"}]));
    let tui = Tui::new();
    let work = tui.work();
    std::fs::create_dir_all(work.join(".claude")).unwrap();
    std::fs::create_dir_all(work.join("scripts")).unwrap();
    std::fs::write(work.join("scripts/lint.sh"), "exit 0\n").unwrap();
    std::fs::write(
        work.join(".claude/settings.json"),
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "sh scripts/lint.sh"}]}]}}"#,
    )
    .unwrap();
    std::fs::write(
        work.join(".mcp.json"),
        r#"{"mcpServers": {"dev": {"command": "npm", "args": ["run", "mcp"]}}}"#,
    )
    .unwrap();
    tui.start(&server, &["say hello"]);
    let screen = tui.wait_for("Trust these files as they are now?");
    // The question is wrapped to the window: read it as one line.
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("`npm run mcp` runs the project's package scripts and packages: it runs any code in this project"),
        "{screen}"
    );
    assert!(
        flat.contains("It runs scripts/lint.sh, scripts/;"),
        "{screen}"
    );
    tui.type_text("y");
    tui.keys(&["Enter"]);
    // Trusted: the TUI opens and the trust is on record for the next run.
    tui.wait_for("ready");
    let records = std::fs::read_to_string(tui.home.path().join("trusted.json")).unwrap();
    assert!(
        records.contains(".mcp.json") && records.contains("settings.json"),
        "{records}"
    );
}

/// Issue 27: keel in the home folder asks before it takes it as the workspace; a no stops
/// it, naming the flag that says yes.
#[test]
fn the_home_folder_as_workspace_is_asked_about() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([{"text": "in home"}]));
    let tui = Tui::new();
    let home = format!("HOME={}", shell_quote(&tui.work().to_string_lossy()));
    tui.start_with(&server, &[], &home);
    let screen = tui.wait_for("Work here anyway? [y/N]");
    assert!(screen.contains("(your home folder)"), "{screen}");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("KEEL-EXITED-");
    assert!(screen.contains("--allow-home-workspace"), "{screen}");
    assert!(!screen.contains("KEEL-EXITED-0"), "{screen}");

    let tui = Tui::new();
    let home = format!("HOME={}", shell_quote(&tui.work().to_string_lossy()));
    tui.start_with(&server, &["say hello"], &home);
    tui.wait_for("Work here anyway? [y/N]");
    tui.type_text("y");
    tui.keys(&["Enter"]);
    tui.wait_for("in home");
}

/// Issue 33: a first run with no key anywhere opens the picker: provider, the key typed
/// without echo, model, a test call; the key lands 0600 and never shows; the TUI starts.
#[test]
fn a_first_run_sets_up_a_provider_with_the_key_never_on_screen() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([{"text": "OK"}, {"text": "hello at last"}]));
    let tui = Tui::new();
    let home = tui.home.path();
    let key = "sk-ant-first-run-0123456789-secret";
    tui.start_line(&format!(
        "cd {} && env -i PATH=\"$PATH\" HOME={} TERM=xterm-256color ANTHROPIC_BASE_URL={} {}",
        shell_quote(&tui.work().to_string_lossy()),
        shell_quote(&home.to_string_lossy()),
        server.url(),
        shell_quote(env!("CARGO_BIN_EXE_keel")),
    ));
    tui.wait_for("Which provider?");
    tui.type_text("1");
    tui.keys(&["Enter"]);
    tui.wait_for("Key:");
    tui.type_text(key);
    tui.keys(&["Enter"]);
    tui.wait_for("Which anthropic model?");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("ask keel to do something");
    assert!(
        screen.contains("answered in"),
        "the test call ran: {screen}"
    );
    assert!(!screen.contains("secret"), "the key was shown: {screen}");
    let stored = home.join(".keel/credentials.json");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&stored).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    assert!(std::fs::read_to_string(&stored).unwrap().contains(key));
    assert_eq!(server.requests()[0].headers["x-api-key"], key);
    let config = std::fs::read_to_string(home.join(".keel/config.yaml")).unwrap();
    assert_eq!(config, "model: anthropic/claude-sonnet-4-5\n");
    tui.type_text("hi");
    tui.keys(&["Enter"]);
    tui.wait_for("hello at last");
}

/// Issue 33: `keel login PROVIDER` from the shell: the key typed without echo, the model
/// picked, the test call made through the provider's base-URL variable, the key kept 0600.
#[test]
fn keel_login_keeps_a_key_it_checked_and_never_shows_it() {
    let mock = Mock::new();
    let server = mock.serve(&serde_json::json!([{"text": "OK"}]));
    let tui = Tui::new();
    let home = tui.home.path();
    let key = "sk-openai-login-0123456789-secret";
    tui.start_line(&format!(
        "cd {} && env -i PATH=\"$PATH\" HOME={} TERM=xterm-256color OPENAI_BASE_URL={}/v1 {} login openai",
        shell_quote(&tui.work().to_string_lossy()),
        shell_quote(&home.to_string_lossy()),
        server.url(),
        shell_quote(env!("CARGO_BIN_EXE_keel")),
    ));
    tui.wait_for("Key:");
    tui.type_text(key);
    tui.keys(&["Enter"]);
    tui.wait_for("Which openai model?");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("KEEL-EXITED-");
    assert!(screen.contains("KEEL-EXITED-0"), "{screen}");
    assert!(screen.contains("answered in"), "{screen}");
    assert!(!screen.contains("secret"), "the key was shown: {screen}");
    let stored = std::fs::read_to_string(home.join(".keel/credentials.json")).unwrap();
    assert!(
        stored.contains(key) && stored.contains("openai"),
        "{stored}"
    );
    let request = &server.requests()[0];
    assert_eq!(request.headers["authorization"], format!("Bearer {key}"));
    // The recommended model needs no `model:`: the key alone chooses it.
    assert!(!home.join(".keel/config.yaml").exists());
}
