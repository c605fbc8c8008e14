//! The session report's files, in `<session folder>/report/`:
//! - `llm-call.json`: everything about the current model call except its messages
//!   (system prompt, tool schemas, model and provider, thinking level, output limit, cache
//!   policy), rewritten only when its SHA-256 changes;
//! - `calls/<sha256>.json`: every such envelope the session used, so older steps can be
//!   rebuilt after the configuration changed;
//! - `llm-calls.jsonl`: one line per request: its step, turn, envelope, the history prefix
//!   it was built from and any messages sent with it only;
//! - `compaction-<revision>/`: the two files above as they were when history was compacted,
//!   `<revision>` being the last revision before the compaction.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use keel_protocol::Message;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The report folder in a session folder.
pub const REPORT_DIR: &str = "report";
/// The current envelope.
pub const ENVELOPE_FILE: &str = "llm-call.json";
/// The request log.
pub const LOG_FILE: &str = "llm-calls.jsonl";
/// Envelopes by hash.
pub const CALLS_DIR: &str = "calls";
/// Prefix of a frozen compaction folder.
pub const COMPACTION_PREFIX: &str = "compaction-";
/// Largest envelope written whole (DESIGN §6).
pub const MAX_ENVELOPE: usize = 4 * 1024 * 1024;

/// Request options as recorded: those that shape the body, and header names only (their
/// values may be credentials).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedOptions {
    /// Output limit.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Thinking level.
    pub thinking: Option<keel_llm::ThinkingLevel>,
    /// Cache policy.
    pub cache_retention: Option<keel_llm::CacheRetention>,
    /// The prompt-cache key (the session id).
    pub session_id: Option<String>,
    /// Names of the extra headers sent.
    pub header_names: Vec<String>,
}

impl RecordedOptions {
    /// What of `options` is recorded.
    pub fn of(options: &keel_llm::RequestOptions) -> Self {
        Self {
            max_tokens: options.max_tokens,
            temperature: options.temperature,
            thinking: options.thinking,
            cache_retention: options.cache_retention,
            session_id: options.session_id.clone(),
            header_names: options.headers.iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    /// Options that encode to the same body.
    pub fn to_options(&self) -> keel_llm::RequestOptions {
        keel_llm::RequestOptions {
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            thinking: self.thinking,
            cache_retention: self.cache_retention,
            session_id: self.session_id.clone(),
            ..keel_llm::RequestOptions::default()
        }
    }
}

/// A part too large for the envelope, named by its size and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omitted {
    /// Its serialised size.
    pub omitted_bytes: usize,
    /// Its SHA-256.
    pub sha256: String,
}

/// Everything about a model call except its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Format version.
    pub version: u32,
    /// Provider.
    pub provider: String,
    /// Wire API.
    pub api: String,
    /// Model id.
    pub model: String,
    /// The model as the loop knew it.
    pub spec: keel_llm::ModelSpec,
    /// The provider entry the body was encoded for (header values removed); `None` for a
    /// fixed model (a script), whose requests have no wire body.
    pub entry: Option<keel_llm::ModelEntry>,
    /// System prompt, or what it was when too large.
    pub system_prompt: Part<String>,
    /// Tool schemas, or what they were when too large.
    pub tools: Part<Vec<keel_protocol::ToolDefinition>>,
    /// Request options.
    pub options: RecordedOptions,
}

/// A part of the envelope, whole or omitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Part<T> {
    /// The part itself.
    Whole(T),
    /// Too large to keep: its size and hash.
    Omitted(Omitted),
}

/// One line of the request log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The request's number in the session, from 1.
    pub step: u64,
    /// The turn.
    pub turn_id: String,
    /// The turn's model call, from 1.
    pub call: usize,
    /// SHA-256 of the envelope.
    pub envelope: String,
    /// History messages the request starts with.
    pub history_prefix: usize,
    /// Messages sent with this request only, after that prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_only: Option<Vec<Message>>,
    /// When it was sent, ms since the epoch.
    pub at_ms: i64,
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The envelope's canonical bytes and hash, parts left out where it would pass the cap.
pub fn encode(mut envelope: Envelope) -> serde_json::Result<(Vec<u8>, String, bool)> {
    let mut bytes = serde_json::to_vec(&envelope)?;
    let mut complete = true;
    if bytes.len() > MAX_ENVELOPE {
        complete = false;
        if let Part::Whole(text) = &envelope.system_prompt {
            envelope.system_prompt = Part::Omitted(Omitted {
                omitted_bytes: text.len(),
                sha256: sha256_hex(text.as_bytes()),
            });
        }
        if let Part::Whole(tools) = &envelope.tools {
            let json = serde_json::to_vec(tools)?;
            envelope.tools = Part::Omitted(Omitted {
                omitted_bytes: json.len(),
                sha256: sha256_hex(&json),
            });
        }
        bytes = serde_json::to_vec(&envelope)?;
    }
    let sha = sha256_hex(&bytes);
    Ok((bytes, sha, complete))
}

/// Creates `dir` (and the folders above it) private to the user.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    keel_runtime::storage::private_dir(dir)
}

/// Writes `bytes` to `path` atomically: a new private file beside it (created through the
/// folder's descriptor, exclusively, following no link: nothing planted under a temp name is
/// ever written through), then a rename over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no folder to write in"))?;
    private_dir(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut file = keel_tools::output::private_file(&temp)?;
    let written = file.write_all(bytes);
    drop(file);
    if let Err(error) = written.and_then(|()| std::fs::rename(&temp, path)) {
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    Ok(())
}

/// `url` without its user, password, query and fragment.
pub fn without_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

/// The report folder of a session folder.
pub fn report_dir(session_dir: &Path) -> PathBuf {
    session_dir.join(REPORT_DIR)
}

/// Reads a request log; lines that do not parse are skipped (a line cut by a crash).
pub fn read_log(path: &Path) -> std::io::Result<Vec<StepRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

/// Frozen compaction folders of a report, oldest first, with their revision.
pub fn frozen(report: &Path) -> Vec<(u64, PathBuf)> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(report)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let revision = name.strip_prefix(COMPACTION_PREFIX)?.parse().ok()?;
            Some((revision, entry.path()))
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_recorded_without_credentials() {
        assert_eq!(
            without_credentials("https://user:secret@proxy.example:8443/v1?key=abc#x"),
            "https://proxy.example:8443/v1"
        );
        assert_eq!(
            without_credentials("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1"
        );
        assert_eq!(without_credentials("https://a@b@host"), "https://host");
    }
}
