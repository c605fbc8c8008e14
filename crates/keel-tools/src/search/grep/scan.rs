//! Pass one of `grep`: a parallel walk that searches every file and keeps only the file and
//! its number of matching lines (stopping at the first match when only names are wanted),
//! the work `rg -l` and `rg -c` do. Each walker thread keeps its own findings and merges them
//! when it ends, so threads never contend on a lock per file.

use std::io;
use std::sync::Mutex;

use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkState};

use super::{Hit, OutputMode, Request, Scan};
use crate::search::{PathKind, SearchError, Stop, walker};

impl Request {
    /// Pass one: every file searched in parallel, keeping only hits and their counts.
    pub(super) fn scan(&self, kind: PathKind, stop: &Stop) -> Result<Scan, SearchError> {
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
}

/// The walk for a request: filters from `glob` and `type` apply below a folder; a file
/// given directly is searched whatever its name.
fn walker_for(request: &Request, kind: PathKind) -> Result<ignore::WalkBuilder, SearchError> {
    let mut builder = walker(&request.cwd, &request.root, request.hidden.clone());
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
