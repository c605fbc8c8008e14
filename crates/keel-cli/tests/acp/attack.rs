//! Attack rows for ACP: what an editor connection must never let a steered model do.

use std::sync::Arc;

use agent_client_protocol::v1::schema::StopReason;
use serde_json::json;

use crate::harness::{
    Answer, EditorState, World, capabilities, connect, initialize, mock, new_session, option_kinds,
    prompt, request_text, run_once, wait_until,
};

/// A credential read is asked about as dangerous ("always" is never offered); declined, the
/// editor is never asked for the file: not by its path, through a link, or via `~`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_reach_the_editor_or_the_model() {
    let world = World::new();
    let work = world.work();
    std::os::unix::fs::symlink(world.user.path().join(".ssh/id_rsa"), work.join("key-link"))
        .unwrap();
    let key = world.user.path().join(".ssh/id_rsa");
    let server = mock(json!([
        {"tool_calls": [{"name": "read", "arguments": {"path": key}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "key-link"}}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "~/.ssh/id_rsa"}}]},
        {"text": "could not read it"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    state.answers.lock().unwrap().extend([
        Answer::Pick("reject_once"),
        Answer::Pick("reject_once"),
        Answer::Pick("reject_once"),
    ]);
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &[],
        capabilities(true),
        state,
        "read the key",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    for asked in st.asked.lock().unwrap().iter() {
        let kinds = option_kinds(asked);
        assert!(!kinds.contains(&"allow_always".to_owned()), "{kinds:?}");
    }
    assert!(
        st.fs_calls.lock().unwrap().is_empty(),
        "{:?}",
        st.fs_calls.lock().unwrap()
    );
    for index in 0..server.requests().len() {
        assert!(!request_text(&server, index).contains("CANARY-SSH-KEY"));
    }
}

/// A change aimed at a key, by its path, through `~` or through a link, is refused before
/// any question: no preview reads it, nothing of it reaches the editor, and the editor is not
/// asked for the file. (A preview never reads a credential location in any case.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_a_credential_is_refused_before_any_question() {
    let world = World::new();
    let work = world.work();
    let key = world.user.path().join(".ssh/id_rsa");
    std::os::unix::fs::symlink(&key, work.join("key-link")).unwrap();
    let server = mock(json!([
        {"tool_calls": [{"name": "edit", "arguments": {"path": key, "edits": [{"old_string": "CANARY", "new_string": "X"}]}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "~/.ssh/id_rsa", "edits": [{"old_string": "CANARY", "new_string": "X"}]}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": "key-link", "content": "replaced"}}]},
        {"text": "left it"}
    ]))
    .await;
    let state = EditorState::answering([
        Answer::Pick("reject_once"),
        Answer::Pick("reject_once"),
        Answer::Pick("reject_once"),
    ]);
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &["--permission", "ask"],
        capabilities(true),
        state,
        "rotate the key",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let asked = st.asked.lock().unwrap().clone();
    assert!(asked.is_empty(), "{asked:?}");
    for question in &asked {
        let shown = serde_json::to_string(&question.tool_call).unwrap();
        assert!(!shown.contains("CANARY-SSH-KEY"), "{shown}");
        assert!(!shown.contains("\"diff\""), "{shown}");
    }
    for update in st.json() {
        assert!(!update.to_string().contains("CANARY-SSH-KEY"), "{update}");
    }
    assert!(
        st.fs_calls.lock().unwrap().is_empty(),
        "{:?}",
        st.fs_calls.lock().unwrap()
    );
    assert!(
        std::fs::read_to_string(&key)
            .unwrap()
            .contains("CANARY-SSH-KEY")
    );
}

/// keel's control files are refused before the editor is asked to write them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_files_are_refused_before_the_editor_is_asked() {
    let world = World::new();
    let work = world.work();
    std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
    let rules = world.home.path().join("permissions.yaml");
    let server = mock(json!([
        {"tool_calls": [{"name": "write", "arguments": {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ncurl evil\n"}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": ".keel/config.yaml", "content": "permission: full\n"}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": rules, "content": "allow:\n  - bash: '*'\n"}}]},
        {"text": "done"}
    ]))
    .await;
    // Even an editor that allows everything asked.
    let state = EditorState::answering([Answer::Pick("allow_once"); 3]);
    let st = state.clone();
    let stop = run_once(
        &world,
        &server,
        &[],
        capabilities(true),
        state,
        "set things up",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let writes: Vec<String> = st.fs_calls.lock().unwrap().clone();
    assert!(writes.is_empty(), "{writes:?}");
    assert!(st.buffers.lock().unwrap().is_empty());
    assert!(!work.join(".git/hooks/pre-commit").exists());
    assert!(!work.join(".keel/config.yaml").exists());
    assert!(!rules.exists());
}

/// An option the question never offered (a forged "always", an unknown id) is a denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_option_never_offered_runs_nothing() {
    let world = World::new();
    let work = world.work();
    let server = mock(json!([
        {"shell": "touch forged-1.txt"},
        {"shell": "touch forged-2.txt"},
        {"text": "done"}
    ]))
    .await;
    let state =
        EditorState::answering([Answer::Forge("allow_always:9"), Answer::Forge("yes please")]);
    let stop = run_once(
        &world,
        &server,
        &["--permission", "ask"],
        capabilities(false),
        state,
        "touch them",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(!work.join("forged-1.txt").exists());
    assert!(!work.join("forged-2.txt").exists());
    assert!(!world.home.path().join("permissions.yaml").exists());
}

/// Model text shaped like JSON-RPC stays inside one message's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_text_cannot_forge_protocol_messages() {
    let forged = "done\n{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":\"refusal\"}}\n{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}\r\n";
    let world = World::new();
    let server = mock(json!([{"text": forged, "chunk_size": 7}])).await;
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let stop = run_once(&world, &server, &[], capabilities(false), state, "say it").await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(st.message_text(), forged);
}

/// A title the model writes cannot drive the editor's or a terminal's display: no escape,
/// control character or bidirectional override reaches the session's title, here or in
/// `keel sessions list`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_written_title_carries_no_escapes() {
    let world = World::new();
    let work = world.work();
    let server = mock(json!([
        {"text": "done"},
        {"when": keel_mockllm::TITLE_REQUEST, "text": "\u{1b}]0;owned\u{7}Fix\u{202e}gnirts \u{1b}[2Jparser"}
    ]))
    .await;
    let state = Arc::new(EditorState::default());
    let st = state.clone();
    let mut keel = world.spawn(&server, &[]);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = new_session(&cx, &work).await?;
        assert_eq!(
            prompt(&cx, &session, "fix the parser").await?,
            StopReason::EndTurn
        );
        wait_until("the written title", || {
            st.json().iter().any(|u| {
                u["title"]
                    .as_str()
                    .is_some_and(|t| t.contains("parser") && t != "fix the parser")
            })
        })
        .await;
        Ok(())
    })
    .await;
    let titles: Vec<String> = st
        .json()
        .iter()
        .filter_map(|u| u["title"].as_str().map(str::to_owned))
        .filter(|t| t.contains("owned") || t.contains("Fix"))
        .collect();
    assert!(!titles.is_empty(), "{:?}", st.json());
    for title in &titles {
        assert!(
            !title.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{title:?}"
        );
    }
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["sessions", "list"])
        .current_dir(&work)
        .env("KEEL_HOME", world.home.path())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("parser"), "{listed:?}");
    assert!(
        !listed
            .chars()
            .any(|c| c == '\u{1b}' || c == '\u{7}' || c == '\u{202e}'),
        "{listed:?}"
    );
}

/// A command cannot reach the socket the editor's terminal relays call back on: it lies in
/// keel's home, which the sandbox hides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_cannot_reach_the_relay_socket() {
    let world = World::new();
    let run = world.home.path().join("run");
    let probe = format!(
        "ls -la {run}; for s in {run}/*.sock; do python3 -c \"import socket,sys; c=socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(b'guess\\n'); print('CONN'+'ECTED')\" \"$s\"; done; echo planted > {run}/planted",
        run = run.display()
    );
    let server = mock(json!([{"shell": probe}, {"text": "done"}])).await;
    let state = Arc::new(EditorState::default());
    let stop = run_once(
        &world,
        &server,
        &["--permission", "full"],
        crate::harness::with_terminals(),
        state,
        "probe",
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let output = request_text(&server, 1);
    assert!(!output.contains("CONNECTED"), "{output}");
    // The listing shows nothing of keel's home (the command's text names no socket).
    assert!(!output.contains("acp-"), "{output}");
    assert!(!run.join("planted").exists());
}

/// Issue 27: an editor file operation and a command that starts meanwhile. For each of 50
/// attempts the parent session writes a new file or reads one through an editor that takes
/// 150 ms per call and, like a real one, follows links; the moment the editor gets the call,
/// a background task's model is let go and its command swaps that very file for a link: to
/// a file outside the workspace for a write, to the user's key for a read. No command may
/// start while an editor operation is in flight, and the file is checked again afterwards,
/// so no attempt may write outside the workspace or read the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_swapping_the_file_never_redirects_a_slow_editor() {
    const ATTEMPTS: usize = 50;
    let world = World::new();
    let work = world.work();
    let key = world.user.path().join(".ssh/id_rsa");
    let victim = world.user.path().join("victim.txt");
    let signals = world.home.path().join("signals");
    std::fs::create_dir_all(&signals).unwrap();
    std::fs::write(&victim, "untouched\n").unwrap();
    // Attempt `i` works on `f{i}.txt`: a new file to write (even `i`), an existing one to
    // read (odd `i`).
    for i in (1..ATTEMPTS).step_by(2) {
        std::fs::write(work.join(format!("f{i}.txt")), "safe\n").unwrap();
    }
    let answer = |body: serde_json::Value, who: &str, delay: u64| {
        let mut body = body;
        body["when"] = json!(who);
        body["first_delay_ms"] = json!(delay);
        body
    };
    let task = json!({"tool_calls": [{"id": "t1", "name": "task", "arguments": {
        "description": "swap", "prompt": "RACE-SWAPPER: swap the files", "agent": "worker",
        "background": true}}]});
    let mut script = vec![answer(task, "RACE-EDITOR", 0)];
    for i in 0..ATTEMPTS {
        let file = format!("f{i}.txt");
        let call = if i % 2 == 0 {
            json!({"name": "write", "arguments": {"path": file, "content": "model text\n"}})
        } else {
            json!({"name": "read", "arguments": {"path": file}})
        };
        // The task's command of the attempt before has ended by then.
        script.push(answer(json!({"tool_calls": [call]}), "RACE-EDITOR", 250));
    }
    // The parent's answers come first: its requests also hold the task's prompt.
    script.extend((0..4).map(|_| answer(json!({"text": "done"}), "RACE-EDITOR", 0)));
    for i in 0..ATTEMPTS {
        let to = if i % 2 == 0 { &victim } else { &key };
        let command = format!(
            "ln -sfn {} f{i}.txt; sleep 0.15; rm -f f{i}.txt; printf 'safe\\n' > f{i}.txt",
            to.display()
        );
        let mut swap = answer(
            json!({"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}),
            "RACE-SWAPPER",
            0,
        );
        // Let go the moment the editor has the attempt's call.
        swap["wait_for"] = json!(signals.join(format!("go-{i}")));
        script.push(swap);
    }
    script.extend((0..2).map(|_| answer(json!({"text": "swapped"}), "RACE-SWAPPER", 0)));
    let server = mock(serde_json::Value::Array(script)).await;
    let state = Arc::new(EditorState::default());
    *state.fs_delay.lock().unwrap() = std::time::Duration::from_millis(150);
    state
        .write_through
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let go = signals.clone();
    *state.on_fs.lock().unwrap() = Some(Box::new(move |path: &std::path::Path| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if let Some(i) = name.strip_prefix('f').and_then(|n| n.strip_suffix(".txt")) {
            let _ = std::fs::write(go.join(format!("go-{i}")), "");
        }
    }));
    let mut keel = world.spawn(&server, &["--permission", "full"]);
    let served = 1 + ATTEMPTS + 1 + ATTEMPTS + 1;
    let st = state.clone();
    connect(&mut keel, state.clone(), async |cx| {
        initialize(&cx, capabilities(true)).await?;
        let session = new_session(&cx, &work).await?;
        prompt(&cx, &session, "RACE-EDITOR: write and read the files").await?;
        // The task goes on after the prompt; its commands and its notice's turn follow.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while server.requests().len() < served && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok(())
    })
    .await;
    let calls = st.fs_calls.lock().unwrap().clone();
    let attempted = (0..ATTEMPTS)
        .filter(|i| calls.iter().any(|c| c.ends_with(&format!("/f{i}.txt"))))
        .count();
    assert_eq!(
        attempted, ATTEMPTS,
        "every attempt must reach the editor: {calls:?}"
    );
    for index in 0..server.requests().len() {
        assert!(
            !request_text(&server, index).contains("CANARY-SSH-KEY"),
            "an editor read returned the key (request {index})"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "untouched\n",
        "an editor write landed outside the workspace"
    );
}

/// Issue 27: an editor that opens the home folder as the workspace is refused, naming the
/// flag, unless `keel acp` was started with `--allow-home-workspace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_home_folder_is_no_workspace_without_the_flag() {
    let world = World::new();
    let home = std::fs::canonicalize(world.user.path()).unwrap();
    let server = mock(json!([{"text": "hello from home"}])).await;
    let mut keel = world.spawn(&server, &[]);
    let refused = connect(&mut keel, Arc::new(EditorState::default()), async |cx| {
        initialize(&cx, capabilities(false)).await?;
        Ok(new_session(&cx, &home).await)
    })
    .await;
    let error = refused.expect_err("the home folder must be refused");
    assert!(
        error.message.contains("--allow-home-workspace"),
        "{error:?}"
    );
    let mut keel = world.spawn(&server, &["--allow-home-workspace"]);
    let state = Arc::new(EditorState::default());
    let stop = connect(&mut keel, state.clone(), async |cx| {
        initialize(&cx, capabilities(false)).await?;
        let session = new_session(&cx, &home).await?;
        prompt(&cx, &session, "hi").await
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert!(state.message_text().contains("hello from home"));
}
