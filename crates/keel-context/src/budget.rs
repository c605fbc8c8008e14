//! The budget of DESIGN §12: how much input a request may carry, when compaction starts,
//! the byte limit of the provider's API, and the output a request may ask for.
//!
//! With C the context window, O the output limit, R the reserve and S the safety margin:
//! O_eff = O if C − O − S ≥ R, else min(O, R);
//! L = max(1, min(⌊0.95·C⌋, C − R, C − O_eff − S));
//! T = min(L, max(1, C − min(2·R, ⌊C/4⌋))).

use serde::Serialize;

/// Reserve R (tokens).
pub const RESERVE: u64 = 16_384;
/// Safety margin S (tokens).
pub const SAFETY: u64 = 2_048;

/// Largest request body each wire API accepts, where the provider documents one.
pub fn api_byte_limit(api: &str) -> Option<u64> {
    match api {
        // Anthropic: 32 MB per Messages request.
        "anthropic-messages" => Some(32_000_000),
        // Gemini: 20 MB of inline request data.
        "google-generative-ai" => Some(20_000_000),
        _ => None,
    }
}

/// A model's context budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// Context window C.
    pub window: u64,
    /// Output limit O.
    pub output: u64,
    /// Reserve R.
    pub reserve: u64,
    /// Safety margin S.
    pub safety: u64,
    /// The output kept free, O_eff.
    pub output_effective: u64,
    /// Input limit L.
    pub input_limit: u64,
    /// Compaction start T.
    pub compact_at: u64,
    /// Largest serialised request, when the API has one.
    pub byte_limit: Option<u64>,
}

impl Budget {
    /// The budget for window `c` and output limit `o` with reserve `r` and safety `s`.
    pub fn with(c: u64, o: u64, r: u64, s: u64) -> Self {
        let output_effective = if c.saturating_sub(o).saturating_sub(s) >= r {
            o
        } else {
            o.min(r)
        };
        let input_limit = (c / 100 * 95 + c % 100 * 95 / 100)
            .min(c.saturating_sub(r))
            .min(c.saturating_sub(output_effective).saturating_sub(s))
            .max(1);
        let compact_at = input_limit.min(c.saturating_sub(r.saturating_mul(2).min(c / 4)).max(1));
        Self {
            window: c,
            output: o,
            reserve: r,
            safety: s,
            output_effective,
            input_limit,
            compact_at,
            byte_limit: None,
        }
    }

    /// The budget for window `c` and output limit `o` with the default R and S.
    pub fn new(c: u64, o: u64) -> Self {
        Self::with(c, o, RESERVE, SAFETY)
    }

    /// The same budget with a byte limit.
    pub fn bytes(mut self, limit: Option<u64>) -> Self {
        self.byte_limit = limit;
        self
    }

    /// The `max_tokens` for a request of `input` estimated tokens: what the window leaves
    /// after the input and the safety margin, never more than O and never below min(O, R).
    pub fn max_tokens(&self, input: u64) -> u64 {
        let left = self
            .window
            .saturating_sub(input)
            .saturating_sub(self.safety);
        let floor = self.output.min(self.reserve);
        left.min(self.output).max(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_designs_example() {
        let budget = Budget::new(131_072, 16_384);
        assert_eq!(budget.input_limit, 112_640);
        assert_eq!(budget.compact_at, 98_304);
        assert_eq!(budget.output_effective, 16_384);
    }

    #[test]
    fn max_tokens_shrinks_to_the_window_with_a_floor() {
        let budget = Budget::new(131_072, 16_384);
        assert_eq!(budget.max_tokens(1_000), 16_384);
        // 131,072 − 120,000 − 2,048 = 9,024 left, below the floor min(O, R) = 16,384.
        assert_eq!(budget.max_tokens(120_000), 16_384);
        let small = Budget::new(131_072, 32_000);
        assert_eq!(small.max_tokens(100_000), 131_072 - 100_000 - 2_048);
        assert_eq!(small.max_tokens(125_000), 16_384);
    }
}
