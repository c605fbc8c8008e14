//! Small tools, hooks and scopes for the registry tests.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_agent::runner::{AfterToolCallHook, BeforeToolCallHook};
use keel_agent::{
    AgentTool, HookError, ToolCallContext, ToolError, ToolGate, ToolOutput, TurnContext,
};
use keel_protocol::{SessionId, ToolCall, ToolDefinition, TurnId, TurnSource};
use keel_runtime::extension::TurnScope;
use serde_json::json;

/// A tool that answers with its own label.
pub struct Named {
    definition: ToolDefinition,
    label: String,
}

/// A tool called `name` whose answer (and description) is `label`.
pub fn tool(name: &str, label: &str) -> keel_agent::ToolRef {
    Arc::new(Named {
        definition: ToolDefinition {
            name: name.into(),
            description: label.into(),
            parameters: json!({"type": "object"}),
        },
        label: label.into(),
    })
}

#[async_trait]
impl AgentTool for Named {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(
        &self,
        _arguments: serde_json::Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.label.clone()))
    }
}

/// A scope of `session` and `turn` with no host services.
pub fn scope(session: &str, turn: &str) -> TurnScope {
    TurnScope {
        model: "mock/model".into(),
        cwd: PathBuf::from("/nowhere"),
        source: TurnSource::Api,
        ..TurnScope::detached(SessionId::new(session), TurnId::new(turn))
    }
}

/// The turn context the runner would pass for `scope`'s turn.
pub fn context(session: &str, turn: &str) -> TurnContext {
    TurnContext {
        session_id: SessionId::new(session),
        turn_id: TurnId::new(turn),
    }
}

/// A call of `name` with no arguments.
pub fn call(name: &str) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: name.into(),
        arguments: json!({}),
    }
}

/// A before-tool hook that records who called it and allows.
pub struct Recorder {
    pub name: &'static str,
    pub log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl BeforeToolCallHook for Recorder {
    async fn before_tool_call(
        &self,
        turn: &TurnContext,
        _call: &ToolCall,
    ) -> Result<ToolGate, HookError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}@{}", self.name, turn.turn_id));
        Ok(ToolGate::Allow)
    }
}

/// An after-tool hook that appends its tag to the result's text, and records what it saw.
pub struct Tagger {
    pub tag: &'static str,
    pub seen: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl AfterToolCallHook for Tagger {
    async fn after_tool_call(
        &self,
        _turn: &TurnContext,
        _call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        let text: String = output
            .content
            .iter()
            .filter_map(keel_protocol::ContentBlock::as_text)
            .collect();
        self.seen.lock().unwrap().push(text.clone());
        Ok(ToolOutput::text(format!("{text}+{}", self.tag)))
    }
}
