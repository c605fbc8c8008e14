//! What a run of `keel exec` reports: its status, the result object shared by the `json`
//! and `stream-json` formats, exit codes, and the helpers that produce them (structured
//! output checks, the atomic `-o` write, `--timeout` parsing).
//!
//! Exit codes are part of the scripting contract (issue 5, item 6), so they live here as
//! named constants rather than at their call sites.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use keel_protocol::{Failure, FailureCode, RunId, TurnOutcome, Usage};
use serde::Serialize;

use super::output::Interrupt;

/// Version of the `json` and `stream-json` output; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Exit code of a run that succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit code of a bad invocation (clap uses it for its own errors too).
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a configuration error.
pub const EXIT_CONFIG: u8 = 3;
/// Exit code of a turn that failed.
pub const EXIT_FAILED: u8 = 4;
/// Exit code of a turn stopped by `--timeout`.
pub const EXIT_TIMEOUT: u8 = 6;
/// Exit code of a turn stopped by `--max-steps`.
pub const EXIT_LIMIT: u8 = 7;
/// Exit code of an internal error (sysexits' `EX_SOFTWARE`).
pub const EXIT_INTERNAL: u8 = 70;
/// Exit code of a run cancelled by SIGINT or SIGTERM (128 + SIGINT, as shells report it).
pub const EXIT_CANCELLED: u8 = 130;
/// Exit code of a run whose standard output was closed (128 + SIGPIPE).
pub const EXIT_STDOUT_CLOSED: u8 = 141;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// The turn finished (and its answer matched `--output-schema`, if given).
    Succeeded,
    /// The turn failed, or its answer did not match the schema.
    Failed,
    /// `--timeout` passed first.
    Timeout,
    /// A signal (or a closed stdout) aborted the turn.
    Cancelled,
    /// `--max-steps` was reached while the model still called tools, or the goal used up
    /// a limit.
    LimitExceeded,
}

impl ExecStatus {
    /// The process exit code for this status.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Succeeded => EXIT_OK,
            Self::Failed => EXIT_FAILED,
            Self::Timeout => EXIT_TIMEOUT,
            Self::Cancelled => EXIT_CANCELLED,
            Self::LimitExceeded => EXIT_LIMIT,
        }
    }
}

/// Why a run failed, in the shape every output format uses: the protocol's failure, whose
/// code is one of [`FailureCode`]'s (the README's table lists them).
pub type ExecError = Failure;

/// The result object: `json` prints it alone, `stream-json` inside `exec.completed`.
#[derive(Debug, Clone, Serialize)]
pub struct ExecResult {
    /// Always `exec.result`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// This invocation.
    pub run_id: RunId,
    /// How the run ended.
    pub status: ExecStatus,
    /// The last assistant message's text.
    pub final_text: String,
    /// The parsed final answer, when `--output-schema` was given and it matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<serde_json::Value>,
    /// The session.
    pub session_id: String,
    /// The turn (the last one, when a goal ran several).
    pub turn_id: String,
    /// Tokens over the run's model calls.
    pub usage: Usage,
    /// Wall time of the turn (of the whole run, when a goal ran several turns).
    pub duration_ms: u64,
    /// Why it failed; `null` on success.
    pub error: Option<ExecError>,
    /// The session's goal as the run left it (its `goal_updated` details), when the run
    /// followed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<serde_json::Value>,
}

/// The run's status and error from how its last turn ended (its outcome, a failed
/// `--output-schema` check, history that was not stored) and what stopped the run.
pub fn status_of(
    outcome: &TurnOutcome,
    output_failure: Option<&Failure>,
    lost: Option<&str>,
    interrupt: Option<Interrupt>,
    timeout: Option<Duration>,
) -> (ExecStatus, Option<ExecError>) {
    let (mut status, mut error) = judge(outcome, interrupt, timeout);
    if let (ExecStatus::Succeeded, Some(failure)) = (status, output_failure) {
        status = ExecStatus::Failed;
        error = Some(failure.clone());
    }
    // History the model was told about but that is not stored, or a turn whose end could
    // not be recorded (it would be reported as interrupted later): no success.
    if let Some(message) = lost
        && status == ExecStatus::Succeeded
    {
        status = ExecStatus::Failed;
        error = Some(ExecError::new(FailureCode::HistoryCommitFailed, message));
    }
    (status, error)
}

/// The run's status and error from the turn's outcome and what stopped it.
pub fn judge(
    outcome: &TurnOutcome,
    interrupt: Option<Interrupt>,
    timeout: Option<Duration>,
) -> (ExecStatus, Option<ExecError>) {
    match outcome {
        TurnOutcome::Completed => (ExecStatus::Succeeded, None),
        TurnOutcome::Failed { code, message } if *code == FailureCode::StepLimitExceeded => (
            ExecStatus::LimitExceeded,
            Some(ExecError::new(*code, message.clone())),
        ),
        TurnOutcome::Failed { code, message } => (
            ExecStatus::Failed,
            Some(ExecError::new(*code, message.clone())),
        ),
        TurnOutcome::Aborted { reason } => match interrupt {
            Some(Interrupt::Timeout) => (
                ExecStatus::Timeout,
                Some(ExecError::new(
                    FailureCode::Timeout,
                    format!(
                        "the turn ran past --timeout {}",
                        timeout.map(|t| format!("{t:?}")).unwrap_or_default()
                    ),
                )),
            ),
            Some(Interrupt::StdoutClosed) => (
                ExecStatus::Cancelled,
                Some(ExecError::new(
                    FailureCode::Cancelled,
                    "standard output was closed",
                )),
            ),
            Some(Interrupt::Signal) | None => (
                ExecStatus::Cancelled,
                Some(ExecError::new(
                    FailureCode::Cancelled,
                    reason.clone().unwrap_or_else(|| "cancelled".into()),
                )),
            ),
        },
        other => (
            ExecStatus::Failed,
            Some(ExecError::new(
                FailureCode::InternalError,
                format!("unexpected outcome {other:?}"),
            )),
        ),
    }
}

/// Parses `--timeout`: `90s`, `5m`, `1h30m`, `250ms`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("`{text}` is not a duration (try 90s, 5m, 1h30m or plain seconds)");
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let value: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.saturating_mul(60)),
            "h" => Duration::from_secs(value.saturating_mul(3600)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(part);
        rest = &rest[unit_len..];
    }
    if total.is_zero() {
        return Err(format!("the timeout `{text}` must be longer than zero"));
    }
    Ok(total)
}

/// Writes `text` to `path` atomically (keel-tools' temp-file-and-rename writer), so a
/// reader never sees half an answer.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    if path.file_name().is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "-o needs a file name",
        ));
    }
    crate::assembly::write_atomic(path, text)
}

/// Converts an exit code constant into the process's.
pub fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/exec.md's table of codes is the contract scripts read: every code is in it.
    #[test]
    fn the_exec_reference_lists_every_failure_code() {
        let reference = include_str!("../../../../docs/exec.md");
        let table = reference
            .split("| code | what failed | exit |")
            .nth(1)
            .expect("docs/exec.md has the code table");
        for code in FailureCode::ALL {
            assert!(
                table.contains(&format!("`{code}`")),
                "docs/exec.md's code table lacks `{code}`"
            );
        }
    }

    #[test]
    fn durations_parse_in_every_documented_form() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "s", "5x", "1h30", "-3s", "0s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
