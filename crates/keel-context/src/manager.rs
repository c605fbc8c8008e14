//! `host.context`, the host-owned extension that keeps each request within the model's
//! window (DESIGN §12). Its before-LLM handler runs first of all, at every model call:
//!
//! 1. measure the request (system prompt, tools, messages; each message once) and read the
//!    usage anchor;
//! 2. after a provider rejected the request as too long, shrink it to half the rejected
//!    size (archiving if that is enough, else a checkpoint), or fail `context_overflow`;
//! 3. at the compaction start T (or past the byte limit), archive if that brings the
//!    request under T, else compact; a compaction that still does not fit fails
//!    `post_admission_failed`;
//! 4. below T, archive only at the output water mark;
//! 5. ask for no more output than the window leaves.
//!
//! Every replacement is one commit by the turn, and each step is reported as an
//! `extension` event with the sizes before and after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::HookError;
use keel_agent::runner::{BeforeLlmAction, BeforeLlmCallHook, LlmCallView};
use keel_protocol::{FailureCode, Message, SessionId};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, Replacement, SessionChange,
    SessionChangeHook, TurnScope,
};
use keel_runtime::settings::ContextConfig;
use keel_runtime::{CompactRequest, Compactor, RuntimeError};
use serde_json::json;

use crate::CONTEXT;
use crate::anchor::{AnchorKey, UsageAnchor, eligible, fingerprint};
use crate::archive::{self, ArchiveConfig, Goal};
use crate::budget::{Budget, api_byte_limit};
use crate::compact::{self, CompactError, CompactInput, Compacted, SummaryModel};
use crate::measure::{MESSAGE_TOKENS, MeasureCache, Size, block_size, system_size, tools_size};

/// The settings the manager works with, read once from `context`.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The `context` configuration.
    pub config: ContextConfig,
    /// The archiver's, in bytes.
    pub archive: ArchiveConfig,
}

impl Settings {
    /// From the `context` configuration.
    pub fn from(config: ContextConfig) -> Self {
        let kib = |v: u64| v.saturating_mul(1024);
        Self {
            config,
            archive: ArchiveConfig {
                inline: kib(config.archive_inline_kib),
                water_mark: kib(config.archive_water_mark_kib),
                min_saving: kib(config.archive_min_saving_kib),
                min_candidate: kib(config.archive_min_candidate_kib),
                protected_rounds: config.protected_rounds,
                protected_tokens: u64::MAX,
            },
        }
    }

    /// The budget of `spec`'s model.
    pub fn budget(&self, spec: &keel_llm::ModelSpec) -> Budget {
        keel_runtime::lean::Limits::of(spec, &self.config)
            .budget(u64::from(spec.context_window))
            .bytes(
                self.config
                    .max_request_bytes
                    .filter(|bytes| *bytes > 0)
                    .or_else(|| api_byte_limit(&spec.api)),
            )
    }
}

/// What the manager keeps of one session in this process.
#[derive(Default)]
struct SessionState {
    cache: MeasureCache,
    anchor: Mutex<AnchorState>,
}

#[derive(Default)]
struct AnchorState {
    /// Grows with every replacement of the history.
    epoch: u64,
    /// The key the last request was sent under, and how many messages it carried: only an
    /// answer after them can be that request's.
    sent: Option<(AnchorKey, usize)>,
    anchor: Option<UsageAnchor>,
    /// The epoch a checkpoint compaction made: until the history changes again, a second
    /// one is made only past L (one below T would be undone by the next step's growth,
    /// costing a summary call every step).
    compacted: Option<u64>,
}

type Sessions = Arc<Mutex<HashMap<String, Arc<SessionState>>>>;

/// How long a call of the handler may take: a checkpoint summary of a long history is a
/// model call of its own (two when the first summary is refused), with its retries.
const COMPACTION_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Sessions whose measurements and anchor are kept before idle ones are forgotten.
const MAX_SESSIONS: usize = 64;

/// The context manager extension.
#[derive(Default)]
pub struct ContextManager {
    sessions: Sessions,
}

impl Extension for ContextManager {
    fn id(&self) -> &str {
        CONTEXT
    }

    fn description(&self) -> Option<&str> {
        Some("keeps every request within the model's window: archives old tool output, compacts")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let settings = Settings::from(api.config().context);
        let sessions = self.sessions.clone();
        api.on_each_turn(
            ExtensionEvent::BeforeLlmCall,
            Arc::new(move |scope: &TurnScope| {
                let state = {
                    let mut sessions = sessions.lock().unwrap_or_else(PoisonError::into_inner);
                    let id = scope.session_id.to_string();
                    if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&id) {
                        // What is kept is only a cache; a long-lived process forgets the
                        // sessions it no longer runs rather than growing.
                        sessions.retain(|_, state| Arc::strong_count(state) > 1);
                    }
                    sessions.entry(id).or_default().clone()
                };
                Hook::BeforeLlmCall(Arc::new(TurnContext {
                    scope: scope.clone(),
                    settings,
                    state,
                    frame: Mutex::new(None),
                    last: Mutex::new(None),
                }))
            }),
        )?;
        api.on_session_change(Arc::new(Forget {
            sessions: self.sessions.clone(),
        }))
    }
}

/// Drops what the manager kept of a session whose history changed under it.
struct Forget {
    sessions: Sessions,
}

#[async_trait]
impl SessionChangeHook for Forget {
    async fn session_changed(
        &self,
        session: &SessionId,
        _dir: Option<&std::path::Path>,
        _change: &SessionChange,
    ) -> Result<(), HookError> {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session.as_str());
        Ok(())
    }
}

/// One turn's handler.
struct TurnContext {
    scope: TurnScope,
    settings: Settings,
    state: Arc<SessionState>,
    /// The system prompt and tools' size and fingerprints (the same for the whole turn).
    frame: Mutex<Option<Frame>>,
    /// The size of the last request this turn sent.
    last: Mutex<Option<Size>>,
}

#[derive(Clone, Copy)]
struct Frame {
    size: Size,
    system: [u8; 16],
    tools: [u8; 16],
}

/// What the handler decided to do with the history.
enum Action {
    Keep,
    Archive(Vec<Arc<Message>>, Size),
    Compact { limit: Size, reason: Reason },
}

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// The provider rejected the request as too long.
    Overflow,
    /// The request reached the compaction start T.
    Threshold,
    /// The `compact` operation.
    Manual,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Self::Overflow => "overflow",
            Self::Threshold => "threshold",
            Self::Manual => "manual",
        }
    }
}

/// Runs one compaction, reporting its start and, when it fails, its failure.
async fn summarise(
    scope: &TurnScope,
    input: CompactInput<'_>,
    reason: Reason,
) -> Result<Compacted, CompactError> {
    let Some(stream) = &scope.stream else {
        return Err(CompactError {
            code: compact::SUMMARY_FAILED,
            message: "there is no model to write a summary with".into(),
        });
    };
    scope.emit(
        CONTEXT,
        "compaction_started",
        json!({
            "reason": reason.as_str(),
            "before": input.frame + input.cache.total(input.history),
            "limit": input.limit,
        }),
    );
    let model = SummaryModel {
        spec: scope.spec.clone(),
        stream: stream.clone(),
    };
    compact::compact(input, &model).await.inspect_err(|error| {
        scope.emit(
            CONTEXT,
            "compaction_failed",
            json!({"reason": reason.as_str(), "code": error.code, "error": error.message}),
        );
    })
}

/// The details of a `compaction_finished` event.
fn finished(compacted: &Compacted, reason: Reason) -> serde_json::Map<String, serde_json::Value> {
    let details = json!({
        "reason": reason.as_str(),
        "before": compacted.before,
        "after": compacted.after,
        "summary_tokens": compacted.summary_tokens,
        "summary_calls": compacted.calls,
        "summary_usage": compacted.usage,
    });
    match details {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

impl TurnContext {
    fn frame(&self, view: &LlmCallView<'_>) -> Frame {
        let mut kept = self.frame.lock().unwrap_or_else(PoisonError::into_inner);
        *kept.get_or_insert_with(|| {
            let tools = serde_json::to_vec(view.tools).unwrap_or_default();
            Frame {
                size: system_size(view.system_prompt) + tools_size(view.tools),
                system: fingerprint(view.system_prompt.as_bytes()),
                tools: fingerprint(&tools),
            }
        })
    }

    fn anchor_state(&self) -> std::sync::MutexGuard<'_, AnchorState> {
        self.state
            .anchor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn key(&self, frame: &Frame, epoch: u64) -> AnchorKey {
        let spec = &self.scope.spec;
        AnchorKey {
            session: self.scope.session_id.to_string(),
            provider: spec.provider.clone(),
            api: spec.api.clone(),
            model: spec.id.clone(),
            system: frame.system,
            tools: frame.tools,
            epoch,
        }
    }

    /// The anchored estimate of `messages`, recording a new anchor when the newest answer
    /// came from a request sent under the current key.
    fn anchored(&self, frame: &Frame, messages: &[Arc<Message>]) -> Option<u64> {
        let spec = &self.scope.spec;
        let mut state = self.anchor_state();
        let key = self.key(frame, state.epoch);
        if let Some((index, tokens)) = eligible(messages, &spec.provider, &spec.api, &spec.id) {
            let fresh = state
                .anchor
                .as_ref()
                .is_none_or(|a| !a.holds(&key, messages) || a.index != index);
            let sent_before = state
                .sent
                .as_ref()
                .is_some_and(|(sent, carried)| *sent == key && index >= *carried);
            if fresh && sent_before {
                state.anchor = Some(UsageAnchor {
                    key: key.clone(),
                    index,
                    message: Arc::downgrade(&messages[index]),
                    tokens,
                });
            }
        }
        let estimate = state
            .anchor
            .as_ref()
            .and_then(|a| a.estimate(&key, messages, &self.state.cache));
        if estimate.is_none() {
            state.anchor = None;
        }
        estimate
    }

    fn sent(&self, frame: &Frame, carried: usize) {
        let mut state = self.anchor_state();
        let key = self.key(frame, state.epoch);
        state.sent = Some((key, carried));
    }

    /// A replacement starts a new epoch; `compaction` marks it as a compaction's.
    fn bump_epoch(&self, compaction: bool) {
        let mut state = self.anchor_state();
        state.epoch += 1;
        state.anchor = None;
        state.compacted = compaction.then_some(state.epoch);
    }

    /// Whether the history is as the last compaction left it.
    fn just_compacted(&self) -> bool {
        let state = self.anchor_state();
        state.compacted == Some(state.epoch)
    }

    fn store(&self, view: &LlmCallView<'_>) -> archive::Store {
        let readable = view.tools.iter().any(|t| t.name == "read");
        match (&self.scope.host, readable) {
            (Some(host), true) => archive::Store::Artifacts(host.env.artifact_dir().to_path_buf()),
            _ => archive::Store::Trim,
        }
    }

    /// Archiving that reaches `goal` and leaves a request within `limit`, if the candidates
    /// allow it; nothing is written unless the receipts are admitted.
    fn try_archive(
        &self,
        view: &LlmCallView<'_>,
        budget: &Budget,
        frame: Size,
        current: Size,
        goal: Goal,
        limit: Size,
    ) -> Option<(Vec<Arc<Message>>, Size)> {
        let cache = &self.state.cache;
        // The protected rounds may hold a third of the room between the system prompt and
        // tools and the compaction start: in a small window, five rounds of large output
        // would otherwise leave archiving nothing to take and force a summary.
        let config = ArchiveConfig {
            protected_tokens: budget.compact_at.saturating_sub(frame.tokens) / 3,
            ..self.settings.archive
        };
        let plan = archive::plan(view.messages, cache, &config, goal);
        if plan.is_empty() {
            return None;
        }
        let applied = archive::apply(view.messages, &plan, &self.store(view));
        let after = frame + cache.total(&applied.history);
        let smaller = after.tokens < current.tokens || after.bytes < current.bytes;
        // Without a byte limit of its API, a candidate may not grow the request.
        let bytes_ok = budget.byte_limit.is_some() || after.bytes <= current.bytes;
        if !(smaller && bytes_ok && after.fits(limit.tokens, Some(limit.bytes))) {
            return None;
        }
        if let Err(error) = archive::save(view.messages, &applied.writes) {
            self.scope.emit(
                CONTEXT,
                "archive_failed",
                json!({"error": error.to_string()}),
            );
            return None;
        }
        Some((applied.history, after))
    }

    fn decide(
        &self,
        view: &LlmCallView<'_>,
        budget: &Budget,
        frame: Size,
        local: Size,
        estimate: u64,
    ) -> Action {
        let byte_limit = budget.byte_limit.unwrap_or(u64::MAX);
        if let Some(error) = view.overflow {
            let rejected = self
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or(local)
                .max(local);
            let limit = Size::new(
                (rejected.tokens / 2).min(budget.input_limit),
                (rejected.bytes / 2).min(byte_limit),
            );
            self.scope.emit(
                CONTEXT,
                "overflow_recovery",
                json!({"rejected": rejected, "target": limit, "error": error.message}),
            );
            let needed = Size::new(
                local.tokens.saturating_sub(limit.tokens),
                local.bytes.saturating_sub(limit.bytes),
            );
            return match self.try_archive(view, budget, frame, local, Goal::Save(needed), limit) {
                Some((history, after)) => Action::Archive(history, after),
                None => Action::Compact {
                    limit,
                    reason: Reason::Overflow,
                },
            };
        }
        if !self.settings.config.auto_compact {
            return Action::Keep;
        }
        let limit = Size::new(budget.input_limit, byte_limit);
        if estimate >= budget.compact_at || local.bytes > byte_limit {
            // Below T and within the byte limit is where archiving must bring it. Every
            // candidate goes at once: each archive costs the cached prefix, so it should buy
            // as many steps as it can before the next.
            let target = Size::new(budget.compact_at.saturating_sub(1), byte_limit);
            let all = Size::new(u64::MAX, u64::MAX);
            return match self.try_archive(view, budget, frame, local, Goal::Save(all), target) {
                Some((history, after)) => Action::Archive(history, after),
                // Right after a compaction, below L: send it as it is.
                None if self.just_compacted()
                    && estimate <= budget.input_limit
                    && local.bytes <= byte_limit =>
                {
                    Action::Keep
                }
                None => Action::Compact {
                    limit,
                    reason: Reason::Threshold,
                },
            };
        }
        match self.try_archive(view, budget, frame, local, Goal::WaterMark, limit) {
            Some((history, after)) => Action::Archive(history, after),
            None => Action::Keep,
        }
    }

    /// Compacts the history and commits the replacement; `Err` holds the turn's failure.
    async fn compact(
        &self,
        view: &LlmCallView<'_>,
        budget: &Budget,
        frame: Size,
        limit: Size,
        reason: Reason,
    ) -> Result<Vec<Arc<Message>>, (FailureCode, String)> {
        // After an overflow the turn fails as the provider's rejection does.
        let fail = |code: FailureCode, message: String| match reason {
            Reason::Overflow => (FailureCode::ContextOverflow, message),
            _ => (code, message),
        };
        let Some(writer) = &self.scope.history else {
            return Err(fail(
                compact::SUMMARY_FAILED,
                "this turn cannot replace its history".into(),
            ));
        };
        let input = CompactInput {
            history: view.messages,
            frame,
            limit,
            target: budget.compact_at,
            instructions: None,
            user_message_tokens: self.settings.config.user_message_tokens,
            cache: &self.state.cache,
        };
        let compacted = summarise(&self.scope, input, reason)
            .await
            .map_err(|error| fail(error.code, error.message))?;
        let replaced = writer
            .replace(&compacted.history, Replacement::Compaction)
            .await
            .map_err(|e| fail(FailureCode::HistoryCommitFailed, e.to_string()))?;
        self.bump_epoch(true);
        let mut details = finished(&compacted, reason);
        details.insert("revision_before".into(), json!(replaced.before));
        details.insert("revision".into(), json!(replaced.revision));
        self.scope.emit(
            CONTEXT,
            "compaction_finished",
            serde_json::Value::Object(details),
        );
        Ok(compacted.history)
    }
}

#[async_trait]
impl BeforeLlmCallHook for TurnContext {
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        let frame = self.frame(view);
        let budget = self.settings.budget(&self.scope.spec);
        let cache = &self.state.cache;
        let local = frame.size + cache.total(view.messages);
        let anchored = self.anchored(&frame, view.messages);
        let estimate = local.tokens.max(anchored.unwrap_or(0));
        let mut history = None;
        let mut size = local;
        match self.decide(view, &budget, frame.size, local, estimate) {
            Action::Keep => {}
            Action::Archive(new, after) => {
                let Some(writer) = &self.scope.history else {
                    return Ok(BeforeLlmAction::Continue);
                };
                writer
                    .replace(&new, Replacement::Archive)
                    .await
                    .map_err(|e| HookError::new(e.to_string()))?;
                self.bump_epoch(false);
                let archived = new
                    .iter()
                    .zip(view.messages)
                    .filter(|(a, b)| !Arc::ptr_eq(a, b))
                    .count();
                self.scope.emit(
                    CONTEXT,
                    "archived",
                    json!({"outputs": archived, "before": local, "after": after}),
                );
                size = after;
                history = Some(new);
                cache.prune();
            }
            Action::Compact { limit, reason } => {
                match self.compact(view, &budget, frame.size, limit, reason).await {
                    Ok(new) => {
                        size = frame.size + cache.total(&new);
                        history = Some(new);
                    }
                    Err((code, message)) => {
                        return Ok(BeforeLlmAction::Fail { code, message });
                    }
                }
                cache.prune();
            }
        }
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(size);
        let carried = history.as_ref().map_or(view.messages.len(), Vec::len);
        self.sent(&frame, carried);
        let input = if history.is_some() {
            size.tokens
        } else {
            estimate
        };
        let max_tokens = u32::try_from(budget.max_tokens(input)).unwrap_or(u32::MAX);
        Ok(BeforeLlmAction::Prepare {
            history,
            max_tokens: Some(max_tokens),
        })
    }

    fn recovers_overflow(&self) -> bool {
        true
    }

    fn time_limit(&self) -> Option<std::time::Duration> {
        Some(COMPACTION_TIME_LIMIT)
    }
}

/// The `compact` operation's strategy: a checkpoint summary of the whole history.
pub struct ContextCompactor;

#[async_trait]
impl Compactor for ContextCompactor {
    fn measure(&self, request: &CompactRequest) -> keel_protocol::ContextReport {
        let block = |block: &keel_protocol::ContentBlock| block_size(block).tokens;
        keel_runtime::context_report(
            request,
            &keel_runtime::Sizes {
                system_prompt: system_size(&request.system_prompt).tokens,
                tools: tools_size(&request.tools).tokens,
                block: &block,
                framing: MESSAGE_TOKENS,
                measured: true,
            },
        )
    }

    async fn compact(&self, request: CompactRequest) -> Result<Option<Vec<Message>>, RuntimeError> {
        let scope = &request.scope;
        if !request
            .history
            .iter()
            .any(|m| matches!(&**m, Message::Assistant(_) | Message::ToolResult(_)))
        {
            return Ok(None);
        }
        let settings = Settings::from(request.context);
        let budget = settings.budget(&scope.spec);
        let cache = MeasureCache::default();
        let input = CompactInput {
            history: &request.history,
            frame: system_size(&request.system_prompt) + tools_size(&request.tools),
            limit: Size::new(budget.input_limit, budget.byte_limit.unwrap_or(u64::MAX)),
            target: budget.compact_at,
            instructions: request.instructions.as_deref(),
            user_message_tokens: settings.config.user_message_tokens,
            cache: &cache,
        };
        let compacted = summarise(scope, input, Reason::Manual)
            .await
            .map_err(|error| RuntimeError::Compaction {
                code: error.code,
                message: error.message,
            })?;
        scope.emit(
            CONTEXT,
            "compaction_finished",
            serde_json::Value::Object(finished(&compacted, Reason::Manual)),
        );
        Ok(Some(
            compacted
                .history
                .iter()
                .map(|m| Message::clone(m))
                .collect(),
        ))
    }
}
