//! A runtime over a temporary folder, a temporary store and a scripted model, with helpers
//! to drive it through operations and to watch a session's events.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolOutput};
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_llm::{EventStream, LlmRequest, ModelSpec, StreamFn};
use keel_protocol::ops;
use keel_protocol::{
    Message, SessionEvent, SessionEventBody, SessionId, SessionTarget, ToolDefinition, TurnId,
    TurnSource,
};
use keel_runtime::extension::{ExtensionBuilder, ProfileEntry};
use keel_runtime::settings::SettingsInput;
use keel_runtime::{
    ContractExt, ConversationContract, ModelChoice, Prepared, Runtime, RuntimeOptions, TurnHandle,
};
use keel_store::{Durability, Execution, OpenOptions, Store};
use serde_json::json;
use tokio::sync::{Notify, mpsc};

/// How long a test waits for something that should happen at once.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A test tool that reports when it starts and then waits to be released (or cancelled).
pub struct Gate {
    definition: ToolDefinition,
    pub started: Arc<Notify>,
    pub release: Arc<Notify>,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            definition: ToolDefinition {
                name: "gate".into(),
                description: "waits until the test releases it".into(),
                parameters: json!({"type": "object"}),
            },
            started: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
        })
    }
}

impl Gate {
    /// Waits until a call of the gate started.
    pub async fn wait_started(&self) {
        tokio::time::timeout(PATIENCE, self.started.notified())
            .await
            .expect("the gate never started");
    }
}

#[async_trait]
impl AgentTool for Gate {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        _arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.started.notify_one();
        tokio::select! {
            () = self.release.notified() => Ok(ToolOutput::text("released")),
            () = context.cancel.cancelled() => Ok(ToolOutput::error("cancelled while waiting")),
        }
    }
}

/// Answers every request with `echo: <last user text>` after a short delay, so concurrent
/// sessions can tell their answers apart.
pub struct Echo;

impl StreamFn for Echo {
    fn stream(
        &self,
        request: LlmRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> EventStream {
        let last = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match &**m {
                Message::User(user) if !user.hidden => Some(
                    user.content
                        .iter()
                        .filter_map(keel_protocol::ContentBlock::as_text)
                        .collect::<String>(),
                ),
                _ => None,
            })
            .unwrap_or_default();
        let response = ScriptedResponse::text(format!("echo: {last}"))
            .chunk_size(3)
            .delay(Duration::from_millis(2));
        ScriptedProvider::with_responses([response]).stream(request, cancel)
    }
}

/// A runtime and what it was built over.
pub struct Harness {
    pub runtime: Runtime,
    pub store: Store,
    /// Holds the folder for as long as the runtime uses it.
    pub _dir: tempfile::TempDir,
}

/// Options for [`Harness::start`].
pub struct Setup {
    pub model: Arc<dyn StreamFn>,
    pub interactive: bool,
    pub permission: Option<keel_tools::permission::Mode>,
    pub tools: Vec<keel_agent::ToolRef>,
    pub extensions: Vec<Arc<dyn keel_runtime::extension::Extension>>,
    pub host_extensions: Vec<Arc<dyn keel_runtime::extension::Extension>>,
    /// `$KEEL_HOME/permissions.yaml`, when given.
    pub rules: Option<&'static str>,
}

impl Setup {
    /// The scripted model, with `gate` as a tool.
    pub fn gated(provider: &Arc<ScriptedProvider>, gate: &Arc<Gate>) -> Self {
        let mut setup = Self::scripted(provider);
        setup.tools = vec![gate.clone()];
        setup
    }

    /// The scripted model with these responses.
    pub fn scripted(provider: &Arc<ScriptedProvider>) -> Self {
        Self {
            model: provider.clone(),
            interactive: false,
            permission: None,
            tools: Vec::new(),
            extensions: Vec::new(),
            host_extensions: Vec::new(),
            rules: None,
        }
    }
}

impl Harness {
    pub async fn start(setup: Setup) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("work");
        let home = dir.path().join("keel-home");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        if let Some(rules) = setup.rules {
            std::fs::write(home.join("permissions.yaml"), rules).unwrap();
        }
        let cwd = cwd.canonicalize().unwrap();
        let mut extensions = Vec::new();
        if !setup.tools.is_empty() {
            let builder = setup
                .tools
                .into_iter()
                .fold(ExtensionBuilder::new("test-tools"), ExtensionBuilder::tool);
            extensions.push(ProfileEntry::on(builder.build()));
        }
        extensions.extend(setup.extensions.into_iter().map(ProfileEntry::on));
        let options = RuntimeOptions {
            settings: SettingsInput {
                cwd,
                keel_home: Some(home),
                ..SettingsInput::default()
            },
            model: ModelChoice::Fixed {
                spec: ModelSpec::scripted(),
                stream: setup.model,
            },
            permission: setup.permission,
            sandbox: None,
            system_prompt: Some("You are a test.".into()),
            max_steps: None,
            interactive: setup.interactive,
            extensions,
            host_extensions: setup.host_extensions,
            compactor: None,
            editor: None,
            thinking: None,
            trust_project_mcp: false,
            allow_home_workspace: false,
        };
        let prepared = Prepared::new(options).unwrap();
        let store = Store::open(
            dir.path().join("sessions.db"),
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
            _dir: dir,
        }
    }

    /// A new session.
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

    /// Subscribes to a session's events.
    pub async fn watch(&self, session: &SessionId) -> Watch {
        let (sink, rx) = keel_runtime::channel();
        let subscription = self.runtime.subscribe(session, sink).await.unwrap();
        Watch {
            rx,
            seen: Vec::new(),
            _subscription: subscription,
        }
    }

    /// Queues `text` as `kind` from `source`.
    pub async fn enqueue_from(
        &self,
        session: &SessionId,
        kind: keel_protocol::InputKind,
        text: &str,
        source: keel_protocol::TurnSource,
    ) -> keel_runtime::Queued {
        self.runtime
            .request(ops::Enqueue {
                session_id: session.clone(),
                kind,
                text: text.into(),
                source,
            })
            .await
            .unwrap()
    }

    /// Aborts the session's running turn through the contract; whether one was running.
    pub async fn abort(&self, session: &SessionId) -> bool {
        self.runtime
            .request(ops::Abort {
                session_id: session.clone(),
            })
            .await
            .unwrap()
    }

    /// Starts a turn with `text`.
    pub async fn submit(&self, session: &SessionId, text: &str) -> TurnHandle {
        self.runtime
            .request(ops::Submit {
                session_id: session.clone(),
                text: text.into(),
                images: Vec::new(),
                source: TurnSource::Api,
                output_schema: None,
                time_budget_ms: None,
            })
            .await
            .unwrap()
    }

    /// `(role, text)` of every stored message, tool results as `tool_result:<text>`.
    pub async fn history(&self, session: &SessionId) -> Vec<(String, String)> {
        self.store
            .history(session)
            .await
            .unwrap()
            .into_iter()
            .map(|e| describe(&e.message))
            .collect()
    }
}

/// `(role, text)` of a message.
pub fn describe(message: &Message) -> (String, String) {
    let text = match message {
        Message::User(user) => user
            .content
            .iter()
            .filter_map(keel_protocol::ContentBlock::as_text)
            .collect(),
        Message::Assistant(assistant) => {
            let calls: Vec<String> = assistant.tool_calls().map(|c| c.name.clone()).collect();
            if calls.is_empty() {
                assistant.text()
            } else {
                format!("calls {}", calls.join(","))
            }
        }
        Message::ToolResult(result) => result.text(),
        Message::Host(host) => host.kind.clone(),
        _ => String::new(),
    };
    (message.role().to_owned(), text)
}

/// `turn`'s report, waited for no longer than [`PATIENCE`].
pub async fn ended(turn: TurnHandle) -> keel_runtime::TurnReport {
    tokio::time::timeout(PATIENCE, turn.wait())
        .await
        .expect("the turn never ended")
        .unwrap()
}

/// A session's events as they arrive.
pub struct Watch {
    rx: mpsc::UnboundedReceiver<SessionEvent>,
    pub seen: Vec<SessionEvent>,
    _subscription: keel_runtime::Subscription,
}

impl Watch {
    /// Waits for the first event (after those already seen) that `matches`.
    pub async fn until(
        &mut self,
        mut matches: impl FnMut(&SessionEventBody) -> bool,
    ) -> SessionEvent {
        tokio::time::timeout(PATIENCE, async {
            loop {
                let event = self.rx.recv().await.expect("the event stream ended");
                self.seen.push(event.clone());
                if matches(&event.body) {
                    return event;
                }
            }
        })
        .await
        .expect("the awaited event never came")
    }

    /// Waits until a turn's answer streams (an item was updated).
    pub async fn streaming(&mut self) {
        self.until(|b| {
            matches!(
                b,
                SessionEventBody::Item {
                    event: keel_protocol::ItemEvent::Updated { .. },
                    ..
                }
            )
        })
        .await;
    }

    /// Waits until the session is at rest.
    pub async fn rest(&mut self) {
        self.until(|b| matches!(b, SessionEventBody::Quiescent { .. }))
            .await;
    }

    /// Waits for the end of `turn`.
    pub async fn turn_end(&mut self, turn: &TurnId) -> SessionEvent {
        self.until(|b| matches!(b, SessionEventBody::TurnEnded { turn_id, .. } if turn_id == turn))
            .await
    }

    /// Waits for any turn's end.
    pub async fn any_turn_end(&mut self) -> TurnId {
        match self
            .until(|b| matches!(b, SessionEventBody::TurnEnded { .. }))
            .await
            .body
        {
            SessionEventBody::TurnEnded { turn_id, .. } => turn_id,
            _ => unreachable!(),
        }
    }

    /// Takes what arrived without waiting.
    pub fn drain(&mut self) {
        while let Ok(event) = self.rx.try_recv() {
            self.seen.push(event);
        }
    }
}
