//! Syntax colouring for code blocks and diffs: a small lexer per language family (comments,
//! strings, numbers, keywords, types), one line at a time with the state a block comment or
//! a multi-line string carries to the next line. It colours the languages models write most;
//! anything else is shown plain.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;

/// The lexer's rules for one language family.
struct Lang {
    line_comments: &'static [&'static str],
    block_comment: Option<(&'static str, &'static str)>,
    quotes: &'static [char],
    keywords: &'static [&'static str],
}

const RUST: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"'],
    keywords: &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
        "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
        "true", "type", "unsafe", "use", "where", "while",
    ],
};

const C_LIKE: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\'', '`'],
    keywords: &[
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "default",
        "defer",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "final",
        "finally",
        "for",
        "func",
        "function",
        "go",
        "if",
        "implements",
        "import",
        "interface",
        "let",
        "new",
        "null",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "struct",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "type",
        "typeof",
        "var",
        "void",
        "while",
        "yield",
        "async",
        "await",
        "from",
        "int",
        "char",
        "long",
        "double",
        "float",
        "bool",
        "auto",
        "namespace",
        "template",
        "using",
        "nil",
        "range",
        "map",
        "chan",
        "select",
    ],
};

const PYTHON: Lang = Lang {
    line_comments: &["#"],
    block_comment: None,
    quotes: &['"', '\''],
    keywords: &[
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "False", "finally", "for", "from", "global", "if", "import",
        "in", "is", "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True",
        "try", "while", "with", "yield", "self",
    ],
};

const SHELL: Lang = Lang {
    line_comments: &["#"],
    block_comment: None,
    quotes: &['"', '\''],
    keywords: &[
        "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case",
        "esac", "function", "return", "export", "local", "set", "echo", "cd", "exit",
    ],
};

const DATA: Lang = Lang {
    line_comments: &["#"],
    block_comment: None,
    quotes: &['"', '\''],
    keywords: &["true", "false", "null", "yes", "no", "on", "off"],
};

const SQL: Lang = Lang {
    line_comments: &["--"],
    block_comment: Some(("/*", "*/")),
    quotes: &['\''],
    keywords: &[
        "select", "from", "where", "insert", "into", "values", "update", "set", "delete", "create",
        "table", "index", "join", "left", "right", "inner", "outer", "on", "group", "by", "order",
        "limit", "and", "or", "not", "null", "as", "primary", "key", "begin", "commit",
    ],
};

fn lang(name: &str) -> Option<&'static Lang> {
    let name = name.trim().to_ascii_lowercase();
    let name = name.split([' ', ',', '{']).next().unwrap_or_default();
    Some(match name {
        "rust" | "rs" => &RUST,
        "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "java" | "kotlin" | "kt" | "go" | "js"
        | "javascript" | "jsx" | "ts" | "typescript" | "tsx" | "swift" | "scala" | "cs"
        | "csharp" | "dart" | "php" | "zig" => &C_LIKE,
        "python" | "py" | "ruby" | "rb" | "r" | "perl" | "pl" => &PYTHON,
        "sh" | "bash" | "zsh" | "shell" | "console" | "fish" | "dockerfile" | "make"
        | "makefile" => &SHELL,
        "json" | "jsonc" | "yaml" | "yml" | "toml" | "ini" | "env" => &DATA,
        "sql" => &SQL,
        _ => return None,
    })
}

/// The language a file's extension names, for diffs and file previews.
pub fn lang_of_path(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or_default()
}

const KEYWORD: Style = Style::new().fg(Color::Magenta);
const STRING: Style = Style::new().fg(Color::Green);
const COMMENT: Style = Style::new()
    .fg(Color::DarkGray)
    .add_modifier(Modifier::ITALIC);
const NUMBER: Style = Style::new().fg(Color::Yellow);
const TYPE: Style = Style::new().fg(Color::Cyan);

/// Colours code line by line.
#[derive(Debug, Clone)]
pub struct Highlighter {
    lang: Option<&'static Lang>,
    /// A block comment runs on from the previous line.
    in_comment: bool,
}

impl std::fmt::Debug for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lang")
    }
}

impl Highlighter {
    /// A highlighter for the language a code fence or extension names.
    pub fn new(name: &str) -> Self {
        Self {
            lang: lang(name),
            in_comment: false,
        }
    }

    /// The spans of one line, `base` under every colour.
    pub fn line(&mut self, text: &str, base: Style) -> Vec<Span<'static>> {
        let Some(lang) = self.lang else {
            return vec![Span::styled(text.to_owned(), base)];
        };
        let mut spans = Vec::new();
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut i = 0;
        let mut plain_start = 0;
        let flush = |spans: &mut Vec<Span<'static>>, from: usize, to: usize| {
            if to > from {
                spans.push(Span::styled(text[from..to].to_owned(), base));
            }
        };
        let at = |i: usize| chars.get(i).map_or(text.len(), |(b, _)| *b);
        if self.in_comment
            && let Some((_, close)) = lang.block_comment
        {
            match text.find(close) {
                Some(end) => {
                    let end = end + close.len();
                    spans.push(Span::styled(text[..end].to_owned(), base.patch(COMMENT)));
                    self.in_comment = false;
                    while i < chars.len() && at(i) < end {
                        i += 1;
                    }
                    plain_start = end;
                }
                None => {
                    return vec![Span::styled(text.to_owned(), base.patch(COMMENT))];
                }
            }
        }
        while i < chars.len() {
            let (byte, ch) = chars[i];
            let rest = &text[byte..];
            if lang.line_comments.iter().any(|c| rest.starts_with(c)) {
                flush(&mut spans, plain_start, byte);
                spans.push(Span::styled(rest.to_owned(), base.patch(COMMENT)));
                return spans;
            }
            if let Some((open, close)) = lang.block_comment
                && rest.starts_with(open)
            {
                flush(&mut spans, plain_start, byte);
                match rest[open.len()..].find(close) {
                    Some(end) => {
                        let end = byte + open.len() + end + close.len();
                        spans.push(Span::styled(
                            text[byte..end].to_owned(),
                            base.patch(COMMENT),
                        ));
                        while i < chars.len() && at(i) < end {
                            i += 1;
                        }
                        plain_start = end;
                        continue;
                    }
                    None => {
                        spans.push(Span::styled(rest.to_owned(), base.patch(COMMENT)));
                        self.in_comment = true;
                        return spans;
                    }
                }
            }
            if lang.quotes.contains(&ch) {
                flush(&mut spans, plain_start, byte);
                let mut j = i + 1;
                while j < chars.len() {
                    if chars[j].1 == '\\' {
                        j += 2;
                        continue;
                    }
                    if chars[j].1 == ch {
                        j += 1;
                        break;
                    }
                    j += 1;
                }
                let end = at(j.min(chars.len()));
                spans.push(Span::styled(text[byte..end].to_owned(), base.patch(STRING)));
                i = j.min(chars.len());
                plain_start = end;
                continue;
            }
            if ch.is_ascii_digit() && (i == 0 || !is_word(chars[i - 1].1)) {
                flush(&mut spans, plain_start, byte);
                let mut j = i;
                while j < chars.len()
                    && (chars[j].1.is_ascii_alphanumeric()
                        || chars[j].1 == '.'
                        || chars[j].1 == '_')
                {
                    j += 1;
                }
                let end = at(j);
                spans.push(Span::styled(text[byte..end].to_owned(), base.patch(NUMBER)));
                i = j;
                plain_start = end;
                continue;
            }
            if is_word(ch) && (i == 0 || !is_word(chars[i - 1].1)) {
                let mut j = i;
                while j < chars.len() && is_word(chars[j].1) {
                    j += 1;
                }
                let end = at(j);
                let word = &text[byte..end];
                let style = if lang.keywords.contains(&word)
                    || lang.keywords.contains(&word.to_ascii_lowercase().as_str())
                        && std::ptr::eq(lang, &SQL)
                {
                    Some(KEYWORD)
                } else if word.chars().next().is_some_and(char::is_uppercase)
                    && word.chars().any(char::is_lowercase)
                {
                    Some(TYPE)
                } else {
                    None
                };
                if let Some(style) = style {
                    flush(&mut spans, plain_start, byte);
                    spans.push(Span::styled(word.to_owned(), base.patch(style)));
                    plain_start = end;
                }
                i = j;
                continue;
            }
            i += 1;
        }
        flush(&mut spans, plain_start, text.len());
        spans
    }
}

fn is_word(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn styles(spans: &[Span<'static>]) -> Vec<(String, Option<Color>)> {
        spans
            .iter()
            .map(|s| (s.content.to_string(), s.style.fg))
            .collect()
    }

    #[test]
    fn colours_keywords_strings_numbers_and_comments() {
        let mut h = Highlighter::new("rust");
        let spans = h.line("let x = \"hi\" + 42; // done", Style::new());
        let got = styles(&spans);
        assert!(got.contains(&("let".into(), Some(Color::Magenta))));
        assert!(got.contains(&("\"hi\"".into(), Some(Color::Green))));
        assert!(got.contains(&("42".into(), Some(Color::Yellow))));
        assert!(got.contains(&("// done".into(), Some(Color::DarkGray))));
    }

    #[test]
    fn a_block_comment_carries_to_the_next_line() {
        let mut h = Highlighter::new("c");
        h.line("int a; /* open", Style::new());
        let spans = h.line("still */ int b;", Style::new());
        assert_eq!(spans[0].content, "still */");
        assert_eq!(spans[0].style.fg, Some(Color::DarkGray));
    }

    #[test]
    fn unknown_languages_are_plain() {
        let mut h = Highlighter::new("brainfuck");
        assert_eq!(h.line("+++[>]", Style::new()).len(), 1);
    }

    proptest! {
        #[test]
        fn spans_give_back_the_line(line in "\\PC{0,80}", lang in "(rust|py|sh|json|sql|x)") {
            let mut h = Highlighter::new(&lang);
            let joined: String = h.line(&line, Style::new()).iter().map(|s| s.content.as_ref()).collect();
            prop_assert_eq!(joined, line);
        }
    }
}
