//! Rebuilding a recorded request (`keel sessions replay-request`): the envelope and log line
//! of a step, and the stored history it was built from, give back the exact body that was
//! sent: the history prefix and the request-only messages are projected as the loop
//! projects them, and the request is encoded by the same code the provider uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_llm::LlmRequest;
use keel_protocol::Message;

use super::files::{self, CALLS_DIR, ENVELOPE_FILE, Envelope, LOG_FILE, Part, StepRecord};

/// Why a request cannot be rebuilt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The session has no report (it never called a model with the report on).
    #[error("session {0} has no request report (no model call was recorded)")]
    NoReport(String),
    /// No recorded step has that number.
    #[error("step {step} is not in the report (it has steps {first} to {last})")]
    NoStep {
        /// The step asked for.
        step: u64,
        /// The first recorded step.
        first: u64,
        /// The last recorded step.
        last: u64,
    },
    /// A report file is missing or unreadable.
    #[error("cannot read {path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The request cannot be rebuilt from what was recorded.
    #[error("step {step} cannot be rebuilt: {reason}")]
    Incomplete {
        /// The step.
        step: u64,
        /// What is missing.
        reason: String,
    },
}

impl ReplayError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoReport(_) => "report_missing",
            Self::NoStep { .. } => "report_no_step",
            Self::File { .. } => "report_unreadable",
            Self::Incomplete { .. } => "report_incomplete",
        }
    }
}

/// A recorded step found in a report.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its log line.
    pub record: StepRecord,
    /// Its envelope.
    pub envelope: Envelope,
    /// The history revision it was built on, when history has since been compacted; `None`
    /// for the head.
    pub revision: Option<u64>,
}

fn unreadable(path: &Path, error: impl std::fmt::Display) -> ReplayError {
    ReplayError::File {
        path: path.to_path_buf(),
        reason: error.to_string(),
    }
}

/// Finds step `step` (the last one when `None`) in the report of the session folder `dir`.
pub fn find(dir: &Path, session: &str, step: Option<u64>) -> Result<Found, ReplayError> {
    let report = files::report_dir(dir);
    let mut logs: Vec<(Option<u64>, PathBuf)> = files::frozen(&report)
        .into_iter()
        .map(|(revision, path)| (Some(revision), path))
        .collect();
    logs.push((None, report.clone()));
    let mut all: Vec<(Option<u64>, StepRecord)> = Vec::new();
    for (revision, folder) in &logs {
        let log = folder.join(LOG_FILE);
        for record in files::read_log(&log).map_err(|e| unreadable(&log, e))? {
            all.push((*revision, record));
        }
    }
    all.sort_by_key(|(_, r)| r.step);
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return Err(ReplayError::NoReport(session.to_owned()));
    };
    let (first, last) = (first.1.step, last.1.step);
    let wanted = step.unwrap_or(last);
    let Some((revision, record)) = all.into_iter().find(|(_, r)| r.step == wanted) else {
        return Err(ReplayError::NoStep {
            step: wanted,
            first,
            last,
        });
    };
    let path = report
        .join(CALLS_DIR)
        .join(format!("{}.json", record.envelope));
    let bytes = std::fs::read(&path).map_err(|e| unreadable(&path, e))?;
    if files::sha256_hex(&bytes) != record.envelope {
        return Err(unreadable(&path, "its content does not match its hash"));
    }
    let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|e| unreadable(&path, e))?;
    Ok(Found {
        record,
        envelope,
        revision,
    })
}

/// The body the request of `found` sent, rebuilt on `history` (the session's history at
/// the head, or at `found.revision`).
pub fn rebuild(found: &Found, history: &[Message]) -> Result<Vec<u8>, ReplayError> {
    let step = found.record.step;
    let incomplete = |reason: String| ReplayError::Incomplete { step, reason };
    let envelope = &found.envelope;
    let Some(entry) = &envelope.entry else {
        return Err(incomplete(
            "it went to a fixed model (a script), which is sent no wire body".into(),
        ));
    };
    let (Part::Whole(system), Part::Whole(tools)) = (&envelope.system_prompt, &envelope.tools)
    else {
        return Err(incomplete(format!(
            "its system prompt or tools were over the {} MiB envelope limit and were not kept",
            files::MAX_ENVELOPE / (1024 * 1024)
        )));
    };
    let prefix = found.record.history_prefix;
    let Some(base) = history.get(..prefix) else {
        return Err(incomplete(format!(
            "it was built on {prefix} history messages and the session has {} now",
            history.len()
        )));
    };
    let mut messages: Vec<Arc<Message>> = base.iter().cloned().map(Arc::new).collect();
    if let Some(extra) = &found.record.request_only {
        messages.extend(extra.iter().cloned().map(Arc::new));
    }
    let projected = keel_agent::project_all(&messages, keel_agent::DEFAULT_MIN_IMAGE_BYTES);
    let request = LlmRequest {
        model: Arc::new(envelope.spec.clone()),
        system_prompt: Arc::from(system.as_str()),
        messages: Arc::new(projected),
        tools: Arc::from(tools.clone()),
        options: envelope.options.to_options(),
    };
    keel_llm::api::request_body(entry, &request).map_err(|e| incomplete(e.to_string()))
}

/// The current envelope of a session folder, when there is one.
pub fn current_envelope(dir: &Path) -> Option<PathBuf> {
    let path = files::report_dir(dir).join(ENVELOPE_FILE);
    path.is_file().then_some(path)
}
