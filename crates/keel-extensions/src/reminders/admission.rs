//! Admission of in-turn reminders (DESIGN §4, §12): a reminder that would push the request
//! past the input limit is dropped rather than sent.
//!
//! The request's size is judged the way §12 describes: the last assistant response's usage
//! (which counts the system prompt, tools and history as the provider saw them) plus an
//! estimate of what came after it; without any usage report, an estimate of the messages.
//! The estimate counts one token per three bytes, which overestimates English prose and
//! code (about four bytes a token) and matches CJK text (three bytes a character), so a
//! reminder is never admitted by undercounting.

use std::sync::Arc;

use keel_protocol::{ContentBlock, Message};

/// Reserve R of §12.
const RESERVE: u64 = 16_384;
/// Safety margin S of §12.
const SAFETY: u64 = 2_048;
/// Bytes per estimated token.
const BYTES_PER_TOKEN: u64 = 3;

/// The input limit L of §12 for a context window `c` and output limit `o`.
pub fn input_limit(c: u64, o: u64) -> u64 {
    let o_eff = if c.saturating_sub(o).saturating_sub(SAFETY) >= RESERVE {
        o
    } else {
        o.min(RESERVE)
    };
    let limit = (c * 95 / 100)
        .min(c.saturating_sub(RESERVE))
        .min(c.saturating_sub(o_eff).saturating_sub(SAFETY));
    limit.max(1)
}

/// Estimated tokens of `bytes` bytes of text.
pub fn tokens_of(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Estimated size of one message, in tokens.
fn message_tokens(message: &Message) -> u64 {
    let bytes: usize = match message {
        Message::User(user) => blocks_bytes(&user.content),
        Message::Assistant(assistant) => blocks_bytes(&assistant.content),
        Message::ToolResult(result) => blocks_bytes(&result.content) + result.tool_name.len(),
        _ => 0,
    };
    // A few tokens of framing per message.
    tokens_of(bytes) + 4
}

fn blocks_bytes(blocks: &[ContentBlock]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.len(),
            ContentBlock::Thinking(thinking) => thinking.thinking.len(),
            ContentBlock::ToolCall(call) => call.name.len() + call.arguments.to_string().len(),
            // Providers count an image as roughly a thousand tokens.
            ContentBlock::Image(_) => 3_000,
            _ => 0,
        })
        .sum()
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
                .map(|m| message_tokens(m))
                .sum::<u64>()
        }
        None => messages.iter().map(|m| message_tokens(m)).sum(),
    }
}

/// Whether adding `reminder` to a request of `messages` keeps it within the input limit
/// of a model with window `c` and output limit `o`; `Err` holds the estimate and limit.
pub fn admit(messages: &[Arc<Message>], reminder: &str, c: u64, o: u64) -> Result<(), (u64, u64)> {
    let limit = input_limit(c, o);
    let estimate = request_tokens(messages) + tokens_of(reminder.len()) + 4;
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
        // A small window keeps the reserve for output.
        assert_eq!(input_limit(32_000, 30_000), 13_568);
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
        assert_eq!(request_tokens(&history), 1_520 + 10 + 4);
        assert!(admit(&history, "short", 131_072, 16_384).is_ok());
        // Without usage every message counts.
        let unanchored = vec![Arc::new(Message::user_text("z".repeat(340_000)))];
        let (estimate, limit) = admit(&unanchored, "short", 131_072, 16_384).unwrap_err();
        assert!(estimate > limit && limit == 112_640, "{estimate}");
    }
}
