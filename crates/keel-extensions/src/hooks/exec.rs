//! Running one hook command: `bash -c` in its own process group, the input on stdin, the
//! output captured up to a cap, the whole group killed at the timeout or when the future is
//! dropped.
//!
//! A hook never wedges keel: a hook that ignores its stdin, floods its output or leaves
//! children behind is bounded by the timeout, and the group kill takes the children with
//! it. A hook that finishes may leave background processes (Claude Code allows that, and
//! scripts use it to start servers); only a timed-out or abandoned hook loses them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_sandbox::{Confinement, Program, Stream, TreeGuard};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

/// The most of a hook's stdout and of its stderr kept; the rest is read and dropped.
pub(super) const OUTPUT_CAP: usize = 1024 * 1024;

/// How long to wait for a killed hook to be reaped before leaving it to tokio's reaper.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// How a hook command ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Status {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signalled(i32),
    /// It ran past its timeout and its process group was killed.
    TimedOut,
    /// It could not be started or waited for.
    NotStarted(String),
}

/// A hook command's end and output.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Finished {
    pub status: Status,
    pub stdout: String,
    pub stderr: String,
    /// Stdout or stderr passed [`OUTPUT_CAP`].
    pub truncated: bool,
}

impl Finished {
    fn not_started(why: String) -> Self {
        Self {
            status: Status::NotStarted(why),
            stdout: String::new(),
            stderr: String::new(),
            truncated: false,
        }
    }
}

/// Runs `command` in `cwd` with exactly the variables `env`, `input` on its stdin.
pub(super) async fn execute(
    command: &str,
    timeout: Duration,
    input: &[u8],
    cwd: &Path,
    env: &[(String, String)],
) -> Finished {
    let program = Program::new(shell(env), cwd)
        .args(["-c", command])
        .env(env.to_vec())
        .streams(Stream::Piped, Stream::Piped, Stream::Piped);
    let mut child = match keel_sandbox::spawn(program, &Confinement::Group) {
        Ok(child) => child,
        Err(error) => return Finished::not_started(format!("cannot start: {error}")),
    };
    // Killed whole when the run is dropped (tokio's `kill_on_drop` reaches only the
    // group's leader), unless it finished in time.
    let mut group = TreeGuard::new(child.tree());
    let stdin = child.take_stdin();
    let stdout = child.take_stdout();
    let stderr = child.take_stderr();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook need not read its input: a closed pipe is not an error.
            let _ = stdin.write_all(input).await;
        }
    };
    let run = async {
        let (_, out, err, status) =
            tokio::join!(feed, read_capped(stdout), read_capped(stderr), child.wait());
        (out, err, status)
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(((stdout, cut_out), (stderr, cut_err), status)) => {
            // Finished in time: whatever it left running in the background is its own.
            group.release();
            let status = match status {
                Ok(status) => exit_status(status),
                Err(error) => Status::NotStarted(format!("cannot wait for it: {error}")),
            };
            Finished {
                status,
                stdout,
                stderr,
                truncated: cut_out || cut_err,
            }
        }
        Err(_) => {
            drop(group);
            // Reaped here when possible; otherwise `kill_on_drop` hands it to tokio's reaper.
            let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
            Finished {
                status: Status::TimedOut,
                stdout: String::new(),
                stderr: String::new(),
                truncated: false,
            }
        }
    }
}

fn exit_status(status: std::process::ExitStatus) -> Status {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => Status::Exited(code),
        (None, Some(signal)) => Status::Signalled(signal),
        (None, None) => Status::NotStarted(format!("ended without a status ({status})")),
    }
}

/// All of `reader` up to [`OUTPUT_CAP`] bytes (as text, invalid UTF-8 replaced), and
/// whether there was more; the rest is drained so the hook never blocks on a full pipe.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>) -> (String, bool) {
    let Some(mut reader) = reader else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut cut = false;
    let mut chunk = vec![0; 64 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP - kept.len();
                kept.extend_from_slice(&chunk[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), cut)
}

/// `bash` from the hook's own `PATH` (Claude Code documents hook commands as bash), else
/// `/bin/sh`. An absolute path keeps the standard library's cheap `posix_spawn`.
fn shell(env: &[(String, String)]) -> PathBuf {
    keel_tools::bash::find_bash(env).unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

#[cfg(test)]
#[path = "exec_tests.rs"]
pub(super) mod tests;
