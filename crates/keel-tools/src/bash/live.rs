//! A command shown live in an editor's terminal (ACP's `terminal/*`): the command still runs
//! here, sandboxed, with the cleaned environment; its output is copied to the terminal as it
//! comes, and a terminal the user kills stops it. The model gets the output as always.

use tokio_util::sync::CancellationToken;

/// Opens a live view of one command.
pub trait LiveTerminal: Send + Sync {
    /// A view of the command `command` of call `call_id`, running in `cwd`; `None` when no
    /// terminal can be shown (the command runs all the same).
    fn open(
        &self,
        call_id: &str,
        command: &str,
        cwd: &std::path::Path,
    ) -> Option<Box<dyn LiveFeed>>;
}

/// One command's live view.
pub trait LiveFeed: Send + Sync {
    /// Output, in the order the command wrote it (stdout and stderr together).
    fn output(&self, bytes: &[u8]);
    /// The command ended with this exit code (`None`: killed by a signal, timed out or
    /// aborted).
    fn exit(&self, code: Option<i32>);
    /// Fires when the user stopped the command from the terminal.
    fn killed(&self) -> CancellationToken;
    /// Fires once the front end shows this view, or never will. The command's end waits
    /// for it (bounded), so no front end hears that the call ended before it got the view.
    fn shown(&self) -> CancellationToken;
    /// The command ended and the view was not shown in time: it is not shown after.
    fn too_late(&self);
}

/// A shared terminal handle, as [`crate::ToolEnv`] carries it.
#[derive(Clone)]
pub struct Terminal(pub std::sync::Arc<dyn LiveTerminal>);

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Terminal")
    }
}
