//! Shared test fixtures: tools with scripted behaviour, an event recorder, agent builders.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{
    Agent, AgentOptions, AgentSubscriber, AgentTool, ExecutionMode, LoopHooks, ToolCallContext,
    ToolError, ToolOutput, ToolRef,
};
use keel_llm::ModelSpec;
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::{AgentEvent, Message, ToolDefinition};
use serde_json::{Value, json};

/// Records every event.
#[derive(Default)]
pub struct Recorder {
    pub events: Mutex<Vec<AgentEvent>>,
}

#[async_trait]
impl AgentSubscriber for Recorder {
    async fn on_event(&self, event: &AgentEvent) {
        self.events.lock().unwrap().push(event.clone());
    }
}

impl Recorder {
    pub fn all(&self) -> Vec<AgentEvent> {
        self.events.lock().unwrap().clone()
    }

    /// The event sequence in a compact, comparable form (updates left out).
    pub fn trace(&self) -> Vec<String> {
        self.all().iter().filter_map(describe).collect()
    }
}

pub fn describe(event: &AgentEvent) -> Option<String> {
    Some(match event {
        AgentEvent::AgentStart => "agent_start".into(),
        AgentEvent::TurnStart => "turn_start".into(),
        AgentEvent::TurnEnd {
            message,
            tool_results,
        } => format!(
            "turn_end({}{})",
            message.as_ref().map_or("none".into(), |m| short(m)),
            if tool_results.is_empty() {
                String::new()
            } else {
                format!(", {} results", tool_results.len())
            }
        ),
        AgentEvent::MessageStart { message, .. } => format!("message_start({})", message.role()),
        AgentEvent::MessageUpdate { .. } => return None,
        AgentEvent::MessageEnd { message, .. } => format!("message_end({})", short(message)),
        AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
            format!("tool_start({tool_call_id})")
        }
        AgentEvent::ToolExecutionUpdate { tool_call_id, .. } => {
            format!("tool_update({tool_call_id})")
        }
        AgentEvent::ToolExecutionEnd {
            tool_call_id,
            is_error,
            ..
        } => {
            format!(
                "tool_end({tool_call_id}{})",
                if *is_error { ", error" } else { "" }
            )
        }
        AgentEvent::AgentEnd { messages } => format!("agent_end({})", messages.len()),
        _ => "other".into(),
    })
}

/// A message in one short token: `user:text`, `assistant:stop`, `result:id`.
pub fn short(message: &Message) -> String {
    match message {
        Message::User(user) => format!(
            "user:{}",
            user.content
                .iter()
                .filter_map(|b| b.as_text())
                .collect::<String>()
        ),
        Message::Assistant(a) => format!(
            "assistant:{}",
            serde_json::to_value(a.stop_reason)
                .unwrap()
                .as_str()
                .unwrap()
        ),
        Message::ToolResult(r) => format!(
            "result:{}{}",
            r.tool_call_id,
            if r.is_error { "!" } else { "" }
        ),
        Message::Host(h) => format!("host:{}", h.kind),
        _ => "other".into(),
    }
}

/// The history in short form.
pub fn history(agent: &Agent) -> Vec<String> {
    agent.messages().iter().map(|m| short(m)).collect()
}

/// The tool result text for call `id`.
pub fn result_text(agent: &Agent, id: &str) -> String {
    agent
        .messages()
        .iter()
        .filter_map(|m| m.as_tool_result())
        .find(|r| r.tool_call_id.as_str() == id)
        .map(|r| r.text())
        .unwrap_or_else(|| panic!("no result for {id}"))
}

pub fn model() -> ModelSpec {
    ModelSpec::scripted()
}

/// Builds an agent over a scripted provider with a recorder subscribed.
pub fn agent_with(
    responses: Vec<ScriptedResponse>,
    tools: Vec<ToolRef>,
    hooks: Option<Arc<dyn LoopHooks>>,
) -> (Agent, ScriptedProvider, Arc<Recorder>) {
    let provider = ScriptedProvider::with_responses(responses);
    let mut options = AgentOptions::new(model(), Arc::new(provider.clone()))
        .tools(tools)
        .system_prompt("You are a test.");
    if let Some(hooks) = hooks {
        options = options.hooks(hooks);
    }
    options.abort_grace = Duration::from_millis(300);
    let agent = Agent::new(options).unwrap();
    let recorder = Arc::new(Recorder::default());
    agent.subscribe(recorder.clone());
    (agent, provider, recorder)
}

pub fn user(text: &str) -> Message {
    Message::user_text(text)
}

/// How the test tool behaves.
#[derive(Clone)]
pub enum Behaviour {
    /// Returns `echo: <args>`.
    Echo,
    /// Sleeps `ms` (argument) and honours cancellation.
    Sleep,
    /// Sleeps `ms` and ignores cancellation.
    Stubborn,
    /// Returns an error.
    Fail,
    /// Panics.
    Panic,
    /// Returns a result that asks to terminate.
    Terminate,
    /// Sends two progress updates then echoes.
    Progress,
}

/// A configurable tool. Tracks how many calls run at once, per `path` argument.
pub struct TestTool {
    definition: ToolDefinition,
    mode: ExecutionMode,
    behaviour: Behaviour,
    pub calls: AtomicUsize,
    active: Mutex<HashMap<Option<String>, usize>>,
    pub max_overlap: Mutex<HashMap<Option<String>, usize>>,
    pub mutates: bool,
}

impl TestTool {
    pub fn new(name: &str, mode: ExecutionMode, behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self::build(name, mode, behaviour, false))
    }

    pub fn mutating(name: &str, mode: ExecutionMode) -> Arc<Self> {
        Arc::new(Self::build(name, mode, Behaviour::Sleep, true))
    }

    fn build(name: &str, mode: ExecutionMode, behaviour: Behaviour, mutates: bool) -> Self {
        Self {
            definition: ToolDefinition {
                name: name.into(),
                description: format!("test tool {name}"),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "ms": {"type": "integer", "minimum": 0},
                        "path": {"type": "string"},
                        "text": {"type": "string"}
                    },
                    "additionalProperties": false
                }),
            },
            mode,
            behaviour,
            calls: AtomicUsize::new(0),
            active: Mutex::new(HashMap::new()),
            max_overlap: Mutex::new(HashMap::new()),
            mutates,
        }
    }

    pub fn overlap(&self, path: Option<&str>) -> usize {
        *self
            .max_overlap
            .lock()
            .unwrap()
            .get(&path.map(str::to_owned))
            .unwrap_or(&0)
    }

    pub fn count(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl AgentTool for TestTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> ExecutionMode {
        self.mode
    }

    fn mutated_path(&self, arguments: &Value) -> Option<PathBuf> {
        if self.mutates {
            arguments
                .get("path")
                .and_then(Value::as_str)
                .map(PathBuf::from)
        } else {
            None
        }
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let key = arguments
            .get("path")
            .and_then(Value::as_str)
            .map(str::to_owned);
        {
            let mut active = self.active.lock().unwrap();
            let now = active.entry(key.clone()).or_default();
            *now += 1;
            let mut max = self.max_overlap.lock().unwrap();
            let peak = max.entry(key.clone()).or_default();
            *peak = (*peak).max(*now);
        }
        let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
        let outcome = match self.behaviour {
            Behaviour::Echo => Ok(ToolOutput::text(format!("echo: {arguments}"))),
            Behaviour::Sleep => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(ToolOutput::text(format!("slept {ms}"))),
                    () = context.cancel.cancelled() => Err(ToolError::new("cancelled")),
                }
            }
            Behaviour::Stubborn => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(ToolOutput::text("finished anyway"))
            }
            Behaviour::Fail => Err(ToolError::new("disk on fire")),
            Behaviour::Panic => panic!("tool exploded"),
            Behaviour::Terminate => Ok(ToolOutput {
                terminate: true,
                ..ToolOutput::text("done, stop")
            }),
            Behaviour::Progress => {
                context.updates.send(json!({"progress": 1}));
                context.updates.send(json!({"progress": 2}));
                tokio::task::yield_now().await;
                Ok(ToolOutput::text("progressed"))
            }
        };
        *self.active.lock().unwrap().get_mut(&key).unwrap() -= 1;
        outcome
    }
}

pub fn call(id: &str, name: &str, args: Value) -> ScriptedResponse {
    ScriptedResponse::tool_call(id, name, args)
}

pub fn text(t: &str) -> ScriptedResponse {
    ScriptedResponse::text(t)
}
