//! Admission of in-turn reminders (DESIGN §4, §12): a reminder that would push the request
//! past the input limit is dropped rather than sent.
//!
//! The request's size is judged the way §12 describes, with `keel-context`'s measurer: the
//! last assistant response's usage (which counts the system prompt, tools and history as
//! the provider saw them) plus an estimate of what came after it; without any usage report,
//! an estimate of the messages. The estimate overestimates by design, so a reminder is
//! never admitted by undercounting.

use std::sync::Arc;

use keel_context::measure::{message_size, text_size};
use keel_protocol::Message;

/// The input limit L of §12 for a context window `c` and output limit `o`.
pub fn input_limit(c: u64, o: u64) -> u64 {
    keel_context::Budget::new(c, o).input_limit
}

/// Estimated tokens of `text`.
pub fn tokens_of(text: &str) -> u64 {
    text_size(text).tokens
}

/// Estimated tokens of the request `messages` make: the newest usage report, plus what
/// came after it; else every message.
pub fn request_tokens(messages: &[Arc<Message>]) -> u64 {
    let anchored = messages.iter().enumerate().rev().find_map(|(i, message)| {
        let usage = message.as_assistant()?.usage;
        let seen = usage.input + usage.cache_read + usage.cache_write + usage.output;
        (seen > 0).then_some((i, seen))
    });
    match anchored {
        Some((at, seen)) => {
            seen + messages[at + 1..]
                .iter()
                .map(|m| message_size(m).tokens)
                .sum::<u64>()
        }
        None => messages.iter().map(|m| message_size(m).tokens).sum(),
    }
}

/// Whether adding `reminder` to a request of `messages` keeps it within the input limit
/// of a model with window `c` and output limit `o`; `Err` holds the estimate and limit.
pub fn admit(messages: &[Arc<Message>], reminder: &str, c: u64, o: u64) -> Result<(), (u64, u64)> {
    let limit = input_limit(c, o);
    let estimate = request_tokens(messages) + tokens_of(reminder) + 4;
    if estimate > limit {
        Err((estimate, limit))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, Usage};

    #[test]
    fn the_input_limit_follows_the_design_formula() {
        assert_eq!(input_limit(131_072, 16_384), 112_640);
        // A small window keeps a reserve for output scaled to it (an eighth: 4,000).
        assert_eq!(input_limit(32_000, 30_000), 27_500);
        assert_eq!(input_limit(10, 5), 1);
    }

    #[test]
    fn the_estimate_starts_from_the_newest_usage_report() {
        let mut answer = AssistantMessage::from_text("ok");
        answer.usage = Usage {
            input: 1_000,
            cache_read: 500,
            output: 20,
            ..Usage::default()
        };
        let history = vec![
            Arc::new(Message::user_text("x".repeat(300_000))),
            Arc::new(Message::Assistant(answer)),
            Arc::new(Message::user_text("y".repeat(30))),
        ];
        assert_eq!(
            request_tokens(&history),
            1_520 + message_size(&history[2]).tokens
        );
        assert!(admit(&history, "short", 131_072, 16_384).is_ok());
        // Without usage every message counts.
        let unanchored = vec![Arc::new(Message::user_text("z".repeat(340_000)))];
        let (estimate, limit) = admit(&unanchored, "short", 131_072, 16_384).unwrap_err();
        assert!(estimate > limit && limit == 112_640, "{estimate}");
    }
}
