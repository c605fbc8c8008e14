//! The spawner's rows of the sandbox suite: what a command cannot do to the spawner that
//! started it, what appeared after the spawner started is still covered, commands share
//! no temp folder, and a spawner killed from outside is replaced.
//!
//! Each test binary is a process of its own with its own spawner (forked from the test
//! process: only keel's binary starts it as a fresh program, see `keel-cli`'s tests).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_protocol::SandboxMode;
use keel_sandbox::{Confinement, Policy, Program, Stream, spawn, spawner_pid};

/// Whether this system runs commands through the spawner (namespaces and Landlock).
fn spawned_here() -> bool {
    let support = keel_sandbox::support();
    let ok = support.landlock.is_ok() && support.namespaces.is_ok();
    if !ok {
        eprintln!("skipped: this system cannot build the namespaces");
    }
    ok
}

/// A workspace and its session's private temp folder.
struct Session {
    _base: tempfile::TempDir,
    ws: PathBuf,
    tmp: PathBuf,
}

impl Session {
    fn new() -> Self {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().canonicalize().unwrap();
        let (ws, tmp) = (root.join("ws"), root.join("tmp"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        Self {
            _base: base,
            ws,
            tmp,
        }
    }

    fn policy(&self) -> Policy {
        Policy {
            mode: SandboxMode::WorkspaceWrite,
            block_network: false,
            roots: vec![self.ws.clone()],
            tmp: self.tmp.clone(),
            credentials: Vec::new(),
            output_dir: self.tmp.join("no-outputs"),
            pinned: Vec::new(),
            read_only: Vec::new(),
            private_network: None,
        }
    }

    /// Runs `script` under `policy`; its output (stdout and stderr) and exit code.
    async fn run(&self, policy: Policy, script: &str) -> (String, Option<i32>) {
        let (reader, writer) = std::io::pipe().unwrap();
        let program = Program::new("/bin/sh", &self.ws)
            .args(["-c", script])
            .env(vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("TMPDIR".into(), "/tmp".into()),
            ])
            .streams(
                Stream::Null,
                writer.try_clone().unwrap().into(),
                writer.into(),
            );
        let mut child = spawn(program, &Confinement::Sandbox(policy)).unwrap();
        let out = tokio::task::spawn_blocking(move || {
            let mut out = String::new();
            std::io::Read::read_to_string(&mut &reader, &mut out).unwrap();
            out
        })
        .await
        .unwrap();
        let code = child.wait().await.unwrap().code();
        (out, code)
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn a_command_can_neither_see_nor_signal_nor_trace_the_spawner() {
    if !spawned_here() {
        return;
    }
    let session = Session::new();
    session.run(session.policy(), "true").await;
    let spawner = spawner_pid().expect("a spawner runs once a command ran");
    let script = format!(
        "kill -0 {spawner} 2>/dev/null && echo signalled || echo no-signal
         test -e /proc/{spawner} && echo visible || echo hidden
         cat /proc/{spawner}/mem >/dev/null 2>&1 && echo read-memory || echo no-memory
         if command -v python3 >/dev/null; then
           python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print(\"traced\" if l.ptrace(16, {spawner}, 0, 0) == 0 else \"no-trace\")'
         else echo no-trace; fi
         kill -9 -1 2>/dev/null; echo after-kill-all"
    );
    let (out, _) = session.run(session.policy(), &script).await;
    for (bad, good) in [
        ("signalled", "no-signal"),
        ("visible", "hidden"),
        ("read-memory", "no-memory"),
        ("traced", "no-trace"),
    ] {
        assert!(
            out.lines().any(|l| l == good) && !out.lines().any(|l| l == bad),
            "{out}"
        );
    }
    // `kill -9 -1` ends the command's own namespace only: the spawner serves on.
    assert!(alive(spawner), "the spawner died of a command's kill -9 -1");
    assert_eq!(spawner_pid(), Some(spawner));
    let (out, code) = session.run(session.policy(), "echo still").await;
    assert_eq!((out.trim(), code), ("still", Some(0)));
    assert_eq!(spawner_pid(), Some(spawner));
}

#[tokio::test]
async fn a_socket_and_a_control_file_made_after_the_spawner_started_are_covered() {
    if !spawned_here() {
        return;
    }
    let session = Session::new();
    session.run(session.policy(), "true").await;
    assert!(spawner_pid().is_some());
    // A socket where sessions keep theirs (a new tmux server, say), made after the start.
    let socket = PathBuf::from(format!("/dev/shm/keel-late-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // A control file named after the start, as a new trust record would name one.
    let control = session.ws.join("late.toml");
    std::fs::write(&control, "kept = true\n").unwrap();
    let mut policy = session.policy();
    policy.read_only.push(control.clone());
    let script = format!(
        "test -S {socket} && echo socket-visible || echo socket-hidden
         echo 'hooked = true' >> late.toml 2>/dev/null && echo control-changed || echo control-kept",
        socket = socket.display()
    );
    let (out, _) = session.run(policy, &script).await;
    let _ = std::fs::remove_file(&socket);
    assert!(out.contains("socket-hidden"), "{out}");
    assert!(out.contains("control-kept"), "{out}");
    assert_eq!(std::fs::read_to_string(&control).unwrap(), "kept = true\n");
}

#[tokio::test]
async fn every_credential_folder_is_hidden_whatever_their_order_and_nesting() {
    if !spawned_here() {
        return;
    }
    let session = Session::new();
    // The first folder hidden is the source of the others' copies: here it lies inside the
    // second, which covers its path before the third is hidden.
    // (In the workspace: the command's /tmp is the session's own.)
    let home = session.ws.join("home");
    let folders = [
        home.join(".config/gh"),
        home.join(".config"),
        home.join(".aws"),
    ];
    for folder in &folders {
        std::fs::create_dir_all(folder).unwrap();
        std::fs::write(folder.join("secret"), "token\n").unwrap();
    }
    let mut policy = session.policy();
    policy.credentials = folders.to_vec();
    let script = folders
        .iter()
        .map(|f| format!("cat {}/secret 2>/dev/null || echo hidden", f.display()))
        .collect::<Vec<_>>()
        .join("\n");
    let (out, _) = session.run(policy, &script).await;
    assert_eq!(out, "hidden\nhidden\nhidden\n");
}

#[tokio::test]
async fn two_sessions_commands_do_not_see_each_others_temp_folder() {
    if !spawned_here() {
        return;
    }
    let (one, two) = (Session::new(), Session::new());
    if !one.tmp.starts_with("/tmp") {
        eprintln!("skipped: the system temp folder is not /tmp");
        return;
    }
    let (out, code) = one
        .run(one.policy(), "echo one > /tmp/mine && echo written")
        .await;
    assert_eq!((out.trim(), code), ("written", Some(0)));
    assert_eq!(
        std::fs::read_to_string(one.tmp.join("mine")).unwrap(),
        "one\n"
    );
    let (out, _) = two
        .run(two.policy(), "cat /tmp/mine 2>/dev/null || echo absent")
        .await;
    assert_eq!(out.trim(), "absent", "{out}");
    assert!(!two.tmp.join("mine").exists());
    // And each command has a mount namespace of its own: what one mounts, none sees.
    let (out, _) = one.run(one.policy(), "cat /tmp/mine").await;
    assert_eq!(out.trim(), "one");
}

#[tokio::test]
async fn a_spawner_killed_from_outside_is_replaced_and_its_commands_end() {
    if !spawned_here() {
        return;
    }
    let session = Session::new();
    let marker = format!("30{}.5", std::process::id() % 1000);
    let (reader, writer) = std::io::pipe().unwrap();
    let program = Program::new("/bin/sh", &session.ws)
        .args(["-c", &format!("echo up; exec sleep {marker}")])
        .env(vec![("PATH".into(), "/usr/bin:/bin".into())])
        .streams(Stream::Null, writer.into(), Stream::Null);
    let mut running = spawn(program, &Confinement::Sandbox(session.policy())).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&reader), &mut line).unwrap();
    assert_eq!(line.trim(), "up");
    let first = spawner_pid().unwrap();
    // SAFETY: signalling the test's own spawner.
    #[expect(unsafe_code, reason = "kill(2) has no safe wrapper in std")]
    unsafe {
        libc::kill(first, libc::SIGKILL);
    }
    // The command dies with its spawner (a generous bound: no tight timing).
    let started = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(20), running.wait())
        .await
        .expect("the command outlived its spawner")
        .unwrap();
    println!(
        "the command ended {:?} after its spawner",
        started.elapsed()
    );
    assert!(status.code().is_none(), "{status:?}");
    // The next command runs, through a new spawner.
    let (out, code) = session.run(session.policy(), "echo next").await;
    assert_eq!((out.trim(), code), ("next", Some(0)));
    let second = spawner_pid().unwrap();
    assert_ne!(first, second);
    assert!(alive(second));
}
