//! Pass two of `grep`: the files on the page are searched again for their lines and context,
//! and the page is rendered within [`SEARCH_MAX_BYTES`], with notes on what was left out and
//! structured details for front ends. The larger half of the tool, and the only one that
//! formats text for the model.

use std::io;
use std::path::Path;

use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use keel_agent::ToolOutput;
use keel_protocol::ContentBlock;
use serde_json::{Value, json};

use super::{MAX_LINE_CHARS, OutputMode, Request, Scan};
use crate::env::ToolEnv;
use crate::search::{LOSSY_NAMES_NOTE, SEARCH_MAX_BYTES, counted, display_path, timeout_note};

impl Request {
    /// Pass two: the page cut and rendered.
    pub(super) fn render(&self, env: &ToolEnv, scan: Scan, timed_out: bool) -> ToolOutput {
        let mut page = Page::new(self, env);
        match self.mode {
            OutputMode::FilesWithMatches | OutputMode::Count => page.files(&scan),
            OutputMode::Content => page.content(&scan),
        }
        page.finish(&scan, timed_out)
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
