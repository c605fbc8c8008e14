//! `glob`: files by name pattern, newest first.
//!
//! Patterns follow `.gitignore` rules, as `rg -g` does: one without a slash matches at any
//! depth (`*.rs`), one with a slash is anchored to the search folder (`src/**/*.rs`). A
//! literal leading part of the pattern (`crates/keel-tools/**/*.rs`, or an absolute path)
//! becomes the folder walked, so a narrow pattern never walks the whole tree. Sorting by
//! modification time needs one `stat` per matching file, the only work `rg --files` does
//! not do.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use ignore::overrides::OverrideBuilder;
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkState};
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Hidden, LOSSY_NAMES_NOTE, PathKind, SEARCH_MAX_BYTES, SEARCH_TIMEOUT, SearchError, Stop,
    Unreadable, counted, display_path, inspect, parse_args, run_walk, timeout_note, walker,
};
use crate::args::{self, Int, present};
use crate::env::{ToolEnv, normalize};

/// Files listed when no limit is given.
pub const GLOB_DEFAULT_LIMIT: usize = 200;
/// The most files one call may list.
pub const GLOB_MAX_LIMIT: usize = 2_000;

/// The arguments of `glob`; its doc comments are the descriptions the model reads.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    /// Glob pattern, e.g. `**/*.rs` or `src/**/*.{ts,tsx}`.
    pattern: String,
    /// Folder to search; default the working folder.
    #[serde(default, deserialize_with = "present")]
    path: Option<String>,
    /// Most files to list.
    #[serde(default, deserialize_with = "present")]
    limit: Option<Int<1, { GLOB_MAX_LIMIT as u64 }>>,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "glob".to_owned(),
    description: format!(
        "Find files by name pattern, newest first (by modification time). Patterns follow \
         .gitignore rules: without a slash they match at any depth (`*.rs`, `Cargo.toml`), \
         with one they are anchored to `path` (`src/**/*.ts`, `crates/*/Cargo.toml`); \
         braces work (`*.{{ts,tsx}}`). Honours .gitignore and .ignore; skips \
         version-control folders; lists files only. At most `limit` files (default \
         {GLOB_DEFAULT_LIMIT}) are listed, saying how many more exist."
    ),
    parameters: args::schema::<GlobArgs>(),
});

/// The `glob` tool: files matching a pattern, newest first, honouring ignore files.
#[derive(Debug)]
pub struct GlobTool {
    env: Arc<ToolEnv>,
    timeout: Duration,
    hidden: Hidden,
}

impl GlobTool {
    /// A glob tool listing files in `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            timeout: SEARCH_TIMEOUT,
            hidden: Hidden::default(),
        }
    }

    /// The same tool with another walk deadline (tests, slow file systems).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs one call outside the agent loop (tests, benchmarks); `execute` delegates here.
    pub async fn run(
        &self,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, ToolError> {
        Ok(self.glob(arguments, cancel).await?)
    }

    async fn glob(
        &self,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, SearchError> {
        let args: GlobArgs = parse_args(arguments)?;
        let limit = args.limit.map_or(GLOB_DEFAULT_LIMIT, Int::usize);
        let base = self.env.resolve(args.path.as_deref().unwrap_or("."));
        let (base_shown, _) = display_path(&self.env, &base);
        if inspect(&base, &base_shown).await? == PathKind::File {
            return Err(SearchError::NotAFolder(base_shown));
        }
        let (prefix, rest) = split_literal_prefix(&args.pattern);
        let root = normalize(&base.join(prefix));
        let (root_shown, _) = display_path(&self.env, &root);
        let mut overrides = OverrideBuilder::new(&root);
        overrides
            .add(&rest)
            .map_err(|err| invalid_glob(&args.pattern, &err))?;
        let overrides = overrides
            .build()
            .map_err(|err| invalid_glob(&args.pattern, &err))?;
        // A literal prefix that names no folder simply matches nothing.
        match tokio::fs::metadata(&root).await {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) | Err(_) => {
                let text = format!(
                    "No files match `{}`: {root_shown} is not a folder.",
                    args.pattern
                );
                return Ok(output(
                    text,
                    json!({"pattern": args.pattern, "path": root_shown, "total": 0, "shown": 0, "files": []}),
                ));
            }
        }

        let cwd = self.env.cwd.clone();
        let hidden = self.hidden.below(&self.env, &root);
        let walk_root = root.clone();
        let (found, timed_out) = run_walk("glob", cancel, self.timeout, move |stop| {
            let mut builder = walker(&cwd, &walk_root, hidden);
            builder.overrides(overrides);
            let results = Mutex::new(Vec::new());
            builder.build_parallel().visit(&mut ListBuilder {
                stop,
                results: &results,
            });
            let mut found = Found::default();
            for part in results
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
            {
                found.files.extend(part.files);
                found.unreadable.merge(part.unreadable);
            }
            // Newest first; the path breaks ties so the order is stable.
            found
                .files
                .sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            found
        })
        .await?;

        let total = found.files.len();
        let mut body = String::new();
        let mut shown = Vec::new();
        let mut lossy = false;
        let mut cut_by_bytes = false;
        for (path, _) in found.files.iter().take(limit) {
            let (name, was_lossy) = display_path(&self.env, path);
            if !shown.is_empty() && body.len() + name.len() + 1 > SEARCH_MAX_BYTES {
                cut_by_bytes = true;
                break;
            }
            lossy |= was_lossy;
            body.push_str(&name);
            body.push('\n');
            shown.push(name);
        }
        let mut text = if total == 0 {
            format!("No files match `{}` in {root_shown}.", args.pattern)
        } else if shown.len() == total {
            format!(
                "{} `{}` in {root_shown}, newest first:\n{body}",
                counted(total as u64, "file matches", "files match"),
                args.pattern
            )
        } else {
            format!(
                "{total} files match `{}` in {root_shown}; the {} newest:\n{body}",
                args.pattern,
                shown.len()
            )
        };
        let mut notes = Vec::new();
        let more = total - shown.len();
        if more > 0 {
            let why = if cut_by_bytes {
                format!("Output cut at {} KiB. ", SEARCH_MAX_BYTES / 1024)
            } else {
                String::new()
            };
            notes.push(format!(
                "{why}{} not shown; narrow the pattern or path{}.",
                counted(more as u64, "more file", "more files"),
                if limit < GLOB_MAX_LIMIT && !cut_by_bytes {
                    format!(", or raise limit (at most {GLOB_MAX_LIMIT})")
                } else {
                    String::new()
                }
            ));
        }
        if timed_out {
            notes.push(timeout_note(self.timeout));
        }
        if let Some(note) = found.unreadable.note_line() {
            notes.push(note);
        }
        if lossy {
            notes.push(LOSSY_NAMES_NOTE.to_owned());
        }
        if total == 0 {
            notes.push(
                "Files ignored by .gitignore/.ignore and version-control folders are not listed."
                    .to_owned(),
            );
        }
        if !notes.is_empty() {
            text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
            text.push_str(&notes.join("\n"));
        }
        let details = json!({
            "pattern": args.pattern,
            "path": root_shown,
            "total": total,
            "shown": shown.len(),
            "files": shown,
            "unreadable": found.unreadable.count,
            "timed_out": timed_out,
        });
        Ok(output(text, details))
    }
}

#[async_trait]
impl AgentTool for GlobTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SearchesFolder {
            path: "path",
            pattern: Some("pattern"),
            recursive: false,
        }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.run(arguments, &context.cancel).await
    }
}

fn output(text: String, details: Value) -> ToolOutput {
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details: Some(details),
        is_error: false,
        terminate: false,
    }
}

fn invalid_glob(glob: &str, err: &ignore::Error) -> SearchError {
    SearchError::InvalidGlob {
        glob: glob.to_owned(),
        message: err.to_string(),
    }
}

/// Splits the literal folders off the front of `pattern`: `src/a/**/*.rs` becomes
/// (`src/a`, `/**/*.rs`). The rest stays anchored (leading `/`) when a prefix was taken,
/// so `src/*.rs` still means only the files directly in `src`. A negated pattern, or one
/// whose first part is already a glob, is left whole.
fn split_literal_prefix(pattern: &str) -> (PathBuf, String) {
    let is_glob = |part: &str| part.contains(['*', '?', '[', ']', '{', '}', '\\']);
    if pattern.starts_with('!') {
        return (PathBuf::new(), pattern.to_owned());
    }
    let parts: Vec<&str> = pattern.split('/').collect();
    let mut prefix = PathBuf::new();
    if pattern.starts_with('/') {
        prefix.push("/");
    }
    let mut taken = 0;
    // The last part names files, so it always stays in the pattern.
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        if is_glob(part) {
            break;
        }
        if !part.is_empty() {
            prefix.push(part);
        }
        taken += 1;
    }
    if taken == 0 {
        return (PathBuf::new(), pattern.to_owned());
    }
    let rest = parts.get(taken..).unwrap_or_default().join("/");
    (prefix, format!("/{rest}"))
}

/// What the walk found: files with their modification times.
#[derive(Debug, Default)]
struct Found {
    files: Vec<(PathBuf, SystemTime)>,
    unreadable: Unreadable,
}

struct ListBuilder<'a> {
    stop: &'a Stop,
    results: &'a Mutex<Vec<Found>>,
}

impl<'a> ParallelVisitorBuilder<'a> for ListBuilder<'a> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(ListVisitor {
            stop: self.stop,
            results: self.results,
            local: Found::default(),
        })
    }
}

struct ListVisitor<'a> {
    stop: &'a Stop,
    results: &'a Mutex<Vec<Found>>,
    local: Found,
}

impl ParallelVisitor for ListVisitor<'_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.stop.should_stop() {
            return WalkState::Quit;
        }
        match entry {
            Ok(entry) if entry.file_type().is_some_and(|kind| kind.is_file()) => {
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|meta| meta.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                self.local.files.push((entry.into_path(), modified));
            }
            Ok(_) => {}
            Err(err) => self.local.unreadable.note(|| err.to_string()),
        }
        WalkState::Continue
    }
}

impl Drop for ListVisitor<'_> {
    fn drop(&mut self) {
        let local = std::mem::take(&mut self.local);
        match self.results.lock() {
            Ok(mut results) => results.push(local),
            Err(poisoned) => poisoned.into_inner().push(local),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_folders_move_from_pattern_to_walk_root() {
        let split = |p: &str| {
            let (prefix, rest) = split_literal_prefix(p);
            (prefix.to_string_lossy().into_owned(), rest)
        };
        assert_eq!(split("**/*.rs"), (String::new(), "**/*.rs".to_owned()));
        assert_eq!(split("*.rs"), (String::new(), "*.rs".to_owned()));
        assert_eq!(
            split("src/**/*.rs"),
            ("src".to_owned(), "/**/*.rs".to_owned())
        );
        assert_eq!(
            split("src/a/*.rs"),
            ("src/a".to_owned(), "/*.rs".to_owned())
        );
        assert_eq!(
            split("/abs/dir/*.rs"),
            ("/abs/dir".to_owned(), "/*.rs".to_owned())
        );
        assert_eq!(
            split("../x/Cargo.toml"),
            ("../x".to_owned(), "/Cargo.toml".to_owned())
        );
        assert_eq!(
            split("crates/*/Cargo.toml"),
            ("crates".to_owned(), "/*/Cargo.toml".to_owned())
        );
        assert_eq!(split("!*.rs"), (String::new(), "!*.rs".to_owned()));
        assert_eq!(
            split("./src/*.rs"),
            ("./src".to_owned(), "/*.rs".to_owned())
        );
    }
}
