//! Shell command parsing for the permission gate: a tokenizer for the POSIX/bash subset that
//! agents write, a splitter into simple commands, and an analysis that expands words as bash
//! would (braces, variables, splitting, globs against the file system), follows `cd`, tracks
//! exported variables, unwraps wrappers (`env`, `sudo`, `timeout`, `xargs`, …) and parses
//! nested scripts (`$( )`, backticks, `bash -c`, `eval`, heredocs and `echo … |` fed to a shell).
//!
//! Trade-off: this is not a shell. Parsing never fails; malformed input (unterminated quotes,
//! stray parentheses) is read as far as it goes. Whatever cannot be seen through (an unknown
//! variable, the output of a substitution, code piped in from elsewhere, any value once the
//! script touches `IFS`) is marked opaque, and the gate judges opaque things as strictly as
//! the worst case they could stand for. Expansion against the file system is bounded; a word
//! past the bounds is reported as not expandable.
//!
//! The pieces, in the order a command goes through them: `lexer` and `quoting` turn text into
//! the tokens of `word`, `split` groups them into simple commands, `words` expands each word
//! (with `expand` for braces and splitting and `glob` for patterns), and `analyzer` walks the
//! commands, with `builtins` for variables, `programs` and `feed` for wrappers and what
//! `xargs` reads, and `nested` for scripts inside scripts, into the [`Invocation`]s and
//! [`Unseen`] code defined in `invocation`.

mod analyzer;
mod builtins;
mod expand;
mod feed;
mod glob;
mod invocation;
mod lexer;
mod nested;
mod programs;
mod quoting;
mod split;
mod word;
mod words;

pub use analyzer::analyze;
pub use invocation::{
    Analysis, Arg, FileRedirect, Invocation, ShellEnv, Stdin, Unseen, UnseenSource,
};
pub use lexer::tokenize;
pub use programs::{DOWNLOADERS, INTERPRETERS, SHELLS, program_name, reads_stdin, skip_options};
pub use quoting::quote_word;
pub use split::{Item, SimpleCommand, split};
pub use word::{Operator, Piece, Redirect, RedirectKind, Token, Word};

/// Deepest nesting of scripts inside scripts (`bash -c "$(…)"` …) that is parsed (design
/// choice: deeper input is judged as unreadable code).
pub const MAX_DEPTH: usize = 8;
/// Most scripts parsed for one command, a bound on the work an adversarial input can cause.
pub const MAX_SCRIPTS: usize = 256;

#[cfg(test)]
mod tests;
