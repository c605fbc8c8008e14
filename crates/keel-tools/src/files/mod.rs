//! File tools: read, write, edit, and what they share (line endings, BOM, atomic writes).

pub mod edit;
pub mod editor;
mod pinned;
mod preview;
pub mod read;
mod refused;
pub mod write;

use std::io::Write as _;
use std::path::Path;

use refused::Refused;

/// UTF-8 byte order mark.
pub(crate) const BOM: &str = "\u{feff}";

/// Mode of a file `write` creates, as an editor would make it.
const NEW_FILE_MODE: u32 = 0o644;
/// Mode of the plan file, which lies in keel's private home.
const PLAN_FILE_MODE: u32 = 0o600;

/// How a text file encodes its line ends, so a rewrite can keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextStyle {
    pub(crate) crlf: bool,
    pub(crate) bom: bool,
}

impl TextStyle {
    /// The style of existing file text.
    pub(crate) fn of(text: &str) -> Self {
        let bom = text.starts_with(BOM);
        let crlf_count = text.matches("\r\n").count();
        let lf_count = text.matches('\n').count();
        Self {
            crlf: crlf_count > 0 && crlf_count * 2 >= lf_count,
            bom,
        }
    }

    /// `text` (LF line ends, no BOM) in this style.
    pub(crate) fn apply(self, text: &str) -> String {
        let body = if self.crlf {
            text.replace("\r\n", "\n").replace('\n', "\r\n")
        } else {
            text.to_owned()
        };
        if self.bom && !body.starts_with(BOM) {
            format!("{BOM}{body}")
        } else {
            body
        }
    }
}

/// `text` with the BOM removed and CRLF turned into LF.
/// The editor, when it is the one to read and write `path`: never for the plan file, which
/// is keel's, in keel's home.
pub(crate) fn in_editor(env: &crate::env::ToolEnv, path: &Path) -> Option<editor::Editor> {
    env.editor.clone().filter(|_| !is_plan_file(env, path))
}

pub(crate) fn plain(text: &str) -> String {
    text.strip_prefix(BOM).unwrap_or(text).replace("\r\n", "\n")
}

/// Writes `bytes` to `path` atomically: a temporary file beside the real target, then a
/// rename, so a crash leaves either the old or the new content. A symbolic link is followed
/// (its target is rewritten, the link stays), and an existing file keeps its permissions and,
/// where allowed, its owner. The temporary file is created exclusively with the final
/// permissions, so its content is never readable by others in between.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).or_else(|_| {
            // A dangling link: write where it points.
            std::fs::read_link(path)
                .map(|dest| path.parent().map_or(dest.clone(), |dir| dir.join(&dest)))
        })?,
        _ => path.to_path_buf(),
    };
    let existing = std::fs::metadata(&target).ok();
    if let Some(meta) = &existing
        && !meta.is_file()
    {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let dir = target
        .parent()
        .ok_or_else(|| std::io::Error::other("the path has no parent folder"))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mode = existing
        .as_ref()
        .map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp = dir.join(format!(".{name}.keel-{}-{stamp}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)?;
        if let Some(meta) = &existing {
            // Keep the owner when we may (root, or the same user); otherwise keep ours.
            let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Whether `real` (a resolved path) is the session's plan file, in plan mode
/// ([`crate::ToolEnv::plan_target`]).
pub(crate) fn is_plan_file(env: &crate::ToolEnv, real: &Path) -> bool {
    env.plan_target().is_some_and(|plan| plan == real)
}

/// Makes the folders `path` (resolved) is written in and returns the mode a new file there
/// gets. The plan file's folder (`$KEEL_HOME/plans`) is made 0700 and must be this user's
/// own private folder, never a link; elsewhere parent folders are made as usual.
pub(crate) fn make_parent(env: &crate::ToolEnv, path: &Path) -> std::io::Result<u32> {
    let Some(parent) = path.parent() else {
        return Ok(NEW_FILE_MODE);
    };
    if is_plan_file(env, path) {
        crate::output::private_folder(parent)?;
        return Ok(PLAN_FILE_MODE);
    }
    std::fs::create_dir_all(parent)?;
    Ok(NEW_FILE_MODE)
}

/// Reads the whole regular file `path`, following no link anywhere in it (resolve a folder
/// that may be the user's link, such as keel's home, first), refusing one larger than
/// `max_bytes`: for keel's own files in folders the model may have reached.
pub fn read_no_links(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = pinned::open_read(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    if meta.len() > max_bytes {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, more than the {max_bytes} allowed",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::other(format!(
            "it is more than the {max_bytes} bytes allowed"
        )));
    }
    Ok(bytes)
}

/// Reads a whole file opened by [`pinned::open_read`], refusing what is not a regular
/// file.
pub(crate) fn read_pinned(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut file = pinned::open_read(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Refuses anything that is not a regular file (FIFOs would block, devices never end).
pub(crate) fn ensure_regular(path: &Path) -> Result<bool, Refused> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(true),
        Ok(meta) if meta.is_dir() => Err(Refused::Folder(path.to_path_buf())),
        Ok(_) => Err(Refused::Special(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Refused::Io(io_message("open", path, &e))),
    }
}

/// Opens `path` (links followed) for reading when it is a regular file, without waiting: a
/// named pipe a project holds in a file's place would otherwise block whoever opens it, keel
/// at start-up included. Anything else than a regular file is `InvalidInput`.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The text of the regular file `path` ([`open_regular`]).
pub fn read_regular(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    open_regular(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Refuses a write to a protected control file ([`crate::protect`]) while they are
/// protected, judged on the real path at the moment of writing (the gate judged it
/// earlier; a link could have been swapped since).
pub(crate) fn refuse_control(env: &crate::ToolEnv, path: &Path) -> Result<(), Refused> {
    if !env.protect_control {
        return Ok(());
    }
    let real = crate::permission::real_path(path);
    match crate::protect::Protection::of(env).control_file(&real) {
        Some(what) => Err(Refused::Control {
            path: path.to_path_buf(),
            what: what.to_string(),
        }),
        None => Ok(()),
    }
}

/// A message for an I/O error on `path` that a model can act on.
pub(crate) fn io_message(action: &str, path: &Path, error: &std::io::Error) -> String {
    let shown = path.display();
    match error.kind() {
        std::io::ErrorKind::NotFound => format!("Cannot {action} {shown}: no such file or folder."),
        std::io::ErrorKind::PermissionDenied => {
            format!("Cannot {action} {shown}: permission denied.")
        }
        std::io::ErrorKind::IsADirectory => format!("Cannot {action} {shown}: it is a folder."),
        _ => format!("Cannot {action} {shown}: {error}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_round_trip() {
        let style = TextStyle::of("\u{feff}a\r\nb\r\n");
        assert_eq!(
            style,
            TextStyle {
                crlf: true,
                bom: true
            }
        );
        assert_eq!(style.apply("x\ny\n"), "\u{feff}x\r\ny\r\n");
        assert_eq!(TextStyle::of("a\nb\n").apply("x\r\ny"), "x\r\ny");
        assert_eq!(plain("\u{feff}a\r\nb"), "a\nb");
    }
}
