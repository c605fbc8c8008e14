//! The session report (DESIGN §6), a host-owned extension: for every model request it
//! records everything but the messages, which the stored history already holds, so any
//! request can be rebuilt byte for byte afterwards ([`replay`]).
//!
//! The envelope (`llm-call.json`) is rewritten only when its SHA-256 changes, which the
//! report learns cheaply: the system prompt and tool set are shared values, so an unchanged
//! one is the same pointer as last time and is not hashed again. Each request adds one line
//! to the log. A write that fails is reported as an event and never touches the call. On
//! compaction the files are frozen beside the snapshot; after a rewind the stale envelope
//! is deleted and log lines past the rewind point are dropped.

pub mod files;
pub mod replay;

use std::collections::HashMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::{LlmCallPreparedHook, RequestOrigin};
use keel_agent::{HookError, TurnContext};
use keel_llm::LlmRequest;
use keel_protocol::{Message, SessionId, ToolDefinition};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, SessionChange,
    SessionChangeHook, TurnScope,
};
use serde_json::json;

use crate::SESSION_REPORT;
use files::{
    CALLS_DIR, COMPACTION_PREFIX, ENVELOPE_FILE, Envelope, LOG_FILE, Part, RecordedOptions,
    StepRecord,
};

/// The session report extension.
#[derive(Default)]
pub struct SessionReport {
    sessions: Arc<Sessions>,
}

/// What the report remembers of each session this process wrote for.
#[derive(Default)]
struct Sessions(Mutex<HashMap<SessionId, Written>>);

/// The session's last envelope and its open log.
#[derive(Default)]
struct Written {
    system: Option<Arc<str>>,
    tools: Option<Arc<[ToolDefinition]>>,
    options: Option<RecordedOptions>,
    model: Option<String>,
    sha: Option<String>,
    steps: Option<u64>,
    log: Option<File>,
}

impl Extension for SessionReport {
    fn id(&self) -> &str {
        SESSION_REPORT
    }

    fn description(&self) -> Option<&str> {
        Some("records every model request (all but its messages) so it can be rebuilt")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let sessions = self.sessions.clone();
        api.on_each_turn(
            ExtensionEvent::OnLlmCallPrepared,
            Arc::new(move |scope: &TurnScope| {
                Hook::OnLlmCallPrepared(Arc::new(TurnReport {
                    scope: scope.clone(),
                    sessions: sessions.clone(),
                    reported: Mutex::new(false),
                }))
            }),
        )?;
        api.on_session_change(Arc::new(Changes {
            sessions: self.sessions.clone(),
        }))
    }
}

struct TurnReport {
    scope: TurnScope,
    sessions: Arc<Sessions>,
    /// Whether a write failure was reported in this turn already.
    reported: Mutex<bool>,
}

/// Why a request could not be added to the session report.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    /// The envelope did not encode.
    #[error("cannot encode the request: {0}")]
    Encode(#[from] serde_json::Error),
    /// A report file could not be written.
    #[error("cannot write the report: {0}")]
    Write(#[from] std::io::Error),
}

impl TurnReport {
    fn record(&self, request: &LlmRequest, origin: &RequestOrigin) -> Result<(), RecordError> {
        let Some(dir) = self
            .scope
            .session_dir
            .as_ref()
            .map(|d| files::report_dir(d))
        else {
            return Ok(());
        };
        let mut sessions = self
            .sessions
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let written = sessions.entry(self.scope.session_id.clone()).or_default();
        let options = RecordedOptions::of(&request.options);
        let model = format!("{}/{}", request.model.provider, request.model.id);
        let same = written.sha.is_some()
            && written
                .system
                .as_ref()
                .is_some_and(|s| Arc::ptr_eq(s, &request.system_prompt))
            && written
                .tools
                .as_ref()
                .is_some_and(|t| Arc::ptr_eq(t, &request.tools))
            && written.options.as_ref() == Some(&options)
            && written.model.as_deref() == Some(model.as_str());
        if !same {
            let envelope = Envelope {
                version: 1,
                provider: request.model.provider.clone(),
                api: request.model.api.clone(),
                model: request.model.id.clone(),
                spec: (*request.model).clone(),
                entry: self.scope.entry.as_deref().map(|entry| {
                    let mut entry = entry.clone();
                    // Header values and a base URL's user, password and query may be
                    // credentials; none of them reaches the body.
                    for (_, value) in &mut entry.headers {
                        value.clear();
                    }
                    entry.base_url = files::without_credentials(&entry.base_url);
                    entry
                }),
                system_prompt: Part::Whole(request.system_prompt.to_string()),
                tools: Part::Whole(request.tools.to_vec()),
                options: options.clone(),
            };
            let (bytes, sha, complete) = files::encode(envelope)?;
            if written.sha.as_deref() != Some(sha.as_str()) {
                let kept = dir.join(CALLS_DIR).join(format!("{sha}.json"));
                if !kept.exists() {
                    files::write_atomic(&kept, &bytes)?;
                }
                files::write_atomic(&dir.join(ENVELOPE_FILE), &bytes)?;
                if !complete {
                    self.scope.emit(
                        SESSION_REPORT,
                        "envelope_cut",
                        json!({"limit_bytes": files::MAX_ENVELOPE}),
                    );
                }
            }
            written.sha = Some(sha);
            written.system = Some(request.system_prompt.clone());
            written.tools = Some(request.tools.clone());
            written.options = Some(options);
            written.model = Some(model);
        }
        let step = match written.steps {
            Some(steps) => steps + 1,
            None => last_step(&dir) + 1,
        };
        let record = StepRecord {
            step,
            turn_id: self.scope.turn_id.to_string(),
            call: origin.call,
            envelope: written.sha.clone().unwrap_or_default(),
            history_prefix: origin.history_prefix,
            request_only: origin
                .request_only
                .as_ref()
                .map(|messages| messages.iter().map(|m| Message::clone(m)).collect()),
            at_ms: keel_protocol::now_ms(),
        };
        let mut line = serde_json::to_vec(&record)?;
        line.push(b'\n');
        if written.log.is_none() {
            written.log = Some(open_log(&dir)?);
        }
        if let Some(log) = &mut written.log {
            // One write per line, so a crash leaves whole lines behind.
            log.write_all(&line).inspect_err(|_| written.log = None)?;
        }
        written.steps = Some(step);
        Ok(())
    }
}

/// Opens the request log for appending: never through a link, and only a file of this
/// user's with no other name (a hard link planted in its place would have keel append to
/// the file it names), made private.
fn open_log(dir: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
    files::private_dir(dir)?;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(LOG_FILE))?;
    let meta = file.metadata()?;
    let own = keel_tools::env::own_uid();
    if !meta.is_file() || meta.nlink() != 1 || meta.uid() != own {
        return Err(std::io::Error::other(format!(
            "{} is not the report's own log (a file of this user's with one name)",
            dir.join(LOG_FILE).display()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// The last step number in a report, frozen logs included (0 when none).
fn last_step(dir: &Path) -> u64 {
    let mut logs: Vec<PathBuf> = vec![dir.join(LOG_FILE)];
    logs.extend(
        files::frozen(dir)
            .into_iter()
            .map(|(_, p)| p.join(LOG_FILE)),
    );
    logs.iter()
        .filter_map(|log| files::read_log(log).ok())
        .flat_map(|records| records.last().map(|r| r.step))
        .max()
        .unwrap_or(0)
}

#[async_trait]
impl LlmCallPreparedHook for TurnReport {
    async fn on_llm_call_prepared(
        &self,
        _turn: &TurnContext,
        request: &LlmRequest,
        origin: &RequestOrigin,
    ) -> Result<(), HookError> {
        if let Err(error) = self.record(request, origin) {
            tracing::warn!(%error, "cannot write the session report");
            let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
            if !*reported {
                *reported = true;
                self.scope.emit(
                    SESSION_REPORT,
                    "write_failed",
                    json!({"error": error.to_string()}),
                );
            }
        }
        Ok(())
    }
}

/// Keeps the report true to history when it changes outside a turn.
struct Changes {
    sessions: Arc<Sessions>,
}

#[async_trait]
impl SessionChangeHook for Changes {
    async fn session_changed(
        &self,
        session: &SessionId,
        dir: Option<&Path>,
        change: &SessionChange,
    ) -> Result<(), HookError> {
        self.sessions
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session);
        let Some(dir) = dir.map(files::report_dir) else {
            return Ok(());
        };
        let failed = |e: std::io::Error| HookError::new(format!("session report: {e}"));
        match change {
            SessionChange::Rewound { length, .. } => prune(&dir, *length).map_err(failed),
            SessionChange::Compacted { before, .. } => freeze(&dir, *before).map_err(failed),
            _ => Ok(()),
        }
    }
}

/// After a rewind to `length` messages: the envelope goes (it may describe a request the
/// history no longer leads to) and log lines built on history past `length` are dropped.
pub fn prune(dir: &Path, length: u64) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(ENVELOPE_FILE)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let log = dir.join(LOG_FILE);
    let records = files::read_log(&log)?;
    let kept: Vec<&StepRecord> = records
        .iter()
        .filter(|r| r.history_prefix as u64 <= length)
        .collect();
    if kept.len() == records.len() {
        return Ok(());
    }
    let mut bytes = Vec::new();
    for record in kept {
        serde_json::to_writer(&mut bytes, record).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
    }
    files::write_atomic(&log, &bytes)
}

/// On compaction: the envelope and log move beside the snapshot, revision `before`.
pub fn freeze(dir: &Path, before: u64) -> std::io::Result<()> {
    let target = dir.join(format!("{COMPACTION_PREFIX}{before}"));
    for name in [ENVELOPE_FILE, LOG_FILE] {
        let from = dir.join(name);
        if !from.exists() {
            continue;
        }
        files::private_dir(&target)?;
        std::fs::rename(&from, target.join(name))?;
    }
    Ok(())
}
