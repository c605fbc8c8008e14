//! Word expansion as bash does it before a program runs, in bash's order: brace expansion
//! (`{a,b}`, `{1..3}`) on the pieces of a word, then, in the analyzer, variables and field
//! splitting into [`Field`]s, then pathname expansion (`glob`) of each field.
//!
//! Trade-off: brace expansion is purely lexical and bounded ([`MAX_WORDS`]); a word that would
//! grow past the bound is not expanded but reported, so the gate asks instead of judging a
//! part of it. Quoted braces, commas and globs are plain text ([`Piece::Lit`]), so only what
//! bash would expand is expanded.

use super::word::Piece;

/// Most words one word may expand to (design choice: far above what commands need, small
/// enough to judge each).
pub const MAX_WORDS: usize = 256;

/// One token of a word for brace expansion: a plain character, an unquoted special one, or
/// an expansion that is carried through whole.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ch(char),
    Meta(char),
    Other(Piece),
}

/// The words a word's pieces expand to by brace expansion; `Err` says why it could not be done.
pub(super) fn braces(pieces: &[Piece]) -> Result<Vec<Vec<Piece>>, String> {
    if !pieces.iter().any(|p| matches!(p, Piece::Meta('{'))) {
        return Ok(vec![pieces.to_vec()]);
    }
    let toks = tokens(pieces);
    let mut out = Vec::new();
    expand(toks, &mut out)?;
    Ok(out.into_iter().map(|toks| pieces_of(&toks)).collect())
}

fn tokens(pieces: &[Piece]) -> Vec<Tok> {
    let mut toks = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Lit(text) => toks.extend(text.chars().map(Tok::Ch)),
            Piece::Meta(c) => toks.push(Tok::Meta(*c)),
            other => toks.push(Tok::Other(other.clone())),
        }
    }
    toks
}

/// Back to pieces; a `~` that brace expansion put at the start of a word is expanded like
/// one written there (`{~/.ssh/id_rsa,x}`).
fn pieces_of(toks: &[Tok]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = toks;
    if let [Tok::Meta('~'), after @ ..] = toks
        && matches!(after.first(), None | Some(Tok::Ch('/')))
    {
        pieces.push(Piece::Tilde);
        rest = after;
    }
    for tok in rest {
        match tok {
            Tok::Ch(c) => match pieces.last_mut() {
                Some(Piece::Lit(text)) => text.push(*c),
                _ => pieces.push(Piece::Lit(c.to_string())),
            },
            Tok::Meta(c) => pieces.push(Piece::Meta(*c)),
            Tok::Other(piece) => pieces.push(piece.clone()),
        }
    }
    pieces
}

fn expand(toks: Vec<Tok>, out: &mut Vec<Vec<Tok>>) -> Result<(), String> {
    let Some((open, close, alternatives)) = first_group(&toks)? else {
        if out.len() >= MAX_WORDS {
            return Err(too_many());
        }
        out.push(toks);
        return Ok(());
    };
    let prefix = toks.get(..open).unwrap_or(&[]);
    let suffix = toks.get(close + 1..).unwrap_or(&[]);
    for alternative in alternatives {
        let mut word = prefix.to_vec();
        word.extend(alternative);
        word.extend_from_slice(suffix);
        expand(word, out)?;
    }
    Ok(())
}

fn too_many() -> String {
    format!("brace expansion makes more than {MAX_WORDS} words")
}

type Group = (usize, usize, Vec<Vec<Tok>>);

/// The first `{…}` that bash would expand: its bounds and its alternatives.
fn first_group(toks: &[Tok]) -> Result<Option<Group>, String> {
    for (open, tok) in toks.iter().enumerate() {
        if *tok != Tok::Meta('{') {
            continue;
        }
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (at, tok) in toks.iter().enumerate().skip(open + 1) {
            match tok {
                Tok::Meta('{') => depth += 1,
                Tok::Meta('}') if depth == 0 => {
                    close = Some(at);
                    break;
                }
                Tok::Meta('}') => depth -= 1,
                Tok::Meta(',') if depth == 0 => commas.push(at),
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let inner = toks.get(open + 1..close).unwrap_or(&[]);
        if !commas.is_empty() {
            let mut alternatives = Vec::new();
            let mut start = open + 1;
            for at in commas.into_iter().chain(std::iter::once(close)) {
                alternatives.push(toks.get(start..at).unwrap_or(&[]).to_vec());
                start = at + 1;
            }
            return Ok(Some((open, close, alternatives)));
        }
        if let Some(items) = sequence(inner)? {
            return Ok(Some((open, close, items)));
        }
    }
    Ok(None)
}

/// `{a..e}`, `{1..10}`, `{10..1..3}`, `{01..12}`: the items, when `inner` is a sequence.
fn sequence(inner: &[Tok]) -> Result<Option<Vec<Vec<Tok>>>, String> {
    let mut text = String::new();
    for tok in inner {
        match tok {
            Tok::Ch(c) => text.push(*c),
            _ => return Ok(None),
        }
    }
    let parts: Vec<&str> = text.split("..").collect();
    let (start, end, step) = match parts.as_slice() {
        [start, end] => (*start, *end, None),
        [start, end, step] => (*start, *end, Some(*step)),
        _ => return Ok(None),
    };
    let step = match step.map(str::parse::<i64>) {
        None => 1,
        Some(Ok(step)) => step.unsigned_abs().max(1),
        Some(Err(_)) => return Ok(None),
    };
    let word = |s: String| s.chars().map(Tok::Ch).collect::<Vec<_>>();
    if let (Ok(a), Ok(b)) = (start.parse::<i64>(), end.parse::<i64>()) {
        let count = a.abs_diff(b) / step + 1;
        if count > MAX_WORDS as u64 {
            return Err(too_many());
        }
        let padded = |s: &str| {
            s.trim_start_matches('-').len() > 1 && s.trim_start_matches('-').starts_with('0')
        };
        let width = if padded(start) || padded(end) {
            start.len().max(end.len())
        } else {
            0
        };
        let mut items = Vec::new();
        let mut value = a;
        for _ in 0..count {
            items.push(word(format!("{value:0width$}")));
            value = if a <= b {
                value.saturating_add(step as i64)
            } else {
                value.saturating_sub(step as i64)
            };
        }
        return Ok(Some(items));
    }
    let single = |s: &str| {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c as u32),
            _ => None,
        }
    };
    let (Some(a), Some(b)) = (single(start), single(end)) else {
        return Ok(None);
    };
    let step = u32::try_from(step).unwrap_or(u32::MAX);
    let mut items = Vec::new();
    let mut value = a;
    loop {
        if let Some(c) = char::from_u32(value) {
            items.push(vec![Tok::Ch(c)]);
        }
        let next = if a <= b {
            value.checked_add(step).filter(|v| *v <= b)
        } else {
            value.checked_sub(step).filter(|v| *v >= b)
        };
        match next {
            Some(next) => value = next,
            None => break,
        }
    }
    Ok(Some(items))
}

/// One word after variables are expanded and split: each character with whether it is an
/// unquoted glob character, and what is known of the value.
#[derive(Debug, Clone, Default)]
pub(super) struct Field {
    pub(super) chars: Vec<(char, bool)>,
    pub(super) opaque: bool,
    pub(super) from_subst: bool,
    pub(super) subst_programs: Vec<String>,
    /// Kept even when empty (it had quotes or literal text).
    pub(super) keep: bool,
}

impl Field {
    pub(super) fn push_str(&mut self, text: &str, active: bool) {
        self.chars.extend(
            text.chars()
                .map(|c| (c, active && matches!(c, '*' | '?' | '['))),
        );
    }

    pub(super) fn text(&self) -> String {
        self.chars.iter().map(|(c, _)| c).collect()
    }

    /// Whether pathname expansion applies: an unquoted `*`, `?`, or `[` closed later.
    pub(super) fn has_glob(&self) -> bool {
        self.chars.iter().enumerate().any(|(at, (c, active))| {
            *active
                && (matches!(c, '*' | '?')
                    || (*c == '['
                        && self
                            .chars
                            .get(at + 1..)
                            .is_some_and(|rest| rest.iter().skip(1).any(|(c, _)| *c == ']'))))
        })
    }
}

/// Splits fields at the blanks of an unquoted value (bash's default `IFS`); glob characters in
/// it stay active.
pub(super) struct Splitter {
    pub(super) fields: Vec<Field>,
    pub(super) current: Field,
    pending: bool,
}

impl Splitter {
    pub(super) fn new(keep: bool) -> Self {
        Self {
            fields: Vec::new(),
            current: Field {
                keep,
                ..Field::default()
            },
            pending: false,
        }
    }

    fn flush_pending(&mut self) {
        if self.pending {
            self.pending = false;
            let done = std::mem::take(&mut self.current);
            if done.keep || !done.chars.is_empty() {
                self.fields.push(done);
            }
        }
    }

    /// Text that joins the current field (literal text, a quoted value).
    pub(super) fn join(&mut self, text: &str, active: bool) {
        if text.is_empty() {
            return;
        }
        self.flush_pending();
        self.current.push_str(text, active);
        self.current.keep = true;
    }

    /// Appends the current field's flags without text (an opaque part, a quoted empty value).
    pub(super) fn mark(&mut self, update: impl FnOnce(&mut Field)) {
        self.flush_pending();
        update(&mut self.current);
    }

    /// A part whose value is only known at run time, shown as `text`.
    pub(super) fn opaque(&mut self, text: &str, from_subst: bool, programs: Vec<String>) {
        self.mark(|field| {
            field.opaque = true;
            field.from_subst |= from_subst;
            field.subst_programs.extend(programs);
            field.keep = true;
        });
        self.current.push_str(text, false);
    }

    /// An unquoted value: split at blanks.
    pub(super) fn split(&mut self, value: &str) {
        for c in value.chars() {
            if matches!(c, ' ' | '\t' | '\n') {
                self.pending = true;
                continue;
            }
            self.flush_pending();
            self.current.chars.push((c, matches!(c, '*' | '?' | '[')));
        }
    }

    pub(super) fn finish(mut self) -> Vec<Field> {
        let current = std::mem::take(&mut self.current);
        if current.keep || !current.chars.is_empty() {
            self.fields.push(current);
        }
        self.fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn word(text: &str) -> Vec<Piece> {
        let mut pieces = Vec::new();
        for c in text.chars() {
            if "{},~".contains(c) {
                pieces.push(Piece::Meta(c));
            } else {
                match pieces.last_mut() {
                    Some(Piece::Lit(t)) => t.push(c),
                    _ => pieces.push(Piece::Lit(c.to_string())),
                }
            }
        }
        pieces
    }

    fn expanded(text: &str) -> Vec<String> {
        braces(&word(text))
            .unwrap()
            .into_iter()
            .map(|pieces| {
                pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Lit(t) => t.clone(),
                        Piece::Meta(c) => c.to_string(),
                        Piece::Tilde => "<HOME>".into(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn brace_lists_and_sequences_expand_like_bash() {
        assert_eq!(expanded("a{b,c}d"), vec!["abd", "acd"]);
        assert_eq!(expanded("{x,y{1,2}}"), vec!["x", "y1", "y2"]);
        assert_eq!(expanded("{a}"), vec!["{a}"]);
        assert_eq!(expanded("{a{b,c}"), vec!["{ab", "{ac"]);
        assert_eq!(expanded("{,x}"), vec!["", "x"]);
        assert_eq!(expanded("{1..3}"), vec!["1", "2", "3"]);
        assert_eq!(expanded("{3..1}"), vec!["3", "2", "1"]);
        assert_eq!(expanded("{01..3}"), vec!["01", "02", "03"]);
        assert_eq!(expanded("{1..7..3}"), vec!["1", "4", "7"]);
        assert_eq!(expanded("{a..c}"), vec!["a", "b", "c"]);
        assert_eq!(expanded("{a..}"), vec!["{a..}"]);
        assert_eq!(
            expanded("{~/.ssh/id_rsa,/dev/null}"),
            vec!["<HOME>/.ssh/id_rsa", "/dev/null"]
        );
        assert_eq!(
            expanded("{OUT/p,a}"),
            vec!["OUT/p".to_owned(), "a".to_owned()]
        );
    }

    #[test]
    fn brace_expansion_is_bounded() {
        assert!(braces(&word("{1..100000}")).is_err());
        assert!(braces(&word("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")).is_err());
        assert_eq!(braces(&word("{1..256}")).unwrap().len(), 256);
    }
}
