//! What a response cost.

use keel_protocol::{Cost, Usage};

use crate::model::Prices;

/// Cost of `usage` at `prices` (US dollars per million tokens). Reasoning tokens are part
/// of output and priced once, as output.
pub fn cost(usage: &Usage, prices: &Prices) -> Cost {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    let input = per(usage.input, prices.input);
    let output = per(usage.output, prices.output);
    let cache_read = per(usage.cache_read, prices.cache_read);
    let cache_write = per(usage.cache_write, prices.cache_write);
    Cost {
        input,
        output,
        cache_read,
        cache_write,
        total: input + output + cache_read + cache_write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_follows_prices_and_counts_reasoning_once() {
        let prices = Prices {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        let usage = Usage {
            input: 1_000_000,
            output: 200_000,
            reasoning: 150_000,
            cache_read: 2_000_000,
            cache_write: 100_000,
            ..Usage::default()
        };
        let cost = cost(&usage, &prices);
        assert!((cost.input - 3.0).abs() < 1e-9);
        assert!((cost.output - 3.0).abs() < 1e-9);
        assert!((cost.cache_read - 0.6).abs() < 1e-9);
        assert!((cost.cache_write - 0.375).abs() < 1e-9);
        assert!((cost.total - 6.975).abs() < 1e-9);
    }
}
