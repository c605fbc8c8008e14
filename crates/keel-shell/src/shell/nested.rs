//! Scripts inside scripts: `bash -c`, `eval`, `su -c`, `watch`, code fed to a shell on
//! stdin (a heredoc, `echo … | sh`), and the commands `find -exec` runs. Each is parsed with
//! the folder and environment of the invocation that runs it; what cannot be read is
//! recorded as unseen code.

use std::path::PathBuf;

use super::MAX_DEPTH;
use super::analyzer::{Analyzer, Planned, State};
use super::invocation::{Arg, Invocation, Stdin, Unseen, UnseenSource};
use super::programs::{DOWNLOADERS, is_download};

impl Analyzer<'_> {
    pub(super) fn unseen(&mut self, program: &str, source: UnseenSource) {
        self.out.unseen.push(Unseen {
            program: program.to_owned(),
            source,
        });
    }

    /// Parses a script run by the invocation at `index`, in its folder and environment.
    pub(super) fn nested(&mut self, text: &str, index: usize, depth: usize) {
        let (cwd, exported) = self
            .out
            .invocations
            .get(index)
            .map(|i| (i.cwd.clone(), i.env.clone()))
            .unwrap_or_default();
        let mut state = State {
            cwd,
            exported,
            ..State::default()
        };
        self.script(text, &mut state, depth + 1);
    }

    pub(super) fn mark_transparent(&mut self, index: usize) {
        if let Some(invocation) = self.out.invocations.get_mut(index) {
            invocation.transparent = true;
        }
    }

    /// Parses a script argument; returns whether it could be read.
    pub(super) fn nested_arg(
        &mut self,
        program: &str,
        script: &Arg,
        index: usize,
        depth: usize,
    ) -> bool {
        if script.from_subst {
            self.unseen(program, UnseenSource::Substitution);
            false
        } else {
            // Unknown variables stay as `$NAME` in the text and are judged unknown again.
            self.nested(&script.text, index, depth);
            true
        }
    }

    pub(super) fn stdin_script(
        &mut self,
        program: &str,
        stdin: &Stdin,
        reads_pipe: bool,
        index: usize,
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
                    self.nested(&source, index, depth);
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
                        self.nested(&text, index, depth);
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

    pub(super) fn find_exec(
        &mut self,
        args: &[Arg],
        cwd: Option<PathBuf>,
        state: &State,
        depth: usize,
    ) {
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
                if next.text == "{}" {
                    // Each file found: anything under the start folder.
                    next = Arg {
                        tree: true,
                        ..start.clone()
                    };
                } else if next.text.contains("{}") {
                    let base = start.text.trim_end_matches('/');
                    next.text = next.text.replace("{}", &format!("{base}/{{}}"));
                    next.tree = true;
                    next.opaque |= start.opaque;
                }
                inner.push(next);
            }
            if !inner.is_empty() {
                let pipeline = self.next_pipeline;
                self.next_pipeline += 1;
                let mut inner_state = State {
                    cwd: cwd.clone(),
                    ..state.clone()
                };
                if depth < MAX_DEPTH {
                    self.invocation(
                        Planned {
                            argv: inner,
                            redirects: Vec::new(),
                            stdin: Stdin::Inherit,
                            env: state.exported.clone(),
                            pipeline,
                            stage: 0,
                        },
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
