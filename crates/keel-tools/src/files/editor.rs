//! Files held by an editor: with ACP's `fs/*` methods, `read`, `write` and `edit` move their
//! text through the editor, so the model sees unsaved buffers and its changes land in the
//! editor (with its undo) instead of behind it on disk.
//!
//! Trade-off: every check a file tool makes (links into credential locations, control
//! files, the workspace) runs on the disk path first, and the editor gets the resolved path,
//! never the model's words. But the editor opens that path itself, following links, so a
//! process swapping the name for a link between keel's check and the editor's open could
//! redirect it. The tools therefore use the editor only while nothing the model started can
//! be running ([`crate::bash::quiet`]: no command of keel's alive, and a sandbox whose pid
//! namespace ends whatever a command left behind); otherwise they read and write the disk
//! through descriptors that follow no link, as without an editor.

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
