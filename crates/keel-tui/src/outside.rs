//! What the TUI runs outside the runtime for the user: `$EDITOR` on a draft, `git diff`
//! for `/diff`, and the file `/export` writes.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// Why one of them failed.
#[derive(Debug, thiserror::Error)]
pub enum OutsideError {
    /// The draft file could not be made or written.
    #[error("cannot prepare the draft file: {0}")]
    Draft(#[source] std::io::Error),
    /// The editor did not start.
    #[error("cannot start `{editor}`: {source}")]
    EditorStart {
        /// The editor's command.
        editor: String,
        /// Why.
        source: std::io::Error,
    },
    /// The editor failed; the draft stays as it was.
    #[error("`{editor}` exited with {status}; the draft is unchanged")]
    EditorFailed {
        /// The editor's command.
        editor: String,
        /// How it ended.
        status: ExitStatus,
    },
    /// The edited draft could not be read back.
    #[error("cannot read the draft back: {0}")]
    DraftBack(#[source] std::io::Error),
    /// git did not run.
    #[error("cannot run git: {0}")]
    GitStart(#[source] std::io::Error),
    /// git refused (its message).
    #[error("{0}")]
    Git(String),
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// `draft` after the user edited it in `$VISUAL`, else `$EDITOR`, else `vi`.
pub fn edit_in_editor(draft: &str) -> Result<String, OutsideError> {
    let editor = std::env::var("VISUAL")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .or_else(|| {
            std::env::var("EDITOR")
                .ok()
                .filter(|e| !e.trim().is_empty())
        })
        .unwrap_or_else(|| "vi".into());
    // A private file of its own (0600, a name nobody can guess or pre-create).
    let file = tempfile::Builder::new()
        .prefix("keel-draft-")
        .suffix(".md")
        .tempfile()
        .map_err(OutsideError::Draft)?;
    std::fs::write(file.path(), draft).map_err(OutsideError::Draft)?;
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(words)
        .arg(file.path())
        .status()
        .map_err(|source| OutsideError::EditorStart {
            editor: editor.clone(),
            source,
        })?;
    if !status.success() {
        return Err(OutsideError::EditorFailed { editor, status });
    }
    std::fs::read_to_string(file.path()).map_err(OutsideError::DraftBack)
}

/// The working tree's changes against `HEAD`.
pub fn git_diff(cwd: &Path) -> Result<String, OutsideError> {
    let output = std::process::Command::new("git")
        .args(["--no-pager", "diff", "--no-color", "--no-ext-diff", "HEAD"])
        .current_dir(cwd)
        .output()
        .map_err(OutsideError::GitStart)?;
    if !output.status.success() {
        return Err(OutsideError::Git(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Writes `text` to `path`, making its folder.
pub fn write_file(path: &Path, text: &str) -> Result<(), OutsideError> {
    let written = match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent).and_then(|()| std::fs::write(path, text)),
        None => std::fs::write(path, text),
    };
    written.map_err(|source| OutsideError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The bytes that tell the user keel needs them: OSC 9 (a desktop notification in
/// iTerm2, WezTerm, Ghostty, kitty and others) or the bell. The text is keel's own words
/// with controls removed, so it cannot end the sequence early.
pub fn notification(how: keel_runtime::settings::extend::Notifications, text: &str) -> Vec<u8> {
    use keel_runtime::settings::extend::Notifications;
    let osc9 = match how {
        Notifications::Off => return Vec::new(),
        Notifications::Bell => false,
        Notifications::Osc9 => true,
        Notifications::Auto => shows_osc9(),
    };
    if !osc9 {
        return b"\x07".to_vec();
    }
    let clean: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    format!("\x1b]9;{clean}\x07").into_bytes()
}

/// Whether the terminal is one known to show OSC 9 as a notification (others may print
/// it or ignore it: they get the bell).
fn shows_osc9() -> bool {
    let program = std::env::var("TERM_PROGRAM").unwrap_or_default();
    let term = std::env::var("TERM").unwrap_or_default();
    matches!(program.as_str(), "iTerm.app" | "WezTerm" | "ghostty")
        || term.contains("kitty")
        || term.contains("ghostty")
}

/// The largest image a paste attaches.
const MAX_PASTED_IMAGE: u64 = 20 * 1024 * 1024;

/// A pasted path (as terminals paste a dropped file: plain, quoted, with escaped spaces or
/// as a `file://` URL) to a PNG, JPEG, GIF or WebP image of at most 20 MiB, known by its
/// bytes: the image and its file name. `None` for any other paste.
pub fn pasted_image(
    text: &str,
    cwd: &std::path::Path,
) -> Option<(keel_protocol::ImageBlock, String)> {
    let text = text.trim();
    if text.is_empty() || text.contains('\n') {
        return None;
    }
    let unquoted = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
        .unwrap_or(text);
    let unescaped = unquoted.replace("\\ ", " ");
    let path = if unescaped.starts_with("file://") {
        keel_protocol::file_url_path(&unescaped)?
    } else {
        unescaped
    };
    let path = cwd.join(path);
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > MAX_PASTED_IMAGE {
        return None;
    }
    // The first bytes say whether it is an image before the whole file is read.
    let mut head = [0u8; 16];
    let read = {
        use std::io::Read as _;
        std::fs::File::open(&path).ok()?.read(&mut head).ok()?
    };
    keel_protocol::image_type(&head[..read])?;
    let data = std::fs::read(&path).ok()?;
    let mime_type = keel_protocol::image_type(&data)?;
    let name = path
        .file_name()
        .map_or_else(|| "image".to_owned(), |n| n.to_string_lossy().into_owned());
    Some((
        keel_protocol::ImageBlock {
            data,
            mime_type: mime_type.to_owned(),
        },
        name,
    ))
}
