//! `grep`: regex search over files with the ripgrep crates.
//!
//! Two passes. A parallel walk searches every file and keeps only the file and its number
//! of matching lines (stopping at the first match when only file names are wanted), which
//! is the work `rg -l` and `rg -c` do. The hits are then sorted by path, the page cut, and
//! only the files on the page are searched again for their lines and context. Re-reading a
//! page's worth of files, warm in the page cache, costs less than holding every matching
//! line of a large tree in memory, and sorting before paging keeps `offset` stable.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkState};
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    LOSSY_NAMES_NOTE, PathKind, SEARCH_MAX_BYTES, SEARCH_TIMEOUT, SearchError, Stop, Unreadable,
    clamp_limit, counted, display_path, inspect, parse_args, run_walk, timeout_note, walker,
};
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default, rename = "type")]
    file_type: Option<String>,
    #[serde(default)]
    output_mode: Option<OutputMode>,
    #[serde(default)]
    case_insensitive: Option<bool>,
    #[serde(default)]
    context: Option<u32>,
    #[serde(default)]
    before: Option<u32>,
    #[serde(default)]
    after: Option<u32>,
    #[serde(default)]
    multiline: Option<bool>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// The `grep` tool: regex search honouring ignore files, in parallel.
#[derive(Debug)]
pub struct GrepTool {
    env: Arc<ToolEnv>,
    definition: ToolDefinition,
    timeout: Duration,
}

impl GrepTool {
    /// A grep tool searching in `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            definition: definition(),
            timeout: SEARCH_TIMEOUT,
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
        let request = Request::new(&self.env, &args, self.timeout)?;
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
    fn definition(&self) -> &ToolDefinition {
        &self.definition
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

fn definition() -> ToolDefinition {
    ToolDefinition {
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
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for."},
                "path": {"type": "string", "description": "File or folder to search; default the working folder."},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs` or `src/**/*.{ts,tsx}`; `!` excludes."},
                "type": {"type": "string", "description": "Only search files of this ripgrep type, e.g. rust, py, js, ts, go, md."},
                "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"], "description": "What to report; default files_with_matches."},
                "case_insensitive": {"type": "boolean", "description": "Ignore case; default false."},
                "context": {"type": "integer", "minimum": 0, "maximum": GREP_MAX_CONTEXT, "description": "Lines of context around each match (content mode)."},
                "before": {"type": "integer", "minimum": 0, "maximum": GREP_MAX_CONTEXT, "description": "Lines of context before each match (content mode); overrides context."},
                "after": {"type": "integer", "minimum": 0, "maximum": GREP_MAX_CONTEXT, "description": "Lines of context after each match (content mode); overrides context."},
                "multiline": {"type": "boolean", "description": "Let matches span lines (`.` then matches newlines too); slower."},
                "limit": {"type": "integer", "minimum": 1, "maximum": GREP_MAX_LIMIT, "description": "Files (or matching lines in content mode) per page."},
                "offset": {"type": "integer", "minimum": 0, "description": "Files (or matching lines in content mode) to skip, to read the next page."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
    }
}

/// A validated call: everything both passes need, cheap to clone into a blocking task.
#[derive(Debug, Clone)]
struct Request {
    pattern: String,
    cwd: PathBuf,
    timeout: Duration,
    root: PathBuf,
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
    fn new(env: &ToolEnv, args: &GrepArgs, timeout: Duration) -> Result<Self, SearchError> {
        let root = env.resolve(args.path.as_deref().unwrap_or("."));
        let (root_shown, _) = display_path(env, &root);
        let mode = args.output_mode.unwrap_or_default();
        let multiline = args.multiline.unwrap_or(false);
        let matcher = build_matcher(
            &args.pattern,
            args.case_insensitive.unwrap_or(false),
            multiline,
        )?;
        let context = args.context.unwrap_or(0).min(GREP_MAX_CONTEXT);
        let before = args.before.unwrap_or(context).min(GREP_MAX_CONTEXT) as usize;
        let after = args.after.unwrap_or(context).min(GREP_MAX_CONTEXT) as usize;
        let default_limit = match mode {
            OutputMode::Content => GREP_DEFAULT_LINE_LIMIT,
            OutputMode::FilesWithMatches | OutputMode::Count => GREP_DEFAULT_FILE_LIMIT,
        };
        Ok(Self {
            pattern: args.pattern.clone(),
            cwd: env.cwd.clone(),
            timeout,
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
            limit: clamp_limit(args.limit, default_limit, GREP_MAX_LIMIT),
            offset: args.offset.unwrap_or(0),
        })
    }

    /// Pass one: every file searched in parallel, keeping only hits and their counts.
    fn scan(&self, kind: PathKind, stop: &Stop) -> Result<Scan, SearchError> {
        let builder = walker_for(self, kind)?;
        let searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .line_number(false)
            .multi_line(self.multiline)
            .build();
        let results = Mutex::new(Vec::new());
        let mut visitors = ScanBuilder {
            matcher: &self.matcher,
            searcher: &searcher,
            first_only: self.mode == OutputMode::FilesWithMatches,
            stop,
            results: &results,
        };
        builder.build_parallel().visit(&mut visitors);
        let mut scan = Scan::default();
        for part in results
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
        {
            scan.merge(part);
        }
        scan.hits.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok(scan)
    }

    /// Pass two: the page cut and rendered.
    fn render(&self, env: &ToolEnv, scan: Scan, timed_out: bool) -> ToolOutput {
        let mut page = Page::new(self, env);
        match self.mode {
            OutputMode::FilesWithMatches | OutputMode::Count => page.files(&scan),
            OutputMode::Content => page.content(&scan),
        }
        page.finish(&scan, timed_out)
    }
}

/// The walk for a request: filters from `glob` and `type` apply below a folder; a file
/// given directly is searched whatever its name.
fn walker_for(request: &Request, kind: PathKind) -> Result<ignore::WalkBuilder, SearchError> {
    let mut builder = walker(&request.cwd, &request.root);
    if kind == PathKind::Folder {
        if let Some(glob) = &request.glob {
            let mut overrides = OverrideBuilder::new(&request.root);
            overrides
                .add(glob)
                .map_err(|err| invalid_glob(glob, &err))?;
            let overrides = overrides.build().map_err(|err| invalid_glob(glob, &err))?;
            builder.overrides(overrides);
        }
        if let Some(name) = &request.file_type {
            let mut types = TypesBuilder::new();
            types.add_defaults().select(name);
            let types = types
                .build()
                .map_err(|_| SearchError::UnknownFileType(name.clone()))?;
            builder.types(types);
        }
    }
    Ok(builder)
}

fn invalid_glob(glob: &str, err: &ignore::Error) -> SearchError {
    SearchError::InvalidGlob {
        glob: glob.to_owned(),
        message: err.to_string(),
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

/// Builds one scanning visitor per walker thread.
struct ScanBuilder<'a> {
    matcher: &'a RegexMatcher,
    searcher: &'a Searcher,
    first_only: bool,
    stop: &'a Stop,
    results: &'a Mutex<Vec<Scan>>,
}

impl<'a> ParallelVisitorBuilder<'a> for ScanBuilder<'a> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(ScanVisitor {
            matcher: self.matcher.clone(),
            searcher: self.searcher.clone(),
            first_only: self.first_only,
            stop: self.stop,
            results: self.results,
            local: Scan::default(),
        })
    }
}

/// One walker thread's searcher; its findings are merged when the thread ends.
struct ScanVisitor<'a> {
    matcher: RegexMatcher,
    searcher: Searcher,
    first_only: bool,
    stop: &'a Stop,
    results: &'a Mutex<Vec<Scan>>,
    local: Scan,
}

impl ParallelVisitor for ScanVisitor<'_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.stop.should_stop() {
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                self.local.unreadable.note(|| err.to_string());
                return WalkState::Continue;
            }
        };
        // The root was checked to be a file or folder; below it only regular files are
        // searched (a FIFO could block forever).
        let searchable = match entry.file_type() {
            Some(kind) if entry.depth() == 0 => !kind.is_dir(),
            Some(kind) => kind.is_file(),
            None => false,
        };
        if !searchable {
            return WalkState::Continue;
        }
        let mut sink = CountSink {
            first_only: self.first_only,
            count: 0,
            binary: false,
        };
        self.local.searched += 1;
        match self
            .searcher
            .search_path(&self.matcher, entry.path(), &mut sink)
        {
            Ok(()) if sink.binary => self.local.binary_skipped += 1,
            Ok(()) if sink.count > 0 => self.local.hits.push(Hit {
                path: entry.into_path(),
                count: sink.count,
            }),
            Ok(()) => {}
            Err(err) => self
                .local
                .unreadable
                .note(|| format!("{}: {err}", entry.path().display())),
        }
        WalkState::Continue
    }
}

impl Drop for ScanVisitor<'_> {
    fn drop(&mut self) {
        let local = std::mem::take(&mut self.local);
        match self.results.lock() {
            Ok(mut results) => results.push(local),
            Err(poisoned) => poisoned.into_inner().push(local),
        }
    }
}

/// Counts matching lines; stops at the first when only the file name is wanted, and at
/// the first NUL byte (a binary file, skipped whole).
struct CountSink {
    first_only: bool,
    count: u64,
    binary: bool,
}

impl Sink for CountSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, _: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        Ok(!self.first_only)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// One line of a file as shown in content mode.
#[derive(Debug)]
struct Line {
    number: u64,
    text: String,
    /// The index of the match this line belongs to within its file, for matched lines.
    matched: Option<u64>,
}

/// Collects matched and context lines of one file, up to the match at `stop_at`.
struct CollectSink {
    lines: Vec<Line>,
    next_match: u64,
    stop_at: u64,
    lossy: bool,
    binary: bool,
}

impl CollectSink {
    fn push(&mut self, first_line: u64, bytes: &[u8], matched: Option<u64>) {
        for (number, line) in (first_line..).zip(bytes.split_inclusive(|&byte| byte == b'\n')) {
            let (text, lossy) = show_line(line);
            self.lossy |= lossy;
            self.lines.push(Line {
                number,
                text,
                matched,
            });
        }
    }
}

impl Sink for CollectSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.next_match >= self.stop_at {
            return Ok(false);
        }
        let index = self.next_match;
        self.next_match += 1;
        self.push(mat.line_number().unwrap_or(0), mat.bytes(), Some(index));
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.push(context.line_number().unwrap_or(0), context.bytes(), None);
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line for display: line ending removed, invalid UTF-8 replaced (flagged), long lines
/// cut with a note of how much was left out.
fn show_line(bytes: &[u8]) -> (String, bool) {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let (text, lossy) = match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), true),
    };
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => {
            let left_out = text.len() - cut;
            (format!("{}… [{left_out} more bytes]", &text[..cut]), lossy)
        }
        None => (text, lossy),
    }
}

/// The page being rendered, bounded by [`SEARCH_MAX_BYTES`].
struct Page<'a> {
    request: &'a Request,
    env: &'a ToolEnv,
    body: String,
    /// Entries (files, or matching lines in content mode) on the page.
    shown: usize,
    /// Total entries, to say how many pages remain.
    total: u64,
    /// The page stopped early at the byte cap.
    cut_by_bytes: bool,
    lossy_names: bool,
    lossy_text: bool,
    details: Vec<Value>,
    total_matches: Option<u64>,
}

impl<'a> Page<'a> {
    fn new(request: &'a Request, env: &'a ToolEnv) -> Self {
        Self {
            request,
            env,
            body: String::new(),
            shown: 0,
            total: 0,
            cut_by_bytes: false,
            lossy_names: false,
            lossy_text: false,
            details: Vec::new(),
            total_matches: None,
        }
    }

    fn show_path(&mut self, path: &Path) -> String {
        let (shown, lossy) = display_path(self.env, path);
        self.lossy_names |= lossy;
        shown
    }

    /// Whether `text` still fits under the byte cap (the first entry always does).
    fn fits(&mut self, text: &str) -> bool {
        if self.shown > 0 && self.body.len() + text.len() > SEARCH_MAX_BYTES {
            self.cut_by_bytes = true;
            return false;
        }
        true
    }

    /// `files_with_matches` and `count`: one entry per file.
    fn files(&mut self, scan: &Scan) {
        self.total = scan.hits.len() as u64;
        let count_mode = self.request.mode == OutputMode::Count;
        if count_mode {
            self.total_matches = Some(scan.hits.iter().map(|hit| hit.count).sum());
        }
        for hit in scan
            .hits
            .iter()
            .skip(self.request.offset)
            .take(self.request.limit)
        {
            let shown = self.show_path(&hit.path);
            let line = if count_mode {
                format!("{shown}:{}\n", hit.count)
            } else {
                format!("{shown}\n")
            };
            if !self.fits(&line) {
                break;
            }
            self.body.push_str(&line);
            self.details.push(if count_mode {
                json!({"path": shown, "count": hit.count})
            } else {
                json!(shown)
            });
            self.shown += 1;
        }
    }

    /// `content`: matching lines with context, files re-searched only for this page.
    fn content(&mut self, scan: &Scan) {
        let total: u64 = scan.hits.iter().map(|hit| hit.count).sum();
        self.total = total;
        self.total_matches = Some(total);
        let start = self.request.offset as u64;
        let end = start.saturating_add(self.request.limit as u64);
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .line_number(true)
            .multi_line(self.request.multiline)
            .before_context(self.request.before)
            .after_context(self.request.after)
            .build();
        let mut first_of_file = 0_u64;
        for hit in &scan.hits {
            let file_start = first_of_file;
            first_of_file += hit.count;
            if first_of_file <= start {
                continue;
            }
            if file_start >= end || self.cut_by_bytes {
                break;
            }
            // Matches of this file that fall on the page, as indexes within the file.
            let skip = start.saturating_sub(file_start);
            let take_until = end - file_start;
            let mut sink = CollectSink {
                lines: Vec::new(),
                next_match: 0,
                stop_at: take_until,
                lossy: false,
                binary: false,
            };
            // A file that vanished or changed since pass one shows what is there now.
            if searcher
                .search_path(&self.request.matcher, &hit.path, &mut sink)
                .is_err()
                || sink.binary
            {
                continue;
            }
            self.lossy_text |= sink.lossy;
            let shown = self.show_path(&hit.path);
            self.file_lines(&shown, &sink.lines, skip);
        }
    }

    /// Appends the matches of one file from index `skip` on, each with its context. A
    /// match's block runs from its before-context to its after-context, stopping short of
    /// the next match on the page, so every block is one page entry.
    fn file_lines(&mut self, shown: &str, lines: &[Line], skip: u64) {
        let with_context = self.request.before > 0 || self.request.after > 0;
        let before = self.request.before as u64;
        let after = self.request.after as u64;
        let on_page = |line: &Line| line.matched.is_some_and(|index| index >= skip);
        let mut printed_to: Option<u64> = None;
        let mut position = 0;
        while let Some(group_start) = lines
            .get(position..)
            .and_then(|rest| rest.iter().position(on_page))
            .map(|found| position + found)
        {
            let rest = lines.get(group_start..).unwrap_or_default();
            let Some(first) = rest.first() else { break };
            // Lines of one multi-line match share an index and form one group.
            let group_len = rest
                .iter()
                .take_while(|line| line.matched == first.matched)
                .count();
            let group_end = group_start + group_len;
            let next_on_page = lines
                .get(group_end..)
                .and_then(|rest| rest.iter().position(on_page))
                .map_or(lines.len(), |found| group_end + found);
            let last_number = rest
                .get(group_len.saturating_sub(1))
                .map_or(first.number, |line| line.number);
            let low = first.number.saturating_sub(before);
            let high = last_number.saturating_add(after);
            let mut from = group_start;
            while from > 0 && lines.get(from - 1).is_some_and(|line| line.number >= low) {
                from -= 1;
            }
            let mut block = String::new();
            if with_context && self.shown > 0 && printed_to.is_none_or(|last| low > last + 1) {
                block.push_str("--\n");
            }
            let mut block_end = printed_to;
            for line in lines.get(from..next_on_page).unwrap_or_default() {
                if line.number > high {
                    break;
                }
                if block_end.is_some_and(|last| line.number <= last) {
                    continue;
                }
                let separator = if line.matched.is_some() { ':' } else { '-' };
                block.push_str(&format!(
                    "{shown}{separator}{}{separator}{}\n",
                    line.number, line.text
                ));
                block_end = Some(line.number);
            }
            if !self.fits(&block) {
                return;
            }
            self.body.push_str(&block);
            self.details
                .push(json!({"path": shown, "line": first.number, "text": first.text}));
            self.shown += 1;
            printed_to = block_end;
            position = group_end;
        }
    }

    fn finish(mut self, scan: &Scan, timed_out: bool) -> ToolOutput {
        let request = self.request;
        let (one, noun) = match request.mode {
            OutputMode::Content => ("matching line", "matching lines"),
            OutputMode::FilesWithMatches | OutputMode::Count => ("file", "files"),
        };
        let mut text = String::new();
        let files = scan.hits.len();
        if files == 0 {
            text.push_str(&format!(
                "No matches for `{}` in {}.",
                request.pattern, request.root_shown
            ));
        } else if self.shown == 0 {
            text.push_str(&format!(
                "No results at offset {}: there are only {}.",
                request.offset,
                counted(self.total, one, noun)
            ));
        } else {
            let summary = match self.total_matches {
                Some(matches) => format!(
                    "{} in {}",
                    counted(matches, "matching line", "matching lines"),
                    counted(files as u64, "file", "files")
                ),
                None => counted(files as u64, "file", "files"),
            };
            text.push_str(&format!(
                "Found {summary} for `{}` in {}",
                request.pattern, request.root_shown
            ));
            if self.shown as u64 == self.total {
                text.push_str(":\n");
            } else {
                let first = request.offset + 1;
                let last = request.offset + self.shown;
                text.push_str(&format!(
                    "; showing {noun} {first}-{last}, sorted by path:\n"
                ));
            }
            text.push_str(&self.body);
        }
        let next_offset = request.offset as u64 + self.shown as u64;
        let more = self.total.saturating_sub(next_offset);
        let mut notes = Vec::new();
        if self.shown > 0 && more > 0 {
            let why = if self.cut_by_bytes {
                format!("Output cut at {} KiB. ", SEARCH_MAX_BYTES / 1024)
            } else {
                String::new()
            };
            notes.push(format!(
                "{why}{} not shown; call again with offset={next_offset} to see them, or narrow the search.",
                counted(more, &format!("more {one}"), &format!("more {noun}"))
            ));
        }
        if timed_out {
            notes.push(timeout_note(request.timeout));
        }
        if scan.binary_skipped > 0 {
            notes.push(format!(
                "{} skipped.",
                counted(scan.binary_skipped, "binary file", "binary files")
            ));
        }
        if let Some(note) = scan.unreadable.note_line() {
            notes.push(note);
        }
        if self.lossy_names {
            notes.push(LOSSY_NAMES_NOTE.to_owned());
        }
        if self.lossy_text {
            notes.push(
                "Some lines are not valid UTF-8 and are shown with U+FFFD replacement characters."
                    .to_owned(),
            );
        }
        if files == 0 && (request.glob.is_some() || request.file_type.is_some()) {
            notes.push("Only files passing the glob/type filter were searched.".to_owned());
        }
        if !notes.is_empty() {
            let text_end = if text.ends_with('\n') { "\n" } else { "\n\n" };
            text.push_str(text_end);
            text.push_str(&notes.join("\n"));
        }
        let mut details = json!({
            "mode": request.mode.as_str(),
            "pattern": request.pattern,
            "path": request.root_shown,
            "total_files": files,
            "files_searched": scan.searched,
            "offset": request.offset,
            "limit": request.limit,
            "shown": self.shown,
            "next_offset": (more > 0).then_some(next_offset),
            "binary_skipped": scan.binary_skipped,
            "unreadable": scan.unreadable.count,
            "timed_out": timed_out,
        });
        if let Some(object) = details.as_object_mut() {
            if let Some(matches) = self.total_matches {
                object.insert("total_matches".to_owned(), json!(matches));
            }
            let key = match request.mode {
                OutputMode::FilesWithMatches => "files",
                OutputMode::Count => "counts",
                OutputMode::Content => "matches",
            };
            object.insert(
                key.to_owned(),
                Value::Array(std::mem::take(&mut self.details)),
            );
        }
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(details),
            is_error: false,
            terminate: false,
        }
    }
}
