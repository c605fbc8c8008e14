//! The tokenizer: walks a command line character by character and emits words, operators and
//! redirections, reading heredoc bodies at the end of their line. Quoted text, `$…` and the
//! balanced scanners live in `quoting`; this file holds the top-level loop and redirections.

use super::quoting::expand_text;
use super::word::{Operator, Piece, Redirect, RedirectKind, Token, Word};

pub(super) struct PendingHeredoc {
    token: usize,
    delimiter: String,
    strip_tabs: bool,
    expand: bool,
}

pub(super) struct Lexer {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) tokens: Vec<Token>,
    pub(super) pending: Vec<PendingHeredoc>,
}

/// Splits `input` into shell tokens. Never fails; unterminated constructs run to the end.
pub fn tokenize(input: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        chars: input.chars().collect(),
        pos: 0,
        tokens: Vec::new(),
        pending: Vec::new(),
    };
    lexer.run();
    lexer.tokens
}

fn is_word_end(c: Option<char>) -> bool {
    matches!(
        c,
        None | Some(' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>')
    )
}

pub(super) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(super) fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Lexer {
    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    pub(super) fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.chars.len());
    }

    pub(super) fn slice(&self, start: usize, end: usize) -> String {
        self.chars
            .get(start..end.min(self.chars.len()))
            .map(|s| s.iter().collect())
            .unwrap_or_default()
    }

    fn op(&mut self, op: Operator, len: usize) {
        self.advance(len);
        self.tokens.push(Token::Op(op));
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            let before = self.pos;
            match c {
                ' ' | '\t' | '\r' => self.advance(1),
                '\\' if self.peek_at(1) == Some('\n') => self.advance(2),
                '#' => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.advance(1);
                    }
                }
                '\n' => {
                    self.op(Operator::Newline, 1);
                    self.read_heredoc_bodies();
                }
                ';' => {
                    let len = match (self.peek_at(1), self.peek_at(2)) {
                        (Some(';'), Some('&')) => 3,
                        (Some(';' | '&'), _) => 2,
                        _ => 1,
                    };
                    self.op(Operator::Semi, len);
                }
                '&' => match self.peek_at(1) {
                    Some('&') => self.op(Operator::And, 2),
                    Some('>') => {
                        self.advance(2);
                        let kind = if self.peek() == Some('>') {
                            self.advance(1);
                            RedirectKind::Append
                        } else {
                            RedirectKind::Write
                        };
                        self.finish_redirect(None, kind);
                    }
                    _ => self.op(Operator::Background, 1),
                },
                '|' => match self.peek_at(1) {
                    Some('|') => self.op(Operator::Or, 2),
                    Some('&') => self.op(Operator::Pipe, 2),
                    _ => self.op(Operator::Pipe, 1),
                },
                '(' => self.op(Operator::Open, 1),
                ')' => self.op(Operator::Close, 1),
                '<' | '>' if self.peek_at(1) != Some('(') => self.redirect(None),
                _ => {
                    let word = self.read_word();
                    let fd = word
                        .literal()
                        .filter(|t| !t.is_empty() && !word.quoted)
                        .and_then(|t| t.parse::<u32>().ok());
                    let at_redirect =
                        matches!(self.peek(), Some('<' | '>')) && self.peek_at(1) != Some('(');
                    match fd {
                        Some(fd) if at_redirect => self.redirect(Some(fd)),
                        _ => {
                            if !word.pieces.is_empty() || word.quoted {
                                self.tokens.push(Token::Word(word));
                            }
                        }
                    }
                }
            }
            if self.pos == before {
                // Never loop without progress, whatever the input.
                self.advance(1);
            }
        }
    }

    fn redirect(&mut self, fd: Option<u32>) {
        let first = self.peek();
        let second = self.peek_at(1);
        let kind = match (first, second) {
            (Some('<'), Some('<')) => {
                if self.peek_at(2) == Some('<') {
                    self.advance(3);
                    RedirectKind::HereString
                } else {
                    self.advance(2);
                    let strip_tabs = self.peek() == Some('-');
                    if strip_tabs {
                        self.advance(1);
                    }
                    self.skip_blanks();
                    let delimiter = self.read_word();
                    let expand = !delimiter.quoted;
                    let text = delimiter.raw();
                    self.pending.push(PendingHeredoc {
                        token: self.tokens.len(),
                        delimiter: text,
                        strip_tabs,
                        expand,
                    });
                    self.tokens.push(Token::Redirect(Redirect {
                        fd,
                        kind: RedirectKind::Heredoc {
                            body: Word::default(),
                        },
                        target: delimiter,
                    }));
                    return;
                }
            }
            (Some('<'), Some('>')) => {
                self.advance(2);
                RedirectKind::ReadWrite
            }
            (Some('<'), Some('&')) => {
                self.advance(2);
                RedirectKind::Dup
            }
            (Some('<'), _) => {
                self.advance(1);
                RedirectKind::Read
            }
            (Some('>'), Some('>')) => {
                self.advance(2);
                RedirectKind::Append
            }
            (Some('>'), Some('|')) => {
                self.advance(2);
                RedirectKind::Write
            }
            (Some('>'), Some('&')) => {
                self.advance(2);
                self.skip_blanks();
                let target = self.read_word();
                let is_fd = target.literal().is_some_and(|t| {
                    t == "-" || (!t.is_empty() && t.chars().all(|c| c.is_ascii_digit()))
                });
                let kind = if is_fd {
                    RedirectKind::Dup
                } else {
                    RedirectKind::Write
                };
                self.tokens
                    .push(Token::Redirect(Redirect { fd, kind, target }));
                return;
            }
            _ => {
                self.advance(1);
                RedirectKind::Write
            }
        };
        self.finish_redirect(fd, kind);
    }

    fn finish_redirect(&mut self, fd: Option<u32>, kind: RedirectKind) {
        self.skip_blanks();
        let target = if is_word_end(self.peek()) && !matches!(self.peek(), Some('<' | '>')) {
            Word::default()
        } else {
            self.read_word()
        };
        self.tokens
            .push(Token::Redirect(Redirect { fd, kind, target }));
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.advance(1);
        }
    }

    fn read_heredoc_bodies(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for heredoc in pending {
            let mut lines = Vec::new();
            while self.pos < self.chars.len() {
                let start = self.pos;
                while !matches!(self.peek(), None | Some('\n')) {
                    self.advance(1);
                }
                let line = self.slice(start, self.pos);
                self.advance(1);
                let line = if heredoc.strip_tabs {
                    line.trim_start_matches('\t').to_owned()
                } else {
                    line
                };
                if line == heredoc.delimiter {
                    break;
                }
                lines.push(line);
            }
            let mut text = lines.join("\n");
            if !lines.is_empty() {
                text.push('\n');
            }
            let body = if heredoc.expand {
                expand_text(&text)
            } else {
                let mut word = Word::default();
                word.push_str(&text);
                word.quoted = true;
                word
            };
            if let Some(Token::Redirect(Redirect {
                kind: RedirectKind::Heredoc { body: slot },
                ..
            })) = self.tokens.get_mut(heredoc.token)
            {
                *slot = body;
            }
        }
    }

    fn read_word(&mut self) -> Word {
        let mut word = Word::default();
        let mut ident_run = true;
        while let Some(c) = self.peek() {
            match c {
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.advance(2);
                    let inner = self.scan_paren();
                    word.pieces.push(Piece::Process(inner));
                    ident_run = false;
                }
                c if is_word_end(Some(c)) => break,
                '\\' => {
                    self.advance(1);
                    match self.peek() {
                        Some('\n') => self.advance(1),
                        Some(next) => {
                            self.advance(1);
                            word.push_char(next);
                            word.quoted = true;
                        }
                        None => {}
                    }
                    ident_run = false;
                }
                '\'' => {
                    self.advance(1);
                    let start = self.pos;
                    while !matches!(self.peek(), None | Some('\'')) {
                        self.advance(1);
                    }
                    let text = self.slice(start, self.pos);
                    self.advance(1);
                    word.push_str(&text);
                    word.quoted = true;
                    ident_run = false;
                }
                '"' => {
                    self.advance(1);
                    self.read_double_quoted(&mut word, Some('"'));
                    word.quoted = true;
                    ident_run = false;
                }
                '$' => {
                    self.read_dollar(&mut word, false);
                    ident_run = false;
                }
                '`' => {
                    self.advance(1);
                    let inner = self.scan_backtick();
                    word.pieces.push(Piece::Subst(inner));
                    ident_run = false;
                }
                '~' if word.pieces.is_empty()
                    && !word.quoted
                    && (is_word_end(self.peek_at(1)) || self.peek_at(1) == Some('/')) =>
                {
                    self.advance(1);
                    word.pieces.push(Piece::Tilde);
                    ident_run = false;
                }
                // Elsewhere a `~` is text, unless brace expansion or an assignment puts it
                // at the start of a word.
                '~' => {
                    self.advance(1);
                    word.pieces.push(Piece::Meta('~'));
                    ident_run = false;
                }
                '*' | '?' | '[' | ']' | '{' | '}' | ',' => {
                    self.advance(1);
                    if matches!(c, '*' | '?' | '[' | '{') {
                        word.glob = true;
                    }
                    word.pieces.push(Piece::Meta(c));
                    ident_run = false;
                }
                '=' => {
                    if ident_run && !word.pieces.is_empty() {
                        word.assignment = true;
                    }
                    self.advance(1);
                    word.push_char('=');
                    ident_run = false;
                }
                c => {
                    if !is_ident(c) || (word.pieces.is_empty() && !is_ident_start(c)) {
                        ident_run = false;
                    }
                    self.advance(1);
                    word.push_char(c);
                }
            }
        }
        word
    }
}
