//! Failures as front ends see them: a stable code, a message, and whether trying again may
//! work. Retryability is decided here and nowhere else.

use serde::{Deserialize, Serialize};

/// Every way a turn, a run or a session operation can fail, as one stable snake_case code.
/// Front ends match on these; `keel exec`'s `error.code` is always one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// The provider refused the key.
    ModelAuth,
    /// The provider asked to slow down.
    ModelRateLimit,
    /// The provider is overloaded.
    ModelOverloaded,
    /// The provider refused the request as malformed.
    ModelInvalidRequest,
    /// The model call took too long.
    ModelTimeout,
    /// The model could not be reached.
    ModelNetwork,
    /// The provider failed on its side.
    ModelServer,
    /// The account's quota is spent.
    ModelQuota,
    /// The model call was cancelled.
    ModelCancelled,
    /// The model call failed in a way the provider did not name.
    ModelError,
    /// The model declined to answer (a refusal, a content filter).
    ModelRefusal,
    /// The turn's only response had no text and no tool call.
    EmptyResponse,
    /// The request does not fit the model's context window.
    ContextOverflow,
    /// Compacting the history failed.
    CompactionFailed,
    /// The request grew past the window after it was admitted.
    PostAdmissionFailed,
    /// The step limit was reached while the model still wanted to go on.
    StepLimitExceeded,
    /// A before-LLM hook failed, so the call was not made.
    BeforeLlmHookFailed,
    /// The model's answer was empty after the recovery retry.
    TerminalEmpty,
    /// An after-LLM hook refused the answer.
    AfterLlmRejected,
    /// A `turn_start` handler refused the turn.
    TurnStartFailed,
    /// The process running the turn stopped before it ended.
    Interrupted,
    /// The final answer did not match the output schema.
    StructuredOutputInvalid,
    /// History the turn produced could not be stored.
    HistoryCommitFailed,
    /// A task's result read could not be confirmed.
    TaskConsumptionFailed,
    /// The run's time limit was reached.
    Timeout,
    /// The run was cancelled (a signal, a closed output).
    Cancelled,
    /// The goal used up a limit.
    GoalBudgetLimited,
    /// A breaker (or the user) paused the goal.
    GoalPaused,
    /// The model reported the goal blocked.
    GoalBlocked,
    /// The goal is active but its next turn did not start.
    GoalStalled,
    /// Another process runs a turn of the session.
    SessionBusy,
    /// No API key is set for the model's provider.
    MissingApiKey,
    /// The configuration is invalid.
    ConfigInvalid,
    /// The session store failed.
    StoreFailed,
    /// An extension failed.
    ExtensionFailed,
    /// The input queue could not be read or written.
    QueueFailed,
    /// A turn was asked to continue a history that has nothing left to answer.
    NothingToContinue,
    /// A command the user ran with `!` failed (exited non-zero, was killed or refused).
    CommandFailed,
    /// keel failed inside (a bug).
    InternalError,
}

impl FailureCode {
    /// Every code, in the order the README's table lists them.
    pub const ALL: [Self; 39] = [
        Self::ModelAuth,
        Self::ModelRateLimit,
        Self::ModelOverloaded,
        Self::ModelInvalidRequest,
        Self::ModelTimeout,
        Self::ModelNetwork,
        Self::ModelServer,
        Self::ModelQuota,
        Self::ModelCancelled,
        Self::ModelError,
        Self::ModelRefusal,
        Self::EmptyResponse,
        Self::ContextOverflow,
        Self::CompactionFailed,
        Self::PostAdmissionFailed,
        Self::StepLimitExceeded,
        Self::BeforeLlmHookFailed,
        Self::TerminalEmpty,
        Self::AfterLlmRejected,
        Self::TurnStartFailed,
        Self::Interrupted,
        Self::StructuredOutputInvalid,
        Self::HistoryCommitFailed,
        Self::TaskConsumptionFailed,
        Self::Timeout,
        Self::Cancelled,
        Self::GoalBudgetLimited,
        Self::GoalPaused,
        Self::GoalBlocked,
        Self::GoalStalled,
        Self::SessionBusy,
        Self::MissingApiKey,
        Self::ConfigInvalid,
        Self::StoreFailed,
        Self::ExtensionFailed,
        Self::QueueFailed,
        Self::NothingToContinue,
        Self::CommandFailed,
        Self::InternalError,
    ];

    /// The code as written in JSON and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelAuth => "model_auth",
            Self::ModelRateLimit => "model_rate_limit",
            Self::ModelOverloaded => "model_overloaded",
            Self::ModelInvalidRequest => "model_invalid_request",
            Self::ModelTimeout => "model_timeout",
            Self::ModelNetwork => "model_network",
            Self::ModelServer => "model_server",
            Self::ModelQuota => "model_quota",
            Self::ModelCancelled => "model_cancelled",
            Self::ModelError => "model_error",
            Self::ModelRefusal => "model_refusal",
            Self::EmptyResponse => "empty_response",
            Self::ContextOverflow => "context_overflow",
            Self::CompactionFailed => "compaction_failed",
            Self::PostAdmissionFailed => "post_admission_failed",
            Self::StepLimitExceeded => "step_limit_exceeded",
            Self::BeforeLlmHookFailed => "before_llm_hook_failed",
            Self::TerminalEmpty => "terminal_empty",
            Self::AfterLlmRejected => "after_llm_rejected",
            Self::TurnStartFailed => "turn_start_failed",
            Self::Interrupted => "interrupted",
            Self::StructuredOutputInvalid => "structured_output_invalid",
            Self::HistoryCommitFailed => "history_commit_failed",
            Self::TaskConsumptionFailed => "task_consumption_failed",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::GoalBudgetLimited => "goal_budget_limited",
            Self::GoalPaused => "goal_paused",
            Self::GoalBlocked => "goal_blocked",
            Self::GoalStalled => "goal_stalled",
            Self::SessionBusy => "session_busy",
            Self::MissingApiKey => "missing_api_key",
            Self::ConfigInvalid => "config_invalid",
            Self::StoreFailed => "store_failed",
            Self::ExtensionFailed => "extension_failed",
            Self::QueueFailed => "queue_failed",
            Self::NothingToContinue => "nothing_to_continue",
            Self::CommandFailed => "command_failed",
            Self::InternalError => "internal_error",
        }
    }

    /// The code `text` names. Codes older keel versions stored (`after_llm_rejected:CODE`,
    /// the uppercase `POST_ADMISSION_FAILED`) read as what they meant.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.rsplit(':').next().unwrap_or(text).to_ascii_lowercase();
        Self::ALL.into_iter().find(|code| code.as_str() == text)
    }

    /// Whether a later try of the same request may succeed (the failure may go away on its
    /// own); everything else needs a change (a key, a smaller context, a different input).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::ModelRateLimit
                | Self::ModelOverloaded
                | Self::ModelTimeout
                | Self::ModelNetwork
                | Self::ModelServer
                | Self::Timeout
                | Self::SessionBusy
        )
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure with `{code, message, retryable}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Stable code.
    pub code: FailureCode,
    /// What went wrong, for a person.
    pub message: String,
    /// Whether the same request may succeed if tried again.
    pub retryable: bool,
}

impl Failure {
    /// A failure whose retryability follows from its code.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: code.is_retryable(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_codes_are_retryable_and_the_rest_are_not() {
        assert!(Failure::new(FailureCode::ModelRateLimit, "slow down").retryable);
        assert!(Failure::new(FailureCode::Timeout, "too long").retryable);
        assert!(!Failure::new(FailureCode::ModelAuth, "bad key").retryable);
        assert!(!Failure::new(FailureCode::StructuredOutputInvalid, "bad").retryable);
        assert!(!Failure::new(FailureCode::EmptyResponse, "nothing").retryable);
    }

    #[test]
    fn every_code_reads_back_and_serde_spells_it_the_same() {
        for code in FailureCode::ALL {
            assert_eq!(FailureCode::parse(code.as_str()), Some(code));
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
        assert_eq!(
            FailureCode::parse("after_llm_rejected:terminal_empty"),
            Some(FailureCode::TerminalEmpty)
        );
        assert_eq!(
            FailureCode::parse("POST_ADMISSION_FAILED"),
            Some(FailureCode::PostAdmissionFailed)
        );
        assert_eq!(FailureCode::parse("no_such_code"), None);
    }
}
