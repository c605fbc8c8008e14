//! The tool half of a step: prepare, admit and run one batch of tool calls.
//!
//! One sequential tool makes the batch sequential; otherwise every call is prepared in
//! order and then all run concurrently. End events go out in completion order; results are
//! appended in the model's call order. Every call gets exactly one result, whatever
//! happens: unknown tool, invalid arguments, a block, an error, a panic, an abort, or a
//! tool that ignores the abort and is abandoned after the grace period.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use keel_protocol::{
    AgentEvent, AssistantMessage, Message, MessageId, StopReason, ToolCall, ToolResultMessage,
};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use super::Run;
use crate::guard::{Guarded, guard, panic_text};
use crate::hooks::{BlockSource, ToolGate};
use crate::tool::{ExecutionMode, ToolCallContext, ToolOutput, ToolUpdates, normalize_path};
use crate::tools_table::ToolEntry;

/// Progress updates buffered per batch before new ones are dropped.
const UPDATE_CAPACITY: usize = 256;

/// Tag that starts the text of a call stopped because a hook terminated the batch.
pub const STOPPED_BY_HOOK: &str = "Stopped by hook";

/// What a batch produced.
#[derive(Default)]
pub(crate) struct BatchOutcome {
    /// Results in call order.
    pub(crate) results: Vec<Arc<Message>>,
    /// No model call should answer these results.
    pub(crate) terminate: bool,
}

struct Ready {
    index: usize,
    call: ToolCall,
    entry: Arc<ToolEntry>,
}

enum Prepared {
    Ready(Ready),
    Answered(ToolResultMessage),
    Terminate(ToolResultMessage),
}

/// One finished call: its result and whether it asked to terminate.
type Slot = Option<(Arc<Message>, bool)>;

impl Run {
    pub(super) async fn execute_batch(
        &mut self,
        assistant: &AssistantMessage,
        id: &MessageId,
    ) -> BatchOutcome {
        let calls: Vec<ToolCall> = assistant.tool_calls().cloned().collect();
        let mut slots: Vec<Slot> = vec![None; calls.len()];
        let mut terminated = false;
        if assistant.stop_reason == StopReason::Length {
            // The output limit may have cut any of these calls short; run none of them.
            for (index, call) in calls.iter().enumerate() {
                let text = format!(
                    "Tool call `{}` was not executed: the response hit the output token limit, so its arguments may be incomplete. Re-issue the call; split large content across several smaller calls.",
                    call.name
                );
                let result = ToolResultMessage::error(call.id.clone(), call.name.clone(), text);
                slots[index] = Some((self.answer_without_running(call, result).await, false));
            }
        } else {
            let parallel = calls.iter().all(|call| {
                self.config
                    .tools
                    .get(&call.name)
                    .is_none_or(|entry| entry.tool.execution_mode() == ExecutionMode::Parallel)
            });
            let mut ready = Vec::new();
            for (index, call) in calls.iter().enumerate() {
                if terminated || self.cancel.is_cancelled() {
                    let text = if terminated {
                        format!(
                            "{STOPPED_BY_HOOK}: tool call `{}` was not executed because a hook ended the batch.",
                            call.name
                        )
                    } else {
                        format!(
                            "Tool call `{}` was not executed: the run was aborted.",
                            call.name
                        )
                    };
                    let result = ToolResultMessage::error(call.id.clone(), call.name.clone(), text);
                    slots[index] = Some((self.answer_without_running(call, result).await, false));
                    continue;
                }
                self.emit_start(call).await;
                match self.prepare(index, call).await {
                    Prepared::Ready(call) if parallel => ready.push(call),
                    Prepared::Ready(call) => self.run_ready(vec![call], id, &mut slots).await,
                    Prepared::Answered(result) => {
                        slots[index] = Some((self.emit_end(call, result).await, false))
                    }
                    Prepared::Terminate(result) => {
                        slots[index] = Some((self.emit_end(call, result).await, false));
                        terminated = true;
                    }
                }
            }
            if !ready.is_empty() {
                self.run_ready(ready, id, &mut slots).await;
            }
        }
        let all_terminate =
            !slots.is_empty() && slots.iter().all(|s| s.as_ref().is_some_and(|(_, t)| *t));
        let mut results = Vec::with_capacity(slots.len());
        for (index, slot) in slots.into_iter().enumerate() {
            let result = match slot {
                Some((result, _)) => result,
                // Unreachable by construction; kept so a logic slip cannot drop a result.
                None => {
                    let call = &calls[index];
                    let text = format!("Tool call `{}` produced no result.", call.name);
                    Arc::new(Message::ToolResult(ToolResultMessage::error(
                        call.id.clone(),
                        call.name.clone(),
                        text,
                    )))
                }
            };
            self.append(result.clone()).await;
            results.push(result);
        }
        BatchOutcome {
            results,
            terminate: terminated || all_terminate,
        }
    }

    async fn prepare(&mut self, index: usize, call: &ToolCall) -> Prepared {
        let error = |text: String| {
            Prepared::Answered(ToolResultMessage::error(
                call.id.clone(),
                call.name.clone(),
                text,
            ))
        };
        if let Some(reused) = self.reused_id(&call.id) {
            return error(format!(
                "Duplicate tool call id `{reused}` in this turn; this call was not run (it was renamed `{}` so that every call keeps its own result). Issue it again with a new id.",
                call.id
            ));
        }
        let Some(entry) = self.config.tools.get(&call.name).cloned() else {
            let names = self.config.tools.names();
            let available = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            return error(format!(
                "Tool `{}` does not exist. Available tools: {available}.",
                call.name
            ));
        };
        if let Err(problems) = entry.validate(&call.name, &call.arguments) {
            return error(problems);
        }
        let hooks = self.config.hooks.clone();
        let gate = guard(
            "before_tool_call hook",
            hooks.before_tool_call(call),
            self.config.hook_timeout,
            Some(&self.cancel),
        )
        .await;
        match gate {
            Guarded::Done(Ok(ToolGate::Allow)) => Prepared::Ready(Ready {
                index,
                call: call.clone(),
                entry,
            }),
            Guarded::Done(Ok(ToolGate::Rewrite { arguments })) => {
                // The model's call stays in history as it was sent; the tool gets the
                // changed input, which must still fit the tool's schema.
                if let Err(problems) = entry.validate(&call.name, &arguments) {
                    return error(format!(
                        "A hook changed the call's input into one the tool refuses:\n{problems}"
                    ));
                }
                let mut call = call.clone();
                call.arguments = arguments;
                Prepared::Ready(Ready { index, call, entry })
            }
            Guarded::Done(Ok(ToolGate::Block { reason, source })) => {
                let tag = match source {
                    BlockSource::Hook => "Blocked by hook",
                    BlockSource::Permission => "Blocked by permissions",
                };
                error(format!("{tag}: {reason}"))
            }
            Guarded::Done(Ok(ToolGate::Terminate { reason })) => {
                Prepared::Terminate(ToolResultMessage::error(
                    call.id.clone(),
                    call.name.clone(),
                    format!("{STOPPED_BY_HOOK}: {reason}"),
                ))
            }
            // Fail closed: a gate that cannot decide does not let the call through.
            Guarded::Done(Err(problem)) => error(format!(
                "Blocked: the before_tool_call hook failed ({problem}); the call was not executed."
            )),
            Guarded::Failed(problem) => {
                error(format!("Blocked: {problem}; the call was not executed."))
            }
            Guarded::Cancelled => error(format!(
                "Tool call `{}` was not executed: the run was aborted.",
                call.name
            )),
        }
    }

    /// Runs admitted calls concurrently, forwarding progress, until all ended or the abort
    /// grace period ran out.
    async fn run_ready(&mut self, ready: Vec<Ready>, message_id: &MessageId, slots: &mut [Slot]) {
        let (updates_tx, mut updates_rx) = mpsc::channel(UPDATE_CAPACITY);
        let mut tasks = FuturesUnordered::new();
        let mut handles = Vec::with_capacity(ready.len());
        let mut calls: HashMap<usize, ToolCall> = HashMap::with_capacity(ready.len());
        let mut file_tails: HashMap<PathBuf, oneshot::Receiver<()>> = HashMap::new();
        for Ready { index, call, entry } in ready {
            let hooks = self.config.hooks.clone();
            if let Guarded::Failed(problem) = guard(
                "on_tool_execution_start hook",
                hooks.on_tool_execution_start(&call),
                self.config.hook_timeout,
                Some(&self.cancel),
            )
            .await
            {
                tracing::warn!(%problem, "on_tool_execution_start hook failed");
            }
            if self.cancel.is_cancelled() {
                // Admitted but not yet started: an abort means it never starts.
                let text = format!(
                    "Tool call `{}` was not executed: the run was aborted.",
                    call.name
                );
                let result = ToolResultMessage::error(call.id.clone(), call.name.clone(), text);
                slots[index] = Some((self.emit_end(&call, result).await, false));
                continue;
            }
            // Two changes to one file never overlap: each waits for the previous one.
            let (wait, done) = match entry.tool.mutated_path(&call.arguments) {
                Some(path) => {
                    let key = normalize_path(&path);
                    let (done_tx, done_rx) = oneshot::channel::<()>();
                    (file_tails.insert(key, done_rx), Some(done_tx))
                }
                None => (None, None),
            };
            let context = ToolCallContext {
                tool_call_id: call.id.clone(),
                assistant_message_id: message_id.clone(),
                turn: self.config.turn.clone(),
                cancel: self.cancel.child_token(),
                updates: ToolUpdates::new(index, updates_tx.clone()),
            };
            let tool = entry.tool.clone();
            let arguments = call.arguments.clone();
            let span = tracing::debug_span!("tool", id = %call.id, name = %call.name);
            let task = async move {
                if let Some(wait) = wait {
                    let _ = wait.await;
                }
                let output = tool.execute(arguments, context).await;
                drop(done);
                output
            };
            let handle = tokio::spawn(task.instrument(span));
            handles.push((index, handle.abort_handle()));
            tasks.push(async move { (index, handle.await) });
            calls.insert(index, call);
        }
        drop(updates_tx);
        let mut deadline: Option<tokio::time::Instant> = None;
        while !tasks.is_empty() {
            tokio::select! {
                Some((index, joined)) = tasks.next() => {
                    let Some(call) = calls.remove(&index) else { continue };
                    let output = match joined {
                        Ok(Ok(output)) => output,
                        Ok(Err(error)) => ToolOutput::error(error.message),
                        Err(error) if error.is_panic() => ToolOutput::error(format!(
                            "Tool `{}` crashed: {}",
                            call.name,
                            panic_text(&*error.into_panic())
                        )),
                        Err(_) => ToolOutput::error(format!("Tool `{}` was stopped before it finished.", call.name)),
                    };
                    let output = self.after_tool_call(&call, output).await;
                    let terminate = output.terminate;
                    let result = tool_result(&call, output);
                    slots[index] = Some((self.emit_end(&call, result).await, terminate));
                }
                Some((index, update)) = updates_rx.recv() => {
                    if let Some(call) = calls.get(&index) {
                        self.emit(AgentEvent::ToolExecutionUpdate {
                            tool_call_id: call.id.clone(),
                            tool_name: call.name.clone(),
                            update,
                        }).await;
                    }
                }
                () = self.cancel.cancelled(), if deadline.is_none() => {
                    deadline = Some(tokio::time::Instant::now() + self.config.abort_grace);
                }
                () = sleep_until(deadline), if deadline.is_some() => break,
            }
        }
        // Whatever is still running ignored the abort: abandon it.
        for (index, handle) in handles {
            let Some(call) = calls.remove(&index) else {
                continue;
            };
            handle.abort();
            let text = format!(
                "Tool `{}` did not stop within {} s of the abort and was abandoned; whatever it was doing may be incomplete.",
                call.name,
                self.config.abort_grace.as_secs_f32()
            );
            let result = ToolResultMessage::error(call.id.clone(), call.name.clone(), text);
            slots[index] = Some((self.emit_end(&call, result).await, false));
        }
    }

    async fn after_tool_call(&self, call: &ToolCall, output: ToolOutput) -> ToolOutput {
        let hooks = self.config.hooks.clone();
        let fallback = output.clone();
        match guard(
            "after_tool_call hook",
            hooks.after_tool_call(call, output),
            self.config.hook_timeout,
            Some(&self.cancel),
        )
        .await
        {
            Guarded::Done(Ok(output)) => output,
            Guarded::Done(Err(error)) => {
                tracing::warn!(%error, tool = %call.name, "after_tool_call hook failed; keeping the result");
                fallback
            }
            Guarded::Failed(problem) => {
                tracing::warn!(%problem, tool = %call.name, "after_tool_call hook failed; keeping the result");
                fallback
            }
            Guarded::Cancelled => fallback,
        }
    }

    pub(super) async fn emit_start(&self, call: &ToolCall) {
        self.emit(AgentEvent::ToolExecutionStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .await;
    }

    pub(super) async fn emit_end(
        &self,
        call: &ToolCall,
        result: ToolResultMessage,
    ) -> Arc<Message> {
        let is_error = result.is_error;
        let result = Arc::new(Message::ToolResult(result));
        self.emit(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result: result.clone(),
            is_error,
        })
        .await;
        result
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => futures::future::pending().await,
    }
}

fn tool_result(call: &ToolCall, output: ToolOutput) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: output.content,
        details: output.details,
        is_error: output.is_error,
        timestamp: keel_protocol::now_ms(),
    }
}
