//! The budget of DESIGN §12: how much input a request may carry, when compaction starts,
//! the byte limit of the provider's API, and the output a request may ask for.
//!
//! With C the context window, O the output limit, R the reserve and S the safety margin:
//! O_eff = O if C − O − S ≥ R, else min(O, R);
//! L = max(1, min(⌊0.95·C⌋, C − R, C − O_eff − S));
//! T = min(L, max(1, C − min(2·R, ⌊C/4⌋))).
//!
//! R and S scale with the window unless set: R = min(16,384, max(512, ⌊C/8⌋)) and
//! S = min(2,048, max(128, ⌊C/64⌋)), so from C = 131,072 up they are the design's 16,384
//! and 2,048 and every number is as it was. Below 131,072 tokens O_eff is also held to
//! max(R, ⌊C/4⌋): a small window's answer may not take the room its input needs.

use serde::Serialize;

/// Reserve R (tokens).
pub const RESERVE: u64 = 16_384;
/// Safety margin S (tokens).
pub const SAFETY: u64 = 2_048;
/// From this window up, R, S and O_eff are the design's, unscaled.
pub const LARGE_WINDOW: u64 = 131_072;

/// R for window `c`: an eighth of it, between 512 and [`RESERVE`].
pub fn reserve_for(c: u64) -> u64 {
    (c / 8).clamp(512, RESERVE)
}

/// S for window `c`: a sixty-fourth of it, between 128 and [`SAFETY`].
pub fn safety_for(c: u64) -> u64 {
    (c / 64).clamp(128, SAFETY)
}

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
        let mut output_effective = if c.saturating_sub(o).saturating_sub(s) >= r {
            o
        } else {
            o.min(r)
        };
        if c < LARGE_WINDOW {
            output_effective = output_effective.min(r.max(c / 4));
        }
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

    /// The budget for window `c` and output limit `o` with R and S scaled to the window.
    pub fn new(c: u64, o: u64) -> Self {
        Self::with(c, o, reserve_for(c), safety_for(c))
    }

    /// The budget with R and S as configured, each scaled to the window when not set.
    pub fn configured(c: u64, o: u64, reserve: Option<u64>, safety: Option<u64>) -> Self {
        Self::with(
            c,
            o,
            reserve.unwrap_or_else(|| reserve_for(c)),
            safety.unwrap_or_else(|| safety_for(c)),
        )
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

    /// The table of DESIGN §12, with O = min(16,384, C/2) as keel assumes for a model it
    /// does not know the limits of, and the large windows' usual outputs.
    #[test]
    fn every_window_of_the_table() {
        let table = [
            // (C, O, R, S, O_eff, L, T)
            (8_192, 4_096, 1_024, 128, 2_048, 6_016, 6_016),
            (16_384, 8_192, 2_048, 256, 4_096, 12_032, 12_032),
            (32_768, 16_384, 4_096, 512, 8_192, 24_064, 24_064),
            (65_536, 16_384, 8_192, 1_024, 16_384, 48_128, 48_128),
            (131_072, 16_384, 16_384, 2_048, 16_384, 112_640, 98_304),
            (200_000, 64_000, 16_384, 2_048, 64_000, 133_952, 133_952),
            (1_000_000, 65_536, 16_384, 2_048, 65_536, 932_416, 932_416),
        ];
        for (c, o, r, s, o_eff, l, t) in table {
            let budget = Budget::new(c, o);
            assert_eq!(
                (budget.reserve, budget.safety, budget.output_effective),
                (r, s, o_eff),
                "{c}"
            );
            assert_eq!((budget.input_limit, budget.compact_at), (l, t), "{c}");
        }
    }

    #[test]
    fn large_windows_keep_the_designs_numbers() {
        for c in [131_072, 200_000, 400_000, 1_000_000, 2_000_000] {
            for o in [4_096, 16_384, 32_000, 64_000, 128_000] {
                assert_eq!(
                    Budget::new(c, o),
                    Budget::with(c, o, RESERVE, SAFETY),
                    "{c} {o}"
                );
            }
        }
    }

    proptest::proptest! {
        /// For any window and any output limit up to half of it (no model offers more): T ≤
        /// L, and L leaves room beyond a quarter of the window (the most the lean fixed part
        /// may take) for at least one step.
        #[test]
        fn the_limit_leaves_room_and_compaction_starts_within_it(
            c in 4_096u64..4_000_000,
            share in 1u64..=1_000,
        ) {
            let o = (c / 2 * share / 1_000).max(256);
            let budget = Budget::new(c, o);
            proptest::prop_assert!(budget.compact_at <= budget.input_limit);
            proptest::prop_assert!(budget.input_limit >= c / 4 + c / 8, "{budget:?}");
            proptest::prop_assert!(budget.input_limit + budget.output_effective + budget.safety <= c);
        }
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
