//! Builtins that change variables: assignments, `export`/`declare -x`, `unset`, `set -a`,
//! and `read`/`printf -v`, which assign values only known at run time. Variables that reach
//! the environment of later programs are tracked, because `LD_PRELOAD=… cat` is not `cat`.

use super::analyzer::{Analyzer, State};
use super::invocation::Arg;
use super::word::Piece;
use crate::envvars;

/// Builtins whose `NAME=value` arguments are assignments, neither split nor globbed.
pub(super) const DECLARATIONS: &[&str] = &["export", "declare", "typeset", "local", "readonly"];

impl State {
    pub(super) fn export(&mut self, name: String, value: Arg) {
        self.exported.retain(|(n, _)| *n != name);
        self.exported.push((name, value));
    }
}

impl Analyzer<'_> {
    /// `NAME=value` as a name and its expanded value (a leading `~` expanded as bash does).
    pub(super) fn assignment(
        &mut self,
        pieces: &[Piece],
        state: &State,
        depth: usize,
    ) -> Option<(String, Arg)> {
        let mut pieces = pieces.to_vec();
        let name = match pieces.first_mut() {
            Some(Piece::Lit(text)) => {
                let (name, rest) = text.split_once('=')?;
                let name = name.to_owned();
                *text = rest.to_owned();
                name
            }
            _ => return None,
        };
        if matches!(pieces.first(), Some(Piece::Lit(t)) if t.is_empty()) {
            pieces.remove(0);
        }
        if matches!(pieces.first(), Some(Piece::Meta('~')))
            && pieces
                .get(1)
                .is_none_or(|p| matches!(p, Piece::Lit(t) if t.starts_with('/')))
        {
            pieces[0] = Piece::Tilde;
        }
        super::words::user_tilde(&mut pieces);
        Some((name, self.expand_one(&pieces, state, depth)))
    }

    /// A variable assignment without a command: known to the script, and in the environment
    /// of later programs when exported, inherited, or read by the shell or loader itself.
    pub(super) fn assign(&self, state: &mut State, name: String, value: Arg) {
        let known = (!value.opaque).then(|| value.text.clone());
        state.vars.insert(name.clone(), known);
        let effective = state.allexport
            || self.env.vars.contains_key(&name)
            || state.exported.iter().any(|(n, _)| *n == name)
            || envvars::affects_programs(&name);
        if effective {
            state.export(name, value);
        }
    }

    /// `export`, `declare -x`, …: assignments, exported when the builtin exports or the
    /// variable already is.
    fn declare(&self, program: &str, args: &[Arg], state: &mut State) {
        let mut exports = program == "export";
        let mut unexport = false;
        for arg in args {
            let text = arg.text.as_str();
            if let Some(flags) = text.strip_prefix('-').filter(|f| !f.contains('=')) {
                exports |= flags.contains('x');
                unexport |= program == "export" && flags.contains('n');
                continue;
            }
            if let Some(flags) = text.strip_prefix('+').filter(|f| !f.contains('=')) {
                unexport |= flags.contains('x');
                continue;
            }
            let (name, value) = match text.split_once('=') {
                Some((name, value)) => (
                    name.trim_end_matches('+').to_owned(),
                    Some(Arg {
                        text: value.to_owned(),
                        ..arg.clone()
                    }),
                ),
                None => (text.to_owned(), None),
            };
            if unexport {
                state.exported.retain(|(n, _)| *n != name);
                continue;
            }
            let value = match value {
                Some(value) => {
                    let known = (!value.opaque).then(|| value.text.clone());
                    state.vars.insert(name.clone(), known);
                    value
                }
                None => match self.lookup(&name, state) {
                    Some(known) => Arg::literal(known),
                    None => Arg::unknown(format!("${name}")),
                },
            };
            if exports {
                state.export(name, value);
            } else {
                self.assign(state, name, value);
            }
        }
    }

    /// Handles a builtin that changes variables; false when `program` is not one.
    pub(super) fn variables(&self, program: &str, args: &[Arg], state: &mut State) -> bool {
        match program {
            _ if DECLARATIONS.contains(&program) => self.declare(program, args, state),
            // Builtins that assign values only known at run time.
            "read" | "mapfile" | "readarray" | "printf" => {
                let names: Vec<&Arg> = if program == "printf" {
                    args.windows(2)
                        .filter(|w| w.first().is_some_and(|a| a.text == "-v"))
                        .filter_map(|w| w.get(1))
                        .collect()
                } else {
                    args.iter().filter(|a| !a.text.starts_with('-')).collect()
                };
                for name in names {
                    if is_name(&name.text) {
                        let unknown = Arg::unknown(format!("${}", name.text));
                        self.assign(state, name.text.clone(), unknown);
                    }
                }
            }
            "unset" => {
                for arg in args {
                    state.vars.remove(&arg.text);
                    state.exported.retain(|(n, _)| *n != arg.text);
                }
            }
            "set" => {
                for arg in args {
                    match arg.text.as_str() {
                        "allexport" => state.allexport = true,
                        t if t.starts_with('-') && t.contains('a') => state.allexport = true,
                        t if t.starts_with('+') && t.contains('a') => state.allexport = false,
                        _ => {}
                    }
                }
            }
            _ => return false,
        }
        true
    }
}

fn is_name(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
