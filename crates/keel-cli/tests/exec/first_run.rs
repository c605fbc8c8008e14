//! A fresh machine: no configuration, only a provider's key (and its base URL) in the
//! environment. keel picks the provider, says so once, and answers.

use std::process::Command;

use crate::{Mock, assert_exit};

/// `keel` with a clean `HOME` and `KEEL_HOME`, no provider variables but `vars`.
fn fresh(home: &std::path::Path, vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
    command.env_clear();
    command
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KEEL_HOME", home.join(".keel"))
        .current_dir(home.join("work"));
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

#[test]
fn a_key_in_the_environment_is_enough_and_the_choice_is_said_once() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "hello from a fresh machine"}, {"text": "again"}]"#);
    let url = server.url();
    let vars = [
        ("ANTHROPIC_API_KEY", "test-key"),
        ("ANTHROPIC_BASE_URL", url.as_str()),
        ("OPENAI_API_KEY", "also-set"),
    ];
    let output = fresh(home.path(), &vars)
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "hello from a fresh machine\n"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("using anthropic/claude-sonnet-4-5 because ANTHROPIC_API_KEY is set"),
        "{stderr}"
    );
    // It names the user's file where it is ($KEEL_HOME here), not a fixed ~/.keel.
    let file = home.path().join(".keel/config.yaml");
    assert!(
        stderr.contains(&format!("`model:` in {}", file.display())),
        "{stderr}"
    );
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].headers["x-api-key"], "test-key");
    // Said once: the second run is quiet about it.
    let output = fresh(home.path(), &vars)
        .args(["exec", "hi again"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains("no model is configured"), "{stderr}");
}

#[test]
fn no_key_at_all_is_one_sentence_naming_the_variables() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let output = fresh(home.path(), &[])
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("ANTHROPIC_API_KEY, OPENAI_API_KEY"),
        "{stderr}"
    );
    assert!(stderr.contains("--model"), "{stderr}");
}

#[test]
fn doctor_checks_the_key_with_a_test_call_and_says_what_to_fix() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "OK"}]"#);
    let url = server.url();
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-ant-test-0123456789-abcd"),
        ("ANTHROPIC_BASE_URL", url.as_str()),
    ];
    let output = fresh(home.path(), &vars).arg("doctor").output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("anthropic/claude-sonnet-4-5"), "{stdout}");
    assert!(
        stdout.contains("sk-ant…abcd"),
        "the key is masked: {stdout}"
    );
    assert!(!stdout.contains("0123456789"), "{stdout}");
    assert!(
        stdout.contains("test call") && stdout.contains("answered in"),
        "{stdout}"
    );
    assert!(stdout.contains("sandbox"), "{stdout}");
    assert_eq!(server.requests().len(), 1);
    // A broken configuration: exit 1, naming the file.
    std::fs::create_dir_all(home.path().join(".keel")).unwrap();
    std::fs::write(home.path().join(".keel/config.yaml"), "model: [unclosed\n").unwrap();
    let output = fresh(home.path(), &vars).arg("doctor").output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("config.yaml:1"),
        "the file and line: {stdout}"
    );
    assert!(stdout.contains("Fix this first"), "{stdout}");
}

#[test]
fn a_bare_word_is_no_prompt_and_print_is_exec() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let output = fresh(home.path(), &[]).arg("doctr").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("Did you mean `keel doctor`?"), "{stderr}");
    assert!(stderr.contains("keel -- doctr"), "{stderr}");
    // Several words are one prompt, and flags may follow them (here the TUI then wants a
    // terminal: the arguments were understood).
    let output = fresh(home.path(), &[])
        .args([
            "fix",
            "the",
            "tests",
            "--model",
            "anthropic/claude-sonnet-4-5",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    // `-p` is Claude Code's headless mode: `keel exec`.
    let dir = tempfile::tempdir().unwrap();
    let script = crate::script(dir.path(), r#"[{"text": "printed"}]"#);
    let output = fresh(home.path(), &[])
        .arg("-p")
        .arg("--mock-script")
        .arg(&script)
        .arg("say it")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "printed\n");
}

#[test]
fn the_flags_other_agents_use_work_here() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = crate::script(
        dir.path(),
        r#"[{"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "pwd"}}]}, {"text": "done"}]"#,
    );
    // -C (--cd) is --cwd; --yolo is full access without the sandbox, and says so.
    let output = fresh(home.path(), &[])
        .args([
            "exec",
            "--yolo",
            "-C",
            "sub",
            "--output-format",
            "json",
            "--mock-script",
        ])
        .arg(&script)
        .arg("where am I")
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("--yolo: full access and no sandbox"),
        "{stderr}"
    );
    // --yolo cannot be weakened or strengthened in the same breath.
    let output = fresh(home.path(), &[])
        .args(["exec", "--yolo", "--permission", "ask", "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    // -m is --model.
    let output = fresh(home.path(), &[])
        .args(["exec", "-m", "nonsense", "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("provider/model"), "{stderr}");
}

#[test]
fn completion_scripts_and_the_manual_page_are_printed() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef keel"),
        ("fish", "complete -c keel"),
        ("elvish", "edit:completion"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let output = fresh(home.path(), &[])
            .args(["completion", shell])
            .output()
            .unwrap();
        assert_exit(&output, 0);
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(
            script.contains(mark),
            "{shell}: {}",
            &script[..200.min(script.len())]
        );
        assert!(script.contains("doctor"), "{shell} completes the commands");
    }
    let output = fresh(home.path(), &[]).arg("man").output().unwrap();
    assert_exit(&output, 0);
    let page = String::from_utf8(output.stdout).unwrap();
    assert!(
        page.contains(".TH keel 1") && page.contains("coding agent"),
        "{page}"
    );
}

#[test]
fn login_keeps_a_key_privately_and_logout_takes_it_back() {
    use std::io::Write as _;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "OK"}, {"text": "answered with the stored key"}]"#);
    let url = server.url();
    let vars = [("ANTHROPIC_BASE_URL", url.as_str())];
    let mut child = fresh(home.path(), &vars)
        .args(["login", "anthropic"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"sk-ant-stored-key-123456\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("answered in"),
        "the test call ran: {stderr}"
    );
    assert!(
        !stderr.contains("stored-key"),
        "the key is never shown: {stderr}"
    );
    let file = home.path().join(".keel/credentials.json");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        server.requests()[0].headers["x-api-key"],
        "sk-ant-stored-key-123456"
    );
    // With no key in the environment, the stored one is used, and chosen.
    let output = fresh(home.path(), &vars)
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "answered with the stored key\n"
    );
    let output = fresh(home.path(), &[]).arg("logout").output().unwrap();
    assert_exit(&output, 0);
    let output = fresh(home.path(), &vars)
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "no key any more");
}

#[test]
fn a_prompt_that_starts_with_a_dash_is_shown_how_to_send_it() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let output = fresh(home.path(), &[])
        .args(["exec", "--permission", "ask", "-5 is odd, why?"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("keel exec --permission ask -- '-5 is odd, why?'"),
        "{stderr}"
    );
}

/// The README's `sh runnable` blocks, line by line, on a fresh machine against the mock:
/// what a new user copies works.
#[test]
fn the_readmes_runnable_commands_work_on_a_fresh_machine() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let mut commands = Vec::new();
    let mut inside = false;
    for line in readme.lines() {
        if inside && line.trim_start().starts_with("```") {
            inside = false;
        } else if inside {
            let command = line.trim();
            if !command.is_empty() && !command.starts_with('#') {
                commands.push(command.to_owned());
            }
        } else if line.trim() == "```sh runnable" {
            inside = true;
        }
    }
    assert!(
        commands.len() >= 4,
        "too few runnable commands: {commands:?}"
    );
    assert!(
        commands.iter().any(|c| c.starts_with("keel exec")),
        "{commands:?}"
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let mock = Mock::new();
    let server = mock.serve(&format!("[{}]", vec![r#"{"text": "OK"}"#; 20].join(",")));
    let url = server.url();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_keel"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    for command in &commands {
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", home.path())
            .env("ANTHROPIC_API_KEY", "sk-ant-readme-0123456789")
            .env("ANTHROPIC_BASE_URL", &url)
            .current_dir(home.path().join("work"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "`{command}` failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(!server.requests().is_empty(), "the model was asked");
}

/// No key at all, but a model server on this machine: keel finds it, takes its first model
/// with the window the server applies (not the assumed default), and says so; a local model
/// named by hand gets its real window too.
#[test]
fn with_no_key_a_local_server_is_found_with_its_real_window() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    std::fs::create_dir_all(home.path().join(".keel")).unwrap();
    let mock = Mock::new();
    let server = mock.serve(r#"[{"text": "local hello"}, {"text": "again"}]"#);
    // Ollama is the mock here, which lists one model as Ollama would; nothing listens where
    // LM Studio is said to be.
    std::fs::write(
        home.path().join(".keel/config.yaml"),
        format!(
            "providers:\n  ollama:\n    base_url: {}/v1\n  lmstudio:\n    base_url: http://127.0.0.1:9/v1\n",
            server.url()
        ),
    )
    .unwrap();
    let output = fresh(home.path(), &[])
        .args(["exec", "--output-format", "stream-json", "hi"])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = format!(
        "using ollama/{} from the server at",
        keel_mockllm::LOCAL_MODEL
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "its window is {} tokens",
            keel_mockllm::LOCAL_WINDOW
        )),
        "{stderr}"
    );
    let events = crate::lines(&output.stdout);
    let usage = events.iter().find(|e| e["type"] == "model.usage").unwrap();
    assert_eq!(
        usage["context_window"],
        keel_mockllm::LOCAL_WINDOW,
        "{usage}"
    );
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
    // Named by hand, an unlisted local model gets the server's window, not 200,000 tokens.
    let output = fresh(home.path(), &[])
        .args([
            "exec",
            "--output-format",
            "stream-json",
            "-m",
            "ollama/other:3b",
            "hi",
        ])
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("not in the registry"), "{stderr}");
    let events = crate::lines(&output.stdout);
    let usage = events.iter().find(|e| e["type"] == "model.usage").unwrap();
    assert_eq!(
        usage["context_window"],
        keel_mockllm::LOCAL_WINDOW,
        "{usage}"
    );
}

/// A refused key is one sentence naming where the key came from and the fix.
#[test]
fn a_wrong_key_names_its_variable_and_the_fix() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    let mock = Mock::new();
    let server = mock.serve(r#"[{"fault": {"kind": "unauthorized"}}]"#);
    let url = server.url();
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-ant-wrong"),
        ("ANTHROPIC_BASE_URL", url.as_str()),
    ];
    let output = fresh(home.path(), &vars)
        .args(["exec", "hi"])
        .output()
        .unwrap();
    assert_exit(&output, 4);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "anthropic refused the key in ANTHROPIC_API_KEY: set a valid one there, or unset it \
             and run `keel login anthropic`"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-ant-wrong"), "{stderr}");
}
