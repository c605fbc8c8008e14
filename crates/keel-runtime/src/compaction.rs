//! Compaction and context reports: the strategy the runtime calls (keel-context's checkpoint
//! summary) and the one shape of report every front end shows.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{Message, SessionId, ToolDefinition, TurnId, TurnSource};
use keel_store::{CommitRequest, Entry, HistoryOp, new_id};

use crate::error::RuntimeError;
use crate::extension::{ExtensionEvents, SessionChange, TurnScope};
use crate::lifecycle::{Sessions, refuse_if_running};
use crate::runtime::Slot;

/// What a compaction strategy is given for the `compact` operation.
pub struct CompactRequest {
    /// The session.
    pub session_id: SessionId,
    /// Its canonical history.
    pub history: Vec<Arc<Message>>,
    /// The user's instructions for the summary (untrusted text, to be quoted).
    pub instructions: Option<String>,
    /// The system prompt the session's next request carries.
    pub system_prompt: String,
    /// The tool definitions the session's next request carries.
    pub tools: Vec<ToolDefinition>,
    /// The `context` configuration.
    pub context: crate::settings::ContextConfig,
    /// The session's model, folder and event stream, as a turn of it would see them (no
    /// turn runs: its id is never stored and its history writer is absent).
    pub scope: TurnScope,
}

/// A compaction strategy (DESIGN §12); the runtime calls it for the `compact` operation,
/// and for the `context_report` operation's measuring.
#[async_trait]
pub trait Compactor: Send + Sync {
    /// The history that replaces the request's, or `None` when nothing can be saved.
    async fn compact(&self, request: CompactRequest) -> Result<Option<Vec<Message>>, RuntimeError>;

    /// What the request would carry, measured the way compaction measures it.
    fn measure(&self, request: &CompactRequest) -> keel_protocol::ContextReport {
        rough_report(request)
    }
}

/// How a context report sizes what a request carries, in tokens.
pub struct Sizes<'a> {
    /// The system prompt's.
    pub system_prompt: u64,
    /// The tool definitions'.
    pub tools: u64,
    /// One content block's.
    pub block: &'a dyn Fn(&keel_protocol::ContentBlock) -> u64,
    /// What each sent message costs beyond its blocks.
    pub framing: u64,
    /// Whether these are a calibrated measurer's (`false`: a rough estimate).
    pub measured: bool,
}

/// `request`'s next request by part (system prompt, tools, your messages, answers,
/// reasoning, tool calls, tool results), sized by `sizes`: one shape of report whoever
/// measures.
pub fn context_report(request: &CompactRequest, sizes: &Sizes<'_>) -> keel_protocol::ContextReport {
    use keel_protocol::ContentBlock;
    let mut parts = [
        ("system prompt", sizes.system_prompt),
        ("tools", sizes.tools),
        ("your messages", 0),
        ("answers", 0),
        ("reasoning", 0),
        ("tool calls", 0),
        ("tool results", 0),
    ];
    for message in &request.history {
        let (home, blocks) = match &**message {
            Message::User(user) => (2, &user.content),
            Message::Assistant(answer) => (3, &answer.content),
            Message::ToolResult(result) => (6, &result.content),
            // Host bookkeeping is never sent.
            _ => continue,
        };
        parts[home].1 += sizes.framing;
        for block in blocks {
            let part = match (home, block) {
                (3, ContentBlock::Thinking(_)) => 4,
                (3, ContentBlock::ToolCall(_)) => 5,
                _ => home,
            };
            parts[part].1 += (sizes.block)(block);
        }
    }
    let spec = &request.scope.spec;
    let budget =
        crate::lean::Limits::of(spec, &request.context).budget(u64::from(spec.context_window));
    let (compactions, summary_tokens) = keel_tools::todo::compaction_tally(&request.history);
    keel_protocol::ContextReport {
        window: request.scope.spec.context_window,
        limit: Some(budget.input_limit),
        compact_at: Some(budget.compact_at),
        compactions,
        summary_tokens,
        parts: parts
            .into_iter()
            .map(|(label, tokens)| keel_protocol::ContextPart {
                label: label.to_owned(),
                tokens,
            })
            .collect(),
        measured: sizes.measured,
    }
}

/// A report from characters over four, for runtimes with no measurer installed.
pub fn rough_report(request: &CompactRequest) -> keel_protocol::ContextReport {
    use keel_protocol::ContentBlock;
    let tokens = |chars: usize| (chars / 4) as u64;
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    let block = |block: &ContentBlock| match block {
        ContentBlock::Text(t) => tokens(t.text.len()),
        ContentBlock::Thinking(t) => tokens(t.thinking.len()),
        ContentBlock::ToolCall(c) => tokens(c.name.len() + c.arguments.to_string().len()),
        // An image costs about a thousand tokens whatever its bytes.
        _ => 1_000,
    };
    context_report(
        request,
        &Sizes {
            system_prompt: tokens(request.system_prompt.len()),
            tools: tokens(tools),
            block: &block,
            framing: 0,
            measured: false,
        },
    )
}

impl Sessions {
    /// The installed compaction strategy, if any.
    fn compactor(&self) -> Option<Arc<dyn Compactor>> {
        self.runtime
            .inner
            .compactor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Compacts a session's history with the installed strategy, following `instructions`;
    /// returns the new revision, or `None` when the strategy found nothing to save.
    pub(crate) async fn compact(
        &self,
        session: &SessionId,
        instructions: Option<String>,
    ) -> Result<Option<u64>, RuntimeError> {
        let compactor = self.compactor().ok_or_else(|| {
            RuntimeError::Unsupported("no compaction strategy is installed".into())
        })?;
        let slot = self.runtime.slot_or_open(session).await?;
        refuse_if_running(&slot)?;
        let store = &self.runtime.inner.store;
        let before = store.session(session).await?.revision;
        let history: Vec<Arc<Message>> = store
            .history(session)
            .await?
            .into_iter()
            .map(|e| Arc::new(e.message))
            .collect();
        self.runtime
            .session_changed(
                session,
                SessionChange::Compacting {
                    manual: true,
                    instructions: instructions.clone(),
                },
            )
            .await;
        let request = self.compact_request(&slot, history, instructions)?;
        let Some(replacement) = compactor.compact(request).await? else {
            return Ok(None);
        };
        let receipt = store
            .commit(CommitRequest {
                session_id: session.clone(),
                turn_id: None,
                operation_id: new_id("op-"),
                // A turn elsewhere that committed meanwhile wins; the summary is stale.
                expected_revision: Some(before),
                op: HistoryOp::Replace {
                    entries: replacement.into_iter().map(Entry::new).collect(),
                },
            })
            .await?;
        slot.history_changed();
        self.runtime
            .session_changed(
                session,
                SessionChange::Compacted {
                    before,
                    revision: receipt.revision,
                },
            )
            .await;
        Ok(Some(receipt.revision))
    }

    /// The request a compaction strategy gets: the session's history and what its next
    /// request would carry, assembled as for a turn.
    /// What fills `session`'s context window: its next request measured by part, by the
    /// installed compaction strategy's measurer when there is one.
    pub(crate) async fn context_report(
        &self,
        session: &SessionId,
    ) -> Result<keel_protocol::ContextReport, RuntimeError> {
        let slot = self.runtime.slot_or_open(session).await?;
        let history: Vec<Arc<Message>> = self
            .runtime
            .inner
            .store
            .history(session)
            .await?
            .into_iter()
            .map(|e| Arc::new(e.message))
            .collect();
        let request = self.compact_request(&slot, history, None)?;
        let compactor = self.compactor();
        Ok(match compactor {
            Some(compactor) => compactor.measure(&request),
            None => rough_report(&request),
        })
    }

    fn compact_request(
        &self,
        slot: &Arc<Slot>,
        history: Vec<Arc<Message>>,
        instructions: Option<String>,
    ) -> Result<CompactRequest, RuntimeError> {
        // No turn runs: the scope's turn id is never stored, and its events name no turn.
        let (model, services) = {
            let state = slot.lock();
            (state.model.clone(), state.services.clone())
        };
        let mut scope = self.runtime.scope(
            slot,
            &model,
            services,
            TurnId::generate(),
            TurnSource::Api,
            None,
        );
        scope.events = ExtensionEvents::new(slot.hub.clone(), None);
        let caps = self.runtime.inner.registry.assemble_turn(&scope)?;
        let mut system_prompt = self.runtime.system_prompt(&caps.system_prompt);
        // What a turn would offer: in a small window, the lean set. A window too small for
        // it is measured with the tools as they are, so `/context` still says how full it is.
        let all = caps.tools.clone();
        let fixed = crate::turn::Fixed {
            system_prompt: &system_prompt,
            tools: caps.tools,
            history: &history,
        };
        let tools = match self.runtime.lean_tools(&scope, fixed, slot, &model, false) {
            Ok(lean) => {
                if let Some(note) = lean.note {
                    system_prompt.push_str("\n\n");
                    system_prompt.push_str(&note);
                }
                lean.tools.iter().map(|t| t.definition().clone()).collect()
            }
            Err(RuntimeError::WindowTooSmall(_)) => {
                all.iter().map(|t| t.definition().clone()).collect()
            }
            Err(other) => return Err(other),
        };
        Ok(CompactRequest {
            session_id: slot.id.clone(),
            history,
            instructions,
            system_prompt,
            tools,
            context: self.runtime.inner.settings.loaded.config.context,
            scope,
        })
    }
}
