//! `read`: numbered lines of a text file, or an image, in bounded pages.

use std::io::{BufRead, BufReader, Read as _};
use std::os::unix::fs::FileTypeExt as _;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ImageBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::io_message;
use crate::args::{self, Int, UNBOUNDED, present};
use crate::env::ToolEnv;

/// Lines returned per call at most (issue 4).
pub const MAX_LINES: usize = 2_000;
/// Bytes returned per call at most (issue 4).
pub const MAX_BYTES: usize = 50 * 1024;
/// Longest line shown; longer ones are cut with a marker.
const MAX_LINE_CHARS: usize = 2_000;
/// Largest image returned inline.
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

/// The arguments of `read`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// File path, absolute or relative to the working folder
    path: String,
    /// First line to return (1-based)
    #[serde(default, deserialize_with = "present")]
    offset: Option<Int<1, UNBOUNDED>>,
    /// Lines to return
    #[serde(default, deserialize_with = "present")]
    limit: Option<Int<1, UNBOUNDED>>,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "read".into(),
    description: format!(
        "Read a file. Text comes back as numbered lines, at most {MAX_LINES} lines or {} KiB per call; \
         continue with `offset`. Images (png, jpeg, gif, webp) come back as images. Binary files, \
         folders and devices are refused.",
        MAX_BYTES / 1024
    ),
    parameters: args::schema::<Args>(),
});

/// The `read` tool.
pub struct Read {
    env: Arc<ToolEnv>,
}

impl Read {
    /// A read tool over `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self { env }
    }
}

#[async_trait]
impl AgentTool for Read {
    fn nature(&self) -> ToolNature {
        ToolNature::ReadsFile { path: "path" }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = args::arguments(arguments)?;
        let env = self.env.clone();
        if let Some(editor) = env.editor.clone()
            && let Some(hold) = crate::bash::quiet::editor_hold(&env).await
        {
            let checked = env.clone();
            let wanted = args.path.clone();
            let target = tokio::task::spawn_blocking(move || editor_target(&checked, &wanted))
                .await
                .map_err(|e| ToolError::new(format!("read failed: {e}")))??;
            if let Some(path) = target {
                let before = super::editor::identity(&path)?;
                let text = editor.0.read_text(&path).await.map_err(|e| {
                    ToolError::new(format!("Cannot read {} in the editor: {e}", path.display()))
                })?;
                super::editor::recheck(&path, before)?;
                drop(hold);
                return text_page(&path, std::io::Cursor::new(text.into_bytes()), &args);
            }
        }
        tokio::task::spawn_blocking(move || read(&env, &args))
            .await
            .map_err(|e| ToolError::new(format!("read failed: {e}")))?
    }
}

/// The path the editor is asked for, after the disk checks every read makes; `None` when
/// the disk answers instead (keel's saved outputs, images).
fn editor_target(env: &ToolEnv, wanted: &str) -> Result<Option<std::path::PathBuf>, ToolError> {
    let path = super::pinned::resolve(env, &env.resolve(wanted), false)?;
    if env
        .artifacts_root()
        .is_some_and(|root| path.starts_with(root))
    {
        return Ok(None);
    }
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Err(ToolError::new(format!(
            "{} is a folder, not a file; use `ls` to list it.",
            path.display()
        ))),
        Ok(meta) if !meta.is_file() => Err(ToolError::new(format!(
            "{} is a device, FIFO or socket; reading it could block forever, so it is refused.",
            path.display()
        ))),
        Ok(_) => {
            // Opened without following links: a name that became a link since the check is
            // refused here, not handed on.
            let mut head = [0u8; 16];
            let n = super::pinned::open_read(&path)
                .and_then(|mut f| f.read(&mut head))
                .map_err(|e| ToolError::new(io_message("read", &path, &e)))?;
            Ok(keel_protocol::image_type(&head[..n])
                .is_none()
                .then_some(path))
        }
        // Not on disk (not even as a dangling link): the editor may have an unsaved buffer.
        Err(_) if std::fs::symlink_metadata(&path).is_err() => Ok(Some(path)),
        Err(e) => Err(ToolError::new(io_message("read", &path, &e))),
    }
}

fn read(env: &ToolEnv, args: &Args) -> Result<ToolOutput, ToolError> {
    let path = super::pinned::resolve(env, &env.resolve(&args.path), false)?;
    let file = super::pinned::open_read(&path)
        .map_err(|e| ToolError::new(io_message("read", &path, &e)))?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::new(io_message("read", &path, &e)))?;
    if let Some(root) = env.artifacts_root()
        && path.starts_with(&root)
    {
        // What was opened must be what the gate judged: a file keel made, not one swapped
        // in since (a hard link to a credential has a second name).
        use std::os::unix::fs::MetadataExt as _;
        if !(meta.is_file() && meta.nlink() == 1 && meta.uid() == crate::env::own_uid()) {
            return Err(ToolError::new(format!(
                "{} is not one of this session's saved outputs; it is refused",
                path.display()
            )));
        }
    }
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(ToolError::new(format!(
            "{} is a folder, not a file; use `ls` to list it.",
            path.display()
        )));
    }
    if kind.is_fifo() || kind.is_char_device() || kind.is_block_device() || kind.is_socket() {
        return Err(ToolError::new(format!(
            "{} is a device, FIFO or socket; reading it could block forever, so it is refused.",
            path.display()
        )));
    }
    let mut reader = BufReader::new(file);
    let head = reader
        .fill_buf()
        .map_err(|e| ToolError::new(io_message("read", &path, &e)))?
        .to_vec();
    if let Some(mime) = keel_protocol::image_type(&head) {
        if meta.len() > MAX_IMAGE_BYTES {
            return Err(ToolError::new(format!(
                "{} is an image of {} MiB, larger than the {} MiB that can be shown.",
                path.display(),
                meta.len() / (1024 * 1024),
                MAX_IMAGE_BYTES / (1024 * 1024)
            )));
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        reader
            .read_to_end(&mut data)
            .map_err(|e| ToolError::new(io_message("read", &path, &e)))?;
        return Ok(ToolOutput {
            content: vec![ContentBlock::Image(ImageBlock {
                data,
                mime_type: mime.into(),
            })],
            details: Some(
                json!({"path": path, "kind": "image", "mime_type": mime, "bytes": meta.len()}),
            ),
            ..ToolOutput::default()
        });
    }
    text_page(&path, reader, args)
}

/// One page of numbered lines of a text file read from `reader`.
fn text_page(
    path: &std::path::Path,
    mut reader: impl BufRead,
    args: &Args,
) -> Result<ToolOutput, ToolError> {
    let head = reader
        .fill_buf()
        .map_err(|e| ToolError::new(io_message("read", path, &e)))?
        .to_vec();
    if head.iter().take(8192).any(|b| *b == 0) {
        return Err(ToolError::new(format!(
            "{} looks binary (it contains NUL bytes); it is not shown. Use a tool such as `xxd` through bash if you need its bytes.",
            path.display()
        )));
    }
    let offset = args.offset.map_or(1, Int::usize);
    let limit = args.limit.map_or(MAX_LINES, Int::usize).min(MAX_LINES);
    let mut out = String::new();
    let mut line_no = 0usize;
    let mut shown = 0usize;
    let mut lossy = false;
    let mut more = false;
    let mut bytes_cut = false;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        // Keep at most a bounded prefix of each line, so one huge line (a minified
        // bundle) cannot fill memory; skipped lines keep nothing.
        let cap = if line_no + 1 < offset {
            0
        } else {
            MAX_LINE_BYTES
        };
        let n = read_line_capped(&mut reader, &mut raw, cap)
            .map_err(|e| ToolError::new(io_message("read", path, &e)))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line_no < offset {
            continue;
        }
        if shown == limit {
            more = true;
            break;
        }
        let text = match std::str::from_utf8(&raw) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => {
                lossy = true;
                String::from_utf8_lossy(&raw)
            }
        };
        let text = text.trim_end_matches(['\n', '\r']);
        let text = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!(
                "{}… [line cut at {MAX_LINE_CHARS} characters]",
                &text[..cut]
            ),
            None => text.to_owned(),
        };
        let line = format!("{line_no:>6}\t{text}\n");
        if out.len() + line.len() > MAX_BYTES && shown > 0 {
            more = true;
            bytes_cut = true;
            break;
        }
        out.push_str(&line);
        shown += 1;
    }
    if line_no < offset && line_no > 0 {
        return Err(ToolError::new(format!(
            "{} has {line_no} lines; offset {offset} is past its end.",
            path.display()
        )));
    }
    if line_no == 0 {
        out.push_str("(the file is empty)\n");
    }
    let last = offset + shown.saturating_sub(1);
    if more {
        let why = if bytes_cut {
            format!("{} KiB", MAX_BYTES / 1024)
        } else {
            format!("{limit} lines")
        };
        out.push_str(&format!(
            "\n[Showing lines {offset}-{last} (limit {why}). Continue with offset={}.]\n",
            last + 1
        ));
    }
    if lossy {
        out.push_str("\n[The file is not valid UTF-8; invalid bytes are shown as \u{fffd}.]\n");
    }
    Ok(ToolOutput {
        content: vec![ContentBlock::text(out)],
        details: Some(
            json!({"path": path, "kind": "text", "start_line": offset, "end_line": last, "more": more}),
        ),
        ..ToolOutput::default()
    })
}

/// Bytes of one line kept at most (enough for the character cut, in any UTF-8).
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;

/// Reads one line (through its `\n`), keeping at most `cap` bytes of it in `out`; returns
/// the bytes consumed (0 at the end of the file).
fn read_line_capped(
    reader: &mut impl BufRead,
    out: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}
