//! Classifying provider failures into stable error codes.
//!
//! One place decides what an HTTP status or an in-stream error means, so every API and the
//! retry policy agree: `auth`, `rate_limit`, `overloaded`, `context_overflow`,
//! `invalid_request`, `timeout`, `network`, `server`, `quota`, `cancelled`.

use keel_protocol::ErrorCode;

/// Phrases providers use for a request that does not fit the context window:
/// OpenAI (`context_length_exceeded`, "maximum context length"), Anthropic ("prompt is too
/// long"), Gemini ("input token count … exceeds the maximum number of tokens"), llama.cpp
/// ("exceeds the available context size", `exceed_context_size_error`), vLLM ("maximum
/// context length … reduce the length"), Ollama ("prompt too long; exceeded max context
/// length"), Mistral ("too large for model with … maximum context length"), Bedrock
/// ("input is too long"), Anthropic again ("input length and `max_tokens` exceed context
/// limit"). A rate limit's "request too large … tokens per min" is not one of them.
const OVERFLOW_PHRASES: &[&str] = &[
    "context length",
    "context_length",
    "context window",
    "context size",
    "context_size",
    "maximum context",
    "max context",
    "too many tokens",
    "prompt is too long",
    "prompt too long",
    "input is too long",
    "input token count",
    "exceeds the maximum",
    "token limit",
    "reduce the length",
    "too large for model",
    "context limit",
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
        | ErrorCode::Refusal
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
            (
                Some(400),
                "invalid_request_error context_length_exceeded",
                "Your input exceeds the context window of this model.",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(400),
                "invalid_request_error context_length_exceeded",
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 130000 tokens.",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(400),
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed \
                 (1048576).",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(400),
                "exceed_context_size_error",
                "the request exceeds the available context size, try increasing it",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(400),
                "BadRequestError",
                "This model's maximum context length is 4096 tokens. However, you requested \
                 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the \
                 length of the messages or completion.",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(500),
                "",
                "prompt too long; exceeded max context length by 120 tokens",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(400),
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: 190000 + 16384 > 200000",
                ErrorCode::ContextOverflow,
            ),
            (
                Some(429),
                "tokens rate_limit_exceeded",
                "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000",
                ErrorCode::RateLimit,
            ),
            (
                Some(400),
                "invalid_request_message_order",
                "Prompt contains 40000 tokens and 0 draft tokens, too large for model with \
                 32768 maximum context length",
                ErrorCode::ContextOverflow,
            ),
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
