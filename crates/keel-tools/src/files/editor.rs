//! Files held by an editor: with ACP's `fs/*` methods, `read`, `write` and `edit` move their
//! text through the editor, so the model sees unsaved buffers and its changes land in the
//! editor (with its undo) instead of behind it on disk.
//!
//! Trade-off: every check a file tool makes (links into credential locations, control
//! files, the workspace) runs on the disk path first, and the editor gets the resolved path,
//! never the model's words. But the editor opens that path itself, following links, so a
//! process swapping the name for a link between keel's check and the editor's open could
//! redirect it. The tools therefore use the editor only under an [`EditorHold`]: no command
//! of keel's runs or starts from before the path is checked until after the editor's last
//! round trip, and a sandbox whose pid namespace ends whatever a command left behind; the
//! file's identity is checked again afterwards ([`recheck`]). When a command may be running
//! they read and write the disk through descriptors that follow no link, as without an
//! editor.
//!
//! [`EditorHold`]: crate::bash::quiet::EditorHold

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::refused::Refused;

/// Why the editor did not read or write a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    /// The editor answered with an error (its message).
    #[error("{0}")]
    Refused(String),
    /// The editor did not answer in time.
    #[error("the editor did not answer within {0} s")]
    Timeout(u64),
}

/// An editor that reads and writes text files for the file tools.
#[async_trait]
pub trait EditorFiles: Send + Sync {
    /// The file's text as the editor has it (unsaved changes included).
    async fn read_text(&self, path: &Path) -> Result<String, EditorError>;
    /// Replaces the file's text in the editor.
    async fn write_text(&self, path: &Path, content: &str) -> Result<(), EditorError>;
}

/// A shared editor handle, as [`crate::ToolEnv`] carries it.
#[derive(Clone)]
pub struct Editor(pub Arc<dyn EditorFiles>);

impl std::fmt::Debug for Editor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Editor")
    }
}

/// What a file is, looked at without following a link: its device and inode; `None` when
/// nothing is there.
pub(crate) fn identity(path: &Path) -> Result<Option<(u64, u64)>, Refused> {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Refused::Look {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// After the editor's round trips: `path` (resolved, as the editor was given it) must still
/// lead nowhere else (no link anywhere on the way), be a regular file, and, when `before` is
/// given, be that very file. An editor may save by replacing the file, so a write checks
/// only the first two.
pub(crate) fn recheck(path: &Path, before: Option<(u64, u64)>) -> Result<(), Refused> {
    let changed = || Refused::Changed(path.to_path_buf());
    if crate::permission::real_path(path) != path {
        return Err(changed());
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {}
        _ => return Err(changed()),
    }
    if before.is_some() && identity(path)? != before {
        return Err(changed());
    }
    Ok(())
}
