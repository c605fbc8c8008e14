//! One word into the arguments bash would pass: brace expansion, then `~`, variables and
//! substitutions, then splitting of unquoted values, then pathname expansion against the
//! file system. The analyzer's expansion step, apart from the walk over commands.

use super::analyzer::{Analyzer, State};
use super::expand::{Field, Splitter, braces};
use super::glob;
use super::invocation::Arg;
use super::word::{Piece, Word};

impl Analyzer<'_> {
    /// The arguments `word` expands to (none for an unquoted empty value).
    pub(super) fn expand_words(&mut self, word: &Word, state: &State, depth: usize) -> Vec<Arg> {
        let variants = match braces(&word.pieces) {
            Ok(variants) => variants,
            Err(reason) => {
                return vec![Arg {
                    text: word.raw(),
                    opaque: true,
                    unexpanded: Some(reason),
                    ..Arg::default()
                }];
            }
        };
        let mut out = Vec::new();
        for mut pieces in variants {
            user_tilde(&mut pieces);
            for field in self.fields(&pieces, word.quoted, state, depth) {
                out.extend(self.globbed(field, state));
            }
        }
        out
    }

    /// The one argument pieces expand to where bash neither splits nor globs: assignment
    /// values, here-strings, heredoc bodies.
    pub(super) fn expand_one(&mut self, pieces: &[Piece], state: &State, depth: usize) -> Arg {
        let mut arg = Arg::default();
        for piece in pieces {
            match piece {
                Piece::Lit(text) => arg.text.push_str(text),
                Piece::Meta(c) => arg.text.push(*c),
                Piece::Tilde => match &self.env.home {
                    Some(home) => arg.text.push_str(&home.to_string_lossy()),
                    None => {
                        arg.opaque = true;
                        arg.text.push('~');
                    }
                },
                Piece::Var { name, .. } => match self.var_value(name, state) {
                    Some(value) => arg.text.push_str(&value),
                    None => {
                        arg.opaque = true;
                        arg.text.push('$');
                        arg.text.push_str(name);
                    }
                },
                Piece::Process(inner) => {
                    let programs = self.run_substitution(inner, state, depth);
                    arg.subst_programs.extend(programs);
                    arg.opaque = true;
                    arg.from_subst = true;
                    arg.text.push_str("<(");
                    arg.text.push_str(inner);
                    arg.text.push(')');
                }
                Piece::Subst(inner) => match self.substitute(inner, state, depth) {
                    Ok((known, _)) => arg.text.push_str(&known),
                    Err(programs) => {
                        arg.subst_programs.extend(programs);
                        arg.opaque = true;
                        arg.from_subst = true;
                        arg.text.push_str("$(");
                        arg.text.push_str(inner);
                        arg.text.push(')');
                    }
                },
                Piece::Unknown(raw) => {
                    arg.opaque = true;
                    arg.text.push_str(raw);
                }
            }
        }
        arg
    }

    /// A variable's value as the script would see it; `None` when unknown, or when the script
    /// changes `IFS`, which makes how any value splits unknowable.
    fn var_value(&self, name: &str, state: &State) -> Option<String> {
        if self.ifs_changed {
            return None;
        }
        self.lookup(name, state)
    }

    /// Runs a substitution's script through the analysis. `Ok` with its output when that is
    /// known (`$(pwd)`, `$(echo …)`) and whether it is a list of words, else `Err` with the
    /// programs whose output it is.
    fn substitute(
        &mut self,
        inner: &str,
        state: &State,
        depth: usize,
    ) -> Result<(String, bool), Vec<String>> {
        if inner.trim() == "pwd"
            && let Some(cwd) = &state.cwd
        {
            return Ok((cwd.to_string_lossy().into_owned(), false));
        }
        let first = self.out.invocations.len();
        let mut inner_state = state.clone();
        self.script(inner, &mut inner_state, depth + 1);
        let ran = self.out.invocations.get(first..).unwrap_or(&[]);
        // `$(echo ~/.ssh/id_rsa)`: the output of a lone echo of known words is known.
        if let [only] = ran
            && only.program() == Some("echo")
            && only.redirects.is_empty()
            && only.args().iter().all(|a| !a.opaque && !a.glob)
        {
            let words: Vec<&str> = only
                .args()
                .iter()
                .map(|a| a.text.as_str())
                .skip_while(|t| matches!(*t, "-n" | "-e" | "-E"))
                .collect();
            return Ok((words.join(" "), true));
        }
        Err(ran
            .iter()
            .filter_map(|i| i.program().map(str::to_owned))
            .collect())
    }

    /// Runs a process substitution's script through the analysis; the programs it runs.
    fn run_substitution(&mut self, inner: &str, state: &State, depth: usize) -> Vec<String> {
        let first = self.out.invocations.len();
        let mut inner_state = state.clone();
        self.script(inner, &mut inner_state, depth + 1);
        self.out
            .invocations
            .get(first..)
            .unwrap_or(&[])
            .iter()
            .filter_map(|i| i.program().map(str::to_owned))
            .collect()
    }

    fn fields(
        &mut self,
        pieces: &[Piece],
        quoted: bool,
        state: &State,
        depth: usize,
    ) -> Vec<Field> {
        let mut split = Splitter::new(quoted);
        for piece in pieces {
            match piece {
                Piece::Lit(text) => split.join(text, false),
                Piece::Meta(c) => split.join(&c.to_string(), true),
                Piece::Tilde => match &self.env.home {
                    Some(home) => split.join(&home.to_string_lossy(), false),
                    None => split.opaque("~", false, Vec::new()),
                },
                Piece::Var { name, quoted } => match self.var_value(name, state) {
                    Some(value) if *quoted => {
                        split.join(&value, false);
                        split.mark(|field| field.keep = true);
                    }
                    Some(value) => split.split(&value),
                    None => split.opaque(&format!("${name}"), false, Vec::new()),
                },
                Piece::Process(inner) => {
                    let programs = self.run_substitution(inner, state, depth);
                    split.opaque(&format!("<({inner})"), true, programs);
                }
                Piece::Subst(inner) => match self.substitute(inner, state, depth) {
                    Ok((known, false)) => split.join(&known, false),
                    Ok((known, true)) => split.split(&known),
                    Err(programs) => split.opaque(&format!("$({inner})"), true, programs),
                },
                Piece::Unknown(raw) => split.opaque(raw, false, Vec::new()),
            }
        }
        split.finish()
    }

    /// A field after pathname expansion: its matches, itself when it is no pattern or matches
    /// nothing, or itself marked as not expandable.
    fn globbed(&mut self, field: Field, state: &State) -> Vec<Arg> {
        let base = Arg {
            text: field.text(),
            opaque: field.opaque,
            from_subst: field.from_subst,
            subst_programs: field.subst_programs.clone(),
            ..Arg::default()
        };
        if field.opaque || !field.has_glob() {
            return vec![base];
        }
        match glob::expand(
            &field.chars,
            state.cwd.as_deref(),
            self.matching,
            &mut self.budget,
        ) {
            Ok(found) if found.is_empty() => vec![Arg { glob: true, ..base }],
            Ok(found) => found
                .into_iter()
                .map(|text| Arg {
                    text,
                    ..base.clone()
                })
                .collect(),
            Err(reason) => vec![Arg {
                glob: true,
                unexpanded: Some(reason),
                ..base
            }],
        }
    }
}

/// `~name/…` at the start of a word: that user's home folder, as bash expands it (left as
/// written when there is no such user).
pub(super) fn user_tilde(pieces: &mut Vec<Piece>) {
    let (Some(Piece::Meta('~')), Some(Piece::Lit(text))) = (pieces.first(), pieces.get(1)) else {
        return;
    };
    let (name, rest) = text
        .split_once('/')
        .map_or((text.as_str(), None), |(n, r)| (n, Some(r)));
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        return;
    }
    let Some(home) = user_home(name) else { return };
    let expanded = match rest {
        Some(rest) => format!("{home}/{rest}"),
        None => home,
    };
    pieces.splice(..2, [Piece::Lit(expanded)]);
}

/// A user's home folder from the password file.
fn user_home(name: &str) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&name))
            .then(|| fields.get(5).map(|h| (*h).to_owned()))
            .flatten()
    })
}
