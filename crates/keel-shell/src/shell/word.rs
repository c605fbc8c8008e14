//! The token types of a command line: words made of pieces still to be expanded, control
//! operators and redirections. Plain data shared by the lexer, the splitter and the analyzer,
//! kept apart so each of those reads against one small vocabulary.

/// One piece of a shell word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text, quotes and escapes removed.
    Lit(String),
    /// An unquoted character that brace or pathname expansion gives a meaning to
    /// (`* ? [ ] { } ,`); quoted, the same character is part of a [`Piece::Lit`].
    Meta(char),
    /// `$NAME` or `${NAME}`; unquoted, its value is split into words and globbed.
    Var {
        /// The variable's name.
        name: String,
        /// Inside double quotes (or a heredoc): the value stays one word, taken literally.
        quoted: bool,
    },
    /// The raw inner script of `$( )` or backticks.
    Subst(String),
    /// The raw inner script of `<( )` or `>( )`: the word is a path to its output or input.
    Process(String),
    /// `~` at the start of a word.
    Tilde,
    /// A value that cannot be known (`$?`, `$((…))`, `${x:-y}`), with its raw text.
    Unknown(String),
}

/// A shell word as written: pieces to be expanded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    /// The pieces, in order.
    pub pieces: Vec<Piece>,
    /// Contains unquoted glob or brace characters ([`Piece::Meta`]).
    pub glob: bool,
    /// Some part of it was quoted or escaped.
    pub quoted: bool,
    /// It has the form `NAME=value` with an unquoted name.
    pub assignment: bool,
}

impl Word {
    pub(super) fn push_char(&mut self, c: char) {
        if let Some(Piece::Lit(text)) = self.pieces.last_mut() {
            text.push(c);
        } else {
            self.pieces.push(Piece::Lit(c.to_string()));
        }
    }

    pub(super) fn push_str(&mut self, s: &str) {
        if let Some(Piece::Lit(text)) = self.pieces.last_mut() {
            text.push_str(s);
        } else {
            self.pieces.push(Piece::Lit(s.to_owned()));
        }
    }

    /// The text when the word is only literal text (glob characters taken as written).
    pub fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Lit(text) => out.push_str(text),
                Piece::Meta(c) => out.push(*c),
                _ => return None,
            }
        }
        Some(out)
    }

    /// The word roughly as written, for messages.
    pub fn raw(&self) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Lit(text) => out.push_str(text),
                Piece::Meta(c) => out.push(*c),
                Piece::Var { name, .. } => {
                    out.push('$');
                    out.push_str(name);
                }
                Piece::Subst(inner) => {
                    out.push_str("$(");
                    out.push_str(inner);
                    out.push(')');
                }
                Piece::Process(inner) => {
                    out.push_str("<(");
                    out.push_str(inner);
                    out.push(')');
                }
                Piece::Tilde => out.push('~'),
                Piece::Unknown(raw) => out.push_str(raw),
            }
        }
        out
    }
}

/// A control operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `&&`
    And,
    /// `||`
    Or,
    /// `;` (and `;;`, `;&` of `case`)
    Semi,
    /// `|` or `|&`
    Pipe,
    /// `&`
    Background,
    /// A newline.
    Newline,
    /// `(`
    Open,
    /// `)`
    Close,
}

/// What a redirection does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedirectKind {
    /// `>`, `>|`, `&>`, `>& file`
    Write,
    /// `>>`, `&>>`
    Append,
    /// `<`
    Read,
    /// `<>`
    ReadWrite,
    /// `>&N`, `<&N`, `>&-`: duplicates a descriptor, touches no file.
    Dup,
    /// `<<WORD` or `<<-WORD`; the body is filled in at the end of its line.
    Heredoc {
        /// The body, expandable unless the delimiter was quoted.
        body: Word,
    },
    /// `<<<word`
    HereString,
}

/// A redirection with its target word (the delimiter for heredocs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The descriptor written before the operator, if any.
    pub fd: Option<u32>,
    /// What it does.
    pub kind: RedirectKind,
    /// The file, descriptor or here-string word.
    pub target: Word,
}

/// One token of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A word.
    Word(Word),
    /// A control operator.
    Op(Operator),
    /// A redirection.
    Redirect(Redirect),
}
