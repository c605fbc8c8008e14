//! The budget formula of DESIGN §12, table-driven: windows from 8k to 1M, outputs around R.

use keel_context::Budget;
use keel_context::budget::{RESERVE, SAFETY};

/// The formula as the design states it, written out independently of the crate's: R and S
/// scaled below 131,072 tokens (an eighth and a sixty-fourth of the window, at least 512
/// and 128), and there O_eff held to max(R, C/4); from 131,072 up, the design's numbers.
fn expected(c: u64, o: u64) -> (u64, u64, u64, u64) {
    let (r, s) = if c >= 131_072 {
        (RESERVE, SAFETY)
    } else {
        ((c / 8).clamp(512, RESERVE), (c / 64).clamp(128, SAFETY))
    };
    let mut o_eff = if c as i128 - o as i128 - s as i128 >= r as i128 {
        o
    } else {
        o.min(r)
    };
    if c < 131_072 {
        o_eff = o_eff.min(r.max(c / 4));
    }
    let l = [
        (c as f64 * 0.95).floor() as i128,
        c as i128 - r as i128,
        c as i128 - o_eff as i128 - s as i128,
    ]
    .into_iter()
    .min()
    .unwrap()
    .max(1) as u64;
    let t = (c as i128 - (2 * r).min(c / 4) as i128).max(1) as u64;
    (o_eff, l, t.min(l), r)
}

#[test]
fn the_formula_holds_from_8k_to_1m_with_outputs_around_the_reserve() {
    let windows = [
        8_192, 16_384, 32_000, 32_768, 65_536, 100_000, 128_000, 131_072, 200_000, 262_144,
        400_000, 1_000_000, 1_048_576,
    ];
    let outputs = [
        4_096, 8_192, 16_383, 16_384, 16_385, 32_000, 64_000, 128_000,
    ];
    for c in windows {
        for o in outputs {
            let budget = Budget::new(c, o);
            let (o_eff, l, t, r) = expected(c, o);
            assert_eq!(budget.output_effective, o_eff, "O_eff for C={c} O={o}");
            assert_eq!(budget.input_limit, l, "L for C={c} O={o}");
            assert_eq!(budget.compact_at, t, "T for C={c} O={o}");
            assert!(budget.compact_at <= budget.input_limit && budget.input_limit < c);
            // max_tokens never goes below min(O, R) nor above O.
            for input in [0, l / 2, l, c] {
                let max = budget.max_tokens(input);
                assert!(
                    max >= o.min(r) && max <= o,
                    "max_tokens C={c} O={o} in={input}"
                );
            }
        }
    }
}

#[test]
fn rows_checked_by_hand() {
    // (C, O, L, T)
    let rows = [
        (131_072, 16_384, 112_640, 98_304),
        (200_000, 64_000, 133_952, 133_952),
        (1_000_000, 32_000, 950_000, 950_000),
        (65_536, 8_192, 56_320, 49_152),
        // An 8k window works now (it left an input limit of 1 with the fixed reserve).
        (8_192, 4_096, 6_016, 6_016),
        (32_768, 16_384, 24_064, 24_064),
    ];
    for (c, o, l, t) in rows {
        let budget = Budget::new(c, o);
        assert_eq!(
            (budget.input_limit, budget.compact_at),
            (l, t.min(l)),
            "C={c} O={o}"
        );
    }
}
