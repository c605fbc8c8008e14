//! Capturing a command's output: all of it in memory up to the limit, then head and tail in
//! memory and the bytes in a private file, up to a cap on the file. What the model is told
//! about the file is what the file holds: past the cap the file ends with a marker and the
//! message says how much of the output it keeps.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::MAX_OUTPUT;

/// Most of a command's output saved to its file; past this the file is cut (with a note).
pub(super) const MAX_SAVED: usize = 64 * 1024 * 1024;

/// Creates the output folder readable only by this user.
pub(super) fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Creates a new output file readable only by this user; never follows or reuses a
/// file planted under that name.
pub(super) fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// The line that ends a saved file cut at [`MAX_SAVED`].
pub(super) fn cut_marker() -> String {
    format!(
        "\n[keel: saving stopped here, at {} MiB; the rest of the output was not saved]\n",
        MAX_SAVED / (1024 * 1024)
    )
}

/// Collects output: all of it in memory up to the limit, then head and tail in memory and
/// everything (up to [`MAX_SAVED`]) in a file.
pub(super) struct Collected {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
    saved: usize,
    /// Saving stopped at the cap (and the marker was written).
    cut: bool,
    file: Option<(PathBuf, std::fs::File)>,
    dir: PathBuf,
    overflowed: bool,
}

impl Collected {
    pub(super) fn new(dir: PathBuf) -> Self {
        Self {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total: 0,
            saved: 0,
            cut: false,
            file: None,
            dir,
            overflowed: false,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len();
        let keep = MAX_OUTPUT / 2;
        if !self.overflowed {
            if self.head.len() + bytes.len() <= MAX_OUTPUT {
                self.head.extend_from_slice(bytes);
                return;
            }
            // First overflow: everything so far goes to the file, the first half-limit
            // stays as the head, the rest starts the tail.
            self.overflowed = true;
            let mut all = std::mem::take(&mut self.head);
            all.extend_from_slice(bytes);
            let _ = private_dir(&self.dir);
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let path = self
                .dir
                .join(format!("bash-{}-{stamp}.log", std::process::id()));
            if let Ok(file) = private_file(&path) {
                self.file = Some((path, file));
                self.save(&all);
            }
            let split = keep.min(all.len());
            self.tail.extend(&all[split..]);
            all.truncate(split);
            self.head = all;
        } else {
            self.save(bytes);
            self.tail.extend(bytes);
        }
        while self.tail.len() > keep {
            self.tail.pop_front();
        }
    }

    /// Appends to the file up to the cap; the byte that crosses it writes the marker.
    fn save(&mut self, bytes: &[u8]) {
        let Some((_, file)) = &mut self.file else {
            return;
        };
        if self.cut {
            return;
        }
        let room = MAX_SAVED - self.saved;
        let part = bytes.get(..room.min(bytes.len())).unwrap_or(bytes);
        if file.write_all(part).is_err() {
            self.file = None;
            return;
        }
        self.saved += part.len();
        if part.len() < bytes.len() {
            self.cut = true;
            let _ = file.write_all(cut_marker().as_bytes());
        }
    }

    /// The text for the model and the saved file, if output was cut.
    pub(super) fn finish(mut self) -> (String, Option<PathBuf>) {
        if !self.overflowed {
            return (String::from_utf8_lossy(&self.head).into_owned(), None);
        }
        let path = self.file.take().map(|(path, _)| path);
        let tail: Vec<u8> = self.tail.into_iter().collect();
        let omitted = self.total - self.head.len() - tail.len();
        let saved = match &path {
            Some(path) if self.saved < self.total => format!(
                "only the first {} of the {} bytes were saved, in {} (the file ends with a note where saving stopped)",
                self.saved,
                self.total,
                path.display()
            ),
            Some(path) => format!(
                "the full output ({} bytes) is in {}",
                self.total,
                path.display()
            ),
            None => format!("the full output ({} bytes) could not be saved", self.total),
        };
        let text = format!(
            "{}\n\n[… {omitted} bytes omitted; {saved} …]\n\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        );
        (text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_read_larger_than_the_limit_keeps_head_tail_and_all_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut collected = Collected::new(dir.path().to_path_buf());
        let data: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        collected.push(&data);
        collected.push(b"END");
        let (text, path) = collected.finish();
        assert!(text.starts_with("abcdefghij"), "{}", &text[..20]);
        assert!(text.ends_with("END"));
        assert!(text.contains("the full output (100003 bytes)"), "{text}");
        let mut all = data.clone();
        all.extend_from_slice(b"END");
        assert_eq!(std::fs::read(path.unwrap()).unwrap(), all);
    }

    #[test]
    fn output_past_the_saving_cap_is_marked_in_the_file_and_told_truthfully() {
        let dir = tempfile::tempdir().unwrap();
        let mut collected = Collected::new(dir.path().to_path_buf());
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..70 {
            collected.push(&chunk);
        }
        let (text, path) = collected.finish();
        let path = path.unwrap();
        assert!(
            text.contains(&format!(
                "only the first {MAX_SAVED} of the {} bytes were saved",
                70 * 1024 * 1024
            )),
            "{}",
            &text[text.len() - 400..]
        );
        let saved = std::fs::read(&path).unwrap();
        assert_eq!(saved.len(), MAX_SAVED + cut_marker().len());
        assert!(saved.ends_with(cut_marker().as_bytes()));
    }
}
