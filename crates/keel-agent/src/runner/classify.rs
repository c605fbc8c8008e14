//! The error classifier: every failure of a turn maps to one stable status code.

use keel_protocol::{ErrorCode, ErrorInfo, StopReason};

/// Status code of a turn whose before-LLM hook failed (the call was not made).
pub const BEFORE_LLM_HOOK_FAILED: &str = "before_llm_hook_failed";
/// Status code of a turn an after-LLM hook failed on purpose.
pub const AFTER_LLM_REJECTED: &str = "after_llm_rejected";
/// Status code of a turn whose run crashed.
pub const INTERNAL_ERROR: &str = "internal_error";
/// Status code of a turn stopped by `RunnerDefaults::max_steps` while the model still
/// wanted to go on.
pub const STEP_LIMIT_EXCEEDED: &str = "step_limit_exceeded";

/// Status code of a turn whose model declined to answer (a refusal, a content filter).
pub const MODEL_REFUSAL: &str = "model_refusal";
/// Status code of a turn whose first (and only) model response had no text and no tool
/// call: a silent success would report an empty answer as the result.
pub const EMPTY_RESPONSE: &str = "empty_response";

/// Why a turn failed, as the runner saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A before-LLM hook failed (fail closed).
    BeforeLlmHook(String),
    /// An after-LLM hook decided the answer fails the turn.
    Rejected { code: String, message: String },
    /// The model call failed.
    Model(ErrorInfo),
    /// Context management could not make the request fit.
    Context { code: String, message: String },
    /// The agent refused to start the run.
    Refused { code: &'static str, message: String },
    /// The run crashed or was lost.
    Internal(String),
    /// The step limit was reached with tool calls still asking for another step.
    StepLimit(u32),
    /// The turn's only response had no text and no tool call.
    EmptyResponse {
        /// Why the model stopped.
        stop_reason: StopReason,
        /// Whether it reasoned before stopping.
        reasoned: bool,
    },
}

impl Failure {
    /// The stable status code and message.
    pub(crate) fn classify(&self) -> (String, String) {
        match self {
            Self::BeforeLlmHook(message) => (BEFORE_LLM_HOOK_FAILED.to_owned(), message.clone()),
            Self::Rejected { code, message } => {
                (format!("{AFTER_LLM_REJECTED}:{code}"), message.clone())
            }
            Self::Model(error) => (model_code(error.code).to_owned(), error.message.clone()),
            Self::Context { code, message } => (code.clone(), message.clone()),
            Self::Refused { code, message } => ((*code).to_owned(), message.clone()),
            Self::Internal(message) => (INTERNAL_ERROR.to_owned(), message.clone()),
            Self::StepLimit(max) => (
                STEP_LIMIT_EXCEEDED.to_owned(),
                format!("the turn reached its limit of {max} steps before the model finished"),
            ),
            Self::EmptyResponse {
                stop_reason,
                reasoned,
            } => {
                let mut message =
                    "the model ended its first response with no text and no tool call".to_owned();
                if *stop_reason == StopReason::Length {
                    message.push_str(" (it reached its output limit)");
                } else if *reasoned {
                    message.push_str(" (it only reasoned)");
                }
                (EMPTY_RESPONSE.to_owned(), message)
            }
        }
    }
}

/// Stable status code for a failed model call.
pub fn model_code(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Auth => "model_auth",
        ErrorCode::RateLimit => "model_rate_limit",
        ErrorCode::Overloaded => "model_overloaded",
        ErrorCode::ContextOverflow => "context_overflow",
        ErrorCode::InvalidRequest => "model_invalid_request",
        ErrorCode::Timeout => "model_timeout",
        ErrorCode::Network => "model_network",
        ErrorCode::Server => "model_server",
        ErrorCode::Quota => "model_quota",
        ErrorCode::Cancelled => "model_cancelled",
        ErrorCode::Internal => INTERNAL_ERROR,
        ErrorCode::Refusal => MODEL_REFUSAL,
        ErrorCode::Other => "model_error",
        _ => "model_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_has_a_stable_code() {
        let cases = [
            (Failure::BeforeLlmHook("x".into()), "before_llm_hook_failed"),
            (
                Failure::Rejected {
                    code: "terminal_empty".into(),
                    message: "m".into(),
                },
                "after_llm_rejected:terminal_empty",
            ),
            (
                Failure::Model(ErrorInfo::new(ErrorCode::RateLimit, "slow down")),
                "model_rate_limit",
            ),
            (Failure::Internal("panic".into()), "internal_error"),
            (Failure::StepLimit(3), "step_limit_exceeded"),
            (
                Failure::EmptyResponse {
                    stop_reason: StopReason::Stop,
                    reasoned: false,
                },
                "empty_response",
            ),
        ];
        for (failure, code) in cases {
            assert_eq!(failure.classify().0, code);
        }
    }

    #[test]
    fn an_empty_response_says_why_the_model_stopped() {
        let message = |stop_reason, reasoned| {
            Failure::EmptyResponse {
                stop_reason,
                reasoned,
            }
            .classify()
            .1
        };
        assert_eq!(
            [
                message(StopReason::Stop, false),
                message(StopReason::Stop, true),
                message(StopReason::Length, true),
            ],
            [
                "the model ended its first response with no text and no tool call",
                "the model ended its first response with no text and no tool call (it only reasoned)",
                "the model ended its first response with no text and no tool call (it reached its output limit)",
            ]
        );
    }
}
