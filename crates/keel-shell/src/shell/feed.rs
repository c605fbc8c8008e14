//! What `xargs` reads from its input, as far as the command line shows it: the words an
//! `echo` upstream prints (`echo ~/.aws/credentials | xargs cat`), the files a `find` upstream
//! lists (anything under its start folders), the words of a here-string. Whatever else feeds
//! it stays a value only known at run time.

use super::analyzer::Analyzer;
use super::invocation::{Arg, Invocation, Stdin};

/// Most separate runs of an `xargs -I` command judged one by one.
const MAX_RUNS: usize = 16;

/// Programs that pass lines through without making new ones up, when they read stdin.
const PASS_THROUGH: &[&str] = &["head", "tail", "sort", "uniq", "tac", "shuf", "cat"];

impl Analyzer<'_> {
    /// The arguments `xargs` would read, and whether it may read others too.
    pub(super) fn stdin_words(
        &self,
        stdin: &Stdin,
        pipeline: usize,
        stage: usize,
        depth: usize,
    ) -> (Vec<Arg>, bool) {
        match stdin {
            Stdin::Text(text) if !text.opaque => (words_of(&text.text), false),
            Stdin::Pipe => {
                let upstream: Vec<&Invocation> = self
                    .out
                    .invocations
                    .iter()
                    .filter(|i| i.pipeline == pipeline && i.stage < stage && i.depth == depth)
                    .collect();
                let mut words = Vec::new();
                let mut unknown = upstream.is_empty();
                for invocation in upstream {
                    let args = invocation.args();
                    match invocation.program() {
                        Some("echo" | "printf") if args.iter().all(|a| !a.opaque) => {
                            for arg in args {
                                if !matches!(arg.text.as_str(), "-n" | "-e" | "-E") {
                                    words.extend(words_of(&arg.text.replace("\\n", "\n")));
                                }
                            }
                        }
                        Some("find" | "ls" | "tree" | "du" | "fd" | "fdfind") => {
                            let starts: Vec<&Arg> = if invocation.program() == Some("find") {
                                args.iter()
                                    .take_while(|a| {
                                        !(a.text.starts_with('-') || a.text == "(" || a.text == "!")
                                    })
                                    .collect()
                            } else {
                                args.iter().filter(|a| !a.text.starts_with('-')).collect()
                            };
                            if starts.is_empty() {
                                words.push(Arg {
                                    tree: true,
                                    ..Arg::literal(".")
                                });
                            }
                            for start in starts {
                                words.push(Arg {
                                    tree: true,
                                    ..start.clone()
                                });
                            }
                            // `ls` prints bare names, which xargs resolves elsewhere.
                            unknown |= invocation.program() != Some("find");
                        }
                        Some(program)
                            if PASS_THROUGH.contains(&program)
                                && args.iter().all(|a| {
                                    a.text.starts_with('-')
                                        || a.text.chars().all(|c| c.is_ascii_digit())
                                }) => {}
                        _ => unknown = true,
                    }
                }
                (words, unknown)
            }
            Stdin::Text(_) | Stdin::File | Stdin::Inherit => (Vec::new(), true),
        }
    }
}

fn words_of(text: &str) -> Vec<Arg> {
    text.split_whitespace().map(Arg::literal).collect()
}

/// The commands `xargs -I MARKER` runs: one per input word, the marker replaced, and one with
/// the marker unknown when the input may hold other words.
pub(super) fn xargs_variants(
    inner: &[Arg],
    marker: &str,
    words: &[Arg],
    unknown: bool,
) -> Vec<Vec<Arg>> {
    let replaced = |with: Option<&Arg>| -> Vec<Arg> {
        inner
            .iter()
            .enumerate()
            .map(|(at, arg)| {
                if at == 0 || !arg.text.contains(marker) {
                    return arg.clone();
                }
                match with {
                    Some(word) if arg.text == marker => word.clone(),
                    Some(word) => Arg {
                        text: arg.text.replace(marker, &word.text),
                        opaque: arg.opaque || word.opaque,
                        tree: word.tree,
                        ..arg.clone()
                    },
                    None => Arg {
                        opaque: true,
                        ..arg.clone()
                    },
                }
            })
            .collect()
    };
    let mut variants: Vec<Vec<Arg>> = words
        .iter()
        .take(MAX_RUNS)
        .map(|word| replaced(Some(word)))
        .collect();
    if unknown || words.len() > MAX_RUNS || variants.is_empty() {
        variants.push(replaced(None));
    }
    variants
}
