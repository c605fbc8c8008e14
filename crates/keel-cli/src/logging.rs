//! Diagnostic logs: the `tracing` spans and events keel's libraries emit, shown on request.
//!
//! Nothing is installed unless asked for, so keel's output is exactly what it is without
//! logging (the exec formats own stdout and, in text mode, stderr too). `KEEL_LOG` takes
//! any `EnvFilter` directive (`debug`, `keel_llm=trace,keel_agent=debug`) and sends the
//! lines to stderr; `--log-file PATH` sends them to PATH instead, appended, the file
//! created 0600 because a log can quote prompts, commands and paths. With a file and no
//! `KEEL_LOG`, keel's own crates log at debug and everything else at warn. Lines are
//! written as they happen, with no background writer, so nothing is lost when keel exits
//! on its own terms; the cost is a blocking write per line, which only a run that asked
//! for logs pays.
//!
//! `KEEL_TRACE=1` is start-up's timing dump: each phase on the way to the first model request
//! (and the TUI's first frame) on stderr, with its time since logging was set up (just after
//! the arguments were read) and how long it took. Its spans and marks have the target
//! `keel_startup`, so `KEEL_LOG` can ask for them too.

use std::fs::{File, OpenOptions};
use std::io::IsTerminal as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// The variable holding the filter directive.
pub const ENV: &str = "KEEL_LOG";

/// The variable that asks for start-up's timing dump.
pub const TRACE_ENV: &str = "KEEL_TRACE";

/// The target of start-up's spans and marks.
pub const STARTUP: &str = "keel_startup";

/// The filter a log file gets when `KEEL_LOG` is unset: keel's crates in detail, the
/// libraries under them (HTTP, TLS) only when something is wrong.
const FILE_DEFAULT: &str =
    "warn,keel=debug,keel_agent=debug,keel_llm=debug,keel_store=debug,keel_tools=debug";

/// Logging could not be set up as asked.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `KEEL_LOG` is not a valid filter directive.
    #[error(
        "{ENV}={directive:?} is not a valid log filter ({reason}); use a level such as `debug` or directives such as `keel_llm=trace,keel_agent=debug`"
    )]
    Filter {
        /// The directive as given.
        directive: String,
        /// What the parser said.
        reason: String,
    },
    /// The log file cannot be opened for appending.
    #[error("--log-file {}: cannot open it for appending: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Installs the global subscriber when `KEEL_LOG` is set (not empty) or `log_file` is
/// given; otherwise installs nothing.
pub fn init(log_file: Option<&Path>) -> Result<(), LogError> {
    let directive = std::env::var(ENV).ok().filter(|d| !d.trim().is_empty());
    let trace = std::env::var(TRACE_ENV).is_ok_and(|v| !matches!(v.trim(), "" | "0"));
    let startup = format!("{STARTUP}=info");
    let filter = match (&directive, log_file) {
        (None, None) if trace => return trace_startup(&startup),
        (None, None) => return Ok(()),
        (Some(directive), _) if trace => filter(&format!("{directive},{startup}"))?,
        (Some(directive), _) => filter(directive)?,
        (None, Some(_)) if trace => filter(&format!("{FILE_DEFAULT},{startup}"))?,
        (None, Some(_)) => filter(FILE_DEFAULT)?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE);
    // A second subscriber can only come from a test harness; keeping the first is right.
    let _ = match log_file {
        Some(path) => builder
            .with_ansi(false)
            .with_writer(Mutex::new(open(path)?))
            .try_init(),
        None => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
    };
    Ok(())
}

/// Start-up's timing dump alone: each phase when it ends, with its time since now.
fn trace_startup(directive: &str) -> Result<(), LogError> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(directive)?)
        .with_span_events(FmtSpan::CLOSE)
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .with_target(false)
        .with_level(false)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    Ok(())
}

fn filter(directive: &str) -> Result<EnvFilter, LogError> {
    EnvFilter::try_new(directive).map_err(|error| LogError::Filter {
        directive: directive.to_owned(),
        reason: error.to_string(),
    })
}

fn open(path: &Path) -> Result<File, LogError> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| LogError::File {
            path: path.to_owned(),
            reason: error.to_string(),
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_file_default_and_ordinary_directives_parse() {
        for directive in [
            FILE_DEFAULT,
            "debug",
            "keel_llm=trace,keel_agent=debug",
            "off",
        ] {
            assert!(filter(directive).is_ok(), "{directive}");
        }
    }

    #[test]
    fn a_bad_directive_names_the_variable_and_the_directive() {
        let error = filter("keel_llm=loud").unwrap_err().to_string();
        assert!(
            error.starts_with("KEEL_LOG=\"keel_llm=loud\" is not a valid log filter ("),
            "{error}"
        );
    }
}
