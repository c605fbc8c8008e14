//! Argument substitution in a command's or a skill's body, as Claude Code does it.
//!
//! `$ARGUMENTS` is the whole argument string. `$ARGUMENTS[N]` and its shorthand `$N` (one
//! digit) are single arguments counted from 0, as Claude Code counts them today: `$0` is the
//! first and `$1` the second (Claude Code's early documentation counted from `$1`; its
//! current releases and documentation count from `$0`, and a file written for them must
//! work unchanged). Arguments are split like shell words, quotes grouping (`"a b" c` is
//! `a b`, then `c`); a missing one is empty. Any other `$` is text. A body that uses no
//! placeholder gets non-empty arguments appended on a line of their own as `ARGUMENTS: …`,
//! as Claude Code does, so they are never lost.

/// `body` with its argument placeholders replaced from `arguments` (see the module docs).
pub fn expand(body: &str, arguments: &str) -> String {
    let arguments = arguments.trim();
    let mut words: Option<Vec<String>> = None;
    let mut nth = |index: usize| -> String {
        words
            .get_or_insert_with(|| split_arguments(arguments))
            .get(index)
            .cloned()
            .unwrap_or_default()
    };
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut used = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            used = true;
            match bracketed_index(tail) {
                Some((index, tail)) => {
                    out.push_str(&nth(index));
                    rest = tail;
                }
                None => {
                    out.push_str(arguments);
                    rest = tail;
                }
            }
        } else if let Some((index, tail)) = single_digit(after) {
            used = true;
            out.push_str(&nth(index));
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !used && !arguments.is_empty() {
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str("ARGUMENTS: ");
        out.push_str(arguments);
    }
    out
}

/// `[N]` at the start of `text`: N and what follows.
fn bracketed_index(text: &str) -> Option<(usize, &str)> {
    let inner = text.strip_prefix('[')?;
    let end = inner.find(']')?;
    let digits = &inner[..end];
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &inner[end + 1..]))
}

/// One digit at the start of `text`, not followed by another (`$10` is text, so a price in
/// a prompt survives): its value and what follows.
fn single_digit(text: &str) -> Option<(usize, &str)> {
    let bytes = text.as_bytes();
    let digit = *bytes.first().filter(|byte| byte.is_ascii_digit())?;
    if bytes.get(1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some((usize::from(digit - b'0'), &text[1..]))
}

/// `arguments` split into words the way a shell splits them: white space separates, single
/// quotes keep everything, double quotes keep everything but `\"`, `\\`, `` \` `` and `\$`
/// escapes, and a backslash outside quotes keeps the next character. An unclosed quote runs
/// to the end.
pub fn split_arguments(arguments: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = arguments.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(next @ ('"' | '\\' | '`' | '$')) => word.push(next),
                            Some(next) => {
                                word.push('\\');
                                word.push(next);
                            }
                            None => word.push('\\'),
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next().unwrap_or('\\'));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn placeholders_take_the_whole_string_or_one_word() {
        assert_eq!(
            expand("Fix issue #$ARGUMENTS now", " 42 high "),
            "Fix issue #42 high now"
        );
        assert_eq!(
            expand(
                "Move $0 from $1 to $ARGUMENTS[2].",
                r#""search bar" React Vue"#
            ),
            "Move search bar from React to Vue."
        );
        assert_eq!(expand("[$0|$1|$9]", "only"), "[only||]");
        assert_eq!(expand("$ARGUMENTS", ""), "");
    }

    #[test]
    fn other_dollars_are_text() {
        assert_eq!(
            expand("Costs $10, $$0, $HOME, ${X}, $ARGUMENTS[x], $", "a"),
            "Costs $10, $a, $HOME, ${X}, a[x], $"
        );
    }

    #[test]
    fn arguments_are_appended_when_no_placeholder_takes_them() {
        assert_eq!(
            expand("Review the diff.", "  carefully "),
            "Review the diff.\n\nARGUMENTS: carefully"
        );
        assert_eq!(expand("Review.\n", "x"), "Review.\n\nARGUMENTS: x");
        assert_eq!(expand("", "x"), "ARGUMENTS: x");
        assert_eq!(expand("Review.", "  "), "Review.");
        // A positional placeholder counts as taking them.
        assert_eq!(expand("Open $0.", "a b"), "Open a.");
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_arguments(r#"a "b c" 'd "e"' f\ g "h\"i" "" x"y"z 'open"#),
            ["a", "b c", r#"d "e""#, "f g", r#"h"i"#, "", "xyz", "open"]
        );
        assert_eq!(split_arguments("  "), Vec::<String>::new());
        assert_eq!(
            split_arguments(r#"C:\dir "a\nb" end\"#),
            [r"C:dir", r"a\nb", r"end\"]
        );
    }

    /// `word` in double quotes, escaped so that [`split_arguments`] gives it back.
    fn quoted(word: &str) -> String {
        let mut out = String::from("\"");
        for c in word.chars() {
            if matches!(c, '"' | '\\' | '`' | '$') {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    }

    proptest! {
        #[test]
        fn expand_never_panics(body in any::<String>(), arguments in any::<String>()) {
            let _ = expand(&body, &arguments);
        }

        #[test]
        fn text_without_placeholders_is_kept(body in "[^$]*", arguments in any::<String>()) {
            let expanded = expand(&body, &arguments);
            let arguments = arguments.trim();
            if arguments.is_empty() {
                prop_assert_eq!(expanded, body);
            } else {
                prop_assert!(expanded.starts_with(&body));
                let tail = format!("ARGUMENTS: {arguments}");
                prop_assert!(expanded.ends_with(&tail));
            }
        }

        #[test]
        fn text_between_placeholders_is_kept(
            parts in proptest::collection::vec("[^$\\[]*", 2..5),
            arguments in any::<String>(),
        ) {
            let body = parts.join("$ARGUMENTS");
            prop_assert_eq!(expand(&body, &arguments), parts.join(arguments.trim()));
        }

        #[test]
        fn quoted_words_split_back(words in proptest::collection::vec(any::<String>(), 0..6)) {
            let line = words.iter().map(|word| quoted(word)).collect::<Vec<_>>().join(" ");
            prop_assert_eq!(split_arguments(&line), words);
        }

        #[test]
        fn plain_words_split_on_white_space(
            words in proptest::collection::vec("[A-Za-z0-9_./-]+", 0..6),
            gap in "[ \t\n]+",
        ) {
            prop_assert_eq!(split_arguments(&words.join(&gap)), words);
        }
    }
}
