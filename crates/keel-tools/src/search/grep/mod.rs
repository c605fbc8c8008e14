//! `grep`: regex search over files with the ripgrep crates.
//!
//! Two passes. A parallel walk searches every file and keeps only the file and its number
//! of matching lines (stopping at the first match when only file names are wanted), which
//! is the work `rg -l` and `rg -c` do. The hits are then sorted by path, the page cut, and
//! only the files on the page are searched again for their lines and context. Re-reading a
//! page's worth of files, warm in the page cache, costs less than holding every matching
//! line of a large tree in memory, and sorting before paging keeps `offset` stable.
//!
//! The pieces: `scan` is pass one (the parallel walk and its per-thread visitors), `page` is
//! pass two (re-searching the page's files and rendering the result); this file holds the tool,
//! its arguments and the validated request both passes share.

mod page;
mod scan;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::ToolDefinition;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{SEARCH_TIMEOUT, SearchError, Unreadable, display_path, inspect, parse_args, run_walk};
use crate::args::{self, Int, UNBOUNDED, present};
use crate::env::ToolEnv;

/// Files listed per page in `files_with_matches` and `count` modes when no limit is given.
pub const GREP_DEFAULT_FILE_LIMIT: usize = 200;
/// Matching lines shown per page in `content` mode when no limit is given.
pub const GREP_DEFAULT_LINE_LIMIT: usize = 100;
/// The largest page a call may ask for.
pub const GREP_MAX_LIMIT: usize = 2_000;
/// The most context lines on either side of a match.
pub const GREP_MAX_CONTEXT: u32 = 20;
/// Longest line shown in `content` mode; longer lines (minified code) are cut.
pub const MAX_LINE_CHARS: usize = 500;

/// What `grep` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Paths of matching files: the cheapest answer, enough to decide what to read.
    #[default]
    FilesWithMatches,
    /// Matching lines with line numbers and optional context, for reading in place.
    Content,
    /// Matching lines per file, to judge how widespread something is.
    Count,
}

impl OutputMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::FilesWithMatches => "files_with_matches",
            Self::Content => "content",
            Self::Count => "count",
        }
    }
}

/// The most context lines, as the type of the `context`, `before` and `after` arguments.
type ContextLines = Int<0, { GREP_MAX_CONTEXT as u64 }>;

/// The arguments of `grep`; its doc comments are the descriptions the model reads.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepArgs {
    /// Regular expression to search for.
    pattern: String,
    /// File or folder to search; default the working folder.
    #[serde(default, deserialize_with = "present")]
    path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.{ts,tsx}`; `!` excludes.
    #[serde(default, deserialize_with = "present")]
    glob: Option<String>,
    /// Only search files of this ripgrep type, e.g. rust, py, js, ts, go, md.
    #[serde(default, deserialize_with = "present", rename = "type")]
    file_type: Option<String>,
    /// What to report; default files_with_matches.
    #[serde(default)]
    output_mode: OutputMode,
    /// Ignore case; default false.
    #[serde(default)]
    case_insensitive: bool,
    /// Lines of context around each match (content mode).
    #[serde(default, deserialize_with = "present")]
    context: Option<ContextLines>,
    /// Lines of context before each match (content mode); overrides context.
    #[serde(default, deserialize_with = "present")]
    before: Option<ContextLines>,
    /// Lines of context after each match (content mode); overrides context.
    #[serde(default, deserialize_with = "present")]
    after: Option<ContextLines>,
    /// Let matches span lines (`.` then matches newlines too); slower.
    #[serde(default)]
    multiline: bool,
    /// Files (or matching lines in content mode) per page.
    #[serde(default, deserialize_with = "present")]
    limit: Option<Int<1, { GREP_MAX_LIMIT as u64 }>>,
    /// Files (or matching lines in content mode) to skip, to read the next page.
    #[serde(default, deserialize_with = "present")]
    offset: Option<Int<0, UNBOUNDED>>,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "grep".to_owned(),
    description: format!(
        "Search file contents with a regular expression (Rust regex syntax, as ripgrep). \
         Searches `path` (a file or folder, default the working folder) recursively, \
         honouring .gitignore and .ignore, skipping binary files and version-control \
         folders. `output_mode`: `files_with_matches` (default, matching file paths), \
         `content` (matching lines as path:line:text, with optional context lines) or \
         `count` (matching lines per file). Results are sorted by path and paged with \
         `limit` (default {GREP_DEFAULT_FILE_LIMIT} files, or {GREP_DEFAULT_LINE_LIMIT} \
         matching lines in content mode) and `offset`. Filter files with `glob` \
         (gitignore syntax: `*.rs` at any depth, `src/**/*.ts`, `*.{{ts,tsx}}`) or `type` \
         (ripgrep type names: rust, py, js, ts, go, ...). Escape regex metacharacters to \
         find literal text, e.g. `fn main\\(`. Set `multiline` to let a match span lines."
    ),
    parameters: args::schema::<GrepArgs>(),
});

/// The `grep` tool: regex search honouring ignore files, in parallel.
#[derive(Debug)]
pub struct GrepTool {
    env: Arc<ToolEnv>,
    timeout: Duration,
    hidden: super::Hidden,
}

impl GrepTool {
    /// A grep tool searching in `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            timeout: SEARCH_TIMEOUT,
            hidden: super::Hidden::default(),
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
        Ok(self.grep(arguments, cancel).await?)
    }

    async fn grep(
        &self,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, SearchError> {
        let args: GrepArgs = parse_args(arguments)?;
        let request = Request::new(&self.env, &args, self.timeout, &self.hidden)?;
        let kind = inspect(&request.root, &request.root_shown).await?;

        let scan_request = request.clone();
        let (scan, timed_out) = run_walk("grep", cancel, self.timeout, move |stop| {
            scan_request.scan(kind, stop)
        })
        .await?;
        let scan = scan?;

        let page_request = request.clone();
        let env = Arc::clone(&self.env);
        let (rendered, _) = run_walk("grep", cancel, self.timeout, move |_| {
            page_request.render(&env, scan, timed_out)
        })
        .await?;
        Ok(rendered)
    }
}

#[async_trait]
impl AgentTool for GrepTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SearchesFolder {
            path: "path",
            pattern: None,
            recursive: true,
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

/// A validated call: everything both passes need, cheap to clone into a blocking task.
#[derive(Debug, Clone)]
struct Request {
    pattern: String,
    cwd: PathBuf,
    timeout: Duration,
    root: PathBuf,
    /// Credential locations below the root, never entered.
    hidden: std::sync::Arc<[PathBuf]>,
    root_shown: String,
    glob: Option<String>,
    file_type: Option<String>,
    mode: OutputMode,
    matcher: RegexMatcher,
    multiline: bool,
    before: usize,
    after: usize,
    limit: usize,
    offset: usize,
}

impl Request {
    fn new(
        env: &ToolEnv,
        args: &GrepArgs,
        timeout: Duration,
        hidden: &super::Hidden,
    ) -> Result<Self, SearchError> {
        let root = env.resolve(args.path.as_deref().unwrap_or("."));
        let (root_shown, _) = display_path(env, &root);
        let mode = args.output_mode;
        let multiline = args.multiline;
        let matcher = build_matcher(&args.pattern, args.case_insensitive, multiline)?;
        let context = args.context.map_or(0, Int::usize);
        let before = args.before.map_or(context, Int::usize);
        let after = args.after.map_or(context, Int::usize);
        let default_limit = match mode {
            OutputMode::Content => GREP_DEFAULT_LINE_LIMIT,
            OutputMode::FilesWithMatches | OutputMode::Count => GREP_DEFAULT_FILE_LIMIT,
        };
        Ok(Self {
            pattern: args.pattern.clone(),
            cwd: env.cwd.clone(),
            timeout,
            hidden: hidden.below(env, &root),
            root,
            root_shown,
            glob: args.glob.clone().filter(|glob| !glob.trim().is_empty()),
            file_type: args
                .file_type
                .clone()
                .filter(|name| !name.trim().is_empty()),
            mode,
            matcher,
            multiline,
            before,
            after,
            limit: args.limit.map_or(default_limit, Int::usize),
            offset: args.offset.map_or(0, Int::usize),
        })
    }
}

/// The matcher `rg` would build: `^`/`$` at line boundaries, and a line terminator unless
/// matches may span lines (which lets the searcher go line by line, much faster).
fn build_matcher(
    pattern: &str,
    case_insensitive: bool,
    multiline: bool,
) -> Result<RegexMatcher, SearchError> {
    let mut builder = RegexMatcherBuilder::new();
    builder.case_insensitive(case_insensitive).multi_line(true);
    if multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(pattern).map_err(|err| {
        let mut message = err.to_string();
        if !multiline && matches!(err.kind(), grep_regex::ErrorKind::NotAllowed(_)) {
            message.push_str(" (set `multiline: true` to match across lines)");
        }
        SearchError::InvalidRegex {
            pattern: pattern.to_owned(),
            message,
        }
    })
}

/// A file with matches, and how many lines matched (1 when only file names were wanted).
#[derive(Debug)]
struct Hit {
    path: PathBuf,
    count: u64,
}

/// What pass one found.
#[derive(Debug, Default)]
struct Scan {
    hits: Vec<Hit>,
    searched: u64,
    binary_skipped: u64,
    unreadable: Unreadable,
}

impl Scan {
    fn merge(&mut self, other: Self) {
        self.hits.extend(other.hits);
        self.searched += other.searched;
        self.binary_skipped += other.binary_skipped;
        self.unreadable.merge(other.unreadable);
    }
}
