//! One checkpoint compaction: the summary call, its validation, the replacement history and
//! the check that the next request fits. Shared by the in-turn manager and the `compact`
//! operation.

use std::sync::Arc;

use keel_llm::{LlmRequest, ModelSpec, RequestOptions, StreamFn};
use keel_protocol::{ErrorInfo, Message, StopReason, Usage};
use tokio_util::sync::CancellationToken;

use keel_protocol::FailureCode;

use crate::checkpoint::{self, Verified};
use crate::measure::{MeasureCache, Size, system_size, text_size};

/// Error code of a compaction whose result still does not fit (DESIGN §12).
pub const POST_ADMISSION_FAILED: FailureCode = FailureCode::PostAdmissionFailed;
/// Error code of a summary call that failed.
pub const SUMMARY_FAILED: FailureCode = FailureCode::CompactionFailed;

/// Why a compaction failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CompactError {
    /// Stable code.
    pub code: FailureCode,
    /// What went wrong.
    pub message: String,
}

impl CompactError {
    fn new(code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// What a compaction is asked to do.
pub struct CompactInput<'a> {
    /// The history to compact.
    pub history: &'a [Arc<Message>],
    /// Size of the system prompt and tools the next request carries.
    pub frame: Size,
    /// What the next request must fit (tokens and bytes).
    pub limit: Size,
    /// Tokens the result should stay under, so that several steps fit before the next
    /// compaction (the compaction start T).
    pub target: u64,
    /// The user's instructions for the summary.
    pub instructions: Option<&'a str>,
    /// Tokens of genuine user messages kept verbatim.
    pub user_message_tokens: u64,
    /// Sizes of the history's messages.
    pub cache: &'a MeasureCache,
}

/// A finished compaction.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The replacement history.
    pub history: Vec<Arc<Message>>,
    /// The request's size before (frame included).
    pub before: Size,
    /// The next request's size (frame included).
    pub after: Size,
    /// Estimated tokens of the summary.
    pub summary_tokens: u64,
    /// Summary calls made (a second one when the first was refused).
    pub calls: u32,
    /// What the summary calls used and cost.
    pub usage: Usage,
}

/// The model a compaction calls.
pub struct SummaryModel {
    /// Its limits.
    pub spec: Arc<ModelSpec>,
    /// Its stream function, with the runner's wrappers (timeouts, retries).
    pub stream: Arc<dyn StreamFn>,
}

/// Asks the model once for a summary of `text`.
///
/// Nothing cancels it from inside: a turn that is aborted, or runs out of time, drops the
/// compaction's future, and with it the request.
async fn ask(
    model: &SummaryModel,
    text: String,
    max_tokens: u32,
) -> Result<(String, Usage), ErrorInfo> {
    let request = LlmRequest {
        model: model.spec.clone(),
        system_prompt: Arc::from(checkpoint::SYSTEM),
        messages: Arc::new(vec![Arc::new(Message::user_text(text))]),
        tools: Arc::from(Vec::new()),
        options: RequestOptions {
            max_tokens: Some(max_tokens),
            ..RequestOptions::default()
        },
    };
    let answer = keel_llm::collect(model.stream.as_ref(), request, CancellationToken::new()).await;
    match (answer.stop_reason, answer.error.clone()) {
        (StopReason::Error | StopReason::Aborted, Some(error)) => Err(error),
        _ => Ok((answer.text(), answer.usage)),
    }
}

/// Compacts `input.history` with one summary call (two if the first summary is refused).
pub async fn compact(
    input: CompactInput<'_>,
    model: &SummaryModel,
) -> Result<Compacted, CompactError> {
    let before = input.frame + input.cache.total(input.history);
    let limit = input.limit;
    if !input.frame.fits(limit.tokens, Some(limit.bytes)) {
        // No summary can help: the system prompt and tools alone pass the limit.
        return Err(CompactError::new(
            POST_ADMISSION_FAILED,
            format!(
                "the system prompt and tools alone are about {} tokens and {} bytes, more than \
                 the {} tokens and {} bytes a request may have; no compaction can make it fit",
                input.frame.tokens, input.frame.bytes, limit.tokens, limit.bytes
            ),
        ));
    }
    // The room the result leaves for the steps after it: the summary and the kept user
    // messages may each take at most a quarter of it.
    let room = input
        .target
        .min(limit.tokens)
        .saturating_sub(input.frame.tokens);
    let kept_budget = input
        .user_message_tokens
        .min(limit.tokens / 4)
        .min(room / 4);
    let kept = checkpoint::kept_user_messages(input.history, input.cache, kept_budget);
    let kept_size: Size = kept.iter().map(|m| input.cache.size(m)).sum();
    // What the summary may take: a fifth of what the next request may carry, within what
    // the model can write.
    let summary_budget = (limit.tokens / 5)
        .clamp(512, 12_000)
        .min((room / 4).max(512))
        .min(u64::from(model.spec.max_output.max(512)));
    // The summary request must itself fit what the next request may carry (at most L, half
    // the rejected size after an overflow), less its system prompt and the wording around
    // the transcript.
    let transcript_budget = limit
        .tokens
        .saturating_sub(system_size(checkpoint::SYSTEM).tokens + 1_024)
        .max(1);
    let mut text = checkpoint::request_text(input.history, input.instructions, transcript_budget);
    let mut calls = 0;
    let mut usage = Usage::default();
    let summary = loop {
        calls += 1;
        let (answer, used) = ask(
            model,
            text.clone(),
            // Room past the budget so a summary near it is not cut off, never more than
            // the model may write.
            u32::try_from(
                (summary_budget + summary_budget / 4).min(u64::from(model.spec.max_output)),
            )
            .unwrap_or(u32::MAX),
        )
        .await
        .map_err(|e| {
            CompactError::new(
                SUMMARY_FAILED,
                format!("the checkpoint summary call failed: {}", e.message),
            )
        })?;
        usage += used;
        match checkpoint::validate(&answer, summary_budget) {
            Ok(()) => break answer,
            Err(problem) if calls == 1 => {
                text.push_str(&format!(
                    "\n\nA previous answer was refused: {problem}. Answer again with exactly the \
                     eight sections and at most {summary_budget} tokens."
                ));
            }
            Err(problem) => {
                return Err(CompactError::new(
                    SUMMARY_FAILED,
                    format!("the checkpoint summary was refused twice: {problem}"),
                ));
            }
        }
    };
    let verified = Verified::of(input.history);
    let summary_tokens = text_size(&summary).tokens;
    let (compactions, earlier_tokens) = keel_tools::todo::compaction_tally(input.history);
    let history = checkpoint::replacement(
        &summary,
        &verified,
        kept,
        before,
        (compactions + 1, earlier_tokens + summary_tokens),
    );
    let after = input.frame + input.cache.total(&history);
    if !after.fits(limit.tokens, Some(limit.bytes)) {
        return Err(CompactError::new(
            POST_ADMISSION_FAILED,
            format!(
                "after compaction the next request is still about {} tokens and {} bytes, more \
                 than the {} tokens and {} bytes it may have (system prompt and tools: {} tokens; \
                 kept user messages: {} tokens)",
                after.tokens,
                after.bytes,
                limit.tokens,
                limit.bytes,
                input.frame.tokens,
                kept_size.tokens
            ),
        ));
    }
    Ok(Compacted {
        history,
        before,
        after,
        summary_tokens,
        calls,
        usage,
    })
}
