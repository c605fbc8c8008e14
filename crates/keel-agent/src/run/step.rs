//! The model half of a step: prepare the context, call the model, stream the response
//! into history, and let the host judge it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::StreamExt;
use keel_llm::{AssistantBuilder, EventStream, LlmRequest, message_stream};
use keel_protocol::{
    AgentEvent, AssistantMessage, ContentBlock, ErrorCode, ErrorInfo, Message, MessageId,
    StopReason, StreamEvent, UserMessage,
};

use super::call_ids::ResponseCallIds;
use super::{Run, StepMessage};
use crate::guard::{Guarded, guard, panic_text};
use crate::hooks::{CallAction, ContextPlan, RequestFrame, ResponseDecision};
use crate::projection::project_all;

impl Run {
    /// Runs the model half of one step. A request the provider rejects as too long is
    /// prepared and sent once more when the hooks can shrink the context; the rejected
    /// answer stays in history (projection drops failed answers).
    pub(super) async fn model_step(&mut self) -> StepMessage {
        let mut overflow: Option<ErrorInfo> = None;
        loop {
            let step = self.model_call(overflow.as_ref()).await;
            if overflow.is_none()
                && !self.cancel.is_cancelled()
                && let StepMessage::Message { message, .. } = &step
                && let Some(error) = context_overflow(message)
                && self.config.hooks.recovers_overflow()
            {
                tracing::debug!(%error.message, "the request was too long; preparing it again");
                overflow = Some(error);
                continue;
            }
            return step;
        }
    }

    async fn model_call(&mut self, overflow: Option<&ErrorInfo>) -> StepMessage {
        if self.cancel.is_cancelled() {
            return self
                .synthetic(aborted("the run was aborted before the model call"))
                .await;
        }
        if let Some(additions) = &self.config.additions {
            let (count, added) = additions.since(self.config.additions_seen);
            if !added.is_empty() {
                self.config.tools = self.config.tools.extended(&added);
            }
            self.config.additions_seen = count;
        }
        let history = self.shared.lock().history.clone();
        let hooks = self.config.hooks.clone();
        let tools = self.config.tools.definitions();
        let frame = RequestFrame {
            system_prompt: &self.config.system_prompt,
            tools: &tools,
            overflow,
        };
        let plan = match guard(
            "before_llm_call hook",
            hooks.transform_context(&history, frame),
            self.config.hook_timeout,
            Some(&self.cancel),
        )
        .await
        {
            Guarded::Done(Ok(plan)) => plan,
            Guarded::Done(Err(error)) => {
                return self
                    .synthetic(failed(format!("before_llm_call hook failed: {error}")))
                    .await;
            }
            Guarded::Failed(problem) => return self.synthetic(failed(problem)).await,
            Guarded::Cancelled => {
                return self
                    .synthetic(aborted(
                        "the run was aborted while preparing the model call",
                    ))
                    .await;
            }
        };
        drop(history);
        let ContextPlan {
            replace_history,
            append,
            request_messages,
            action,
            max_tokens,
        } = plan;
        if let Some(messages) = replace_history {
            self.shared.lock().replace_history(messages);
        }
        for message in append {
            self.append(Arc::new(message)).await;
        }
        let stream = match action {
            CallAction::Skip => return StepMessage::Skipped,
            CallAction::Abort(reason) => return self.synthetic(aborted(reason)).await,
            CallAction::Respond(message) => message_stream(&message),
            CallAction::Call => self.call_model(request_messages, max_tokens).await,
        };
        self.consume(stream).await
    }

    async fn call_model(
        &mut self,
        request_messages: Option<Vec<Arc<Message>>>,
        max_tokens: Option<u32>,
    ) -> EventStream {
        let messages = match request_messages {
            Some(messages) => Arc::new(project_all(&messages, self.config.min_image_bytes)),
            None => {
                let mut state = self.shared.lock();
                let state = &mut *state;
                state.projector.project(&state.history, state.epoch)
            }
        };
        let mut options = self.config.request_options.clone();
        if let Some(limit) = max_tokens {
            options.max_tokens = Some(options.max_tokens.map_or(limit, |set| set.min(limit)));
        }
        if let Some(keys) = &self.config.api_keys {
            // Fetched for every call: short-lived tokens must refresh after long tool runs.
            let provider = self.config.model.provider.clone();
            match guard(
                "api key source",
                keys.api_key(&provider),
                self.config.hook_timeout,
                Some(&self.cancel),
            )
            .await
            {
                Guarded::Done(key) => options.api_key = key,
                Guarded::Failed(problem) => tracing::warn!(%problem, "api key source failed"),
                Guarded::Cancelled => {}
            }
        }
        let request = LlmRequest {
            model: self.config.model.clone(),
            system_prompt: self.config.system_prompt.clone(),
            messages,
            tools: self.config.tools.definitions(),
            options,
        };
        let stream_fn = self.config.stream_fn.clone();
        let cancel = self.cancel.child_token();
        match std::panic::catch_unwind(AssertUnwindSafe(|| stream_fn.stream(request, cancel))) {
            Ok(stream) => stream,
            Err(panic) => keel_llm::error_stream(
                StopReason::Error,
                ErrorInfo::new(
                    ErrorCode::Other,
                    format!("the stream function panicked: {}", panic_text(&*panic)),
                ),
            ),
        }
    }

    /// Streams a response into history: the first event inserts the partial message, each
    /// delta updates it in place and is forwarded as `message_update`.
    async fn consume(&mut self, mut stream: EventStream) -> StepMessage {
        let mut id: Option<MessageId> = None;
        let mut aborted = false;
        let mut call_ids = ResponseCallIds::default();
        loop {
            let next = tokio::select! {
                biased;
                () = self.cancel.cancelled() => None,
                event = stream.next() => Some(event),
            };
            let Some(event) = next else {
                // Aborted: do not wait for a stream that may ignore cancellation.
                aborted = true;
                break;
            };
            let Some(event) = event else { break };
            let event = call_ids.admit(&self.seen_call_ids, event);
            if id.is_none() {
                id = Some(self.start_streaming().await);
            }
            let applied = {
                let mut state = self.shared.lock();
                match state.streaming.as_mut() {
                    Some(builder) => builder.apply(&event),
                    None => Ok(()),
                }
            };
            if let Err(problem) = applied {
                self.fail_streaming(
                    StopReason::Error,
                    ErrorInfo::new(
                        ErrorCode::Other,
                        format!("malformed response stream: {problem}"),
                    ),
                );
                break;
            }
            let terminal = event.is_terminal();
            if !terminal && !matches!(event, StreamEvent::Start { .. }) {
                let message_id = id.clone().unwrap_or_else(MessageId::generate);
                self.emit(AgentEvent::MessageUpdate { message_id, event })
                    .await;
            }
            if terminal {
                break;
            }
        }
        drop(stream);
        let id = match id {
            Some(id) => id,
            None => self.start_streaming().await,
        };
        if aborted {
            self.fail_streaming(
                StopReason::Aborted,
                ErrorInfo::new(ErrorCode::Cancelled, "the request was aborted"),
            );
        }
        let builder = self.shared.lock().streaming.take().unwrap_or_default();
        let message = builder.finish();
        self.finish_response(message, id, call_ids).await
    }

    /// Applies the after-response hook, then commits the message.
    async fn finish_response(
        &mut self,
        mut message: AssistantMessage,
        id: MessageId,
        call_ids: ResponseCallIds,
    ) -> StepMessage {
        if !matches!(message.stop_reason, StopReason::Error | StopReason::Aborted) {
            let hooks = self.config.hooks.clone();
            let decision = match guard(
                "after_llm_call hook",
                hooks.after_response(&message),
                self.config.hook_timeout,
                Some(&self.cancel),
            )
            .await
            {
                Guarded::Done(Ok(decision)) => decision,
                Guarded::Done(Err(error)) => {
                    tracing::warn!(%error, "after_llm_call hook failed; keeping the response");
                    ResponseDecision::Accept
                }
                Guarded::Failed(problem) => {
                    tracing::warn!(%problem, "after_llm_call hook failed; keeping the response");
                    ResponseDecision::Accept
                }
                Guarded::Cancelled => ResponseDecision::Accept,
            };
            apply_decision(&mut message, decision, &mut self.pending);
        }
        // After the hook: calls it removed never reach history and do not use up their ids.
        self.claim_call_ids(&mut message, call_ids);
        let message = Arc::new(Message::Assistant(message));
        self.commit(message.clone(), id.clone()).await;
        StepMessage::Message { message, id }
    }

    async fn start_streaming(&mut self) -> MessageId {
        let builder = AssistantBuilder::new();
        let initial = Arc::new(Message::Assistant(builder.message().clone()));
        self.shared.lock().streaming = Some(builder);
        let id = self.config.ids.assign(&initial).await;
        self.emit(AgentEvent::MessageStart {
            message_id: id.clone(),
            message: initial,
        })
        .await;
        id
    }

    fn fail_streaming(&mut self, stop_reason: StopReason, error: ErrorInfo) {
        if let Some(builder) = self.shared.lock().streaming.as_mut() {
            builder.fail(stop_reason, error);
        }
    }

    /// Commits a message the model never produced (hook failure, abort before the call).
    async fn synthetic(&mut self, message: AssistantMessage) -> StepMessage {
        let message = Arc::new(Message::Assistant(message));
        let id = self.append(message.clone()).await;
        StepMessage::Message { message, id }
    }
}

/// The error of an answer the provider refused because the request was too long.
fn context_overflow(message: &Message) -> Option<ErrorInfo> {
    let assistant = message.as_assistant()?;
    let error = assistant.error.as_ref()?;
    (assistant.stop_reason == StopReason::Error && error.code == ErrorCode::ContextOverflow)
        .then(|| error.clone())
}

fn apply_decision(
    message: &mut AssistantMessage,
    decision: ResponseDecision,
    pending: &mut Vec<Message>,
) {
    match decision {
        ResponseDecision::Accept => {}
        ResponseDecision::ReplaceText(text) => {
            let at = message
                .content
                .iter()
                .position(|b| matches!(b, ContentBlock::Text(_)));
            message
                .content
                .retain(|b| !matches!(b, ContentBlock::Text(_)));
            let at = at
                .unwrap_or(message.content.len())
                .min(message.content.len());
            message.content.insert(at, ContentBlock::text(text));
        }
        ResponseDecision::Retry { prompt } => {
            strip_tool_calls(message);
            pending.push(Message::User(UserMessage::hidden_text(prompt)));
        }
        ResponseDecision::Fail {
            code,
            message: text,
        } => {
            strip_tool_calls(message);
            message.stop_reason = StopReason::Error;
            message.error = Some(ErrorInfo::new(ErrorCode::Other, format!("{code}: {text}")));
        }
    }
}

/// Removes a rejected answer's tool calls so they cause no side effects.
fn strip_tool_calls(message: &mut AssistantMessage) {
    message
        .content
        .retain(|b| !matches!(b, ContentBlock::ToolCall(_)));
    if message.stop_reason == StopReason::ToolUse {
        message.stop_reason = StopReason::Stop;
    }
}

fn aborted(reason: impl Into<String>) -> AssistantMessage {
    AssistantMessage {
        stop_reason: StopReason::Aborted,
        error: Some(ErrorInfo::new(ErrorCode::Cancelled, reason)),
        timestamp: keel_protocol::now_ms(),
        ..AssistantMessage::default()
    }
}

fn failed(reason: impl Into<String>) -> AssistantMessage {
    AssistantMessage {
        stop_reason: StopReason::Error,
        error: Some(ErrorInfo::new(ErrorCode::Other, reason)),
        timestamp: keel_protocol::now_ms(),
        ..AssistantMessage::default()
    }
}
