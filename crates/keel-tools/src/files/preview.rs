//! What `edit` and `write` would change, shown before the user approves them, and the
//! hold of that approval on the file: a call whose file changed after its preview was
//! computed fails instead of writing something the user never saw.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use keel_agent::ToolError;
use keel_protocol::{ToolCallId, ToolPreview};

use super::{pinned, plain};
use crate::env::ToolEnv;

/// Largest file a preview reads; a larger one is approved on its summary alone.
const READ_MAX: u64 = 1024 * 1024;
/// Longest diff a preview carries.
const DIFF_MAX: usize = 64 * 1024;
/// Largest text carried whole beside the diff (for front ends that draw their own diff).
const TEXT_MAX: usize = 256 * 1024;
/// Most previews remembered: a denied call never runs to clear its own.
const SHOWN_MAX: usize = 256;

/// The file contents previews were computed from, by call.
#[derive(Default)]
pub(crate) struct Shown {
    inner: Mutex<ShownInner>,
    hasher: std::hash::RandomState,
}

#[derive(Default)]
struct ShownInner {
    /// Fingerprint of the text shown, `None` for a file that did not exist.
    calls: HashMap<String, Option<u64>>,
    order: VecDeque<String>,
}

impl Shown {
    fn fingerprint(&self, bytes: &[u8]) -> u64 {
        self.hasher.hash_one(bytes)
    }

    /// Remembers that `call`'s preview was computed from `before` (`None`: no file).
    pub(crate) fn remember(&self, call: &ToolCallId, before: Option<&[u8]>) {
        let print = before.map(|bytes| self.fingerprint(bytes));
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let key = call.as_str().to_owned();
        if inner.calls.insert(key.clone(), print).is_none() {
            inner.order.push_back(key);
        }
        while inner.calls.len() > SHOWN_MAX {
            match inner.order.pop_front() {
                Some(oldest) => {
                    inner.calls.remove(&oldest);
                }
                None => break,
            }
        }
    }

    /// Whether `call` may go on with the file as it is now (`None`: absent): a call never
    /// previewed may; a previewed one only if the file is what its preview read.
    pub(crate) fn check(
        &self,
        call: &ToolCallId,
        path: &Path,
        now: Option<&[u8]>,
    ) -> Result<(), ToolError> {
        let shown = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let shown = inner.calls.remove(call.as_str());
            if shown.is_some() {
                inner.order.retain(|key| key != call.as_str());
            }
            shown
        };
        let Some(shown) = shown else {
            return Ok(());
        };
        if shown == now.map(|bytes| self.fingerprint(bytes)) {
            return Ok(());
        }
        Err(ToolError::new(format!(
            "{} changed after the user was shown this change and before it was written, so \
             nothing was written: the approval was for the file as it was. Read the file again \
             and redo the change.",
            path.display()
        )))
    }
}

/// A call and the previews it may be held to.
pub(crate) struct Held {
    pub(crate) shown: Arc<Shown>,
    pub(crate) call: ToolCallId,
}

impl Held {
    /// Refuses the call when its file is no longer what its preview showed.
    pub(crate) fn check(&self, path: &Path, now: Option<&[u8]>) -> Result<(), ToolError> {
        self.shown.check(&self.call, path, now)
    }
}

/// Where a change to the file the call `named` would land, and the text it would start from:
/// `None` when it gets no preview (a path refused, a credential, a special or too large
/// file); no text when the file does not exist yet. The editor's buffer when the editor
/// holds the file, as the call itself would read it.
pub(crate) async fn starting_text(
    env: &ToolEnv,
    named: &str,
) -> Option<(PathBuf, Option<Vec<u8>>)> {
    let lexical = env.resolve(named);
    let path = pinned::resolve(env, &lexical, true).ok()?;
    if is_credential(env, &lexical, &path) {
        return None;
    }
    let before = match super::in_editor(env, &path) {
        Some(editor) if super::ensure_regular(&path).ok()? => {
            Some(editor.0.read_text(&path).await.ok()?.into_bytes())
        }
        Some(_) => None,
        None => {
            let at = path.clone();
            tokio::task::spawn_blocking(move || read_small(&at))
                .await
                .ok()?
                .ok()?
        }
    };
    Some((path, before))
}

/// Whether `lexical` (as the call named it) or `real` (as resolved) is a credential
/// location: a preview never reads one, since the question goes to every front end.
pub(crate) fn is_credential(env: &ToolEnv, lexical: &Path, real: &Path) -> bool {
    let credentials = pinned::CredentialLocations::of(env);
    credentials.hold(lexical) || credentials.hold(real)
}

/// The file at `path` if it is a regular file no larger than a preview reads; `Ok(None)`
/// when there is none, `Err` when it cannot be previewed.
pub(crate) fn read_small(path: &Path) -> Result<Option<Vec<u8>>, ()> {
    use std::io::Read as _;
    let mut file = match pinned::open_read(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(()),
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() && meta.len() <= READ_MAX => {}
        _ => return Err(()),
    }
    let mut bytes = Vec::new();
    // A file that grew past the bound since is not previewed either.
    match (&mut file).take(READ_MAX + 1).read_to_end(&mut bytes) {
        Ok(n) if n as u64 <= READ_MAX => Ok(Some(bytes)),
        _ => Err(()),
    }
}

/// The preview of `path` going from `before` (`None`: a new file) to `after`.
pub(crate) fn file(path: &Path, before: Option<&str>, after: &str) -> ToolPreview {
    let shown = path.display().to_string();
    let old = plain(before.unwrap_or_default());
    let new = plain(after);
    let mut diff = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(
            if before.is_some() {
                &shown
            } else {
                "/dev/null"
            },
            &shown,
        )
        .to_string();
    let truncated = diff.len() > DIFF_MAX;
    if truncated {
        let mut cut = DIFF_MAX;
        while !diff.is_char_boundary(cut) {
            cut -= 1;
        }
        // Whole lines only.
        cut = diff[..cut].rfind('\n').map_or(0, |at| at + 1);
        diff.truncate(cut);
    }
    let whole = old.len() <= TEXT_MAX && new.len() <= TEXT_MAX;
    ToolPreview::File {
        path: shown,
        created: before.is_none(),
        diff,
        truncated,
        old_text: whole.then_some(old),
        new_text: whole.then_some(new),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn call(id: &str) -> ToolCallId {
        ToolCallId::from(id)
    }

    #[test]
    fn a_call_goes_on_only_with_the_file_its_preview_read() {
        let shown = Shown::default();
        let path = Path::new("/w/a.txt");
        shown.remember(&call("c1"), Some(b"one\n"));
        shown.remember(&call("c2"), Some(b"one\n"));
        shown.remember(&call("c3"), None);
        assert!(shown.check(&call("c1"), path, Some(b"one\n")).is_ok());
        let changed = shown.check(&call("c2"), path, Some(b"two\n")).unwrap_err();
        assert!(
            changed.to_string().contains("/w/a.txt changed after"),
            "{changed}"
        );
        // A file that appeared where the preview found none is a change too.
        assert!(shown.check(&call("c3"), path, Some(b"")).is_err());
        // A call never previewed (the mode allowed it) is not held.
        assert!(shown.check(&call("c4"), path, Some(b"x")).is_ok());
        // A check uses the preview up: a second run of the same id is not held by it.
        assert!(shown.check(&call("c2"), path, Some(b"two\n")).is_ok());
    }

    #[test]
    fn previews_of_calls_that_never_run_are_forgotten_past_the_bound() {
        let shown = Shown::default();
        for n in 0..SHOWN_MAX + 10 {
            shown.remember(&call(&format!("c{n}")), Some(b"x"));
        }
        let inner = shown.inner.lock().unwrap();
        assert_eq!(inner.calls.len(), SHOWN_MAX);
        assert!(!inner.calls.contains_key("c0"));
        assert!(inner.calls.contains_key(&format!("c{}", SHOWN_MAX + 9)));
    }

    #[test]
    fn a_preview_is_a_unified_diff_with_the_whole_texts_when_small() {
        let ToolPreview::File {
            diff,
            created,
            old_text,
            new_text,
            truncated,
            ..
        } = file(
            Path::new("/w/calc.py"),
            Some("a = 1\nb = 2\n"),
            "a = 1\nb = 3\n",
        );
        assert!(!created && !truncated);
        assert!(diff.contains("-b = 2\n+b = 3\n"), "{diff}");
        assert_eq!(old_text.as_deref(), Some("a = 1\nb = 2\n"));
        assert_eq!(new_text.as_deref(), Some("a = 1\nb = 3\n"));
        let ToolPreview::File { diff, created, .. } = file(Path::new("/w/new.py"), None, "x\n");
        assert!(created);
        assert!(diff.starts_with("--- /dev/null\n+++ /w/new.py\n"), "{diff}");
    }

    #[test]
    fn a_long_diff_is_cut_at_a_line_and_says_so() {
        let after: String = (0..20_000).map(|n| format!("line {n}\n")).collect();
        let ToolPreview::File {
            diff,
            truncated,
            old_text,
            ..
        } = file(Path::new("/w/big.txt"), Some(""), &after);
        assert!(truncated);
        assert!(diff.len() <= DIFF_MAX && diff.ends_with('\n'));
        assert!(
            old_text.is_some(),
            "both texts are under the whole-text bound"
        );
    }

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.txt");
        std::fs::write(&small, "hello\n").unwrap();
        assert_eq!(read_small(&small).unwrap().unwrap(), b"hello\n");
        assert_eq!(read_small(&dir.path().join("missing")).unwrap(), None);
        let big = dir.path().join("big.bin");
        std::fs::write(&big, vec![b'x'; READ_MAX as usize + 1]).unwrap();
        assert!(read_small(&big).is_err());
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        assert!(
            read_small(&fifo).is_err(),
            "a named pipe is never read (nor waited on)"
        );
        assert!(read_small(dir.path()).is_err());
    }
}
