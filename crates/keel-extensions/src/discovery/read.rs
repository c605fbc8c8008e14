//! Reading one skill or command file without trusting it.

use std::fs;
use std::io::Read;
use std::path::Path;

use super::MAX_FILE_BYTES;
use super::defect::Defect;

/// The text of the regular file at `path` (a leading byte-order mark dropped), or why it
/// cannot be used. Callers resolved links already; opening without following one closes the
/// window in which a link could be swapped in, and opening without blocking means a planted
/// FIFO cannot hang discovery (it is then refused as not a regular file).
pub(crate) fn read_text(path: &Path) -> Result<String, Defect> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|error| Defect::from(&error))?;
    let meta = file.metadata().map_err(|error| Defect::from(&error))?;
    if !meta.is_file() {
        return Err(Defect::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(Defect::TooBig);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The size can change between the check and the read; the cap holds either way.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| Defect::from(&error))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Defect::TooBig);
    }
    let text = String::from_utf8(bytes)
        .map_err(|error| Defect::NotUtf8(error.utf8_error().valid_up_to()))?;
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => rest,
        None => &text,
    };
    // What the file says is data: keel's own tags in it must not pass for keel's.
    Ok(keel_runtime::tags::defuse(text).into_owned())
}
