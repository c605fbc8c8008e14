//! The plan's files in keel's home: the plan file the model writes
//! (`plans/<session>.md`) and the frozen copies `exit_plan_mode` makes of it
//! (`plans/<session>.<n>.md`), which only keel writes.
//!
//! Everything is read and written below keel's home as resolved once (it may be a link of
//! the user's), following no link further down: the model can only ever write the plan file
//! itself, but nothing here trusts that.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use keel_protocol::SessionId;

/// Largest plan read (a plan is a few pages, not a dump; it goes to the model again on
/// approval).
pub const MAX_PLAN_BYTES: u64 = 256 * 1024;

/// Frozen copies of one session's plan at the most (each review makes one).
const MAX_FROZEN: u32 = 10_000;

/// Why a plan cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Nothing is at the path.
    #[error("there is no plan file at {0}")]
    Missing(PathBuf),
    /// It is not text keel can take as a plan (too large, not UTF-8, a link, not a file).
    #[error("cannot read the plan file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Its first section is not `## Summary`.
    #[error("the plan file {path} does not start with a `## Summary` section: {reason}")]
    NoSummary {
        /// The file.
        path: PathBuf,
        /// What it starts with instead.
        reason: String,
    },
    /// The frozen copy could not be written.
    #[error("cannot freeze the plan in {path}: {reason}")]
    Freeze {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl PlanError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Missing(_) => "plan_missing",
            Self::Unreadable { .. } => "plan_unreadable",
            Self::NoSummary { .. } => "plan_no_summary",
            Self::Freeze { .. } => "plan_freeze_failed",
        }
    }
}

/// The plans folder as resolved paths show it: keel's home resolved, then `plans`.
pub fn plans_dir(keel_home: &Path) -> PathBuf {
    keel_tools::permission::real_path(keel_home).join(keel_runtime::services::PLANS_DIR)
}

/// `session`'s plan file, resolved as [`plans_dir`] is.
pub fn plan_path(keel_home: &Path, session: &SessionId) -> PathBuf {
    plans_dir(keel_home).join(format!("{}.md", session.as_str()))
}

/// The text of the plan at `path` (resolved), following no link.
pub fn read(path: &Path) -> Result<String, PlanError> {
    let unreadable = |reason: String| PlanError::Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = keel_tools::files::read_no_links(path, MAX_PLAN_BYTES).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            PlanError::Missing(path.to_path_buf())
        } else {
            unreadable(e.to_string())
        }
    })?;
    let text = String::from_utf8(bytes).map_err(|_| unreadable("it is not UTF-8 text".into()))?;
    Ok(text.strip_prefix('\u{feff}').unwrap_or(&text).to_owned())
}

/// Why `text` does not open with a `## Summary` section, if it does not: only blank lines
/// and one `# Title` may come before it.
pub fn summary_problem(text: &str) -> Option<String> {
    let mut titled = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(title) = line.strip_prefix("# ")
            && !titled
            && !title.trim().is_empty()
        {
            titled = true;
            continue;
        }
        let shown = crate::text::cut(line, 80);
        return match line.strip_prefix("## ") {
            Some(heading) if heading.trim().eq_ignore_ascii_case("summary") => None,
            Some(_) => Some(format!("its first section is `{shown}`")),
            None => Some(format!("it begins with `{shown}` before any section")),
        };
    }
    Some("it has no sections at all".into())
}

/// The frozen copies of `session`'s plan, oldest first: `(n, path)`.
pub fn frozen(keel_home: &Path, session: &SessionId) -> Vec<(u32, PathBuf)> {
    let dir = plans_dir(keel_home);
    let prefix = format!("{}.", session.as_str());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let n = name.strip_prefix(&prefix)?.strip_suffix(".md")?;
            let n: u32 = n.parse().ok()?;
            Some((n, dir.join(name)))
        })
        .collect();
    found.sort();
    found
}

/// Freezes `text` as `session`'s next frozen plan: a new private file (0600, in the
/// private plans folder, created exclusively, never through a link) the model cannot write.
pub fn freeze(keel_home: &Path, session: &SessionId, text: &str) -> Result<PathBuf, PlanError> {
    let dir = plans_dir(keel_home);
    let failed = |reason: String| PlanError::Freeze {
        path: dir.clone(),
        reason,
    };
    let next = frozen(keel_home, session).last().map_or(1, |(n, _)| n + 1);
    for n in next..=MAX_FROZEN {
        let path = dir.join(format!("{}.{n}.md", session.as_str()));
        match keel_tools::output::private_file(&path) {
            Ok(mut file) => {
                file.write_all(text.as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|e| failed(e.to_string()))?;
                return Ok(path);
            }
            // Another review of the same session froze one at this number first.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(failed(e.to_string())),
        }
    }
    Err(failed(format!("more than {MAX_FROZEN} frozen plans")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_plan_opens_with_its_summary() {
        for good in [
            "## Summary\nDo it.",
            "\n\n## summary  \n",
            "# Plan: caching\n\n## Summary\n…",
            "\u{feff}## Summary",
        ] {
            let text = good.trim_start_matches('\u{feff}');
            assert_eq!(summary_problem(text), None, "{good:?}");
        }
        assert_eq!(
            summary_problem("## Steps\n## Summary"),
            Some("its first section is `## Steps`".into())
        );
        assert_eq!(
            summary_problem("Intro text\n## Summary"),
            Some("it begins with `Intro text` before any section".into())
        );
        assert_eq!(
            summary_problem("# A\n# B\n## Summary"),
            Some("it begins with `# B` before any section".into())
        );
        assert_eq!(
            summary_problem("  \n"),
            Some("it has no sections at all".into())
        );
    }

    #[test]
    fn freezing_numbers_private_copies() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let session = SessionId::from("s-frozen01");
        let first = freeze(dir.path(), &session, "one").unwrap();
        let second = freeze(dir.path(), &session, "two").unwrap();
        assert!(first.ends_with("plans/s-frozen01.1.md"), "{first:?}");
        assert!(second.ends_with("plans/s-frozen01.2.md"), "{second:?}");
        assert_eq!(read(&second).unwrap(), "two");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode(&first), mode(first.parent().unwrap())),
            (0o600, 0o700)
        );
        assert_eq!(
            frozen(dir.path(), &session)
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(frozen(dir.path(), &SessionId::from("s-frozen0")).is_empty());
        assert_eq!(
            read(&plan_path(dir.path(), &session)).unwrap_err().code(),
            "plan_missing"
        );
    }
}
