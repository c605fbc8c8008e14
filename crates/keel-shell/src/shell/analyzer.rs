//! The analysis: walks the simple commands of a script with the variables and folder known so
//! far, expands words, follows `cd`, peels wrappers and recurses into nested scripts
//! (substitutions, `bash -c`, `eval`, `find -exec`, code fed on stdin), within the bounds
//! [`MAX_DEPTH`] and [`MAX_SCRIPTS`]. The one place that mutates analysis state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::builtins::DECLARATIONS;
use super::feed::xargs_variants;
use super::glob::{Budget, Matching};
use super::invocation::{Analysis, Arg, FileRedirect, Invocation, ShellEnv, Stdin, UnseenSource};
use super::lexer::tokenize;
use super::programs::{
    INTERPRETERS, SHELLS, is_download, peel, program_name, reads_stdin, resolve_dir,
    shell_c_script, skip_options,
};
use super::split::{Item, SimpleCommand, split};
use super::word::RedirectKind;
use super::{MAX_DEPTH, MAX_SCRIPTS};

#[derive(Debug, Clone, Default)]
pub(super) struct State {
    pub(super) cwd: Option<PathBuf>,
    /// Variables assigned by the script: `None` when the value is unknown.
    pub(super) vars: HashMap<String, Option<String>>,
    /// Variables later programs get beyond keel's environment: exported, or changed after
    /// being inherited.
    pub(super) exported: Vec<(String, Arg)>,
    /// `set -a`: every assignment is exported.
    pub(super) allexport: bool,
}

/// Parses `command` and lists every program it would run, starting in `cwd`.
pub fn analyze(command: &str, cwd: Option<&Path>, env: &ShellEnv) -> Analysis {
    let widened = ["shopt", "GLOBIGNORE"].iter().any(|w| command.contains(w));
    let mut analyzer = Analyzer {
        env,
        out: Analysis::default(),
        next_pipeline: 0,
        budget: Budget::default(),
        matching: if widened {
            Matching::Widened
        } else {
            Matching::Default
        },
        // Any mention of IFS: how unquoted values split is then unknown everywhere, including
        // in functions defined before the assignment.
        ifs_changed: command.contains("IFS"),
    };
    let mut state = State {
        cwd: cwd.map(Path::to_path_buf),
        ..State::default()
    };
    analyzer.script(command, &mut state, 0);
    analyzer.out
}

pub(super) struct Analyzer<'e> {
    pub(super) env: &'e ShellEnv,
    pub(super) out: Analysis,
    pub(super) next_pipeline: usize,
    pub(super) budget: Budget,
    pub(super) matching: Matching,
    pub(super) ifs_changed: bool,
}

impl Analyzer<'_> {
    pub(super) fn script(&mut self, source: &str, state: &mut State, depth: usize) {
        if depth > MAX_DEPTH || self.out.scripts.len() >= MAX_SCRIPTS {
            self.out.truncated = true;
            return;
        }
        self.out.scripts.push(source.to_owned());
        let items = split(tokenize(source));
        let base = self.next_pipeline;
        let highest = items
            .iter()
            .filter_map(|item| match item {
                Item::Command(command) => Some(command.pipeline),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        self.next_pipeline = base + highest + 1;
        let mut saved: Vec<State> = Vec::new();
        for item in items {
            match item {
                Item::Open => saved.push(state.clone()),
                Item::Close => {
                    if let Some(outer) = saved.pop() {
                        *state = outer;
                    }
                }
                Item::Command(command) => self.command(command, base, state, depth),
            }
        }
    }

    pub(super) fn lookup(&self, name: &str, state: &State) -> Option<String> {
        if let Some(value) = state.vars.get(name) {
            return value.clone();
        }
        match name {
            "HOME" => self
                .env
                .home
                .as_ref()
                .map(|h| h.to_string_lossy().into_owned()),
            "PWD" => state.cwd.as_ref().map(|c| c.to_string_lossy().into_owned()),
            _ => self.env.vars.get(name).cloned(),
        }
    }

    fn command(&mut self, command: SimpleCommand, base: usize, state: &mut State, depth: usize) {
        let pipeline = base + command.pipeline;
        let mut words = command.words.into_iter().peekable();
        let mut assignments = Vec::new();
        while let Some(word) = words.next_if(|w| w.assignment) {
            if let Some((name, value)) = self.assignment(&word.pieces, state, depth) {
                assignments.push((name, value));
            }
        }
        let rest: Vec<_> = words.collect();
        let declaration = rest
            .first()
            .and_then(|w| w.literal())
            .is_some_and(|t| DECLARATIONS.contains(&t.as_str()));
        let mut argv: Vec<Arg> = Vec::new();
        for word in &rest {
            if declaration && word.assignment {
                if let Some((name, value)) = self.assignment(&word.pieces, state, depth) {
                    argv.push(Arg {
                        text: format!("{name}={}", value.text),
                        ..value
                    });
                }
            } else {
                argv.extend(self.expand_words(word, state, depth));
            }
        }
        if argv.is_empty() {
            for (name, value) in assignments.drain(..) {
                self.assign(state, name, value);
            }
        }
        let mut redirects = Vec::new();
        let mut stdin = if command.stage > 0 {
            Stdin::Pipe
        } else {
            Stdin::Inherit
        };
        for redirect in &command.redirects {
            match &redirect.kind {
                RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite => {
                    for target in self.redirect_targets(&redirect.target, state, depth) {
                        redirects.push(FileRedirect {
                            writes: true,
                            target,
                            via: None,
                        });
                    }
                }
                RedirectKind::Read => {
                    if redirect.fd.is_none_or(|fd| fd == 0) {
                        stdin = Stdin::File;
                    }
                    for target in self.redirect_targets(&redirect.target, state, depth) {
                        redirects.push(FileRedirect {
                            writes: false,
                            target,
                            via: None,
                        });
                    }
                }
                RedirectKind::Dup => {}
                RedirectKind::Heredoc { body } => {
                    stdin = Stdin::Text(self.expand_one(&body.pieces, state, depth));
                }
                RedirectKind::HereString => {
                    let mut text = self.expand_one(&redirect.target.pieces, state, depth);
                    text.text.push('\n');
                    stdin = Stdin::Text(text);
                }
            }
        }
        let mut env = state.exported.clone();
        for (name, value) in assignments {
            env.retain(|(n, _)| *n != name);
            env.push((name, value));
        }
        self.invocation(
            Planned {
                argv,
                redirects,
                stdin,
                env,
                pipeline,
                stage: command.stage,
            },
            state,
            depth,
        );
    }

    fn redirect_targets(
        &mut self,
        word: &super::word::Word,
        state: &State,
        depth: usize,
    ) -> Vec<Arg> {
        let targets = self.expand_words(word, state, depth);
        if targets.is_empty() {
            // `> $EMPTY` fails in bash; judged as a file only known at run time.
            vec![Arg::unknown(word.raw())]
        } else {
            targets
        }
    }

    pub(super) fn invocation(&mut self, planned: Planned, state: &mut State, depth: usize) {
        let Planned {
            mut argv,
            mut redirects,
            stdin,
            mut env,
            pipeline,
            stage,
        } = planned;
        let mut wrappers = Vec::new();
        let mut cwd = state.cwd.clone();
        let mut reads_pipe = matches!(stdin, Stdin::Pipe);
        let home = self.env.home.clone();
        while let Some(first) = argv.first() {
            if first.opaque {
                break;
            }
            let program = program_name(&first.text).to_owned();
            let Some(peel) = peel(&program, &argv) else {
                break;
            };
            if peel.taken >= argv.len() && !peel.appends_stdin {
                break;
            }
            let taken = peel.taken.min(argv.len());
            let mut inner: Vec<Arg> = argv.split_off(taken);
            wrappers.push(argv.iter().map(|a| a.text.clone()).collect());
            if let Some(dir) = &peel.chdir {
                cwd = resolve_dir(dir, cwd.as_deref(), home.as_deref());
            }
            for (name, value) in peel.assigns {
                env.retain(|(n, _)| *n != name);
                env.push((name, value));
            }
            for (writes, via, target) in peel.files {
                redirects.push(FileRedirect {
                    writes,
                    target,
                    via: Some(via),
                });
            }
            if let Some(text) = &peel.split {
                let words: Vec<_> = split(tokenize(text))
                    .into_iter()
                    .filter_map(|item| match item {
                        Item::Command(c) => Some(c.words),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                let mut split_words = Vec::new();
                for word in &words {
                    split_words.extend(self.expand_words(word, state, depth));
                }
                split_words.extend(inner);
                inner = split_words;
            }
            if peel.appends_stdin {
                reads_pipe = false;
                if inner.is_empty() {
                    inner.push(Arg::literal("echo"));
                }
                let (words, unknown) = self.stdin_words(&stdin, pipeline, stage, depth);
                match &peel.replace {
                    Some(marker) => {
                        let mut variants = xargs_variants(&inner, marker, &words, unknown);
                        // Every input line runs the command once; all but the first run are
                        // judged as invocations of their own.
                        let first = variants.remove(0);
                        for variant in variants {
                            self.invocation(
                                Planned {
                                    argv: variant,
                                    redirects: redirects.clone(),
                                    stdin: Stdin::Inherit,
                                    env: env.clone(),
                                    pipeline,
                                    stage,
                                },
                                state,
                                depth,
                            );
                        }
                        inner = first;
                    }
                    None => {
                        inner.extend(words);
                        if unknown {
                            inner.push(Arg::unknown("{stdin}"));
                        }
                    }
                }
            }
            argv = inner;
        }
        let program = argv
            .first()
            .filter(|a| !a.opaque)
            .map(|a| program_name(&a.text).to_owned());
        let index = self.out.invocations.len();
        self.out.invocations.push(Invocation {
            argv: argv.clone(),
            wrappers,
            redirects,
            cwd: cwd.clone(),
            pipeline,
            stage,
            stdin: stdin.clone(),
            env,
            depth,
            transparent: false,
        });
        let Some(program) = program else { return };
        let args = argv.get(1..).unwrap_or(&[]).to_vec();
        // Code fed into an interpreter through a substitution: `bash <(curl …)`, `eval "$(…)"`.
        let runs_code = SHELLS.contains(&program.as_str())
            || INTERPRETERS.contains(&program.as_str())
            || matches!(program.as_str(), "eval" | "source" | "." | "su" | "watch");
        if runs_code
            && let Some(downloader) = args.iter().find_map(|a| is_download(&a.subst_programs))
        {
            self.unseen(&program, UnseenSource::Download(downloader));
            return;
        }
        // `source <(…)`, `bash <(…)`, `python3 <(…)`: the script is produced at run time.
        let script_file = matches!(program.as_str(), "source" | ".")
            || ((SHELLS.contains(&program.as_str()) || INTERPRETERS.contains(&program.as_str()))
                && shell_c_script(&argv).is_none());
        if script_file
            && args
                .iter()
                .find(|a| !a.text.starts_with('-'))
                .is_some_and(|a| a.from_subst)
        {
            self.unseen(&program, UnseenSource::Substitution);
            return;
        }
        match program.as_str() {
            "cd" | "pushd" => {
                let (at, _) = skip_options(&args, 0, "", &[]);
                state.cwd = match args.get(at) {
                    None => home.clone(),
                    Some(arg) if arg.text == "-" => None,
                    Some(arg) => resolve_dir(arg, cwd.as_deref(), home.as_deref()),
                };
            }
            "popd" => state.cwd = None,
            "eval" => {
                if args.iter().any(|a| a.from_subst) {
                    self.unseen(&program, UnseenSource::Substitution);
                } else {
                    let text = args
                        .iter()
                        .map(|a| a.text.as_str())
                        .collect::<Vec<_>>()
                        .join(" ");
                    self.nested(&text, index, depth);
                    self.mark_transparent(index);
                }
            }
            "su" => {
                let (_, seen) = skip_options(&args, 0, "cs", &["command", "shell"]);
                if let Some((_, script)) = seen
                    .into_iter()
                    .find(|(flag, _)| flag == "c" || flag == "command")
                    && self.nested_arg(&program, &script, index, depth)
                {
                    self.mark_transparent(index);
                }
            }
            "watch" => {
                let (at, _) = skip_options(&args, 0, "nqd", &["interval", "differences"]);
                let text = args
                    .get(at..)
                    .unwrap_or(&[])
                    .iter()
                    .map(|a| a.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                if args.iter().any(|a| a.from_subst) {
                    self.unseen(&program, UnseenSource::Substitution);
                } else {
                    self.nested(&text, index, depth);
                    self.mark_transparent(index);
                }
            }
            "find" => self.find_exec(&args, cwd, state, depth),
            _ if self.variables(&program, &args, state) => {}
            _ if SHELLS.contains(&program.as_str()) => {
                let parsed = match shell_c_script(&argv) {
                    Some(Some(script)) => self.nested_arg(&program, script, index, depth),
                    None if reads_stdin(&program, &args) => {
                        self.stdin_script(&program, &stdin, reads_pipe, index, depth, true)
                    }
                    Some(None) | None => false,
                };
                if parsed {
                    self.mark_transparent(index);
                }
            }
            _ if INTERPRETERS.contains(&program.as_str()) && reads_stdin(&program, &args) => {
                self.stdin_script(&program, &stdin, reads_pipe, index, depth, false);
            }
            _ => {}
        }
    }
}

/// An invocation before wrappers are peeled off it.
pub(super) struct Planned {
    pub(super) argv: Vec<Arg>,
    pub(super) redirects: Vec<FileRedirect>,
    pub(super) stdin: Stdin,
    pub(super) env: Vec<(String, Arg)>,
    pub(super) pipeline: usize,
    pub(super) stage: usize,
}
