//! Children as keel's callers see them: a program that cannot start is named, a tree is
//! killed whole, a contained program's daemons end with it, and full access is a group.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use keel_protocol::SandboxMode;
use keel_sandbox::{Confinement, Policy, Program, SpawnError, Stream, TreeGuard, spawn};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

/// The pids (outside any namespace) of live processes whose command line is `args`.
fn pids_of(args: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted)
                && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    s.rsplit(')')
                        .next()
                        .is_some_and(|r| r.trim_start().starts_with('Z'))
                })
        })
        .collect()
}

/// Waits up to two seconds for `done`.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..100 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn sh(script: &str) -> Program {
    Program::new("/bin/sh", "/")
        .args(["-c", script])
        .env(vec![("PATH".into(), "/usr/bin:/bin".into())])
        .streams(Stream::Piped, Stream::Piped, Stream::Null)
}

#[tokio::test]
async fn a_program_that_cannot_start_is_named() {
    let missing = Program::new("/nonexistent/keel-test-program", "/");
    let error = spawn(missing, &Confinement::Group).unwrap_err();
    assert!(matches!(error, SpawnError::Start(_)), "{error:?}");
    assert_eq!(error.code(), "spawn_failed");
    assert!(
        error.to_string().contains("/nonexistent/keel-test-program"),
        "{error}"
    );
}

#[tokio::test]
async fn the_environment_is_exactly_the_one_given() {
    let program = Program::new("/usr/bin/env", "/")
        .env(vec![("ONLY".into(), "this".into())])
        .streams(Stream::Null, Stream::Piped, Stream::Null);
    let mut child = spawn(program, &Confinement::Group).unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.take_stdout().unwrap(), &mut out)
        .await
        .unwrap();
    assert!(child.wait().await.unwrap().success());
    assert_eq!(out, "ONLY=this\n");
}

#[tokio::test]
async fn killing_the_tree_ends_what_the_child_started() {
    // A duration no other test sleeps, to find the grandchild by.
    let grandchild = ["sleep", "302.25"];
    let mut child = spawn(sh("sleep 302.25 & echo started; wait"), &Confinement::Group).unwrap();
    let mut out = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(out.next_line().await.unwrap().unwrap(), "started");
    assert!(eventually(|| pids_of(&grandchild).len() == 1).await);
    let tree = child.tree();
    assert_eq!(tree.id(), i32::try_from(child.id().unwrap()).unwrap());
    drop(TreeGuard::new(tree));
    assert!(!child.wait().await.unwrap().success());
    assert!(
        eventually(|| pids_of(&grandchild).is_empty()).await,
        "the grandchild outlived the tree: {:?}",
        pids_of(&grandchild)
    );
}

#[tokio::test]
async fn a_released_guard_leaves_the_tree_running() {
    let mut child = spawn(sh("echo up; read line"), &Confinement::Group).unwrap();
    let mut out = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(out.next_line().await.unwrap().unwrap(), "up");
    let mut guard = TreeGuard::new(child.tree());
    guard.release();
    drop(guard);
    let mut stdin = child.take_stdin().unwrap();
    stdin.write_all(b"go\n").await.unwrap();
    assert!(child.wait().await.unwrap().success(), "it ran to its end");
}

#[tokio::test]
async fn full_access_is_a_process_group_of_its_own() {
    let policy = Policy {
        mode: SandboxMode::DangerFullAccess,
        block_network: false,
        roots: vec!["/".into()],
        tmp: std::env::temp_dir(),
        credentials: Vec::new(),
        output_dir: std::env::temp_dir(),
        pinned: Vec::new(),
        read_only: Vec::new(),
        private_network: None,
    };
    let mut child = spawn(sh("ps -o pgid= -p $$"), &Confinement::Sandbox(policy)).unwrap();
    let mut out = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
    let pgid: i32 = out
        .next_line()
        .await
        .unwrap()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pgid, child.tree().id());
    assert_ne!(pgid, own_group());
    assert!(child.wait().await.unwrap().success());
}

/// This test process's own group, read from /proc (no system call needed).
fn own_group() -> i32 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = stat.rsplit(')').next().unwrap();
    rest.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_contained_programs_daemon_ends_with_it() {
    // A duration no other test sleeps, to find the daemon by.
    let daemon = ["sleep", "301.25"];
    let mut child = spawn(
        sh("setsid sleep 301.25 & echo started; read line; echo got $line"),
        &Confinement::Contained,
    )
    .unwrap();
    if let Some(why) = child.uncontained() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut stdin = child.take_stdin().unwrap();
    let mut out = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(out.next_line().await.unwrap().unwrap(), "started");
    assert!(
        eventually(|| pids_of(&daemon).len() == 1).await,
        "the daemon runs"
    );
    stdin.write_all(b"hello\n").await.unwrap();
    assert_eq!(out.next_line().await.unwrap().unwrap(), "got hello");
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        eventually(|| pids_of(&daemon).is_empty()).await,
        "the setsid daemon outlived its program: {:?}",
        pids_of(&daemon)
    );
}

/// A read-only command's policy over `ws`, with `tmp` its private temp folder.
fn read_only_policy(ws: &std::path::Path, tmp: &std::path::Path) -> Policy {
    Policy {
        mode: SandboxMode::ReadOnly,
        block_network: true,
        roots: vec![ws.to_path_buf()],
        tmp: tmp.to_path_buf(),
        credentials: Vec::new(),
        output_dir: tmp.join("no-outputs"),
        pinned: Vec::new(),
        read_only: Vec::new(),
        private_network: None,
    }
}

#[tokio::test]
async fn a_read_only_command_cannot_write_a_workspace_under_tmp() {
    let support = keel_sandbox::support();
    if support.landlock.is_err() || !support.namespaces.as_ref().is_ok_and(|ns| ns.network) {
        eprintln!("skipped: this system cannot enforce the read-only sandbox");
        return;
    }
    // Both under /tmp, as a project kept there is: the workspace is bound into the
    // command's private /tmp, which it may write.
    let base = tempfile::Builder::new()
        .prefix("keel-ro-")
        .tempdir_in("/tmp")
        .unwrap();
    let base_path = base.path().canonicalize().unwrap();
    let (ws, tmp) = (base_path.join("ws"), base_path.join("private"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(ws.join("kept.txt"), "before").unwrap();
    let script = "echo changed > kept.txt; echo new > made.txt; echo scratch > /tmp/scratch.txt && echo wrote-tmp";
    let program = Program::new("/bin/sh", &ws)
        .args(["-c", script])
        .env(vec![("PATH".into(), "/usr/bin:/bin".into())])
        .streams(Stream::Null, Stream::Piped, Stream::Null);
    let mut child = spawn(program, &Confinement::Sandbox(read_only_policy(&ws, &tmp))).unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.take_stdout().unwrap(), &mut out)
        .await
        .unwrap();
    child.wait().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "before"
    );
    assert!(
        !ws.join("made.txt").exists(),
        "a file was made in the workspace"
    );
    // Its own temp folder stays writable.
    assert_eq!(out.trim(), "wrote-tmp");
    assert!(tmp.join("scratch.txt").exists());
}

#[tokio::test]
async fn a_sandboxed_command_ends_with_its_own_code_and_sees_only_its_processes() {
    let support = keel_sandbox::support();
    if support.landlock.is_err() || support.namespaces.is_err() {
        eprintln!("skipped: this system cannot enforce the sandbox");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().canonicalize().unwrap();
    let mut policy = read_only_policy(&ws, &ws.join("private"));
    policy.mode = SandboxMode::WorkspaceWrite;
    std::fs::create_dir_all(&policy.tmp).unwrap();
    let program = Program::new("/bin/sh", &ws)
        .args(["-c", "ls /proc | grep -c '^[0-9]'; exit 3"])
        .env(vec![("PATH".into(), "/usr/bin:/bin".into())])
        .streams(Stream::Null, Stream::Piped, Stream::Null);
    let mut child = spawn(program, &Confinement::Sandbox(policy)).unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.take_stdout().unwrap(), &mut out)
        .await
        .unwrap();
    assert_eq!(child.wait().await.unwrap().code(), Some(3), "{out}");
    if support.namespaces.as_ref().is_ok_and(|ns| ns.private_proc) {
        let seen: usize = out.trim().parse().unwrap();
        assert!(seen < 5, "the command sees {seen} processes");
    }
}
