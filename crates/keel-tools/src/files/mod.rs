//! File tools: read, write, edit, and what they share (line endings, BOM, atomic writes).

pub mod edit;
pub mod read;
pub mod write;

use std::io::Write as _;
use std::path::Path;

/// UTF-8 byte order mark.
pub(crate) const BOM: &str = "\u{feff}";

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
pub(crate) fn plain(text: &str) -> String {
    text.strip_prefix(BOM).unwrap_or(text).replace("\r\n", "\n")
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, then a rename, so a
/// crash leaves either the old or the new content. Keeps an existing file's permissions.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the path has no parent folder"))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.keel-{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&temp, meta.permissions())?;
        }
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
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
