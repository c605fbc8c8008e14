//! Classifying provider failures into stable error codes.
//!
//! One place decides what an HTTP status or an in-stream error means, so every API and the
//! retry policy agree: `auth`, `rate_limit`, `overloaded`, `context_overflow`,
//! `invalid_request`, `timeout`, `network`, `server`, `quota`, `cancelled`.

use keel_protocol::ErrorCode;

/// Phrases providers use for a request that does not fit the context window.
const OVERFLOW_PHRASES: &[&str] = &[
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "exceeds the maximum",
    "token limit",
    "reduce the length",
];

/// Phrases providers use for an exhausted balance or quota.
const QUOTA_PHRASES: &[&str] = &[
    "insufficient_quota",
    "quota",
    "insufficient balance",
    "billing",
    "credit balance",
    "payment required",
];

/// Classifies a failure from its HTTP status (if any), the provider's error type or code,
/// and its message.
pub fn classify(status: Option<u16>, kind: &str, message: &str) -> ErrorCode {
    let text = format!("{kind} {message}").to_ascii_lowercase();
    let has = |phrases: &[&str]| phrases.iter().any(|p| text.contains(p));
    if has(OVERFLOW_PHRASES) {
        return ErrorCode::ContextOverflow;
    }
    if has(QUOTA_PHRASES) && !text.contains("rate") {
        return ErrorCode::Quota;
    }
    match status {
        Some(401 | 403) => ErrorCode::Auth,
        Some(402) => ErrorCode::Quota,
        Some(413) => ErrorCode::ContextOverflow,
        Some(400 | 404 | 405 | 409 | 415 | 422) => ErrorCode::InvalidRequest,
        Some(408 | 504) => ErrorCode::Timeout,
        Some(429) => ErrorCode::RateLimit,
        Some(503 | 529) => ErrorCode::Overloaded,
        Some(500..=599) => ErrorCode::Server,
        _ => classify_kind(&text),
    }
}

/// Classification from the provider's words alone (errors inside a stream).
fn classify_kind(text: &str) -> ErrorCode {
    if text.contains("overloaded") || text.contains("unavailable") || text.contains("capacity") {
        ErrorCode::Overloaded
    } else if text.contains("rate") && text.contains("limit") || text.contains("resource_exhausted")
    {
        ErrorCode::RateLimit
    } else if text.contains("auth") || text.contains("api key") || text.contains("permission") {
        ErrorCode::Auth
    } else if text.contains("invalid") || text.contains("bad request") {
        ErrorCode::InvalidRequest
    } else if text.contains("timeout") || text.contains("timed out") {
        ErrorCode::Timeout
    } else {
        ErrorCode::Server
    }
}

/// Whether a failure with this code may be retried (before any visible output).
pub fn is_retryable(code: ErrorCode) -> bool {
    match code {
        ErrorCode::RateLimit
        | ErrorCode::Overloaded
        | ErrorCode::Timeout
        | ErrorCode::Network
        | ErrorCode::Server => true,
        ErrorCode::Auth
        | ErrorCode::ContextOverflow
        | ErrorCode::InvalidRequest
        | ErrorCode::Quota
        | ErrorCode::Cancelled
        | ErrorCode::Internal
        | ErrorCode::Other => false,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_phrases_map_to_codes() {
        let cases = [
            (Some(401), "", "", ErrorCode::Auth),
            (Some(403), "", "", ErrorCode::Auth),
            (
                Some(400),
                "invalid_request_error",
                "bad field",
                ErrorCode::InvalidRequest,
            ),
            (
                Some(400),
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
                ErrorCode::ContextOverflow,
            ),
            (Some(413), "", "", ErrorCode::ContextOverflow),
            (Some(404), "", "model not found", ErrorCode::InvalidRequest),
            (
                Some(429),
                "rate_limit_error",
                "slow down",
                ErrorCode::RateLimit,
            ),
            (
                Some(429),
                "insufficient_quota",
                "You exceeded your current quota",
                ErrorCode::Quota,
            ),
            (
                Some(529),
                "overloaded_error",
                "Overloaded",
                ErrorCode::Overloaded,
            ),
            (Some(503), "", "", ErrorCode::Overloaded),
            (Some(500), "", "", ErrorCode::Server),
            (
                None,
                "overloaded_error",
                "Overloaded",
                ErrorCode::Overloaded,
            ),
            (None, "", "Rate limit reached", ErrorCode::RateLimit),
        ];
        for (status, kind, message, code) in cases {
            assert_eq!(
                classify(status, kind, message),
                code,
                "{status:?} {kind} {message}"
            );
        }
    }

    #[test]
    fn only_transient_failures_retry() {
        assert!(is_retryable(ErrorCode::RateLimit));
        assert!(!is_retryable(ErrorCode::ContextOverflow));
        assert!(!is_retryable(ErrorCode::Quota));
        assert!(!is_retryable(ErrorCode::Auth));
    }
}
