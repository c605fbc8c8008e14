//! Commands and an editor's file operations never overlap, in the whole process.
//!
//! With ACP's `fs/*`, the editor opens the path keel checked itself, following links; a
//! process of the model's that swapped the name for a link between keel's check and the
//! editor's open would redirect a write outside the workspace or a read to `~/.ssh`. So an
//! editor operation holds this gate exclusively, from before its path is checked until after
//! its last round trip, and every command (of any session, a background task's included)
//! holds it shared from before it starts until it and everything it started are gone. An
//! editor operation never waits: when a command may be running it is not taken, and the
//! tool uses the disk through descriptors that follow no link. A command waits while an
//! editor operation is in flight, at most the editor's own time limits.
//!
//! Trade-off: one gate for the process, not per session: a task's commands and its
//! parent's editor share a workspace, and the gate is held for milliseconds.

use std::sync::{Arc, LazyLock};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use crate::env::{SandboxMode, ToolEnv};

static GATE: LazyLock<Arc<RwLock<()>>> = LazyLock::new(|| Arc::new(RwLock::new(())));

/// A command's share of the gate: held from before it starts until nothing it started can
/// run any more.
pub(crate) struct Running {
    _share: OwnedRwLockReadGuard<()>,
}

impl Running {
    /// Waits until no editor operation is in flight, then counts one command as running.
    pub(crate) async fn start() -> Self {
        Self {
            _share: GATE.clone().read_owned().await,
        }
    }
}

/// An editor file operation in flight: while it lives, no command of this process runs or
/// starts.
pub struct EditorHold {
    _whole: OwnedRwLockWriteGuard<()>,
}

/// The hold for an editor file operation, when one may run now: no command of keel's is
/// running (and the hold keeps any from starting), and the sandbox has a pid namespace,
/// which ended everything a finished command started (without one, a daemon that left its
/// process group could live on unseen). `None`: use the disk.
pub fn editor_hold(env: &ToolEnv) -> Option<EditorHold> {
    if env.sandbox == SandboxMode::DangerFullAccess || super::sandbox::support().namespaces.is_err()
    {
        return None;
    }
    GATE.clone()
        .try_write_owned()
        .ok()
        .map(|whole| EditorHold { _whole: whole })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_running_command_keeps_the_editor_off_and_an_editor_hold_delays_commands() {
        let mut env = ToolEnv::new("/tmp");
        env.sandbox = SandboxMode::WorkspaceWrite;
        if super::super::sandbox::support().namespaces.is_err() {
            assert!(editor_hold(&env).is_none());
            return;
        }
        let running = Running::start().await;
        assert!(editor_hold(&env).is_none(), "a command runs");
        drop(running);
        let hold = editor_hold(&env).expect("nothing runs");
        let waiting = tokio::spawn(Running::start());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a command waits for the editor");
        drop(hold);
        let started = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
        assert!(started.is_ok(), "and starts once the editor is done");
    }
}
