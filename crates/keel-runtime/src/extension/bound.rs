//! Handlers bound to one turn: each adapter carries the turn it was assembled for and
//! refuses a call for any other, so a handler shared by concurrent turns can never act on
//! the wrong one.

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::runner::{
    AfterLlmCallHook, AfterToolCallHook, BeforeLlmAction, BeforeLlmCallHook, BeforeToolCallHook,
    HistoryChangedHook, LlmCallPreparedHook, LlmCallView, RequestOrigin, StepEndHook, StepQueue,
};
use keel_agent::{HookError, ResponseDecision, StepSummary, ToolGate, ToolOutput, TurnContext};
use keel_llm::LlmRequest;
use keel_protocol::{AssistantMessage, Message, ToolCall, TurnId};

use super::{Hook, foreign_turn};

/// A handler and the turn it belongs to.
pub(crate) struct Bound<H: ?Sized> {
    pub(crate) turn: TurnId,
    pub(crate) inner: Arc<H>,
}

impl<H: ?Sized> Bound<H> {
    fn check(&self, turn: &TurnContext) -> Result<(), HookError> {
        if turn.turn_id == self.turn {
            Ok(())
        } else {
            Err(foreign_turn(&self.turn, &turn.turn_id))
        }
    }
}

/// `hook` bound to `turn`. Turn start and end handlers are called by the runtime with the
/// scope itself, so they need no adapter.
pub(crate) fn bind(hook: Hook, turn: &TurnId) -> Hook {
    fn bound<H: ?Sized>(turn: &TurnId, inner: Arc<H>) -> Bound<H> {
        Bound {
            turn: turn.clone(),
            inner,
        }
    }
    match hook {
        Hook::OnLlmCallPrepared(h) => Hook::OnLlmCallPrepared(Arc::new(bound(turn, h))),
        Hook::BeforeLlmCall(h) => Hook::BeforeLlmCall(Arc::new(bound(turn, h))),
        Hook::AfterLlmCall(h) => Hook::AfterLlmCall(Arc::new(bound(turn, h))),
        Hook::BeforeToolCall(h) => Hook::BeforeToolCall(Arc::new(bound(turn, h))),
        Hook::AfterToolCall(h) => Hook::AfterToolCall(Arc::new(bound(turn, h))),
        Hook::OnHistoryChanged(h) => Hook::OnHistoryChanged(Arc::new(bound(turn, h))),
        Hook::OnStepEnd(h) => Hook::OnStepEnd(Arc::new(bound(turn, h))),
        other @ (Hook::TurnStart(_) | Hook::TurnEnd(_)) => other,
    }
}

#[async_trait]
impl LlmCallPreparedHook for Bound<dyn LlmCallPreparedHook> {
    async fn on_llm_call_prepared(
        &self,
        turn: &TurnContext,
        request: &LlmRequest,
        origin: &RequestOrigin,
    ) -> Result<(), HookError> {
        self.check(turn)?;
        self.inner.on_llm_call_prepared(turn, request, origin).await
    }
}

#[async_trait]
impl BeforeLlmCallHook for Bound<dyn BeforeLlmCallHook> {
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        self.check(view.turn)?;
        self.inner.before_llm_call(view).await
    }

    fn recovers_overflow(&self) -> bool {
        self.inner.recovers_overflow()
    }

    fn time_limit(&self) -> Option<std::time::Duration> {
        self.inner.time_limit()
    }
}

#[async_trait]
impl AfterLlmCallHook for Bound<dyn AfterLlmCallHook> {
    async fn after_llm_call(
        &self,
        turn: &TurnContext,
        message: &AssistantMessage,
    ) -> Result<ResponseDecision, HookError> {
        self.check(turn)?;
        self.inner.after_llm_call(turn, message).await
    }
}

#[async_trait]
impl BeforeToolCallHook for Bound<dyn BeforeToolCallHook> {
    async fn before_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
    ) -> Result<ToolGate, HookError> {
        self.check(turn)?;
        self.inner.before_tool_call(turn, call).await
    }
}

#[async_trait]
impl AfterToolCallHook for Bound<dyn AfterToolCallHook> {
    async fn after_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        self.check(turn)?;
        self.inner.after_tool_call(turn, call, output).await
    }
}

#[async_trait]
impl HistoryChangedHook for Bound<dyn HistoryChangedHook> {
    async fn on_history_changed(
        &self,
        turn: &TurnContext,
        messages: &[Arc<Message>],
    ) -> Result<(), HookError> {
        self.check(turn)?;
        self.inner.on_history_changed(turn, messages).await
    }
}

#[async_trait]
impl StepEndHook for Bound<dyn StepEndHook> {
    async fn on_step_end(
        &self,
        turn: &TurnContext,
        step: &StepSummary,
        queue: &StepQueue,
    ) -> Result<(), HookError> {
        self.check(turn)?;
        self.inner.on_step_end(turn, step, queue).await
    }
}
