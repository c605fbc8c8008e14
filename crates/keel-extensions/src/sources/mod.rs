//! Source references (DESIGN §9), behind `source_references: true`.
//!
//! After a successful call, adapters turn it into a source reference kept in the result's
//! details: a fetched page (`web_fetch`, and MCP results when they come) gets an id
//! (`S1`, `S2`, … per session) and a host-made marker block the model reads; a file the
//! model read is referenced by path, without a marker. Marker look-alikes in any tool's
//! output are defused. When the turn ends with an answer, its citations are normalised
//! and the sources it cites are listed under it; an answer that used this turn's pages
//! without citing any is asked once more (`missing_source_citation`).

mod citations;
mod markers;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::{
    AfterLlmCallHook, AfterToolCallHook, BeforeLlmAction, BeforeLlmCallHook, LlmCallView,
};
use keel_agent::{HookError, ResponseDecision, ToolOutput, TurnContext};
use keel_protocol::{AssistantMessage, ContentBlock, Message, SessionId, StopReason, ToolCall};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, TurnScope,
};
use serde_json::json;

pub use citations::normalise;
pub use markers::{MARKER_OPEN, is_marker, marker_block, new_marker};

use crate::SOURCE_REFERENCES;
use crate::per_turn::PerTurn;

/// The reason of the one retry for an answer that cites nothing it used.
pub const MISSING_SOURCE_CITATION: &str = "missing_source_citation";

/// A source the session knows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Source {
    /// `S1`, `S2`, …
    pub id: String,
    /// What it is: `web` (and `mcp` later).
    pub kind: String,
    /// Where it came from.
    pub url: String,
    /// Its title, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The sources of each session this process has seen.
#[derive(Default)]
struct Sessions(Mutex<HashMap<SessionId, SessionSources>>);

#[derive(Default)]
struct SessionSources {
    /// Whether the session's history was read for earlier sources.
    seeded: bool,
    known: BTreeMap<String, Source>,
    next: u32,
}

/// The source references extension.
#[derive(Default)]
pub struct SourceReferences {
    sessions: Arc<Sessions>,
}

impl Extension for SourceReferences {
    fn id(&self) -> &str {
        SOURCE_REFERENCES
    }

    fn description(&self) -> Option<&str> {
        Some("marks fetched pages as sources and has answers cite them")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        if !api.config().source_references {
            return Ok(());
        }
        let turns: Arc<PerTurn<TurnSources>> = Arc::default();
        let sessions = self.sessions.clone();
        let state_for = move |scope: &TurnScope| {
            turns.get(&scope.turn_id, || TurnSources {
                scope: scope.clone(),
                sessions: sessions.clone(),
                turn: Mutex::new(TurnState::default()),
            })
        };
        let seed = state_for.clone();
        api.on_each_turn(
            ExtensionEvent::BeforeLlmCall,
            Arc::new(move |scope: &TurnScope| Hook::BeforeLlmCall(seed(scope))),
        )?;
        let tools = state_for.clone();
        api.on_each_turn(
            ExtensionEvent::AfterToolCall,
            Arc::new(move |scope: &TurnScope| Hook::AfterToolCall(tools(scope))),
        )?;
        api.on_each_turn(
            ExtensionEvent::AfterLlmCall,
            Arc::new(move |scope: &TurnScope| Hook::AfterLlmCall(state_for(scope))),
        )
    }
}

#[derive(Default)]
struct TurnState {
    /// Sources registered in this turn, in order.
    used: Vec<String>,
    retried: bool,
}

struct TurnSources {
    scope: TurnScope,
    sessions: Arc<Sessions>,
    turn: Mutex<TurnState>,
}

impl TurnSources {
    fn with_session<R>(&self, f: impl FnOnce(&mut SessionSources) -> R) -> R {
        let mut sessions = self
            .sessions
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f(sessions.entry(self.scope.session_id.clone()).or_default())
    }

    /// Registers a fetched page; returns its source.
    fn register(&self, kind: &str, url: &str, title: Option<String>) -> Source {
        let source = self.with_session(|s| {
            s.next += 1;
            let source = Source {
                id: format!("S{}", s.next),
                kind: kind.to_owned(),
                url: url.to_owned(),
                title,
            };
            s.known.insert(source.id.clone(), source.clone());
            source
        });
        self.turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .used
            .push(source.id.clone());
        source
    }
}

/// Sources recorded in history by earlier turns (in this process or another).
fn sources_in(messages: &[Arc<Message>]) -> Vec<Source> {
    messages
        .iter()
        .filter_map(|m| m.as_tool_result())
        .filter_map(|r| r.details.as_ref()?.get("source"))
        .filter_map(|s| serde_json::from_value::<Source>(s.clone()).ok())
        .collect()
}

#[async_trait]
impl BeforeLlmCallHook for TurnSources {
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        let seeded = self.with_session(|s| s.seeded);
        if !seeded {
            let earlier = sources_in(view.messages);
            self.with_session(|s| {
                for source in earlier {
                    let n = source
                        .id
                        .strip_prefix('S')
                        .and_then(|n| n.parse::<u32>().ok())
                        .unwrap_or(0);
                    s.next = s.next.max(n);
                    s.known.entry(source.id.clone()).or_insert(source);
                }
                s.seeded = true;
            });
        }
        Ok(BeforeLlmAction::Continue)
    }
}

#[async_trait]
impl AfterToolCallHook for TurnSources {
    async fn after_tool_call(
        &self,
        _turn: &TurnContext,
        call: &ToolCall,
        mut output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        // No tool's output may carry something that passes for a marker.
        for block in &mut output.content {
            if let ContentBlock::Text(text) = block
                && let Some(defused) = markers::defuse_markers(&text.text)
            {
                text.text = defused;
            }
        }
        if output.is_error {
            return Ok(output);
        }
        match call.name.as_str() {
            "web_fetch" => {
                let details = output.details.clone().unwrap_or_default();
                let Some(url) = details.get("url").and_then(|u| u.as_str()) else {
                    return Ok(output);
                };
                let title = details
                    .get("title")
                    .and_then(|t| t.as_str())
                    .map(str::to_owned);
                let source = self.register("web", url, title);
                let Some(marker) =
                    markers::new_marker(&source.id, &source.url, source.title.as_deref())
                else {
                    return Ok(output);
                };
                output.content.push(marker);
                set_source(&mut output, json!(source));
                self.scope.emit(
                    SOURCE_REFERENCES,
                    "source",
                    json!({"id": source.id, "kind": "web", "url": source.url}),
                );
            }
            "read" => {
                if let Some(path) = call.arguments.get("path").and_then(|p| p.as_str()) {
                    set_source(&mut output, json!({"kind": "file", "path": path}));
                }
            }
            _ => {}
        }
        Ok(output)
    }
}

fn set_source(output: &mut ToolOutput, source: serde_json::Value) {
    match output.details.get_or_insert_with(|| json!({})) {
        serde_json::Value::Object(map) => {
            map.insert("source".into(), source);
        }
        other => *other = json!({"original": other.clone(), "source": source}),
    }
}

#[async_trait]
impl AfterLlmCallHook for TurnSources {
    async fn after_llm_call(
        &self,
        _turn: &TurnContext,
        message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError> {
        if message.has_tool_calls()
            || matches!(message.stop_reason, StopReason::Error | StopReason::Aborted)
        {
            return Ok(ResponseDecision::Accept);
        }
        let text = message.text();
        let known = self.with_session(|s| s.known.clone());
        let (normalised, cited) = normalise(&text, &|id| known.contains_key(id));
        let missing = {
            let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
            let missing = !turn.retried
                && !turn.used.is_empty()
                && !turn.used.iter().any(|id| cited.contains(id));
            if missing {
                turn.retried = true;
            }
            missing.then(|| turn.used.clone())
        };
        if let Some(used) = missing {
            let list: Vec<String> = used
                .iter()
                .filter_map(|id| known.get(id))
                .map(|s| format!("[{}] {}", s.id, s.url))
                .collect();
            self.scope.emit(
                SOURCE_REFERENCES,
                "retry",
                json!({"reason": MISSING_SOURCE_CITATION, "sources": used}),
            );
            return Ok(ResponseDecision::Retry {
                prompt: format!(
                    "Your answer does not cite the pages you fetched in this turn: {}. Give \
                     your final answer again, citing each source where you use it as [S1]; if \
                     you used none of them, say so.",
                    list.join(", ")
                ),
            });
        }
        if cited.is_empty() {
            return Ok(if normalised == text {
                ResponseDecision::Accept
            } else {
                ResponseDecision::ReplaceText(normalised)
            });
        }
        let mut out = normalised;
        if !out.contains("\nSources:") {
            out.push_str("\n\nSources:");
            for id in &cited {
                if let Some(source) = known.get(id) {
                    let title = source
                        .title
                        .as_ref()
                        .map(|t| format!(" {t} —"))
                        .unwrap_or_default();
                    out.push_str(&format!("\n[{}]{title} {}", source.id, source.url));
                }
            }
        }
        Ok(ResponseDecision::ReplaceText(out))
    }
}
