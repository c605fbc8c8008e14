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
