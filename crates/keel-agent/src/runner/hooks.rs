//! The runner's eight hook kinds and their adapter onto the loop's seams (DESIGN §2).
//!
//! | hook | contract |
//! | --- | --- |
//! | before_llm_call | in order; an error fails closed (no call); `append_message` stops the chain |
//! | on_llm_call_prepared | observes the final request; failures never affect the call |
//! | after_llm_call | `replace_text` chains; `retry`/`fail` stop the chain and strip tool calls |
//! | before_tool_call | first block wins; an error blocks (fail closed) |
//! | on_tool_execution_start | observes |
//! | after_tool_call | rewrites merge in order |
//! | on_history_changed | receives each new history message for persistence |
//! | on_step_end | post-step work, may enqueue messages; errors only count a degradation |

use std::sync::Arc;

use async_trait::async_trait;
use keel_llm::LlmRequest;
use keel_protocol::{AssistantMessage, Message, ToolCall};

use crate::hooks::{
    Boundary, CallAction, ContextPlan, HookError, LoopHooks, RequestFrame, ResponseDecision,
    StepSummary, ToolGate,
};
use crate::runner::classify::Failure;
use crate::runner::state::TurnShared;
use crate::tool::ToolOutput;
use crate::turn_context::TurnContext;

/// What a before-LLM hook decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BeforeLlmAction {
    /// Nothing to do; run the next hook.
    Continue,
    /// Make no model call; end the turn here.
    Skip,
    /// Answer directly with this message instead of calling the model.
    Respond(Box<AssistantMessage>),
    /// Send these messages for this request only; history is unchanged.
    ReplaceRequest(Vec<Arc<Message>>),
    /// Replace history persistently (compaction).
    ReplaceHistory(Vec<Arc<Message>>),
    /// Append one hidden message to history; later hooks do not run.
    AppendMessage(Box<Message>),
    /// Context management's decision: the history replaced persistently (archived or
    /// compacted; the hook has committed it) and the output this request may ask for.
    /// Later hooks run on the replaced history.
    Prepare {
        /// The new history, when it changed.
        history: Option<Vec<Arc<Message>>>,
        /// The most output tokens the request may ask for.
        max_tokens: Option<u32>,
    },
    /// Abort the call; the turn ends aborted.
    Abort(String),
    /// Make no call and fail the turn with this stable code (context management that
    /// cannot make the request fit: `context_overflow`, `post_admission_failed`).
    Fail {
        /// The turn's status code.
        code: keel_protocol::FailureCode,
        /// What went wrong.
        message: String,
    },
}

/// What a before-LLM hook sees.
pub struct LlmCallView<'a> {
    /// The turn.
    pub turn: &'a TurnContext,
    /// The messages as the request stands after earlier hooks.
    pub messages: &'a [Arc<Message>],
    /// Model calls made in this turn so far.
    pub calls_made: usize,
    /// The request's system prompt.
    pub system_prompt: &'a str,
    /// The request's tool definitions.
    pub tools: &'a [keel_protocol::ToolDefinition],
    /// Set when the provider rejected this step's previous request as too long.
    pub overflow: Option<&'a keel_protocol::ErrorInfo>,
}

/// Runs inside `transform_context`, before each model call.
#[async_trait]
pub trait BeforeLlmCallHook: Send + Sync {
    /// Decides about the coming call.
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError>;

    /// Whether this hook can shrink a context the provider rejected as too long (the call
    /// is then prepared once more, with [`LlmCallView::overflow`] set).
    fn recovers_overflow(&self) -> bool {
        false
    }

    /// How long one call of this hook may take, when it needs more than the runner's hook
    /// time limit (context management makes a model call of its own).
    fn time_limit(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Where the messages of a request came from, so the request can be rebuilt later from
/// stored history: the projection of the first `history_prefix` history messages, followed
/// by messages sent with this request only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestOrigin {
    /// The turn's model call this request belongs to, from 1 (a retried call keeps its
    /// number).
    pub call: usize,
    /// How many messages of the agent's history (oldest first) the request starts with.
    pub history_prefix: usize,
    /// Messages a before-LLM hook put in this request only, after that prefix (before
    /// projection); `None` when the request is the history's projection.
    pub request_only: Option<Vec<Arc<Message>>>,
}

/// Observes every request as it is sent.
#[async_trait]
pub trait LlmCallPreparedHook: Send + Sync {
    /// Sees the final request and where its messages came from.
    async fn on_llm_call_prepared(
        &self,
        turn: &TurnContext,
        request: &LlmRequest,
        origin: &RequestOrigin,
    ) -> Result<(), HookError>;
}

/// Judges each response at its `message_end`.
#[async_trait]
pub trait AfterLlmCallHook: Send + Sync {
    /// Accepts, rewrites, retries or fails the response.
    async fn after_llm_call(
        &self,
        turn: &TurnContext,
        message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError>;
}

/// Admits or blocks tool calls.
#[async_trait]
pub trait BeforeToolCallHook: Send + Sync {
    /// The verdict for one call.
    async fn before_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
    ) -> Result<ToolGate, HookError>;
}

/// Observes admitted calls right before they run.
#[async_trait]
pub trait ToolExecutionStartHook: Send + Sync {
    /// Called once per admitted call.
    async fn on_tool_execution_start(&self, turn: &TurnContext, call: &ToolCall);
}

/// Rewrites tool results.
#[async_trait]
pub trait AfterToolCallHook: Send + Sync {
    /// Returns the (possibly rewritten) output.
    async fn after_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError>;
}

/// Receives new history for persistence.
#[async_trait]
pub trait HistoryChangedHook: Send + Sync {
    /// `messages` entered history, in order.
    async fn on_history_changed(
        &self,
        turn: &TurnContext,
        messages: &[Arc<Message>],
    ) -> Result<(), HookError>;
}

/// Post-step work.
#[async_trait]
pub trait StepEndHook: Send + Sync {
    /// Called after each step; may queue messages through `queue`.
    async fn on_step_end(
        &self,
        turn: &TurnContext,
        step: &StepSummary,
        queue: &StepQueue,
    ) -> Result<(), HookError>;
}

/// Lets a step-end hook queue messages for the current turn.
pub struct StepQueue {
    pub(crate) agent: crate::Agent,
}

impl StepQueue {
    /// Injects a message before the next model call.
    pub fn steer(&self, message: Message) {
        self.agent.steer(message);
    }

    /// Queues a message for after the turn would otherwise end.
    pub fn follow_up(&self, message: Message) {
        self.agent.follow_up(message);
    }
}

/// The hooks of one turn, by kind, each list in order.
#[derive(Clone, Default)]
pub struct TurnHooks {
    /// before_llm_call hooks.
    pub before_llm_call: Vec<Arc<dyn BeforeLlmCallHook>>,
    /// on_llm_call_prepared hooks.
    pub on_llm_call_prepared: Vec<Arc<dyn LlmCallPreparedHook>>,
    /// after_llm_call hooks.
    pub after_llm_call: Vec<Arc<dyn AfterLlmCallHook>>,
    /// before_tool_call hooks.
    pub before_tool_call: Vec<Arc<dyn BeforeToolCallHook>>,
    /// on_tool_execution_start hooks.
    pub on_tool_execution_start: Vec<Arc<dyn ToolExecutionStartHook>>,
    /// after_tool_call hooks.
    pub after_tool_call: Vec<Arc<dyn AfterToolCallHook>>,
    /// on_history_changed hooks.
    pub on_history_changed: Vec<Arc<dyn HistoryChangedHook>>,
    /// on_step_end hooks.
    pub on_step_end: Vec<Arc<dyn StepEndHook>>,
}

impl TurnHooks {
    /// Length of the longest list, which bounds how long one seam of the loop may take.
    pub(crate) fn longest_chain(&self) -> usize {
        [
            self.before_llm_call.len(),
            self.on_llm_call_prepared.len(),
            self.after_llm_call.len(),
            self.before_tool_call.len(),
            self.on_tool_execution_start.len(),
            self.after_tool_call.len(),
            self.on_history_changed.len(),
            self.on_step_end.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}

/// Where the request a plan leads to takes its messages from: the (replaced) history with
/// the appended messages, or a request-only list, split into the part shared with history
/// (by identity) and the rest.
fn origin_of(history: &[Arc<Message>], plan: &ContextPlan, call: usize) -> RequestOrigin {
    let base = plan.replace_history.as_deref().unwrap_or(history);
    match &plan.request_messages {
        None => RequestOrigin {
            call,
            history_prefix: base.len() + plan.append.len(),
            request_only: None,
        },
        Some(list) => {
            let shared = list
                .iter()
                .zip(base)
                .take_while(|(a, b)| Arc::ptr_eq(a, b))
                .count();
            RequestOrigin {
                call,
                history_prefix: shared,
                request_only: Some(list[shared..].to_vec()),
            }
        }
    }
}

/// A hook replaced the history for good: later hooks see the replacement, and it wins over
/// request-only rewrites made before it (sending the old context would undo a compaction).
fn replace_history(
    plan: &mut ContextPlan,
    current: &mut Option<Vec<Arc<Message>>>,
    messages: Vec<Arc<Message>>,
) {
    plan.request_messages = None;
    *current = Some(messages.clone());
    plan.replace_history = Some(messages);
}

/// The runner's implementation of the loop's seams.
pub(crate) struct TurnLoopHooks {
    pub(crate) shared: Arc<TurnShared>,
    /// The event bridge: admissions go through it, in order with the loop's events. Weak:
    /// the bridge ends when the runner drops its own sender, whoever still holds these
    /// hooks.
    pub(crate) events: tokio::sync::mpsc::WeakSender<super::BridgeInput>,
}

#[async_trait]
impl LoopHooks for TurnLoopHooks {
    fn recovers_overflow(&self) -> bool {
        self.shared
            .hooks
            .before_llm_call
            .iter()
            .any(|hook| hook.recovers_overflow())
    }

    async fn transform_context(
        &self,
        history: &[Arc<Message>],
        frame: RequestFrame<'_>,
    ) -> Result<ContextPlan, HookError> {
        let shared = &self.shared;
        let calls_made = shared.calls_made();
        let mut plan = ContextPlan::default();
        let mut current: Option<Vec<Arc<Message>>> = None;
        for hook in &shared.hooks.before_llm_call {
            let messages = current.as_deref().unwrap_or(history);
            let view = LlmCallView {
                turn: &shared.turn,
                messages,
                calls_made,
                system_prompt: frame.system_prompt,
                tools: frame.tools,
                overflow: frame.overflow,
            };
            let decision = shared
                .call_within(
                    hook.time_limit(),
                    "before_llm_call hook",
                    hook.before_llm_call(&view),
                )
                .await
                .inspect_err(|error| shared.fail(Failure::BeforeLlmHook(error.message.clone())))?;
            match decision {
                BeforeLlmAction::Continue => {}
                BeforeLlmAction::Skip => {
                    plan.action = CallAction::Skip;
                    break;
                }
                BeforeLlmAction::Respond(message) => {
                    plan.action = CallAction::Respond(message);
                    break;
                }
                BeforeLlmAction::Abort(reason) => {
                    plan.action = CallAction::Abort(reason);
                    break;
                }
                BeforeLlmAction::ReplaceRequest(messages) => {
                    current = Some(messages.clone());
                    plan.request_messages = Some(messages);
                }
                BeforeLlmAction::ReplaceHistory(messages) => {
                    replace_history(&mut plan, &mut current, messages);
                }
                BeforeLlmAction::Fail { code, message } => {
                    shared.fail(Failure::Context {
                        code,
                        message: message.clone(),
                    });
                    return Err(HookError::new(message));
                }
                BeforeLlmAction::Prepare {
                    history: replacement,
                    max_tokens,
                } => {
                    if let Some(messages) = replacement {
                        replace_history(&mut plan, &mut current, messages);
                    }
                    if let Some(limit) = max_tokens {
                        plan.max_tokens = Some(plan.max_tokens.map_or(limit, |l| l.min(limit)));
                    }
                }
                BeforeLlmAction::AppendMessage(message) => {
                    if let Some(request) = plan.request_messages.as_mut() {
                        request.push(Arc::new((*message).clone()));
                    }
                    plan.append.push(*message);
                    break;
                }
            }
        }
        shared.count_call();
        shared.set_origin(origin_of(history, &plan, calls_made + 1));
        if let Some(replacement) = &plan.replace_history {
            // Moved only once the plan is certain to be applied: the loop swaps the
            // history in right after this returns, with no await in between.
            shared.history_replaced(replacement.len());
        }
        Ok(plan)
    }

    async fn after_response(
        &self,
        message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError> {
        let shared = &self.shared;
        let mut current: Option<AssistantMessage> = None;
        let mut replaced: Option<String> = None;
        for hook in &shared.hooks.after_llm_call {
            let seen = current.as_ref().unwrap_or(message);
            match shared
                .call(
                    "after_llm_call hook",
                    hook.after_llm_call(&shared.turn, seen),
                )
                .await
            {
                Ok(ResponseDecision::Accept) => {}
                Ok(ResponseDecision::ReplaceText(text)) => {
                    let mut next = seen.clone();
                    next.content.retain(|b| b.as_text().is_none());
                    next.content
                        .insert(0, keel_protocol::ContentBlock::text(text.clone()));
                    current = Some(next);
                    replaced = Some(text);
                }
                Ok(decision @ ResponseDecision::Retry { .. }) => return Ok(decision),
                Ok(ResponseDecision::Fail { code, message }) => {
                    shared.fail(Failure::Rejected {
                        code,
                        message: message.clone(),
                    });
                    return Ok(ResponseDecision::Fail { code, message });
                }
                Err(error) => {
                    tracing::warn!(%error, "after_llm_call hook failed; response kept");
                    shared.degrade();
                }
            }
        }
        Ok(replaced.map_or(ResponseDecision::Accept, ResponseDecision::ReplaceText))
    }

    async fn before_tool_call(&self, call: &ToolCall) -> Result<ToolGate, HookError> {
        // Everything the step streamed (its reasoning, its text, its calls) reaches front
        // ends before a gate can ask the user about one of its calls.
        if let Some(events) = self.events.upgrade() {
            let (reply, delivered) = tokio::sync::oneshot::channel();
            if events
                .send(super::BridgeInput::Barrier(reply))
                .await
                .is_ok()
            {
                drop(events);
                // Bounded: a sink that hangs costs the order of what is shown, never the
                // call (the seam's own limit has room for one hook time more).
                let _ = tokio::time::timeout(self.shared.hook_timeout, delivered).await;
            }
        }
        // A rewrite is judged by every later hook (the permission gate last) as the call
        // that will run.
        let mut rewritten: Option<ToolCall> = None;
        for hook in &self.shared.hooks.before_tool_call {
            let current = rewritten.as_ref().unwrap_or(call);
            match self
                .shared
                .call(
                    "before_tool_call hook",
                    hook.before_tool_call(&self.shared.turn, current),
                )
                .await?
            {
                ToolGate::Allow => {}
                ToolGate::Rewrite { arguments } => {
                    let mut next = current.clone();
                    next.arguments = arguments;
                    rewritten = Some(next);
                }
                gate => return Ok(gate),
            }
        }
        Ok(rewritten.map_or(ToolGate::Allow, |call| ToolGate::Rewrite {
            arguments: call.arguments,
        }))
    }

    async fn on_tool_execution_start(&self, call: &ToolCall) {
        if let Some(events) = self.events.upgrade() {
            let _ = events
                .send(super::BridgeInput::Admitted(
                    call.id.clone(),
                    call.name.clone(),
                ))
                .await;
        }
        for hook in &self.shared.hooks.on_tool_execution_start {
            let observed = hook.on_tool_execution_start(&self.shared.turn, call);
            if let Err(error) = self
                .shared
                .call("on_tool_execution_start hook", async {
                    observed.await;
                    Ok(())
                })
                .await
            {
                tracing::warn!(%error, "on_tool_execution_start hook failed");
                self.shared.degrade();
            }
        }
    }

    async fn after_tool_call(
        &self,
        call: &ToolCall,
        mut output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        for hook in &self.shared.hooks.after_tool_call {
            let before = output.clone();
            output = match self
                .shared
                .call(
                    "after_tool_call hook",
                    hook.after_tool_call(&self.shared.turn, call, output),
                )
                .await
            {
                Ok(rewritten) => rewritten,
                Err(error) => {
                    // One failing rewrite must not undo the others: keep what we had.
                    tracing::warn!(%error, "after_tool_call hook failed");
                    self.shared.degrade();
                    before
                }
            };
        }
        Ok(output)
    }

    async fn should_stop_after_step(&self, step: &StepSummary) -> bool {
        let wants_more = step
            .message
            .as_ref()
            .and_then(|m| m.as_assistant())
            .is_some_and(AssistantMessage::has_tool_calls);
        self.shared.step_limit_reached(wants_more)
    }

    async fn poll_steering(&self, boundary: Boundary) -> Vec<Vec<Message>> {
        self.shared.poll_host(boundary).await
    }
}
