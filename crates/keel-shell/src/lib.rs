//! keel's shell analyser. It reads a command line as bash would (quoting, expansion,
//! wrappers such as `env`, `sudo` and `xargs`, nested `sh -c` scripts) and says what it
//! reads, writes, deletes, runs and reaches ([`shell::analyze`], [`effects::classify`]).
//! It knows nothing of tools, sessions or the gate that judges the result: a command line
//! and an environment in, effects out. It must not import any keel crate but
//! keel-protocol.
#![forbid(unsafe_code)]

pub mod effects;
pub mod envvars;
pub mod shell;

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a call does to the world; rules and modes judge by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Reads a file or lists a folder.
    Read,
    /// Creates or changes a file.
    Write,
    /// Removes a file or folder.
    Delete,
    /// Runs a program.
    Execute,
    /// Reaches the network.
    Network,
}

impl Action {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Delete => "delete",
            Action::Execute => "execute",
            Action::Network => "network",
        }
    }
}

/// `path` with `.` dropped and `..` applied lexically (no link is followed).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
