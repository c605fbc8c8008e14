//! The file, shell, todo and fetch tools on good and bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_agent::{AgentTool, ToolCallContext, ToolOutput};
use keel_protocol::ContentBlock;
use keel_tools::bash::Bash;
use keel_tools::fetch::WebFetch;
use keel_tools::files::{edit::Edit, read::Read, write::Write};
use keel_tools::todo::TodoWrite;
use keel_tools::{EnvMode, SandboxMode, ToolEnv};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[path = "tools/plan_file.rs"]
mod plan_file;
#[path = "tools/previews.rs"]
mod previews;

fn context() -> (ToolCallContext, CancellationToken) {
    let cancel = CancellationToken::new();
    (common::context_with(cancel.clone()), cancel)
}

fn env(dir: &tempfile::TempDir) -> Arc<ToolEnv> {
    let mut env = ToolEnv::new(dir.path().canonicalize().unwrap());
    env.output_dir = dir.path().join(".keel-out");
    env.sandbox = SandboxMode::DangerFullAccess;
    env.env_mode = Some(EnvMode::Off);
    Arc::new(env)
}

async fn run(tool: &dyn AgentTool, args: Value) -> Result<ToolOutput, String> {
    tool.execute(args, context().0).await.map_err(|e| e.message)
}

fn text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect()
}

#[tokio::test]
async fn read_numbers_lines_pages_and_refuses_what_it_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let read = Read::new(env(&dir));
    let lines: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), &lines).unwrap();
    let first = run(&read, json!({"path": "big.txt"})).await.unwrap();
    let first = text(&first);
    assert!(first.starts_with("     1\tline 1\n"));
    assert!(first.contains("  2000\tline 2000\n") && !first.contains("line 2001\n"));
    assert!(
        first.contains("Continue with offset=2001"),
        "{}",
        &first[first.len() - 200..]
    );
    let page = text(
        &run(
            &read,
            json!({"path": "big.txt", "offset": 2490, "limit": 5}),
        )
        .await
        .unwrap(),
    );
    assert!(page.starts_with("  2490\tline 2490") && page.contains("offset=2495"));
    let huge_lines: String = (0..400).map(|_| "x".repeat(300) + "\n").collect();
    std::fs::write(dir.path().join("wide.txt"), huge_lines).unwrap();
    let wide = text(&run(&read, json!({"path": "wide.txt"})).await.unwrap());
    assert!(
        wide.len() <= 52 * 1024 && wide.contains("50 KiB"),
        "{}",
        wide.len()
    );

    std::fs::write(dir.path().join("bin"), b"\x00\x01\x02abc").unwrap();
    assert!(
        run(&read, json!({"path": "bin"}))
            .await
            .unwrap_err()
            .contains("binary")
    );
    assert!(
        run(&read, json!({"path": "missing.txt"}))
            .await
            .unwrap_err()
            .contains("no such file")
    );
    assert!(
        run(&read, json!({"path": "."}))
            .await
            .unwrap_err()
            .contains("is a folder")
    );
    assert!(
        run(&read, json!({"path": "/dev/null"}))
            .await
            .unwrap_err()
            .contains("device")
    );
    assert!(
        run(&read, json!({"path": "big.txt", "offset": 9999}))
            .await
            .unwrap_err()
            .contains("past its end")
    );

    std::fs::write(dir.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
    let latin = text(&run(&read, json!({"path": "latin1.txt"})).await.unwrap());
    assert!(latin.contains("caf\u{fffd}") && latin.contains("not valid UTF-8"));

    let png = b"\x89PNG\r\n\x1a\n0000IHDR".to_vec();
    std::fs::write(dir.path().join("pic.png"), &png).unwrap();
    let image = run(&read, json!({"path": "pic.png"})).await.unwrap();
    assert!(
        matches!(&image.content[0], ContentBlock::Image(i) if i.mime_type == "image/png" && i.data == png)
    );
}

#[tokio::test]
async fn read_reports_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret.txt");
    std::fs::write(&path, "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let result = run(&Read::new(env(&dir)), json!({"path": "secret.txt"})).await;
    // Root can read anything; everyone else must get a clear message.
    if let Err(message) = result {
        assert!(message.contains("permission denied"), "{message}");
    }
}

#[tokio::test]
async fn write_creates_folders_keeps_line_endings_and_says_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let write = Write::new(env(&dir));
    let out = run(
        &write,
        json!({"path": "a/b/new.txt", "content": "one\ntwo\n"}),
    )
    .await
    .unwrap();
    assert!(text(&out).starts_with("Created") && out.details.unwrap()["created"] == true);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a/b/new.txt")).unwrap(),
        "one\ntwo\n"
    );
    std::fs::write(dir.path().join("dos.txt"), "\u{feff}x\r\ny\r\n").unwrap();
    let out = run(&write, json!({"path": "dos.txt", "content": "p\nq\n"}))
        .await
        .unwrap();
    assert!(text(&out).starts_with("Overwrote"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("dos.txt")).unwrap(),
        "\u{feff}p\r\nq\r\n"
    );
    assert!(
        run(&write, json!({"path": "a", "content": "x"}))
            .await
            .unwrap_err()
            .contains("is a folder")
    );
    let leftovers = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0, "no temporary files are left behind");
}

#[tokio::test]
async fn edit_replaces_uniquely_all_or_nothing_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let edit = Edit::new(env(&dir));
    let path = dir.path().join("lib.rs");
    std::fs::write(
        &path,
        "fn a() {\r\n    one();\r\n    two();\r\n    one();\r\n}\r\n",
    )
    .unwrap();
    let out = run(
        &edit,
        json!({"path": "lib.rs", "edits": [{"old_string": "two();", "new_string": "three();"}]}),
    )
    .await
    .unwrap();
    let shown = text(&out);
    assert!(
        shown.contains("-    two();") && shown.contains("+    three();"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn a() {\r\n    one();\r\n    three();\r\n    one();\r\n}\r\n"
    );

    let ambiguous = run(
        &edit,
        json!({"path": "lib.rs", "edits": [{"old_string": "one();", "new_string": "x();"}]}),
    )
    .await
    .unwrap_err();
    assert!(
        ambiguous.contains("matches 2 times") && ambiguous.contains("lines 2, 4"),
        "{ambiguous}"
    );
    let missing = run(
        &edit,
        json!({"path": "lib.rs", "edits": [{"old_string": "three();", "new_string": "four();"}, {"old_string": "nope", "new_string": "x"}]}),
    )
    .await
    .unwrap_err();
    assert!(
        missing.starts_with("Edit 2: old_string was not found"),
        "{missing}"
    );
    assert!(
        std::fs::read_to_string(&path).unwrap().contains("three();"),
        "a failed batch writes nothing"
    );

    let all = run(&edit, json!({"path": "lib.rs", "edits": [{"old_string": "one();", "new_string": "x();", "replace_all": true}]})).await.unwrap();
    assert!(text(&all).contains("2 replacements"));
    std::fs::write(&path, "say(\u{201C}hi\u{201D});  \nnext\n").unwrap();
    let fuzzy = run(&edit, json!({"path": "lib.rs", "edits": [{"old_string": "say(\"hi\");", "new_string": "say(\"bye\");"}]})).await.unwrap();
    assert!(text(&fuzzy).contains("normalising whitespace and quote style"));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "say(\"bye\");\nnext\n"
    );
    assert!(
        run(
            &edit,
            json!({"path": "nope.rs", "edits": [{"old_string": "a", "new_string": "b"}]})
        )
        .await
        .unwrap_err()
        .contains("no such file")
    );
    std::fs::write(dir.path().join("bin.dat"), b"\xff\xfe\x00").unwrap();
    assert!(
        run(
            &edit,
            json!({"path": "bin.dat", "edits": [{"old_string": "a", "new_string": "b"}]})
        )
        .await
        .unwrap_err()
        .contains("not valid UTF-8")
    );
}

#[tokio::test]
async fn bash_reports_exit_codes_and_keeps_output_order() {
    let dir = tempfile::tempdir().unwrap();
    let bash = Bash::new(env(&dir));
    let ok = run(
        &bash,
        json!({"command": "echo out; echo err >&2; echo out2"}),
    )
    .await
    .unwrap();
    assert!(!ok.is_error);
    assert_eq!(text(&ok), "out\nerr\nout2\n");
    let failed = run(&bash, json!({"command": "echo nope; exit 3"}))
        .await
        .unwrap();
    assert!(failed.is_error && text(&failed).contains("[exit code 3]"));
    assert_eq!(failed.details.unwrap()["exit_code"], 3);
    let no_match = run(&bash, json!({"command": "grep -r needle ."}))
        .await
        .unwrap();
    assert!(!no_match.is_error && text(&no_match).contains("no match"));
    let piped = run(&bash, json!({"command": "grep -r needle . | cat; exit 1"}))
        .await
        .unwrap();
    assert!(piped.is_error);
    let stdin = run(&bash, json!({"command": "cat; echo done"}))
        .await
        .unwrap();
    assert_eq!(
        text(&stdin),
        "done\n",
        "stdin is closed, so cat ends at once"
    );
    let cwd = run(&bash, json!({"command": "pwd"})).await.unwrap();
    assert_eq!(
        text(&cwd).trim(),
        dir.path().canonicalize().unwrap().display().to_string()
    );
}

#[tokio::test]
async fn bash_keeps_head_and_tail_of_long_output_and_saves_all_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let bash = Bash::new(env(&dir));
    let out = run(&bash, json!({"command": "seq 1 100000"}))
        .await
        .unwrap();
    let shown = text(&out);
    assert!(
        shown.starts_with("1\n2\n3\n") && shown.contains("100000\n"),
        "{}…{}",
        &shown[..100],
        &shown[shown.len() - 300..]
    );
    assert!(shown.len() < 40 * 1024);
    let saved = out.details.unwrap()["artifact"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let full = std::fs::read_to_string(&saved).unwrap();
    assert_eq!(full.lines().count(), 100_000);
    assert!(shown.contains(&saved));
}

fn alive(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let bash = Bash::new(env(&dir));
    let pidfile = dir.path().join("child.pid");
    let command = format!("(sleep 300 & echo $! > {}); sleep 300", pidfile.display());
    let started = Instant::now();
    let out = run(&bash, json!({"command": command, "timeout": 500}))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        out.is_error && text(&out).contains("timed out"),
        "{}",
        text(&out)
    );
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !alive(&pid),
        "the grandchild {pid} was killed with its group"
    );
}

#[tokio::test]
async fn abort_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let bash = Bash::new(env(&dir));
    let pidfile = dir.path().join("child.pid");
    let command = format!("(sleep 300 & echo $! > {}); sleep 300", pidfile.display());
    let (context, cancel) = context();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let out = bash
        .execute(json!({"command": command}), context)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(text(&out).contains("aborted"));
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!alive(&pid));
}

#[tokio::test]
async fn background_commands_write_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let bash = Bash::new(env(&dir));
    let out = run(
        &bash,
        json!({"command": "echo started; sleep 0.2; echo finished", "run_in_background": true}),
    )
    .await
    .unwrap();
    let file = out.details.unwrap()["output_file"]
        .as_str()
        .unwrap()
        .to_owned();
    for _ in 0..50 {
        if std::fs::read_to_string(&file)
            .unwrap_or_default()
            .contains("finished")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the background output never arrived");
}

#[tokio::test]
async fn credentials_are_scrubbed_by_mode_and_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let base: Vec<(String, String)> = [
        ("PATH", std::env::var("PATH").unwrap_or_default().as_str()),
        ("KEEL_SESSION_ID", "parent-session"),
        ("OPENAI_API_KEY", "sk-secret"),
        ("MY_SERVICE_TOKEN", "t0k3n"),
        ("EDITOR", "vi"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let show = "echo ${KEEL_SESSION_ID:-none} ${OPENAI_API_KEY:-none} ${MY_SERVICE_TOKEN:-none} ${EDITOR:-none}";
    for (mode, expected, removed) in [
        (EnvMode::Off, "none sk-secret t0k3n vi", "KEEL_SESSION_ID."),
        (
            EnvMode::Scrub,
            "none none t0k3n vi",
            "KEEL_SESSION_ID, OPENAI_API_KEY.",
        ),
        (
            EnvMode::Strict,
            "none none none vi",
            "KEEL_SESSION_ID, MY_SERVICE_TOKEN, OPENAI_API_KEY.",
        ),
    ] {
        let mut configured = (*env(&dir)).clone();
        configured.env_mode = Some(mode);
        configured.base_env = Some(base.clone());
        let bash = Bash::new(Arc::new(configured));
        let first = text(&run(&bash, json!({"command": show})).await.unwrap());
        assert!(first.starts_with(expected), "{mode:?}: {first}");
        assert!(
            first.ends_with(&format!("(names only): {removed}")),
            "{mode:?}: {first}"
        );
        let second = text(&run(&bash, json!({"command": show})).await.unwrap());
        assert!(!second.contains("Removed"), "reported once: {second}");
    }
}

#[tokio::test]
async fn todowrite_keeps_one_item_in_progress() {
    let todo = TodoWrite::new();
    let out = run(
        &todo,
        json!({"todos": [{"content": "read", "status": "completed"}, {"content": "fix", "status": "in_progress"}, {"content": "test", "status": "pending"}]}),
    )
    .await
    .unwrap();
    assert_eq!(text(&out), "[x] read\n[~] fix\n[ ] test\n(1 of 3 done)");
    assert_eq!(todo.current().len(), 3);
    let err = run(&todo, json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]})).await.unwrap_err();
    assert!(err.contains("at most one"));
}

fn serve_once(body: &'static str, content_type: &'static str) -> String {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/page", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[tokio::test]
async fn web_fetch_converts_html_and_refuses_internal_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let url = serve_once(
        "<html><body><h1>Title</h1><p>Some <b>bold</b> text.</p></body></html>",
        "text/html",
    );
    let strict = WebFetch::new(env(&dir));
    let refused = run(&strict, json!({"url": url.clone()})).await.unwrap_err();
    assert!(refused.contains("internal address"), "{refused}");
    let mut open = (*env(&dir)).clone();
    open.fetch_allow_private = true;
    let fetch = WebFetch::new(Arc::new(open));
    let page = text(&run(&fetch, json!({"url": url})).await.unwrap());
    assert!(
        page.contains("# Title") && page.contains("**bold**"),
        "{page}"
    );
    assert!(
        run(&fetch, json!({"url": "ftp://example.com/x"}))
            .await
            .unwrap_err()
            .contains("only http")
    );
    assert!(
        run(&fetch, json!({"url": "not a url"}))
            .await
            .unwrap_err()
            .contains("invalid URL")
    );
}

#[tokio::test]
async fn the_sandbox_denies_writes_outside_the_workspace_or_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let outside =
        std::path::PathBuf::from(home).join(format!("keel-sandbox-probe-{}", std::process::id()));
    let _ = std::fs::remove_file(&outside);
    let mut sandboxed = (*env(&dir)).clone();
    sandboxed.sandbox = SandboxMode::WorkspaceWrite;
    let bash = Bash::new(Arc::new(sandboxed.clone()));
    let command = format!(
        "echo inside > inside.txt && echo written-inside; echo x > {} && echo written-outside",
        outside.display()
    );
    match run(&bash, json!({"command": command})).await {
        Ok(out) => {
            let shown = text(&out);
            assert!(shown.contains("written-inside"), "{shown}");
            assert!(!shown.contains("written-outside"), "{shown}");
            assert!(
                !outside.exists(),
                "the write outside the workspace was blocked"
            );
            // /tmp stays writable in every mode, so the read-only workspace must live elsewhere.
            let home_dir = tempfile::tempdir_in(outside.parent().unwrap()).unwrap();
            let mut read_only = (*env(&home_dir)).clone();
            read_only.sandbox = SandboxMode::ReadOnly;
            let out = run(
                &Bash::new(Arc::new(read_only)),
                json!({"command": "echo x > again.txt"}),
            )
            .await
            .unwrap();
            assert!(
                out.is_error && !home_dir.path().join("again.txt").exists(),
                "{}",
                text(&out)
            );
        }
        Err(message) => {
            // Without Landlock a restricted mode must refuse to run at all.
            assert!(
                message.contains("cannot be enforced") && message.contains("danger-full-access"),
                "{message}"
            );
            assert!(!outside.exists() && !dir.path().join("inside.txt").exists());
        }
    }
    let _ = std::fs::remove_file(&outside);
}

/// A sandboxed command must not reach keel's memory: Landlock refuses tracing (and so
/// `/proc/PID/task/TID/mem`) of any task outside the command's domain, and no keel thread may
/// share the command's domain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_command_cannot_open_the_memory_of_any_keel_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut sandboxed = (*env(&dir)).clone();
    sandboxed.sandbox = SandboxMode::WorkspaceWrite;
    let bash = Bash::new(Arc::new(sandboxed));
    let command = format!(
        "for t in /proc/{}/task/*; do if exec 3<\"$t/mem\"; then echo OPENED; exec 3<&-; else echo DENIED; fi; done 2>/dev/null",
        std::process::id()
    );
    // Twice: a second command must not find a confined keel thread left by the first.
    for _ in 0..2 {
        match run(&bash, json!({"command": command})).await {
            Ok(out) => {
                let shown = text(&out);
                assert!(shown.contains("DENIED"), "{shown}");
                assert!(!shown.contains("OPENED"), "{shown}");
            }
            // Without Landlock a restricted mode refuses to run at all.
            Err(message) => assert!(message.contains("cannot be enforced"), "{message}"),
        }
    }
}

#[test]
fn the_builtin_set_has_nine_tools_with_valid_schemas_and_modes() {
    let dir = tempfile::tempdir().unwrap();
    let tools = keel_tools::builtin_tools(env(&dir));
    let mut names: Vec<String> = tools.iter().map(|t| t.definition().name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "bash",
            "edit",
            "glob",
            "grep",
            "ls",
            "read",
            "todowrite",
            "web_fetch",
            "write"
        ]
    );
    for tool in &tools {
        let parallel = tool.execution_mode() == keel_agent::ExecutionMode::Parallel;
        let read_only =
            ["read", "grep", "glob", "ls", "web_fetch"].contains(&tool.definition().name.as_str());
        assert_eq!(parallel, read_only, "{}", tool.definition().name);
    }
    // The loop compiles every schema and rejects duplicate names.
    let provider = keel_llm::scripted::ScriptedProvider::new();
    let options =
        keel_agent::AgentOptions::new(keel_llm::ModelSpec::scripted(), Arc::new(provider))
            .tools(tools);
    keel_agent::Agent::new(options).unwrap();
}

#[tokio::test]
async fn writes_follow_symlinks_keep_modes_and_refuse_special_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tools_env = env(&dir);
    let write = Write::new(tools_env.clone());
    let edit = Edit::new(tools_env.clone());
    std::fs::write(dir.path().join("AGENTS.md"), "old\n").unwrap();
    std::os::unix::fs::symlink("AGENTS.md", dir.path().join("CLAUDE.md")).unwrap();
    run(&write, json!({"path": "CLAUDE.md", "content": "new\n"}))
        .await
        .unwrap();
    assert!(
        std::fs::symlink_metadata(dir.path().join("CLAUDE.md"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("AGENTS.md")).unwrap(),
        "new\n"
    );

    let secret = dir.path().join(".env");
    std::fs::write(&secret, "A=1\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    run(
        &edit,
        json!({"path": ".env", "edits": [{"old_string": "A=1", "new_string": "A=2"}]}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let fifo = dir.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert!(
        run(&write, json!({"path": "pipe", "content": "x"}))
            .await
            .unwrap_err()
            .contains("FIFO")
    );
    assert!(
        run(
            &edit,
            json!({"path": "pipe", "edits": [{"old_string": "a", "new_string": "b"}]})
        )
        .await
        .unwrap_err()
        .contains("FIFO")
    );
    assert!(
        run(&write, json!({"path": "/dev/null", "content": "x"}))
            .await
            .unwrap_err()
            .contains("device")
    );
}

#[tokio::test]
async fn edit_keeps_mixed_line_endings_it_did_not_touch() {
    let dir = tempfile::tempdir().unwrap();
    let edit = Edit::new(env(&dir));
    let path = dir.path().join("fixture.http");
    std::fs::write(&path, "GET / HTTP/1.1\r\nHost: a\r\n\nbody line\nlast\n").unwrap();
    run(&edit, json!({"path": "fixture.http", "edits": [{"old_string": "body line", "new_string": "new body"}]})).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "GET / HTTP/1.1\r\nHost: a\r\n\nnew body\nlast\n"
    );
}

#[tokio::test]
async fn one_huge_line_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let huge = "x".repeat(20 * 1024 * 1024);
    std::fs::write(dir.path().join("bundle.js"), format!("{huge}\nsecond\n")).unwrap();
    let out = text(
        &run(&Read::new(env(&dir)), json!({"path": "bundle.js"}))
            .await
            .unwrap(),
    );
    assert!(out.contains("line cut at 2000 characters") && out.contains("     2\tsecond"));
    assert!(out.len() < 4096);
}

#[tokio::test]
async fn saved_output_is_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = run(&Bash::new(env(&dir)), json!({"command": "seq 1 50000"}))
        .await
        .unwrap();
    let saved = out.details.unwrap()["artifact"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let folder = std::path::Path::new(&saved).parent().unwrap();
    assert_eq!(
        std::fs::metadata(folder).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let quick = run(
        &Bash::new(env(&dir)),
        json!({"command": "sleep 5", "timeout": 200}),
    )
    .await
    .unwrap();
    assert!(
        text(&quick).contains("timed out after 200 ms"),
        "{}",
        text(&quick)
    );
}

#[tokio::test]
async fn write_and_edit_refuse_control_files_even_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink(root.join(".git/hooks"), root.join("hooks-link")).unwrap();
    let mut protected = (*env(&dir)).clone();
    protected.protect_control = true;
    let protected = Arc::new(protected);
    let write = Write::new(protected.clone());
    for path in [
        ".keel/config.yaml",
        ".mcp.json",
        "hooks-link/pre-commit",
        ".claude/settings.json",
    ] {
        let err = run(&write, json!({"path": path, "content": "x"}))
            .await
            .unwrap_err();
        assert!(err.contains("protected control file"), "{path}: {err}");
        assert!(!root.join(path).exists(), "{path}");
    }
    let edit = Edit::new(protected);
    let err = run(
        &edit,
        json!({"path": ".git/config", "edits": [{"old_string": "[core]", "new_string": "[core]\n\tfsmonitor = x"}]}),
    )
    .await
    .unwrap_err();
    assert!(err.contains("protected control file"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );

    // With control files unprotected (full permission mode) the same write goes through.
    let mut open = (*env(&dir)).clone();
    open.protect_control = false;
    let write = Write::new(Arc::new(open));
    run(&write, json!({"path": ".mcp.json", "content": "{}"}))
        .await
        .unwrap();
}

/// A hard link to a credential planted among the session's artifacts is not read as one,
/// however the gate judged the path.
#[tokio::test]
async fn read_refuses_a_planted_hard_link_among_the_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let artifacts = root.join("keel/sessions/s-1/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("bash-1.log"), "line one\n").unwrap();
    std::fs::write(root.join("secret.txt"), "KEY=1\n").unwrap();
    std::fs::hard_link(root.join("secret.txt"), artifacts.join("planted.log")).unwrap();
    let mut env = ToolEnv::new(root.clone());
    env.artifacts = Some(artifacts.clone());
    let read = Read::new(Arc::new(env));
    let own = run(&read, json!({"path": artifacts.join("bash-1.log")}))
        .await
        .unwrap();
    assert!(text(&own).contains("line one"));
    let planted = run(&read, json!({"path": artifacts.join("planted.log")}))
        .await
        .unwrap_err();
    assert!(
        planted.contains("not one of this session's saved outputs"),
        "{planted}"
    );
}
