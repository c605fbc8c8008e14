//! The lexer's readers for quoted and expanded text: double quotes, `$NAME`, `${…}`, `$( )`,
//! ANSI-C `$'…'`, and the scanners that find the end of a nested `( )`, backtick or `{ }`
//! without parsing what is inside. Separate from `lexer` because this is where the subtle
//! quoting rules are, and `expand_text` reuses them for heredoc bodies and `${…}` operands.

use super::lexer::{Lexer, is_ident, is_ident_start};
use super::word::{Piece, Word};

/// `word` as the shell needs it to stay one word with exactly this text: as it is when it
/// holds nothing the shell reads, else in single quotes.
pub fn quote_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,%".contains(c))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

impl Lexer {
    /// Reads double-quoted text up to `end` (or the end of input when `end` is `None`).
    pub(super) fn read_double_quoted(&mut self, word: &mut Word, end: Option<char>) {
        while let Some(c) = self.peek() {
            if Some(c) == end {
                self.advance(1);
                return;
            }
            match c {
                '\\' => match self.peek_at(1) {
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        self.advance(2);
                        word.push_char(next);
                    }
                    Some('\n') => self.advance(2),
                    _ => {
                        self.advance(1);
                        word.push_char('\\');
                    }
                },
                '$' => self.read_dollar(word, true),
                '`' => {
                    self.advance(1);
                    let inner = self.scan_backtick();
                    word.pieces.push(Piece::Subst(inner));
                }
                c => {
                    self.advance(1);
                    word.push_char(c);
                }
            }
        }
    }

    pub(super) fn read_dollar(&mut self, word: &mut Word, in_quotes: bool) {
        match self.peek_at(1) {
            Some('(') => {
                self.advance(2);
                let inner = self.scan_paren();
                if inner.starts_with('(') {
                    // `$(( … ))`: arithmetic; its value is unknown.
                    word.pieces.push(Piece::Unknown(format!("$({inner})")));
                } else {
                    word.pieces.push(Piece::Subst(inner));
                }
            }
            Some('{') => {
                self.advance(2);
                let inner = self.scan_brace();
                if !inner.is_empty()
                    && inner.chars().next().is_some_and(is_ident_start)
                    && inner.chars().all(is_ident)
                {
                    word.pieces.push(Piece::Var {
                        name: inner,
                        quoted: in_quotes,
                    });
                } else {
                    // `${x:-$(cmd)}` still runs what it contains.
                    for piece in expand_text(&inner).pieces {
                        if let Piece::Subst(script) = piece {
                            word.pieces.push(Piece::Subst(script));
                        }
                    }
                    word.pieces.push(Piece::Unknown(format!("${{{inner}}}")));
                }
            }
            Some('\'') if !in_quotes => {
                self.advance(2);
                self.read_ansi_c(word);
                word.quoted = true;
            }
            Some('"') if !in_quotes => self.advance(1),
            Some(c) if is_ident_start(c) => {
                self.advance(1);
                let start = self.pos;
                while self.peek().is_some_and(is_ident) {
                    self.advance(1);
                }
                let name = self.slice(start, self.pos);
                word.pieces.push(Piece::Var {
                    name,
                    quoted: in_quotes,
                });
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.advance(2);
                word.pieces.push(Piece::Unknown(format!("${c}")));
            }
            _ => {
                self.advance(1);
                word.push_char('$');
            }
        }
    }

    fn read_ansi_c(&mut self, word: &mut Word) {
        while let Some(c) = self.peek() {
            self.advance(1);
            match c {
                '\'' => return,
                '\\' => {
                    let Some(next) = self.peek() else { return };
                    self.advance(1);
                    match next {
                        'n' => word.push_char('\n'),
                        't' => word.push_char('\t'),
                        'r' => word.push_char('\r'),
                        '0' => word.push_char('\0'),
                        'x' => {
                            let start = self.pos;
                            while self.pos < start + 2
                                && self.peek().is_some_and(|h| h.is_ascii_hexdigit())
                            {
                                self.advance(1);
                            }
                            let hex = self.slice(start, self.pos);
                            match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                                Some(decoded) => word.push_char(decoded),
                                None => word.push_str("\\x"),
                            }
                        }
                        other => word.push_char(other),
                    }
                }
                other => word.push_char(other),
            }
        }
    }

    /// After an opening `(`: the text up to the matching `)`, which is consumed.
    pub(super) fn scan_paren(&mut self) -> String {
        let start = self.pos;
        let mut depth = 1usize;
        while let Some(c) = self.peek() {
            match c {
                '\\' => self.advance(2),
                '\'' => {
                    self.advance(1);
                    while !matches!(self.peek(), None | Some('\'')) {
                        self.advance(1);
                    }
                    self.advance(1);
                }
                '"' => {
                    self.advance(1);
                    self.skip_double_quoted();
                }
                '`' => {
                    self.advance(1);
                    self.scan_backtick();
                }
                '#' if self.pos == start
                    || matches!(
                        self.chars.get(self.pos.wrapping_sub(1)),
                        Some(' ' | '\t' | '\n' | ';')
                    ) =>
                {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.advance(1);
                    }
                }
                '(' => {
                    depth += 1;
                    self.advance(1);
                }
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let inner = self.slice(start, self.pos);
                        self.advance(1);
                        return inner;
                    }
                    self.advance(1);
                }
                _ => self.advance(1),
            }
        }
        self.slice(start, self.pos)
    }

    fn skip_double_quoted(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                '\\' => self.advance(2),
                '"' => {
                    self.advance(1);
                    return;
                }
                '$' if self.peek_at(1) == Some('(') => {
                    self.advance(2);
                    self.scan_paren();
                }
                '`' => {
                    self.advance(1);
                    self.scan_backtick();
                }
                _ => self.advance(1),
            }
        }
    }

    /// After an opening backtick: the unescaped text up to the closing one.
    pub(super) fn scan_backtick(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            match c {
                '`' => {
                    self.advance(1);
                    return out;
                }
                '\\' => match self.peek_at(1) {
                    Some(next @ ('`' | '\\' | '$')) => {
                        self.advance(2);
                        out.push(next);
                    }
                    _ => {
                        self.advance(1);
                        out.push('\\');
                    }
                },
                c => {
                    self.advance(1);
                    out.push(c);
                }
            }
        }
        out
    }

    /// After `${`: the text up to the matching `}`, which is consumed.
    fn scan_brace(&mut self) -> String {
        let start = self.pos;
        let mut depth = 1usize;
        while let Some(c) = self.peek() {
            match c {
                '\\' => self.advance(2),
                '\'' => {
                    self.advance(1);
                    while !matches!(self.peek(), None | Some('\'')) {
                        self.advance(1);
                    }
                    self.advance(1);
                }
                '"' => {
                    self.advance(1);
                    self.skip_double_quoted();
                }
                '{' => {
                    depth += 1;
                    self.advance(1);
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let inner = self.slice(start, self.pos);
                        self.advance(1);
                        return inner;
                    }
                    self.advance(1);
                }
                _ => self.advance(1),
            }
        }
        self.slice(start, self.pos)
    }
}

/// Text expanded as inside double quotes (heredoc bodies, `${…}` operands).
pub(super) fn expand_text(text: &str) -> Word {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        pos: 0,
        tokens: Vec::new(),
        pending: Vec::new(),
    };
    let mut word = Word::default();
    lexer.read_double_quoted(&mut word, None);
    word.quoted = true;
    word
}
