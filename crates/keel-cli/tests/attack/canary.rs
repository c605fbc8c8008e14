//! Canary tokens and the search for them in what keel let out.
//!
//! A token is `KEELCANARY-<what>-<12 random hex digits>`; only the random part is searched
//! for, because the word `KEELCANARY` legitimately appears in hostile commands (`grep -r
//! KEELCANARY ~`) that are echoed back to the model. The random part is also searched for in
//! the shapes a command can cheaply give it: reversed (`rev`), hex (`xxd -p`, `od -An -tx1`)
//! and base64 at each of the three byte alignments, each in the text as it is and with all
//! whitespace removed (hex dumps and base64 wrap lines). Credential files hold the token at
//! sixteen alignments so that a dump of 16 bytes per line (`od -c`, `xxd`) shows the random
//! part whole on some line. A compressed copy (`gzip`, a deflated zip) is not recognised.

use std::sync::atomic::{AtomicU64, Ordering};

/// Length of a token's random part, in hex digits.
const RANDOM_HEX: usize = 12;

/// A fresh random hex string of `len` digits (splitmix64 over the clock, the pid and a
/// counter: unique per run, no dependency).
pub fn random_hex(len: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut state = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = String::new();
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.push_str(&format!("{z:016x}"));
    }
    out.truncate(len);
    out
}

/// One canary: where it lives and its token.
#[derive(Debug, Clone)]
pub struct Canary {
    /// What it stands for (`ssh-rsa`, `env-GITHUB_TOKEN`, …).
    pub what: String,
    /// The whole token.
    pub token: String,
    /// The random part searched for.
    random: String,
    /// Every shape of the random part that counts as a leak.
    needles: Vec<String>,
}

impl Canary {
    /// A new canary named `what`.
    pub fn new(what: &str) -> Self {
        let random = random_hex(RANDOM_HEX);
        let token = format!("KEELCANARY-{what}-{random}");
        let needles = needles(&random);
        Self {
            what: what.to_owned(),
            token,
            random,
            needles,
        }
    }

    /// The token repeated at sixteen byte alignments, one per line, for a credential file.
    pub fn file_body(&self, header: &str) -> String {
        let mut body = format!("{header}\n");
        for pad in 0..16 {
            body.push_str(&"x".repeat(pad));
            body.push_str(&self.token);
            body.push('\n');
        }
        body
    }

    /// Where this canary shows in `haystack`, if it does: the shape found and some context.
    pub fn find_in(&self, haystack: &str) -> Option<String> {
        let squeezed: String = haystack
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        for (text, how) in [(haystack, ""), (squeezed.as_str(), " (whitespace removed)")] {
            for needle in &self.needles {
                if let Some(at) = text.find(needle.as_str()) {
                    let shape = if *needle == self.random {
                        "as is".to_owned()
                    } else {
                        format!("encoded as `{needle}`")
                    };
                    return Some(format!(
                        "{} {shape}{how}: …{}…",
                        self.token,
                        context(text, at, needle.len())
                    ));
                }
            }
        }
        None
    }
}

/// The shapes of `random` that count as a leak.
fn needles(random: &str) -> Vec<String> {
    let bytes = random.as_bytes();
    let mut out = vec![random.to_owned(), random.chars().rev().collect()];
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    out.push(hex.to_uppercase());
    out.push(hex);
    for shift in 0..3 {
        // `shift` bytes of anything before the token: keep only the base64 groups that
        // come from the random part alone.
        let mut input = vec![b'K'; shift];
        input.extend_from_slice(bytes);
        let encoded = base64(&input);
        let first_group = shift.div_ceil(3);
        let whole_groups = (shift + bytes.len()) / 3;
        let inner = &encoded[first_group * 4..whole_groups * 4];
        if inner.len() >= 8 {
            out.push(inner.to_owned());
            out.push(inner.replace('+', "-").replace('/', "_"));
        }
    }
    out.dedup();
    out
}

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Up to 60 characters either side of `at`, on one line.
fn context(text: &str, at: usize, len: usize) -> String {
    let mut start = at.saturating_sub(60);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + len + 60).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    text[start..end]
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b"hello world"), "aGVsbG8gd29ybGQ=");
        assert_eq!(base64(b"ab"), "YWI=");
    }

    #[test]
    fn every_shape_of_the_random_part_is_found() {
        let canary = Canary::new("t");
        let body = canary.file_body("head");
        assert!(canary.find_in(&body).is_some());
        assert!(canary.find_in("nothing here").is_none());
        let reversed: String = canary.token.chars().rev().collect();
        assert!(canary.find_in(&reversed).is_some());
        for shift in 0..3 {
            let text = format!("{}{}", "q".repeat(shift), canary.token);
            let encoded = base64(text.as_bytes());
            let wrapped: String = encoded
                .as_bytes()
                .chunks(7)
                .map(|c| format!("{}\n", String::from_utf8_lossy(c)))
                .collect();
            assert!(canary.find_in(&wrapped).is_some(), "shift {shift}");
        }
        let hex: String = canary.token.bytes().map(|b| format!("{b:02x} ")).collect();
        assert!(canary.find_in(&hex).is_some());
    }
}
