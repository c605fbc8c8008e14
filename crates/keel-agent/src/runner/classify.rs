//! The error classifier: every failure of a turn maps to one stable status code.

use keel_protocol::{ErrorCode, ErrorInfo};

/// Status code of a turn whose before-LLM hook failed (the call was not made).
pub const BEFORE_LLM_HOOK_FAILED: &str = "before_llm_hook_failed";
/// Status code of a turn an after-LLM hook failed on purpose.
pub const AFTER_LLM_REJECTED: &str = "after_llm_rejected";
/// Status code of a turn whose run crashed.
pub const INTERNAL_ERROR: &str = "internal_error";
/// Status code of a turn stopped by `RunnerDefaults::max_steps` while the model still
/// wanted to go on.
pub const STEP_LIMIT_EXCEEDED: &str = "step_limit_exceeded";

/// Why a turn failed, as the runner saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A before-LLM hook failed (fail closed).
    BeforeLlmHook(String),
    /// An after-LLM hook decided the answer fails the turn.
    Rejected { code: String, message: String },
    /// The model call failed.
    Model(ErrorInfo),
    /// The agent refused to start the run.
    Refused { code: &'static str, message: String },
    /// The run crashed or was lost.
    Internal(String),
    /// The step limit was reached with tool calls still asking for another step.
    StepLimit(u32),
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
            Self::Refused { code, message } => ((*code).to_owned(), message.clone()),
            Self::Internal(message) => (INTERNAL_ERROR.to_owned(), message.clone()),
            Self::StepLimit(max) => (
                STEP_LIMIT_EXCEEDED.to_owned(),
                format!("the turn reached its limit of {max} steps before the model finished"),
            ),
        }
    }
}

/// Stable status code for a failed model call.
pub fn model_code(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Auth => "model_auth",
        ErrorCode::RateLimit => "model_rate_limit",
        ErrorCode::Overloaded => "model_overloaded",
        ErrorCode::ContextOverflow => "model_context_overflow",
        ErrorCode::InvalidRequest => "model_invalid_request",
        ErrorCode::Timeout => "model_timeout",
        ErrorCode::Network => "model_network",
        ErrorCode::Server => "model_server",
        ErrorCode::Quota => "model_quota",
        ErrorCode::Cancelled => "model_cancelled",
        ErrorCode::Internal => INTERNAL_ERROR,
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
        ];
        for (failure, code) in cases {
            assert_eq!(failure.classify().0, code);
        }
    }
}
