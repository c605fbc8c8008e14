//! Short ids a person can type, and resolving a typed prefix to one id.
//!
//! Ids are a kind prefix (`s-` session, `t-` turn, `i-` input, `c-` claim) plus 10 characters of
//! lowercase Crockford base32 (50 random bits): short enough to read aloud, and with a few thousand
//! sessions a 4–6 character prefix is almost always unique. The random bits come from a v4 UUID so
//! the crate needs no extra RNG.

use crate::error::{Result, StoreError};

/// Random characters after the kind prefix.
pub const ID_RANDOM_CHARS: usize = 10;

/// Shortest prefix accepted when looking an id up (issue 5: "ids users can type").
pub const MIN_PREFIX_CHARS: usize = 4;

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A fresh id: `kind` (for example `s-`) plus 10 random base32 characters.
pub fn new_id(kind: &str) -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut bits = u64::from_le_bytes([
        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[9], bytes[10],
    ]);
    let mut out = String::with_capacity(kind.len() + ID_RANDOM_CHARS);
    out.push_str(kind);
    for _ in 0..ID_RANDOM_CHARS {
        out.push(char::from(ALPHABET[(bits & 31) as usize]));
        bits >>= 5;
    }
    out
}

/// Normalises what a user typed into an id prefix of `kind`: trims, lowercases, and adds the kind
/// prefix when it was left out. Fewer than four typed characters is an error.
pub fn normalize_prefix(kind: &str, typed: &str) -> Result<String> {
    let typed = typed.trim().to_ascii_lowercase();
    if typed.chars().count() < MIN_PREFIX_CHARS {
        return Err(StoreError::PrefixTooShort(typed));
    }
    if typed.starts_with(kind) {
        Ok(typed)
    } else {
        Ok(format!("{kind}{typed}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_kind_and_ten_base32_characters() {
        let id = new_id("s-");
        assert_eq!(id.len(), 12, "{id}");
        assert!(id.starts_with("s-"));
        assert!(id[2..].bytes().all(|b| ALPHABET.contains(&b)), "{id}");
        assert_ne!(new_id("s-"), new_id("s-"));
    }

    #[test]
    fn prefixes_gain_the_kind_and_need_four_characters() {
        assert_eq!(normalize_prefix("s-", " AB12 ").ok(), Some("s-ab12".into()));
        assert_eq!(normalize_prefix("s-", "s-ab").ok(), Some("s-ab".into()));
        assert!(matches!(
            normalize_prefix("s-", "ab1"),
            Err(StoreError::PrefixTooShort(_))
        ));
    }
}
