//! Why a file tool refuses a path, said to the model as the call's error.

use std::path::PathBuf;

/// Why a file tool does not touch a path.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// A link leads from a harmless name into a credential location.
    #[error(
        "{} leads through a link into a credential location ({}); it is refused",
        path.display(),
        real.display()
    )]
    IntoCredentials {
        /// The path as named.
        path: PathBuf,
        /// Where it leads.
        real: PathBuf,
    },
    /// A write through a link out of the workspace.
    #[error(
        "{} leads through a link out of the workspace ({}); name the real path if that is meant",
        path.display(),
        real.display()
    )]
    OutOfWorkspace {
        /// The path as named.
        path: PathBuf,
        /// Where it leads.
        real: PathBuf,
    },
    /// Plan mode writes the plan file only.
    #[error(
        "plan mode is read-only: only the plan file {} may be written, not {}",
        plan.display(),
        path.display()
    )]
    PlanOnly {
        /// The plan file.
        plan: PathBuf,
        /// The path asked for.
        path: PathBuf,
    },
    /// One of keel's control files.
    #[error(
        "{} is a protected control file ({what}): the model may not change it short of full \
         permission mode; ask the user to make this change",
        path.display()
    )]
    Control {
        /// The file.
        path: PathBuf,
        /// What it controls.
        what: String,
    },
    /// A folder where a file was meant.
    #[error("{} is a folder; give a file path.", .0.display())]
    Folder(PathBuf),
    /// A device, FIFO or socket.
    #[error("{} is a device, FIFO or socket, not a regular file; it is refused.", .0.display())]
    Special(PathBuf),
    /// The file system refused (said for the action tried).
    #[error("{0}")]
    Io(String),
    /// The path could not be looked at.
    #[error("cannot look at {}: {source}", path.display())]
    Look {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file changed while an editor had it.
    #[error(
        "{} changed while the editor had it (it is no longer the file keel checked); nothing \
         the editor returned is used",
        .0.display()
    )]
    Changed(PathBuf),
}

impl From<Refused> for keel_agent::ToolError {
    fn from(refused: Refused) -> Self {
        Self::new(refused.to_string())
    }
}
