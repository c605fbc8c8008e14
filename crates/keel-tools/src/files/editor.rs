//! Files held by an editor: with ACP's `fs/*` methods, `read`, `write` and `edit` move their
//! text through the editor, so the model sees unsaved buffers and its changes land in the
//! editor (with its undo) instead of behind it on disk.
//!
//! Trade-off: every check a file tool makes (links into credential locations, control
//! files, the workspace) still runs on the disk path first, and the editor is handed the
//! resolved path, never the model's words. What the editor itself does with the path (it
//! follows links of its own) is beyond keel's reach: a link swapped between keel's check and
//! the editor's open is a narrow race the disk path does not have.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

/// An editor that reads and writes text files for the file tools.
#[async_trait]
pub trait EditorFiles: Send + Sync {
    /// The file's text as the editor has it (unsaved changes included).
    async fn read_text(&self, path: &Path) -> Result<String, String>;
    /// Replaces the file's text in the editor.
    async fn write_text(&self, path: &Path, content: &str) -> Result<(), String>;
}

/// A shared editor handle, as [`crate::ToolEnv`] carries it.
#[derive(Clone)]
pub struct Editor(pub Arc<dyn EditorFiles>);

impl std::fmt::Debug for Editor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Editor")
    }
}
