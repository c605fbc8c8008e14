//! Token usage and cost of one model response.

use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

/// Tokens used by one response. `reasoning` is the part of `output` spent on thinking: it is
/// reported for information and is never added to `output` a second time.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens not served from cache.
    pub input: u64,
    /// Generated tokens, reasoning included.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
    /// Of `output`, the tokens spent on reasoning.
    pub reasoning: u64,
    /// What the tokens cost, in US dollars.
    pub cost: Cost,
}

impl Usage {
    /// All tokens that crossed the wire (input, cached and output).
    pub fn total_tokens(&self) -> u64 {
        self.input + self.cache_read + self.cache_write + self.output
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.reasoning += other.reasoning;
        self.cost += other.cost;
    }
}

/// Cost in US dollars, split like [`Usage`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Cost {
    /// Uncached input.
    pub input: f64,
    /// Output, reasoning included.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// Sum of the above.
    pub total: f64,
}

impl AddAssign for Cost {
    fn add_assign(&mut self, other: Self) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total += other.total;
    }
}

/// A token count: `50000`, `50K`, `1.5M` (K = 1,000, M = 1,000,000).
pub fn parse_token_count(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last()? {
        (at, 'k' | 'K') => (&text[..at], 1_000.0),
        (at, 'm' | 'M') => (&text[..at], 1_000_000.0),
        _ => (text, 1.0),
    };
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let tokens = (value * scale).round();
    (tokens >= 1.0 && tokens < u64::MAX as f64).then_some(tokens as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_is_not_counted_twice() {
        let mut total = Usage::default();
        total += Usage {
            input: 10,
            output: 5,
            reasoning: 3,
            ..Usage::default()
        };
        total += Usage {
            input: 1,
            output: 2,
            reasoning: 1,
            ..Usage::default()
        };
        assert_eq!(total.total_tokens(), 18);
        assert_eq!(total.reasoning, 4);
    }
}
