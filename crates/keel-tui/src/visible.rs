//! Text a model or a file controls, made safe to draw: control characters, terminal escapes
//! and bidirectional overrides are shown as what they are, never acted on by the terminal.

/// `text` with each control character (but newline and tab) shown as its Unicode picture or
/// code, and each bidirectional formatting character as its code, so a preview cannot move
/// the cursor, recolour the screen or make text read in another order than it runs.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_showing) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            // C0 controls have pictures at U+2400 onwards (ESC shows as ␛).
            '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('?')),
            '\u{7f}' => out.push('␡'),
            c if needs_showing(c) => out.push_str(&format!("⟨U+{:04X}⟩", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` without terminal escape sequences (CSI such as colours, OSC such as titles, and
/// two-character escapes): what a command printed for a terminal, as text.
pub fn without_escapes(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters and intermediates, then one final byte.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

fn needs_showing(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bidi_overrides_are_shown_not_run() {
        assert_eq!(visible("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(visible("a\u{1b}[2Jb"), "a␛[2Jb");
        assert_eq!(visible("bell\u{7}"), "bell␇");
        assert_eq!(visible("x\rid"), "x␍id");
        assert_eq!(visible("\u{9b}31m"), "⟨U+009B⟩31m");
        assert_eq!(
            visible("if admin \u{202E}} {\u{2066}"),
            "if admin ⟨U+202E⟩} {⟨U+2066⟩"
        );
        assert_eq!(visible("del\u{7f}"), "del␡");
    }
}
