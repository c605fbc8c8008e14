//! The local measurer (DESIGN §12): estimated tokens and serialised UTF-8 bytes of what a
//! request carries: messages, the system prompt and tool definitions.
//!
//! It is an estimator calibrated against o200k (`bench/tokens`), not a tokenizer: text is
//! cut into the pieces o200k's pre-tokenizer makes (words split where case turns, digit
//! groups, punctuation runs, whitespace runs, each CJK character alone) and each piece is
//! charged at least what o200k charges for common text, more for long pieces. It
//! overestimates by design: a budget that undercounts sends a request the provider rejects.
//! Bytes are the JSON-escaped length, the size the text has on the wire.
//!
//! Measuring one message scans its text once; [`MeasureCache`] remembers each shared message's
//! size, so a step measures only the messages that are new since the last one.

use std::collections::HashMap;
use std::ops::{Add, AddAssign};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use keel_protocol::{ContentBlock, Message, ToolDefinition};
use serde::Serialize;

/// Tokens charged for each message's framing (role, separators).
pub const MESSAGE_TOKENS: u64 = 4;
/// Bytes of JSON framing around each message (`{"role":"…","content":[…]}`).
pub const MESSAGE_BYTES: u64 = 48;
/// Tokens charged for each tool call's framing (id, name, argument wrapper).
pub const CALL_TOKENS: u64 = 12;
/// Tokens charged for an image: providers bill a large image at about 1,600.
pub const IMAGE_TOKENS: u64 = 1_800;

/// Estimated tokens and serialised bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Size {
    /// Estimated tokens (an overestimate).
    pub tokens: u64,
    /// Bytes of the serialised JSON.
    pub bytes: u64,
}

impl Size {
    /// A size of `tokens` and `bytes`.
    pub const fn new(tokens: u64, bytes: u64) -> Self {
        Self { tokens, bytes }
    }

    /// Whether this is within `tokens` and, when given, `bytes`.
    pub fn fits(self, tokens: u64, bytes: Option<u64>) -> bool {
        self.tokens <= tokens && bytes.is_none_or(|b| self.bytes <= b)
    }
}

impl Add for Size {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self {
            tokens: self.tokens.saturating_add(other.tokens),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }
}

impl AddAssign for Size {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Size {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), Add::add)
    }
}

/// What a byte is to the piece scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    None,
    Lower,
    Upper,
    Digit,
    Punct,
    Space,
}

/// Per ASCII byte: its class, the bytes JSON escaping adds to it, whether it is a vowel.
const ASCII: [(Piece, u8, bool); 128] = ascii_table();

const fn ascii_table() -> [(Piece, u8, bool); 128] {
    let mut table = [(Piece::Punct, 0u8, false); 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        let class = match b {
            b'a'..=b'z' => Piece::Lower,
            b'A'..=b'Z' => Piece::Upper,
            b'0'..=b'9' => Piece::Digit,
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => Piece::Space,
            _ => Piece::Punct,
        };
        let escape = match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f | 0x7f => 5,
            _ => 0,
        };
        let vowel = matches!(
            b,
            b'a' | b'e' | b'i' | b'o' | b'u' | b'A' | b'E' | b'I' | b'O' | b'U'
        );
        table[i] = (class, escape, vowel);
        i += 1;
    }
    table
}

/// Tokens of a word piece of `n` letters, `vowels` of them vowels: short words are one
/// token and longer ones a token per three letters past five, as o200k charges rare words;
/// a piece with few vowels is not a word (a hash, base64, an abbreviation) and costs a
/// token per two letters, as o200k charges random letters.
fn word_tokens(n: u64, vowels: u64) -> u64 {
    if n >= 3 && vowels * 4 < n {
        n / 2 + 1
    } else if n <= 5 {
        1
    } else {
        1 + (n - 5).div_ceil(3)
    }
}

/// Tokens of a piece of `kind`, length `n` and `vowels` vowels.
fn piece_tokens(kind: Piece, n: u64, vowels: u64) -> u64 {
    match kind {
        Piece::None => 0,
        Piece::Lower | Piece::Upper => word_tokens(n, vowels),
        Piece::Digit => n.div_ceil(3),
        Piece::Punct => n.div_ceil(2),
        Piece::Space => 1 + n / 8,
    }
}

/// Whether `c` is a CJK character (ideographs, kana, hangul, fullwidth forms), which o200k
/// charges about one token each.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FFF | 0x3000..=0x30FF | 0x3100..=0x31FF | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF | 0xA960..=0xA97F | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F | 0xFF00..=0xFFEF | 0x20000..=0x3FFFF)
}

/// Estimated tokens and JSON bytes of `text`.
pub fn text_size(text: &str) -> Size {
    let bytes = text.as_bytes();
    let mut tokens: u64 = 0;
    let mut escaped: u64 = 0;
    let mut kind = Piece::None;
    let mut run: u64 = 0;
    let mut vowels: u64 = 0;
    // A single space before a word or punctuation is part of that piece, as in o200k.
    let mut lone_space = false;
    // Letters outside ASCII and CJK (accents, Cyrillic, Greek, …), charged per two.
    let mut other_letters: u64 = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            let (next, escape, vowel) = ASCII[usize::from(b)];
            escaped += u64::from(escape);
            // `Upper` then lower letters stay one piece ("Hello"); a case turn from lower
            // to upper starts a new one ("helloWorld").
            let continues = (next == kind && kind != Piece::None)
                || (kind == Piece::Upper && next == Piece::Lower);
            if continues {
                kind = next;
                run += 1;
                vowels += u64::from(vowel);
                i += 1;
                // Most text is lowercase runs: take the rest of this one at once (no
                // escapes, no class changes inside it).
                if next == Piece::Lower {
                    while let Some(&c) = bytes.get(i) {
                        if !c.is_ascii_lowercase() {
                            break;
                        }
                        run += 1;
                        vowels += u64::from(matches!(c, b'a' | b'e' | b'i' | b'o' | b'u'));
                        i += 1;
                    }
                }
                continue;
            }
            if kind == Piece::Space
                && run == 1
                && matches!(next, Piece::Lower | Piece::Upper | Piece::Punct)
            {
                lone_space = true;
            }
            if !lone_space {
                tokens += piece_tokens(kind, run, vowels);
            }
            lone_space = false;
            kind = next;
            run = 1;
            vowels = u64::from(vowel);
            i += 1;
            continue;
        }
        // Outside ASCII: decode one character (the text is valid UTF-8).
        let width = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        let c = text
            .get(i..)
            .and_then(|rest| rest.chars().next())
            .unwrap_or('\u{FFFD}');
        tokens += piece_tokens(kind, run, vowels);
        kind = Piece::None;
        run = 0;
        vowels = 0;
        lone_space = false;
        if is_cjk(c) {
            tokens += 1;
        } else if c.is_alphabetic() {
            other_letters += 1;
        } else {
            // Symbols, emoji, combining marks: bytes of their own.
            tokens += if width >= 4 { 3 } else { 1 };
        }
        i += width.min(bytes.len() - i);
    }
    tokens += piece_tokens(kind, run, vowels);
    tokens += other_letters.div_ceil(2);
    Size {
        tokens,
        bytes: bytes.len() as u64 + escaped + 2,
    }
}

/// Size of one content block.
pub fn block_size(block: &ContentBlock) -> Size {
    match block {
        ContentBlock::Text(text) => text_size(&text.text),
        ContentBlock::Thinking(thinking) => {
            text_size(&thinking.thinking)
                + Size::new(0, thinking.signature.as_ref().map_or(0, |s| s.len() as u64))
        }
        ContentBlock::ToolCall(call) => {
            let arguments = call.arguments.to_string();
            let mut size = text_size(&arguments) + text_size(&call.name);
            size.tokens += CALL_TOKENS;
            size.bytes += call.id.as_str().len() as u64 + 40;
            size
        }
        // Sent base64: four bytes for every three.
        ContentBlock::Image(image) => Size::new(
            IMAGE_TOKENS,
            (image.data.len() as u64).div_ceil(3) * 4 + image.mime_type.len() as u64 + 40,
        ),
        _ => Size::default(),
    }
}

fn blocks_size(blocks: &[ContentBlock]) -> Size {
    blocks.iter().map(block_size).sum()
}

/// Size of one message as a request carries it; host bookkeeping is never sent.
pub fn message_size(message: &Message) -> Size {
    let framing = Size::new(MESSAGE_TOKENS, MESSAGE_BYTES);
    match message {
        Message::User(user) => blocks_size(&user.content) + framing,
        Message::Assistant(assistant) => blocks_size(&assistant.content) + framing,
        Message::ToolResult(result) => {
            blocks_size(&result.content)
                + text_size(&result.tool_name)
                + Size::new(0, result.tool_call_id.as_str().len() as u64)
                + framing
        }
        _ => Size::default(),
    }
}

/// Size of the system prompt.
pub fn system_size(system_prompt: &str) -> Size {
    if system_prompt.is_empty() {
        Size::default()
    } else {
        text_size(system_prompt) + Size::new(MESSAGE_TOKENS, MESSAGE_BYTES)
    }
}

/// Size of the tool definitions: their JSON, as the request carries it.
pub fn tools_size(tools: &[ToolDefinition]) -> Size {
    tools
        .iter()
        .map(|tool| {
            let schema = tool.parameters.to_string();
            text_size(&tool.name)
                + text_size(&tool.description)
                + text_size(&schema)
                + Size::new(8, 48)
        })
        .sum()
}

/// Sizes of shared messages, remembered per message while anything else holds it.
///
/// Keyed by the `Arc`'s address and checked through a weak reference, so an address reused
/// by a new message after the old one was dropped is measured afresh.
#[derive(Default)]
pub struct MeasureCache {
    sizes: Mutex<HashMap<usize, (Weak<Message>, Size)>>,
}

impl std::fmt::Debug for MeasureCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeasureCache")
            .field("messages", &self.len())
            .finish()
    }
}

impl MeasureCache {
    /// The size of `message`, measured once.
    pub fn size(&self, message: &Arc<Message>) -> Size {
        let address = Arc::as_ptr(message) as usize;
        let mut sizes = self.sizes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((weak, size)) = sizes.get(&address)
            && weak.upgrade().is_some_and(|m| Arc::ptr_eq(&m, message))
        {
            return *size;
        }
        let size = message_size(message);
        sizes.insert(address, (Arc::downgrade(message), size));
        size
    }

    /// The summed size of `messages`.
    pub fn total(&self, messages: &[Arc<Message>]) -> Size {
        messages.iter().map(|m| self.size(m)).sum()
    }

    /// Forgets messages nothing holds any more.
    pub fn prune(&self) {
        self.sizes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, (weak, _)| weak.strong_count() > 0);
    }

    /// How many messages are remembered.
    pub fn len(&self) -> usize {
        self.sizes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_and_code_cost_about_what_o200k_charges_or_more() {
        // o200k: "The quick brown fox jumps over the lazy dog." is 10 tokens.
        let prose = text_size("The quick brown fox jumps over the lazy dog.");
        assert!((10..=16).contains(&prose.tokens), "{prose:?}");
        // o200k: about 11 tokens.
        let code = text_size("fn main() { println!(\"hello\"); }");
        assert!((11..=20).contains(&code.tokens), "{code:?}");
    }

    #[test]
    fn cjk_is_never_cheaper_than_a_token_a_character() {
        let text = "上下文预算公式与多代理确认语义";
        let size = text_size(text);
        assert!(size.tokens >= text.chars().count() as u64, "{size:?}");
        assert_eq!(size.bytes, text.len() as u64 + 2);
    }

    #[test]
    fn bytes_count_json_escapes() {
        assert_eq!(text_size("a\"b\n").bytes, 4 + 2 + 2);
        assert_eq!(text_size("\u{1}").bytes, 6 + 2);
    }

    #[test]
    fn random_identifiers_are_charged_more_than_words() {
        let word = text_size("configuration");
        let random = text_size("xK9qZ2vB7mN4pL8rT1wY");
        assert!(random.tokens >= 10, "{random:?}");
        assert!(word.tokens <= 4, "{word:?}");
    }

    #[test]
    fn the_cache_measures_a_message_once_and_forgets_dropped_ones() {
        let cache = MeasureCache::default();
        let message = Arc::new(Message::user_text("hello there"));
        let first = cache.size(&message);
        assert_eq!(cache.size(&message), first);
        assert_eq!(cache.len(), 1);
        drop(message);
        cache.prune();
        assert!(cache.is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any text: no panic, the bytes are at least its JSON string's (exactly, without
        /// DEL, which keel counts escaped), and no CJK character costs less than a token.
        #[test]
        fn bytes_follow_json_and_cjk_is_never_cheap(text in "\\PC*|[\\x00-\\x7f]*|[一-龥ぁ-んa-z \n\"]*") {
            let size = text_size(&text);
            let json = serde_json::to_string(&text).unwrap().len() as u64;
            proptest::prop_assert!(size.bytes >= json);
            if !text.contains('\u{7f}') {
                proptest::prop_assert_eq!(size.bytes, json);
            }
            let cjk = text.chars().filter(|c| is_cjk(*c)).count() as u64;
            proptest::prop_assert!(size.tokens >= cjk);
        }
    }

    #[test]
    fn host_messages_cost_nothing() {
        let host = Message::Host(keel_protocol::HostMessage {
            kind: "marker".into(),
            data: serde_json::json!({"x": "y".repeat(1000)}),
            timestamp: 0,
        });
        assert_eq!(message_size(&host), Size::default());
    }
}
