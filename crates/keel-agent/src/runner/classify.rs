//! The error classifier: every failure of a turn maps to one stable status code.

use keel_protocol::{ErrorCode, ErrorInfo, FailureCode, StopReason};

/// Why a turn failed, as the runner saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A before-LLM hook failed (fail closed).
    BeforeLlmHook(String),
    /// An after-LLM hook decided the answer fails the turn.
    Rejected { code: FailureCode, message: String },
    /// The model call failed.
    Model(ErrorInfo),
    /// Context management could not make the request fit.
    Context { code: FailureCode, message: String },
    /// The agent refused to start the run.
    Refused { code: FailureCode, message: String },
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
    pub(crate) fn classify(&self) -> (FailureCode, String) {
        match self {
            Self::BeforeLlmHook(message) => (FailureCode::BeforeLlmHookFailed, message.clone()),
            // The hook's own code: the contract names why the answer failed, not who said so.
            Self::Rejected { code, message }
            | Self::Context { code, message }
            | Self::Refused { code, message } => (*code, message.clone()),
            Self::Model(error) => (model_code(error.code), error.message.clone()),
            Self::Internal(message) => (FailureCode::InternalError, message.clone()),
            Self::StepLimit(max) => (
                FailureCode::StepLimitExceeded,
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
                (FailureCode::EmptyResponse, message)
            }
        }
    }
}

/// Stable status code for a failed model call.
pub fn model_code(code: ErrorCode) -> FailureCode {
    match code {
        ErrorCode::Auth => FailureCode::ModelAuth,
        ErrorCode::RateLimit => FailureCode::ModelRateLimit,
        ErrorCode::Overloaded => FailureCode::ModelOverloaded,
        ErrorCode::ContextOverflow => FailureCode::ContextOverflow,
        ErrorCode::InvalidRequest => FailureCode::ModelInvalidRequest,
        ErrorCode::Timeout => FailureCode::ModelTimeout,
        ErrorCode::Network => FailureCode::ModelNetwork,
        ErrorCode::Server => FailureCode::ModelServer,
        ErrorCode::Quota => FailureCode::ModelQuota,
        ErrorCode::Cancelled => FailureCode::ModelCancelled,
        ErrorCode::Internal => FailureCode::InternalError,
        ErrorCode::Refusal => FailureCode::ModelRefusal,
        _ => FailureCode::ModelError,
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
                    code: FailureCode::TerminalEmpty,
                    message: "m".into(),
                },
                "terminal_empty",
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
            assert_eq!(failure.classify().0.as_str(), code);
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
