//! The loop: one run of steps until the model is done (DESIGN §1).
//!
//! Exits, checked in this order after each step: the response stopped on `error` or
//! `aborted`; `should_stop_after_step`; `should_stop_after_steering` after steering was
//! polled; every result of the batch asked to terminate (or a hook terminated) and nothing
//! is pending; and the natural end, when there are no tool calls to answer, no steering and
//! no follow-up. An abort during the tool batch also ends the run after its step.

mod batch;
pub use batch::STOPPED_BY_HOOK;
mod call_ids;
mod step;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use keel_llm::{ModelSpec, RequestOptions, StreamFn};
use keel_protocol::{
    AgentEvent, AssistantMessage, ErrorCode, ErrorInfo, Message, MessageId, StopReason, ToolCallId,
    ToolResultMessage,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::agent::{Shared, State};
use crate::emit::Emitter;
use crate::guard::{Guarded, guard};
use crate::hooks::{Boundary, LoopHooks, StepSummary};
use crate::options::{AgentOptions, ApiKeySource, MessageIdSource, QueueMode};
use crate::tools_table::ToolTable;
use crate::turn_context::TurnContext;

/// A run's snapshot of the agent's configuration, taken when it starts.
pub(crate) struct RunConfig {
    pub(crate) model: Arc<ModelSpec>,
    pub(crate) system_prompt: Arc<str>,
    pub(crate) stream_fn: Arc<dyn StreamFn>,
    pub(crate) tools: ToolTable,
    pub(crate) additions: Option<crate::tools_table::ToolAdditions>,
    /// How many additions `tools` already holds.
    pub(crate) additions_seen: usize,
    pub(crate) hooks: Arc<dyn LoopHooks>,
    pub(crate) request_options: RequestOptions,
    pub(crate) api_keys: Option<Arc<dyn ApiKeySource>>,
    pub(crate) ids: Arc<dyn MessageIdSource>,
    pub(crate) turn: Option<Arc<TurnContext>>,
    pub(crate) steering_mode: QueueMode,
    pub(crate) follow_up_mode: QueueMode,
    pub(crate) abort_grace: Duration,
    pub(crate) hook_timeout: Duration,
    pub(crate) min_image_bytes: usize,
}

impl RunConfig {
    pub(crate) fn new(options: &AgentOptions, tools: ToolTable) -> Self {
        Self {
            model: options.model.clone(),
            system_prompt: options.system_prompt.clone(),
            stream_fn: options.stream_fn.clone(),
            tools,
            additions: options.tool_additions.clone(),
            additions_seen: 0,
            hooks: options.hooks.clone(),
            request_options: options.request_options.clone(),
            api_keys: options.api_keys.clone(),
            ids: options.message_ids.clone(),
            turn: options.turn.clone(),
            steering_mode: options.steering_mode,
            follow_up_mode: options.follow_up_mode,
            abort_grace: options.abort_grace,
            hook_timeout: options.hook_timeout,
            min_image_bytes: options.min_image_bytes,
        }
    }
}

/// What a step's model call produced.
pub(crate) enum StepMessage {
    /// A before-LLM hook skipped the call.
    Skipped,
    /// The response (or a synthetic one), already in history.
    Message {
        message: Arc<Message>,
        id: MessageId,
    },
}

/// One run of the loop.
pub(crate) struct Run {
    shared: Arc<Shared>,
    config: RunConfig,
    cancel: CancellationToken,
    emitter: Emitter,
    new_messages: Vec<Arc<Message>>,
    /// Ids of the tool calls this turn's responses made (DESIGN §13: unique within a turn).
    seen_call_ids: HashSet<ToolCallId>,
    /// Calls that reused an id, under the fresh id they were given, with the id they reused:
    /// they are answered with an error and never run.
    duplicate_calls: HashMap<ToolCallId, ToolCallId>,
    /// Messages to inject at the start of the next step (steering, follow-ups, retries).
    pending: Vec<Message>,
    start_len: usize,
}

impl Run {
    pub(crate) fn new(
        shared: Arc<Shared>,
        config: RunConfig,
        cancel: CancellationToken,
        emitter: Emitter,
        start_len: usize,
    ) -> Self {
        Self {
            shared,
            config,
            cancel,
            emitter,
            new_messages: Vec::new(),
            seen_call_ids: HashSet::new(),
            duplicate_calls: HashMap::new(),
            pending: Vec::new(),
            start_len,
        }
    }

    pub(crate) fn start_len(&self) -> usize {
        self.start_len
    }

    /// Runs to the end. `prompt` is injected first; without one this continues the history.
    pub(crate) async fn execute(mut self, prompt: Option<Vec<Message>>) {
        self.emit(AgentEvent::AgentStart).await;
        if let Some(prompt) = prompt {
            self.pending.extend(prompt);
        }
        {
            let mut state = self.shared.lock();
            let mode = self.config.steering_mode;
            self.pending.extend(State::take(&mut state.steering, mode));
            if self.pending.is_empty() {
                self.pending.extend(State::take(
                    &mut state.follow_ups,
                    self.config.follow_up_mode,
                ));
            }
        }
        let mut steps: u32 = 0;
        loop {
            let mut has_more_tool_calls = true;
            while has_more_tool_calls || !self.pending.is_empty() {
                self.emit(AgentEvent::TurnStart).await;
                for message in std::mem::take(&mut self.pending) {
                    self.append(Arc::new(message)).await;
                }
                steps += 1;
                let span = tracing::debug_span!("step", step = steps);
                let (message, id) = match self.model_step().instrument(span.clone()).await {
                    StepMessage::Skipped => {
                        let summary = StepSummary {
                            message: None,
                            tool_results: Vec::new(),
                        };
                        self.end_step(&summary).await;
                        return self.finish().await;
                    }
                    StepMessage::Message { message, id } => (message, id),
                };
                let Some(assistant) = message.as_assistant() else {
                    return self.finish().await;
                };
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) {
                    // Exit 1: a failed or aborted response ends the run; calls it holds are
                    // answered so history never keeps a call without a result.
                    let results = self.answer_unexecuted(assistant).await;
                    let summary = StepSummary {
                        message: Some(message.clone()),
                        tool_results: results,
                    };
                    self.end_step(&summary).await;
                    return self.finish().await;
                }
                let has_calls = assistant.has_tool_calls();
                let batch = if has_calls {
                    self.execute_batch(assistant, &id).instrument(span).await
                } else {
                    batch::BatchOutcome::default()
                };
                let summary = StepSummary {
                    message: Some(message.clone()),
                    tool_results: batch.results,
                };
                self.end_step(&summary).await;
                if self.cancel.is_cancelled() {
                    return self.finish().await;
                }
                // Exit 2.
                if self.ask(|h| h.should_stop_after_step(&summary)).await {
                    self.hand_back_pending();
                    return self.finish().await;
                }
                has_more_tool_calls = has_calls && !batch.terminate;
                let queued = self.shared.lock().has_queued();
                let boundary = if has_more_tool_calls || queued || !self.pending.is_empty() {
                    Boundary::MidTurn
                } else {
                    Boundary::Exit
                };
                self.poll_steering(boundary).await;
                // Exit 3.
                if self.ask(|h| h.should_stop_after_steering(&summary)).await {
                    self.hand_back_pending();
                    return self.finish().await;
                }
                // Exit 4 falls out of the loop condition: a terminated batch leaves
                // `has_more_tool_calls` false, so only pending messages continue the run.
            }
            let follow_ups = {
                let mut state = self.shared.lock();
                State::take(&mut state.follow_ups, self.config.follow_up_mode)
            };
            if follow_ups.is_empty() {
                break;
            }
            self.pending = follow_ups;
        }
        // Exit 5: natural end.
        self.finish().await;
    }

    /// Puts messages taken for the next step back at the front of the steering queue, so
    /// a run that stops early leaves them for the next run instead of losing them.
    fn hand_back_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.shared.lock().steering.push_front(pending);
        }
    }

    async fn end_step(&mut self, summary: &StepSummary) {
        self.emit(AgentEvent::TurnEnd {
            message: summary.message.clone(),
            tool_results: summary.tool_results.clone(),
        })
        .await;
    }

    async fn finish(&mut self) {
        let messages = std::mem::take(&mut self.new_messages);
        self.emit(AgentEvent::AgentEnd { messages }).await;
    }

    async fn poll_steering(&mut self, boundary: Boundary) {
        let hooks = self.config.hooks.clone();
        let external = match guard(
            "poll_steering",
            hooks.poll_steering(boundary),
            self.config.hook_timeout,
            Some(&self.cancel),
        )
        .await
        {
            Guarded::Done(batches) => batches,
            Guarded::Failed(problem) => {
                tracing::warn!(%problem, "steering poll failed");
                Vec::new()
            }
            Guarded::Cancelled => Vec::new(),
        };
        let mut state = self.shared.lock();
        for batch in external {
            if !batch.is_empty() {
                state.steering.push_back(crate::agent::assign_batch(batch));
            }
        }
        let taken = State::take(&mut state.steering, self.config.steering_mode);
        self.pending.extend(taken);
    }

    /// Asks a boolean hook; a failing or aborted hook answers `false` (keep going), since
    /// abort is checked separately.
    async fn ask<'a, F>(&'a self, question: impl FnOnce(&'a dyn LoopHooks) -> F) -> bool
    where
        F: std::future::Future<Output = bool> + 'a,
    {
        let future = question(self.config.hooks.as_ref());
        match guard(
            "stop hook",
            future,
            self.config.hook_timeout,
            Some(&self.cancel),
        )
        .await
        {
            Guarded::Done(answer) => answer,
            Guarded::Failed(problem) => {
                tracing::warn!(%problem, "stop hook failed");
                false
            }
            Guarded::Cancelled => false,
        }
    }

    pub(crate) async fn emit(&self, event: AgentEvent) {
        self.emitter.emit(event).await;
    }

    /// Appends a complete message to history with its start and end events.
    pub(crate) async fn append(&mut self, message: Arc<Message>) -> MessageId {
        let id = self.config.ids.assign(&message).await;
        self.emit(AgentEvent::MessageStart {
            message_id: id.clone(),
            message: message.clone(),
        })
        .await;
        self.commit(message, id.clone()).await;
        id
    }

    /// Puts a finished message into history and emits its end event.
    pub(crate) async fn commit(&mut self, message: Arc<Message>, id: MessageId) {
        self.shared.lock().push_message(message.clone());
        self.new_messages.push(message.clone());
        self.emit(AgentEvent::MessageEnd {
            message_id: id,
            message,
        })
        .await;
    }

    /// Answers every call of a response that will not run (failed, aborted or cut off):
    /// each gets start and end events and an error result.
    async fn answer_unexecuted(&mut self, assistant: &AssistantMessage) -> Vec<Arc<Message>> {
        let why = match assistant.stop_reason {
            StopReason::Aborted => "the response was aborted before the call could run".to_owned(),
            _ => match &assistant.error {
                Some(error) => format!(
                    "the response failed ({}: {})",
                    error.code.as_str(),
                    error.message
                ),
                None => "the response failed".to_owned(),
            },
        };
        let calls: Vec<_> = assistant.tool_calls().cloned().collect();
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            let text = format!("Tool call `{}` was not executed: {why}.", call.name);
            let result = ToolResultMessage::error(call.id.clone(), call.name.clone(), text);
            results.push(self.answer_without_running(&call, result).await);
        }
        for result in &results {
            self.append(result.clone()).await;
        }
        results
    }

    /// Emits start and end for a call answered without running it.
    pub(crate) async fn answer_without_running(
        &mut self,
        call: &keel_protocol::ToolCall,
        result: ToolResultMessage,
    ) -> Arc<Message> {
        self.emit_start(call).await;
        self.emit_end(call, result).await
    }
}

/// After a run panicked: close exactly what it left open (the streaming message becomes
/// a failed one, running tools end with error results, dangling calls get results), then
/// still emit `turn_end` and `agent_end`, so every start has its end and every call its
/// result.
pub(crate) async fn recover_from_panic(
    shared: &Arc<Shared>,
    emitter: &Emitter,
    ids: &Arc<dyn MessageIdSource>,
    start_len: usize,
    text: &str,
) {
    let open = emitter.open();
    let error = ErrorInfo::new(ErrorCode::Internal, format!("internal error: {text}"));
    if !open.run {
        emitter.emit(AgentEvent::AgentStart).await;
    }
    if !open.step {
        emitter.emit(AgentEvent::TurnStart).await;
    }
    let streaming = shared.lock().streaming.take();
    let failed = match (&open.message, streaming) {
        (Some((id, _)), Some(mut builder)) => {
            builder.fail(StopReason::Error, error.clone());
            Some((id.clone(), Arc::new(Message::Assistant(builder.finish()))))
        }
        (Some((id, message)), None) => {
            {
                let mut state = shared.lock();
                if !state
                    .history
                    .last()
                    .is_some_and(|last| Arc::ptr_eq(last, message))
                {
                    state.push_message(message.clone());
                }
            }
            emitter
                .emit(AgentEvent::MessageEnd {
                    message_id: id.clone(),
                    message: message.clone(),
                })
                .await;
            None
        }
        (None, _) => None,
    };
    let failed = match failed {
        Some((id, message)) => {
            shared.lock().push_message(message.clone());
            emitter
                .emit(AgentEvent::MessageEnd {
                    message_id: id,
                    message: message.clone(),
                })
                .await;
            message
        }
        None => {
            let message = Arc::new(Message::Assistant(AssistantMessage {
                stop_reason: StopReason::Error,
                error: Some(error),
                timestamp: keel_protocol::now_ms(),
                ..AssistantMessage::default()
            }));
            let id = ids.assign(&message).await;
            emitter
                .emit(AgentEvent::MessageStart {
                    message_id: id.clone(),
                    message: message.clone(),
                })
                .await;
            shared.lock().push_message(message.clone());
            emitter
                .emit(AgentEvent::MessageEnd {
                    message_id: id,
                    message: message.clone(),
                })
                .await;
            message
        }
    };
    let dangling = dangling_calls(&shared.lock().history);
    let mut results = Vec::with_capacity(dangling.len());
    for (id, name) in dangling {
        let result = Arc::new(Message::ToolResult(ToolResultMessage::error(
            id.clone(),
            name.clone(),
            "Tool call was not executed to the end: the agent run failed internally.",
        )));
        if open.tools.contains(&id) {
            emitter
                .emit(AgentEvent::ToolExecutionEnd {
                    tool_call_id: id,
                    tool_name: name,
                    result: result.clone(),
                    is_error: true,
                })
                .await;
        }
        let message_id = ids.assign(&result).await;
        emitter
            .emit(AgentEvent::MessageStart {
                message_id: message_id.clone(),
                message: result.clone(),
            })
            .await;
        shared.lock().push_message(result.clone());
        emitter
            .emit(AgentEvent::MessageEnd {
                message_id,
                message: result.clone(),
            })
            .await;
        results.push(result);
    }
    emitter
        .emit(AgentEvent::TurnEnd {
            message: Some(failed),
            tool_results: results,
        })
        .await;
    let new_messages: Vec<_> = shared
        .lock()
        .history
        .get(start_len..)
        .map(<[_]>::to_vec)
        .unwrap_or_default();
    emitter
        .emit(AgentEvent::AgentEnd {
            messages: new_messages,
        })
        .await;
}

/// Tool calls in `history` with no result after them.
pub(crate) fn dangling_calls(history: &[Arc<Message>]) -> Vec<(ToolCallId, String)> {
    let answered: HashSet<&ToolCallId> = history
        .iter()
        .filter_map(|m| m.as_tool_result())
        .map(|r| &r.tool_call_id)
        .collect();
    history
        .iter()
        .filter_map(|m| m.as_assistant())
        .flat_map(|a| a.tool_calls())
        .filter(|call| !answered.contains(&call.id))
        .map(|call| (call.id.clone(), call.name.clone()))
        .collect()
}
