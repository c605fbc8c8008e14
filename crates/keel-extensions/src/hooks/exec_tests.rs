use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::*;

pub(crate) fn path_env() -> Vec<(String, String)> {
    vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())]
}

/// Whether `pid` is a live process (a zombie waiting for its parent counts as gone).
pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to a second for `pid` to be gone.
pub(crate) async fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// The pid written to `file`, waiting up to a second for it.
pub(crate) async fn pid_in(file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn input_on_stdin_output_captured_env_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = path_env();
    env.push(("ONLY".into(), "this".into()));
    let finished = execute(
        "read -r line; echo \"got $line in $PWD\"; echo \"$ONLY ${HOME:-nohome}\" >&2; exit 3",
        Duration::from_secs(5),
        b"hello\n",
        dir.path(),
        &env,
    )
    .await;
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        finished,
        Finished {
            status: Status::Exited(3),
            stdout: format!("got hello in {}\n", cwd.display()),
            stderr: "this nohome\n".into(),
            truncated: false,
        }
    );
}

#[tokio::test]
async fn a_hook_that_ignores_a_large_input_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let input = vec![b'x'; 4 * 1024 * 1024];
    let finished = execute(
        "echo done",
        Duration::from_secs(5),
        &input,
        dir.path(),
        &path_env(),
    )
    .await;
    assert_eq!(finished.status, Status::Exited(0));
    assert_eq!(finished.stdout, "done\n");
}

#[tokio::test]
async fn output_past_the_cap_is_cut_and_drained() {
    let dir = tempfile::tempdir().unwrap();
    let finished = execute(
        "head -c 1200000 /dev/zero | tr '\\0' a",
        Duration::from_secs(5),
        b"",
        dir.path(),
        &path_env(),
    )
    .await;
    assert_eq!(finished.status, Status::Exited(0));
    assert_eq!(finished.stdout.len(), OUTPUT_CAP);
    assert!(finished.truncated);
}

#[tokio::test]
async fn a_missing_folder_is_reported_not_fatal() {
    let finished = execute(
        "true",
        Duration::from_secs(5),
        b"",
        Path::new("/nonexistent/keel-hooks"),
        &path_env(),
    )
    .await;
    assert!(
        matches!(&finished.status, Status::NotStarted(why) if why.starts_with("cannot start")),
        "{finished:?}"
    );
}

#[tokio::test]
async fn a_signal_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let finished = execute(
        "kill -9 $$",
        Duration::from_secs(5),
        b"",
        dir.path(),
        &path_env(),
    )
    .await;
    assert_eq!(finished.status, Status::Signalled(9));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_hanging_hook_is_killed_with_its_children_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let finished = execute(
        "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait",
        Duration::from_millis(500),
        b"",
        dir.path(),
        &path_env(),
    )
    .await;
    assert_eq!(finished.status, Status::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(2));
    for file in ["shell.pid", "child.pid"] {
        let pid = pid_in(&dir.path().join(file)).await;
        assert!(gone(pid).await, "{file}: {pid} still runs");
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_dropped_run_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let env = path_env();
    let run = execute(
        "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait",
        Duration::from_secs(30),
        b"",
        dir.path(),
        &env,
    );
    let child_file = dir.path().join("child.pid");
    tokio::select! {
        finished = run => panic!("the hook ended: {finished:?}"),
        _ = pid_in(&child_file) => {}
    }
    for file in ["shell.pid", "child.pid"] {
        let pid = pid_in(&dir.path().join(file)).await;
        assert!(gone(pid).await, "{file}: {pid} still runs");
    }
}
