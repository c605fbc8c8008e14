//! Errors carried inside messages and events.

use serde::{Deserialize, Serialize};

/// Stable error codes for failed model calls; front ends and retry policy match on these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The API key was missing, wrong or expired.
    Auth,
    /// The provider rate-limited the request.
    RateLimit,
    /// The provider is overloaded.
    Overloaded,
    /// The request does not fit the model's context window.
    ContextOverflow,
    /// The provider rejected the request as malformed.
    InvalidRequest,
    /// A timeout expired.
    Timeout,
    /// The connection failed or was cut.
    Network,
    /// The provider failed internally.
    Server,
    /// The account's quota or balance is exhausted.
    Quota,
    /// The caller cancelled the request.
    Cancelled,
    /// keel itself failed (a crashed run), not the provider.
    Internal,
    /// The model declined on policy grounds (a refusal, a content filter): sending the same
    /// request again would most likely be refused again.
    Refusal,
    /// Anything not classified above.
    Other,
}

impl ErrorCode {
    /// The code as its stable string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::RateLimit => "rate_limit",
            Self::Overloaded => "overloaded",
            Self::ContextOverflow => "context_overflow",
            Self::InvalidRequest => "invalid_request",
            Self::Timeout => "timeout",
            Self::Network => "network",
            Self::Server => "server",
            Self::Quota => "quota",
            Self::Cancelled => "cancelled",
            Self::Internal => "internal",
            Self::Refusal => "refusal",
            Self::Other => "other",
        }
    }
}

/// A failure with a stable code and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Stable classification.
    pub code: ErrorCode,
    /// Human-readable explanation.
    pub message: String,
    /// How long the provider asked us to wait before trying again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ErrorInfo {
    /// Builds an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// The same error with the provider's requested wait.
    pub fn with_retry_after(mut self, ms: Option<u64>) -> Self {
        self.retry_after_ms = ms;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_stable_strings() {
        for code in [
            ErrorCode::Auth,
            ErrorCode::RateLimit,
            ErrorCode::Overloaded,
            ErrorCode::ContextOverflow,
            ErrorCode::InvalidRequest,
            ErrorCode::Timeout,
            ErrorCode::Network,
            ErrorCode::Server,
            ErrorCode::Quota,
            ErrorCode::Cancelled,
            ErrorCode::Internal,
            ErrorCode::Other,
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
