//! Commands and an editor's file operations never overlap, in the whole process.
//!
//! With ACP's `fs/*`, the editor opens the path keel checked itself, following links; a
//! process of the model's that swapped the name for a link between keel's check and the
//! editor's open would redirect a write outside the workspace or a read to `~/.ssh`. So an
//! editor operation holds this gate exclusively, from before its path is checked until after
//! its last round trip, and every command (of any session, a background task's included)
//! holds it shared from before it starts until it and everything it started are gone. An
//! editor operation never waits for a command: when one may be running the tool uses the
//! disk through descriptors that follow no link. It waits for another editor operation (one
//! round trip each). A command waits while an editor operation is in flight, at most the
//! editor's own time limits.
//!
//! Trade-off: one gate for the process, not per session: a task's commands and its
//! parent's editor share a workspace, and the gate is held for an editor round trip.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::{Notify, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::env::{SandboxMode, ToolEnv};

static GATE: LazyLock<Arc<RwLock<()>>> = LazyLock::new(|| Arc::new(RwLock::new(())));
/// Commands holding the gate now.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Told when an editor operation lets go of the gate.
static RELEASED: Notify = Notify::const_new();
/// How long an editor operation waits before it looks again whether the gate is held by a
/// command (which sends it to the disk) or by another editor operation (which it waits for).
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// A command's share of the gate: held from before it starts until nothing it started can
/// run any more.
pub(crate) struct Running {
    _share: OwnedRwLockReadGuard<()>,
}

impl Running {
    /// Waits until no editor operation is in flight, then counts one command as running.
    pub(crate) async fn start() -> Self {
        let share = GATE.clone().read_owned().await;
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Self { _share: share }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An editor file operation in flight: while it lives, no command of this process runs or
/// starts.
pub struct EditorHold {
    _whole: OwnedRwLockWriteGuard<()>,
}

impl Drop for EditorHold {
    fn drop(&mut self) {
        RELEASED.notify_waiters();
    }
}

/// The hold for an editor file operation, when one may run now: no command of keel's is
/// running (and the hold keeps any from starting), and the sandbox has a pid namespace,
/// which ended everything a finished command started (without one, a daemon that left its
/// process group could live on unseen). Another editor operation in flight is waited for;
/// a running command is not. `None`: use the disk.
pub async fn editor_hold(env: &ToolEnv) -> Option<EditorHold> {
    if env.sandbox == SandboxMode::DangerFullAccess || super::sandbox::support().namespaces.is_err()
    {
        return None;
    }
    loop {
        let released = RELEASED.notified();
        if let Ok(whole) = GATE.clone().try_write_owned() {
            return Some(EditorHold { _whole: whole });
        }
        if RUNNING.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let _ = tokio::time::timeout(LOOK_AGAIN, released).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_running_command_keeps_the_editor_off_and_an_editor_hold_delays_commands() {
        let mut env = ToolEnv::new("/tmp");
        env.sandbox = SandboxMode::WorkspaceWrite;
        if keel_sandbox::support().namespaces.is_err() {
            assert!(editor_hold(&env).await.is_none());
            return;
        }
        let running = Running::start().await;
        assert!(editor_hold(&env).await.is_none(), "a command runs");
        drop(running);
        let hold = editor_hold(&env).await.expect("nothing runs");
        // A second editor operation waits for the first instead of going to the disk.
        let second = tokio::spawn(async {
            let mut env = ToolEnv::new("/tmp");
            env.sandbox = SandboxMode::WorkspaceWrite;
            editor_hold(&env).await
        });
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "the second editor operation waits");
        drop(hold);
        let second = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the second editor operation ends")
            .expect("it did not panic")
            .expect("it got the gate");
        // A command waits for an editor operation in flight, and starts once it is done.
        let waiting = tokio::spawn(Running::start());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a command waits for the editor");
        drop(second);
        let started = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert!(
            started.is_ok(),
            "and the command starts once the editor is done"
        );
    }
}
