//! A runtime with keel's extensions over a temporary folder and store, a scripted model,
//! and helpers to run turns and read what the model was sent.

use std::sync::Arc;

use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_llm::{LlmRequest, ModelSpec};
use keel_protocol::ops;
use keel_protocol::{
    ContentBlock, Message, SessionEvent, SessionEventBody, SessionId, SessionTarget, TurnSource,
};
use keel_runtime::extension::{Extension, ProfileEntry};
use keel_runtime::settings::SettingsInput;
use keel_runtime::{
    CommandOutcome, ContractExt, ConversationContract, ModelChoice, Prepared, Runtime,
    RuntimeOptions, TurnReport,
};
use keel_store::{Durability, Execution, OpenOptions, Store};

pub struct Harness {
    pub runtime: Runtime,
    pub store: Store,
    pub provider: Arc<ScriptedProvider>,
    pub home: std::path::PathBuf,
    /// The working folder.
    pub cwd: std::path::PathBuf,
    /// Holds the folder for as long as the runtime uses it.
    pub _dir: tempfile::TempDir,
}

/// How a harness is built.
pub struct Setup {
    pub responses: Vec<ScriptedResponse>,
    /// `-c` overrides.
    pub overrides: Vec<String>,
    /// Extensions besides keel's own.
    pub extra: Vec<Arc<dyn Extension>>,
    pub spec: ModelSpec,
    /// Permission questions go to the session's events instead of being denied.
    pub interactive: bool,
    /// The model instead of the scripted provider (which is then unused).
    pub stream: Option<Arc<dyn keel_llm::StreamFn>>,
    /// The permission mode sessions start in (default: auto).
    pub permission: Option<keel_tools::permission::Mode>,
    /// A runtime without a model, which keeps sessions only (`keel sessions …`).
    pub sessions_only: bool,
}

impl Setup {
    pub fn new(responses: Vec<ScriptedResponse>) -> Self {
        Self {
            responses,
            overrides: Vec::new(),
            extra: Vec::new(),
            spec: ModelSpec::scripted(),
            interactive: false,
            stream: None,
            permission: None,
            sessions_only: false,
        }
    }

    pub fn set(mut self, override_: &str) -> Self {
        self.overrides.push(override_.to_owned());
        self
    }
}

impl Harness {
    pub async fn start(setup: Setup) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("work");
        let home = dir.path().join("keel-home");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let cwd = cwd.canonicalize().unwrap();
        let provider = Arc::new(ScriptedProvider::with_responses(setup.responses));
        let extensions = setup.extra.into_iter().map(ProfileEntry::on).collect();
        let options = RuntimeOptions {
            settings: SettingsInput {
                cwd: cwd.clone(),
                keel_home: Some(home.clone()),
                overrides: setup.overrides,
                ..SettingsInput::default()
            },
            model: if setup.sessions_only {
                ModelChoice::None
            } else {
                ModelChoice::Fixed {
                    spec: setup.spec,
                    stream: setup.stream.unwrap_or_else(|| provider.clone()),
                }
            },
            permission: setup.permission,
            sandbox: None,
            system_prompt: Some("You are a test.".into()),
            max_steps: None,
            interactive: setup.interactive,
            extensions,
            host_extensions: Vec::new(),
            compactor: None,
            editor: None,
            thinking: None,
            trust_project_mcp: false,
            allow_home_workspace: false,
        };
        let prepared = Prepared::new(keel_extensions::with_harness(options)).unwrap();
        // In keel's home, as by default: the session folders are then behind its
        // protection, but for the running session's own artifacts.
        let store = Store::open(
            home.join("sessions.db"),
            OpenOptions {
                durability: Durability::Normal,
                execution: Execution::WriterThread,
            },
        )
        .await
        .unwrap();
        let runtime = prepared.start(store.clone());
        Self {
            runtime,
            store,
            provider,
            home,
            cwd,
            _dir: dir,
        }
    }

    pub async fn session(&self) -> SessionId {
        self.runtime
            .request(ops::OpenSession {
                target: SessionTarget::New { title: None },
            })
            .await
            .unwrap()
            .record
            .id
    }

    /// Runs one turn of `text` and returns its report and the session events it made.
    pub async fn turn(&self, session: &SessionId, text: &str) -> (TurnReport, Vec<SessionEvent>) {
        self.turn_with(session, text, None).await
    }

    /// Runs one turn with a time budget.
    pub async fn turn_with(
        &self,
        session: &SessionId,
        text: &str,
        time_budget_ms: Option<u64>,
    ) -> (TurnReport, Vec<SessionEvent>) {
        let (sink, rx) = keel_runtime::channel();
        let subscription = self.runtime.subscribe(session, sink).await.unwrap();
        let handle = self.submit(session, text, time_budget_ms).await;
        finish(handle, subscription, rx).await
    }

    /// Starts a turn of `text` (from the API) and returns its handle.
    pub async fn submit(
        &self,
        session: &SessionId,
        text: &str,
        time_budget_ms: Option<u64>,
    ) -> keel_runtime::TurnHandle {
        self.runtime
            .request(ops::Submit {
                session_id: session.clone(),
                text: text.into(),
                images: Vec::new(),
                source: TurnSource::Api,
                output_schema: None,
                time_budget_ms,
            })
            .await
            .unwrap()
    }

    /// Runs `/name arguments` for `session`: the turn it starts, waited for, with the
    /// session events it made; `None` when it answered with text.
    pub async fn command(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Result<Option<(TurnReport, Vec<SessionEvent>)>, keel_runtime::RuntimeError> {
        let (sink, rx) = keel_runtime::channel();
        let subscription = self.runtime.subscribe(session, sink).await.unwrap();
        let handle = match self
            .runtime
            .request(ops::RunCommand {
                session_id: session.clone(),
                name: name.into(),
                arguments: arguments.into(),
            })
            .await?
        {
            CommandOutcome::Turn(handle) => handle,
            _ => return Ok(None),
        };
        Ok(Some(finish(handle, subscription, rx).await))
    }

    /// Every request the model got, in order.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.provider.requests()
    }

    /// A session's folder.
    pub fn session_dir(&self, session: &SessionId) -> std::path::PathBuf {
        self.runtime.session_dir(session)
    }
}

/// Waits for the turn of `handle` and takes the session events its subscription saw.
async fn finish(
    handle: keel_runtime::TurnHandle,
    subscription: keel_runtime::Subscription,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<SessionEvent>,
) -> (TurnReport, Vec<SessionEvent>) {
    let report = tokio::time::timeout(std::time::Duration::from_secs(60), handle.wait())
        .await
        .expect("the turn never ended")
        .unwrap();
    drop(subscription);
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    (report, events)
}

/// The text of every text block of `message`.
pub fn text_of(message: &Message) -> String {
    let blocks: &[ContentBlock] = match message {
        Message::User(user) => &user.content,
        Message::Assistant(answer) => &answer.content,
        Message::ToolResult(result) => &result.content,
        _ => &[],
    };
    blocks
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every message text of a request, joined.
pub fn request_text(request: &LlmRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| text_of(m))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many times `needle` occurs in the request's messages.
pub fn occurrences(request: &LlmRequest, needle: &str) -> usize {
    request_text(request).matches(needle).count()
}

/// The extension events among `events`: `(extension, kind, details)`.
pub fn extension_events(events: &[SessionEvent]) -> Vec<(String, String, serde_json::Value)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            SessionEventBody::Extension {
                extension,
                kind,
                details,
                ..
            } => Some((extension.clone(), kind.clone(), details.clone())),
            _ => None,
        })
        .collect()
}

/// A bash call.
pub fn bash(id: &str, command: &str) -> ScriptedResponse {
    ScriptedResponse::tool_call(id, "bash", serde_json::json!({"command": command}))
}

/// A compaction strategy that keeps only the last message.
pub struct KeepLast;

#[async_trait::async_trait]
impl keel_runtime::Compactor for KeepLast {
    async fn compact(
        &self,
        request: keel_runtime::CompactRequest,
    ) -> Result<Option<Vec<keel_protocol::Message>>, keel_runtime::RuntimeError> {
        Ok(request
            .history
            .last()
            .map(|m| vec![keel_protocol::Message::clone(m)]))
    }
}
