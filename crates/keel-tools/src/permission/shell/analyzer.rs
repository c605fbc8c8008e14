//! The analysis: walks the simple commands of a script with the variables and folder known so
//! far, expands words, follows `cd`, peels wrappers and recurses into nested scripts
//! (substitutions, `bash -c`, `eval`, `find -exec`, code fed on stdin), within the bounds
//! [`MAX_DEPTH`] and [`MAX_SCRIPTS`]. The one place that mutates analysis state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::invocation::{
    Analysis, Arg, FileRedirect, Invocation, ShellEnv, Stdin, Unseen, UnseenSource,
};
use super::lexer::tokenize;
use super::programs::{
    DOWNLOADERS, INTERPRETERS, SHELLS, is_download, peel, program_name, reads_stdin, resolve_dir,
    shell_c_script, skip_options,
};
use super::split::{Item, SimpleCommand, split};
use super::word::{Piece, RedirectKind, Word};
use super::{MAX_DEPTH, MAX_SCRIPTS};

#[derive(Debug, Clone, Default)]
struct State {
    cwd: Option<PathBuf>,
    /// Variables assigned by the script: `None` when the value is unknown.
    vars: HashMap<String, Option<String>>,
}

/// Parses `command` and lists every program it would run, starting in `cwd`.
pub fn analyze(command: &str, cwd: Option<&Path>, env: &ShellEnv) -> Analysis {
    let mut analyzer = Analyzer {
        env,
        out: Analysis::default(),
        next_pipeline: 0,
    };
    let mut state = State {
        cwd: cwd.map(Path::to_path_buf),
        vars: HashMap::new(),
    };
    analyzer.script(command, &mut state, 0);
    analyzer.out
}

struct Analyzer<'e> {
    env: &'e ShellEnv,
    out: Analysis,
    next_pipeline: usize,
}

impl Analyzer<'_> {
    fn script(&mut self, source: &str, state: &mut State, depth: usize) {
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

    fn lookup(&self, name: &str, state: &State) -> Option<String> {
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

    fn expand(&mut self, word: &Word, state: &State, depth: usize) -> Arg {
        self.expand_pieces(&word.pieces, word.glob, state, depth)
    }

    fn expand_pieces(&mut self, pieces: &[Piece], glob: bool, state: &State, depth: usize) -> Arg {
        let mut arg = Arg {
            glob,
            ..Arg::default()
        };
        for piece in pieces {
            match piece {
                Piece::Lit(text) => arg.text.push_str(text),
                Piece::Tilde => match &self.env.home {
                    Some(home) => arg.text.push_str(&home.to_string_lossy()),
                    None => {
                        arg.opaque = true;
                        arg.text.push('~');
                    }
                },
                Piece::Var(name) => match self.lookup(name, state) {
                    Some(value) => arg.text.push_str(&value),
                    None => {
                        arg.opaque = true;
                        arg.text.push('$');
                        arg.text.push_str(name);
                    }
                },
                Piece::Subst(inner) if inner.trim() == "pwd" && state.cwd.is_some() => {
                    if let Some(cwd) = &state.cwd {
                        arg.text.push_str(&cwd.to_string_lossy());
                    }
                }
                Piece::Subst(inner) => {
                    let first = self.out.invocations.len();
                    let mut inner_state = state.clone();
                    self.script(inner, &mut inner_state, depth + 1);
                    let programs = self
                        .out
                        .invocations
                        .get(first..)
                        .unwrap_or(&[])
                        .iter()
                        .filter_map(|i| i.program().map(str::to_owned))
                        .collect::<Vec<_>>();
                    arg.subst_programs.extend(programs);
                    arg.opaque = true;
                    arg.from_subst = true;
                    arg.text.push_str("$(");
                    arg.text.push_str(inner);
                    arg.text.push(')');
                }
                Piece::Unknown(raw) => {
                    arg.opaque = true;
                    arg.text.push_str(raw);
                }
            }
        }
        arg
    }

    fn command(&mut self, command: SimpleCommand, base: usize, state: &mut State, depth: usize) {
        let pipeline = base + command.pipeline;
        let mut words = command.words.into_iter().peekable();
        let mut assignments = Vec::new();
        while let Some(word) = words.next_if(|w| w.assignment) {
            let mut pieces = word.pieces.clone();
            let name = match pieces.first_mut() {
                Some(Piece::Lit(text)) => match text.split_once('=') {
                    Some((name, rest)) => {
                        let name = name.to_owned();
                        *text = rest.to_owned();
                        name
                    }
                    None => continue,
                },
                _ => continue,
            };
            let value = self.expand_pieces(&pieces, false, state, depth);
            assignments.push((name, value));
        }
        let argv: Vec<Arg> = words.map(|w| self.expand(&w, state, depth)).collect();
        if argv.is_empty() {
            for (name, value) in assignments {
                let known = (!value.opaque).then_some(value.text);
                state.vars.insert(name, known);
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
                    let target = self.expand(&redirect.target, state, depth);
                    redirects.push(FileRedirect {
                        writes: true,
                        target,
                    });
                }
                RedirectKind::Read => {
                    let target = self.expand(&redirect.target, state, depth);
                    if redirect.fd.is_none_or(|fd| fd == 0) {
                        stdin = Stdin::File;
                    }
                    redirects.push(FileRedirect {
                        writes: false,
                        target,
                    });
                }
                RedirectKind::Dup => {}
                RedirectKind::Heredoc { body } => {
                    stdin = Stdin::Text(self.expand(body, state, depth));
                }
                RedirectKind::HereString => {
                    let mut text = self.expand(&redirect.target, state, depth);
                    text.text.push('\n');
                    stdin = Stdin::Text(text);
                }
            }
        }
        self.invocation(
            argv,
            redirects,
            stdin,
            pipeline,
            command.stage,
            state,
            depth,
        );
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one place builds invocations; a struct would only rename these"
    )]
    fn invocation(
        &mut self,
        mut argv: Vec<Arg>,
        redirects: Vec<FileRedirect>,
        stdin: Stdin,
        pipeline: usize,
        stage: usize,
        state: &mut State,
        depth: usize,
    ) {
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
            if let Some(text) = &peel.split {
                let mut split_words: Vec<Arg> = split(tokenize(text))
                    .into_iter()
                    .filter_map(|item| match item {
                        Item::Command(c) => Some(c.words),
                        _ => None,
                    })
                    .flatten()
                    .map(|w| self.expand(&w, state, depth))
                    .collect();
                split_words.extend(inner);
                inner = split_words;
            }
            if peel.appends_stdin {
                reads_pipe = false;
                if inner.is_empty() {
                    inner.push(Arg::literal("echo"));
                }
                match &peel.replace {
                    Some(marker) => {
                        for arg in inner.iter_mut().skip(1) {
                            if arg.text.contains(marker.as_str()) {
                                arg.opaque = true;
                            }
                        }
                    }
                    None => inner.push(Arg::unknown("{stdin}")),
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
                    self.nested(&text, cwd, depth);
                    self.mark_transparent(index);
                }
            }
            "su" => {
                let (_, seen) = skip_options(&args, 0, "cs", &["command", "shell"]);
                if let Some((_, script)) = seen
                    .into_iter()
                    .find(|(flag, _)| flag == "c" || flag == "command")
                    && self.nested_arg(&program, &script, cwd, depth)
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
                    self.nested(&text, cwd, depth);
                    self.mark_transparent(index);
                }
            }
            "find" => self.find_exec(&args, cwd, state, depth),
            _ if SHELLS.contains(&program.as_str()) => {
                let parsed = match shell_c_script(&argv) {
                    Some(Some(script)) => self.nested_arg(&program, script, cwd, depth),
                    None if reads_stdin(&program, &args) => {
                        self.stdin_script(&program, &stdin, reads_pipe, index, cwd, depth, true)
                    }
                    Some(None) | None => false,
                };
                if parsed {
                    self.mark_transparent(index);
                }
            }
            _ if INTERPRETERS.contains(&program.as_str()) && reads_stdin(&program, &args) => {
                self.stdin_script(&program, &stdin, reads_pipe, index, cwd, depth, false);
            }
            _ => {}
        }
    }

    fn unseen(&mut self, program: &str, source: UnseenSource) {
        self.out.unseen.push(Unseen {
            program: program.to_owned(),
            source,
        });
    }

    fn nested(&mut self, text: &str, cwd: Option<PathBuf>, depth: usize) {
        let mut state = State {
            cwd,
            vars: HashMap::new(),
        };
        self.script(text, &mut state, depth + 1);
    }

    fn mark_transparent(&mut self, index: usize) {
        if let Some(invocation) = self.out.invocations.get_mut(index) {
            invocation.transparent = true;
        }
    }

    /// Parses a script argument; returns whether it could be read.
    fn nested_arg(
        &mut self,
        program: &str,
        script: &Arg,
        cwd: Option<PathBuf>,
        depth: usize,
    ) -> bool {
        if script.from_subst {
            self.unseen(program, UnseenSource::Substitution);
            false
        } else {
            // Unknown variables stay as `$NAME` in the text and are judged unknown again.
            self.nested(&script.text, cwd, depth);
            true
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "private helper; the arguments are the invocation's parts"
    )]
    fn stdin_script(
        &mut self,
        program: &str,
        stdin: &Stdin,
        reads_pipe: bool,
        index: usize,
        cwd: Option<PathBuf>,
        depth: usize,
        is_shell: bool,
    ) -> bool {
        match stdin {
            Stdin::Text(text) => {
                if let Some(downloader) = is_download(&text.subst_programs) {
                    self.unseen(program, UnseenSource::Download(downloader));
                    false
                } else if text.from_subst || !is_shell {
                    if text.from_subst {
                        self.unseen(program, UnseenSource::Substitution);
                    }
                    false
                } else {
                    let source = text.text.clone();
                    self.nested(&source, cwd, depth);
                    true
                }
            }
            Stdin::Pipe if reads_pipe => {
                let Some(me) = self.out.invocations.get(index) else {
                    return false;
                };
                let (pipeline, stage) = (me.pipeline, me.stage);
                let upstream: Vec<&Invocation> = self
                    .out
                    .invocations
                    .iter()
                    .filter(|i| i.pipeline == pipeline && i.stage < stage && i.depth == depth)
                    .collect();
                let downloader = upstream.iter().find_map(|i| {
                    i.program()
                        .filter(|p| DOWNLOADERS.contains(p))
                        .map(str::to_owned)
                        .or_else(|| i.argv.iter().find_map(|a| is_download(&a.subst_programs)))
                });
                if let Some(downloader) = downloader {
                    self.unseen(program, UnseenSource::Download(downloader));
                    return false;
                }
                // `echo 'cmd' | sh`: the script is the echoed text.
                let echoed = match upstream.as_slice() {
                    [only]
                        if is_shell
                            && matches!(only.program(), Some("echo" | "printf"))
                            && only.args().iter().all(|a| !a.opaque) =>
                    {
                        Some(
                            only.args()
                                .iter()
                                .filter(|a| !matches!(a.text.as_str(), "-n" | "-e" | "-E"))
                                .map(|a| a.text.as_str())
                                .collect::<Vec<_>>()
                                .join(" "),
                        )
                    }
                    _ => None,
                };
                match echoed {
                    Some(text) => {
                        self.nested(&text, cwd, depth);
                        true
                    }
                    None => {
                        self.unseen(program, UnseenSource::Pipe);
                        false
                    }
                }
            }
            Stdin::Pipe | Stdin::Inherit | Stdin::File => false,
        }
    }

    fn find_exec(&mut self, args: &[Arg], cwd: Option<PathBuf>, state: &State, depth: usize) {
        let start = args
            .iter()
            .take_while(|a| !(a.text.starts_with('-') || a.text == "(" || a.text == "!"))
            .find(|a| !a.text.starts_with('-'))
            .cloned()
            .unwrap_or_else(|| Arg::literal("."));
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            i += 1;
            if !matches!(arg.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let mut inner = Vec::new();
            while let Some(next) = args.get(i) {
                i += 1;
                if matches!(next.text.as_str(), ";" | "+") {
                    break;
                }
                let mut next = next.clone();
                if next.text.contains("{}") {
                    // The files found lie under the start folder.
                    let base = start.text.trim_end_matches('/');
                    next.text = next.text.replace("{}", &format!("{base}/{{}}"));
                    next.glob = true;
                    next.opaque |= start.opaque;
                }
                inner.push(next);
            }
            if !inner.is_empty() {
                let pipeline = self.next_pipeline;
                self.next_pipeline += 1;
                let mut inner_state = State {
                    cwd: cwd.clone(),
                    vars: state.vars.clone(),
                };
                if depth < MAX_DEPTH {
                    self.invocation(
                        inner,
                        Vec::new(),
                        Stdin::Inherit,
                        pipeline,
                        0,
                        &mut inner_state,
                        depth + 1,
                    );
                } else {
                    self.out.truncated = true;
                }
            }
        }
    }
}
