//! `write`: create or replace a whole file, atomically, keeping its line ends and BOM.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ToolCallId, ToolDefinition, ToolPreview};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::preview::{self, Held, Shown};
use super::{TextStyle, ensure_regular, io_message, make_parent, pinned, plain, read_pinned};
use crate::args;
use crate::env::ToolEnv;

/// The arguments of `write`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// File path, absolute or relative to the working folder
    path: String,
    /// The whole new content
    content: String,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "write".into(),
    description:
        "Create a file, or replace all of an existing file's content. Parent folders are created. \
        An existing file keeps its line endings (LF or CRLF) and byte order mark. Prefer `edit` \
        for changing part of a file."
            .into(),
    parameters: args::schema::<Args>(),
});

/// The `write` tool.
pub struct Write {
    env: Arc<ToolEnv>,
    shown: Arc<Shown>,
}

impl Write {
    /// A write tool over `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            shown: Arc::default(),
        }
    }
}

#[async_trait]
impl AgentTool for Write {
    fn nature(&self) -> ToolNature {
        ToolNature::WritesFile { path: "path" }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn mutated_path(&self, arguments: &serde_json::Value) -> Option<PathBuf> {
        arguments
            .get("path")
            .and_then(|p| p.as_str())
            .map(|p| self.env.resolve(p))
    }

    async fn preview(
        &self,
        call: &ToolCallId,
        arguments: &serde_json::Value,
    ) -> Option<ToolPreview> {
        let args: Args = serde_json::from_value(arguments.clone()).ok()?;
        let (path, existing) = preview::starting_text(&self.env, &args.path).await?;
        let text = styled(existing.as_deref(), &args.content);
        let before = existing.as_deref().map(String::from_utf8_lossy);
        self.shown.remember(call, existing.as_deref());
        Some(preview::file(&path, before.as_deref(), &text))
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = args::arguments(arguments)?;
        let path = pinned::resolve(&self.env, &self.env.resolve(&args.path), true)?;
        let held = Held {
            shown: self.shown.clone(),
            call: context.tool_call_id,
        };
        // The plan file is keel's, in keel's home: always the disk, never an editor's buffer.
        if let Some(editor) = super::in_editor(&self.env, &path)
            && let Some(_hold) = crate::bash::quiet::editor_hold(&self.env).await
        {
            // Checked again now that no command can run until the editor is done.
            let path = pinned::resolve(&self.env, &self.env.resolve(&args.path), true)?;
            return write_in_editor(&editor, path, &args.content, &held).await;
        }
        let env = self.env.clone();
        tokio::task::spawn_blocking(move || write(&env, path, &args.content, &held))
            .await
            .map_err(|e| ToolError::new(format!("write failed: {e}")))?
    }
}

/// `content` in the line ends and BOM of the text it replaces.
fn styled(existing: Option<&[u8]>, content: &str) -> String {
    match existing.map(std::str::from_utf8) {
        Some(Ok(old)) => TextStyle::of(old).apply(&plain(content)),
        _ => content.to_owned(),
    }
}

/// The write through the editor: the old text (for its style) and the new one both go
/// through it; only the parent folders are made on disk.
async fn write_in_editor(
    editor: &super::editor::Editor,
    path: PathBuf,
    content: &str,
    held: &Held,
) -> Result<ToolOutput, ToolError> {
    let exists = ensure_regular(&path)?;
    let before = super::editor::identity(&path)?;
    let existing = if exists {
        let text = editor.0.read_text(&path).await.map_err(|e| {
            ToolError::new(format!("Cannot read {} in the editor: {e}", path.display()))
        })?;
        super::editor::recheck(&path, before)?;
        Some(text)
    } else {
        None
    };
    held.check(&path, existing.as_deref().map(str::as_bytes))?;
    let text = styled(existing.as_deref().map(str::as_bytes), content);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolError::new(io_message("create the folder", parent, &e)))?;
    }
    editor.0.write_text(&path, &text).await.map_err(|e| {
        ToolError::new(format!(
            "Cannot write {} in the editor: {e}",
            path.display()
        ))
    })?;
    super::editor::recheck(&path, None)?;
    Ok(written(&path, &text, !exists))
}

fn written(path: &std::path::Path, text: &str, created: bool) -> ToolOutput {
    let lines = text.lines().count();
    let verb = if created { "Created" } else { "Overwrote" };
    ToolOutput {
        content: vec![keel_protocol::ContentBlock::text(format!(
            "{verb} {} ({lines} lines, {} bytes).",
            path.display(),
            text.len()
        ))],
        details: Some(
            json!({"path": path, "created": created, "bytes": text.len(), "lines": lines}),
        ),
        ..ToolOutput::default()
    }
}

fn write(
    env: &ToolEnv,
    path: PathBuf,
    content: &str,
    held: &Held,
) -> Result<ToolOutput, ToolError> {
    let exists = ensure_regular(&path)?;
    let existing = match exists.then(|| read_pinned(&path)) {
        Some(Ok(bytes)) => Some(bytes),
        Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => None,
        Some(Err(e)) => return Err(ToolError::new(io_message("read", &path, &e))),
        None => None,
    };
    held.check(&path, existing.as_deref())?;
    let text = styled(existing.as_deref(), content);
    let mode = make_parent(env, &path).map_err(|e| {
        ToolError::new(io_message(
            "create the folder",
            path.parent().unwrap_or(&path),
            &e,
        ))
    })?;
    pinned::write(&path, text.as_bytes(), mode)
        .map_err(|e| ToolError::new(io_message("write", &path, &e)))?;
    Ok(written(&path, &text, existing.is_none()))
}
