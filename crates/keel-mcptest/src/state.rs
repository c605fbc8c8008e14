//! What every session of this process shares: the options and the tool list's version.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Options and mutable state shared by every session (HTTP serves each session its own handler).
#[derive(Debug)]
pub struct Shared {
    /// The server name reported in `initialize`.
    pub name: String,
    /// How many `tool_NNN` tools to offer.
    pub generated_tools: usize,
    /// More tools by name, each answering like `echo` (for name clashes).
    pub extra_tools: Vec<String>,
    /// How long to wait before answering `initialize`.
    pub slow_start: Duration,
    /// Where `starts` and `crashes` are counted across restarts.
    pub state_dir: Option<PathBuf>,
    mutated: AtomicBool,
}

impl Shared {
    /// Options for a server whose tool list has not been mutated.
    pub fn new(
        name: String,
        generated_tools: usize,
        slow_start: Duration,
        state_dir: Option<PathBuf>,
    ) -> Self {
        Self {
            name,
            generated_tools,
            extra_tools: Vec::new(),
            slow_start,
            state_dir,
            mutated: AtomicBool::new(false),
        }
    }

    /// Whether `mutate` has run: the tool list then has `added_later` and `echo v2`.
    pub fn mutated(&self) -> bool {
        self.mutated.load(Ordering::SeqCst)
    }

    /// Switches to the mutated tool list.
    pub fn mutate(&self) {
        self.mutated.store(true, Ordering::SeqCst);
    }

    /// Appends a line to `file` in the state directory, if there is one, so a test can count
    /// events that outlive the process. A failure is reported, not fatal: the count is a test aid.
    pub fn record(&self, file: &str) {
        let Some(dir) = &self.state_dir else { return };
        let path = dir.join(file);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "pid {}", std::process::id()));
        if let Err(err) = written {
            eprintln!("keel-mcptest: cannot append to {}: {err}", path.display());
        }
    }
}
