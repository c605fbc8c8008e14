//! Failures as front ends see them: a stable code, a message, and whether trying again may
//! work. Retryability is decided here and nowhere else.

use serde::{Deserialize, Serialize};

/// Codes of failures that may go away on their own: a later try of the same request can
/// succeed. Everything else needs a change (a key, a smaller context, a different input).
const RETRYABLE_CODES: &[&str] = &[
    "model_rate_limit",
    "model_overloaded",
    "model_timeout",
    "model_network",
    "model_server",
    "timeout",
    "session_busy",
    "database_busy",
];

/// A failure with `{code, message, retryable}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Stable code, for example `model_rate_limit` or `history_commit_failed`.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// Whether the same request may succeed if tried again.
    pub retryable: bool,
}

impl Failure {
    /// A failure whose retryability follows from its code.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        let code = code.into();
        let retryable = is_retryable(&code);
        Self {
            code,
            message: message.into(),
            retryable,
        }
    }
}

/// Whether a failure with this code may succeed on a later try.
pub fn is_retryable(code: &str) -> bool {
    RETRYABLE_CODES.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_codes_are_retryable_and_the_rest_are_not() {
        assert!(Failure::new("model_rate_limit", "slow down").retryable);
        assert!(Failure::new("timeout", "too long").retryable);
        assert!(!Failure::new("model_auth", "bad key").retryable);
        assert!(!Failure::new("structured_output_invalid", "bad").retryable);
        assert!(!Failure::new("empty_response", "nothing").retryable);
    }
}
