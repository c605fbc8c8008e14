//! What an analysis produces: arguments after expansion, the invocations a command line
//! would run (with their wrappers, redirections, folder and stdin), and the code that runs
//! but cannot be read. Plain data, apart from the analyzer that fills it in, so the gate and
//! the danger list depend only on this.

use std::collections::HashMap;
use std::path::PathBuf;

use super::programs::program_name;

/// An argument after expansion.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Arg {
    /// The expanded text; unknown parts keep their raw form (`$X`, `$(cmd)`).
    pub text: String,
    /// Part of its value cannot be known.
    pub opaque: bool,
    /// Part of its value is the output of a command substitution.
    pub from_subst: bool,
    /// A glob pattern that matched nothing when judged: the program gets it as written, and a
    /// file created before it runs could still match it.
    pub glob: bool,
    /// It stands for any file under `text` (the `{}` of `find -exec`, names `find` prints
    /// into `xargs`).
    pub tree: bool,
    /// A brace or glob pattern that could not be expanded, and why.
    pub unexpanded: Option<String>,
    /// Programs whose output was substituted into it.
    pub subst_programs: Vec<String>,
}

impl Arg {
    /// A known literal argument.
    pub fn literal(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// An argument whose value is only known at run time.
    pub fn unknown(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            opaque: true,
            ..Self::default()
        }
    }
}

/// A redirection to or from a file, after expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRedirect {
    /// Whether the file is written (else read).
    pub writes: bool,
    /// The file.
    pub target: Arg,
    /// The wrapper option that names the file (`time -o`), when it is not a redirection.
    pub via: Option<String>,
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stdin {
    /// Nothing in particular (the tool gives no stdin).
    Inherit,
    /// The previous stage of a pipeline.
    Pipe,
    /// A file.
    File,
    /// A heredoc or here-string with this text.
    Text(Arg),
}

/// One program that a command line would run, after unwrapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The real command: program first.
    pub argv: Vec<Arg>,
    /// Wrappers peeled off it, outermost first, each as the words it took.
    pub wrappers: Vec<Vec<String>>,
    /// Files it reads or writes through redirections.
    pub redirects: Vec<FileRedirect>,
    /// The folder relative paths resolve against; `None` when it cannot be known.
    pub cwd: Option<PathBuf>,
    /// Pipeline id, unique within one analysis.
    pub pipeline: usize,
    /// Position in the pipeline.
    pub stage: usize,
    /// Where its input comes from.
    pub stdin: Stdin,
    /// Variables it gets beyond the environment keel gives commands: assignments in front of
    /// it (`A=1 cmd`, `env A=1 cmd`) and variables the script exported or changed before.
    pub env: Vec<(String, Arg)>,
    /// Nesting level: 0 for the command line itself.
    pub depth: usize,
    /// It only runs a script that was parsed and is judged part by part (`bash -c '…'`,
    /// `eval`, a heredoc fed to `sh`), so the program itself is not judged.
    pub transparent: bool,
}

impl Invocation {
    /// The program's base name (`/usr/bin/rm` → `rm`).
    pub fn program(&self) -> Option<&str> {
        self.argv
            .first()
            .filter(|a| !a.opaque)
            .map(|a| program_name(&a.text))
    }

    /// The arguments after the program.
    pub fn args(&self) -> &[Arg] {
        self.argv.get(1..).unwrap_or(&[])
    }

    /// The command's words, program by base name, for rule matching and messages.
    pub fn words(&self) -> Vec<String> {
        let mut words: Vec<String> = self.argv.iter().map(|a| a.text.clone()).collect();
        if let (Some(first), Some(arg)) = (words.first_mut(), self.argv.first())
            && !arg.opaque
        {
            *first = program_name(first).to_owned();
        }
        words
    }

    /// The command with its wrappers, as words.
    pub fn outer_words(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut rest: Vec<String> = self.argv.iter().map(|a| a.text.clone()).collect();
        for wrapper in self.wrappers.iter().rev() {
            let mut words = wrapper.clone();
            words.extend(rest);
            if let Some(first) = words.first_mut() {
                *first = program_name(first).to_owned();
            }
            out.push(words.clone());
            rest = words;
        }
        out
    }
}

/// Why the gate cannot see the code a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnseenSource {
    /// Downloaded by this program (`curl … | sh`, `bash <(wget …)`).
    Download(String),
    /// The output of a command substitution or an unknown variable.
    Substitution,
    /// Piped in from another program.
    Pipe,
}

/// Code that runs but cannot be read: a program and where its code comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unseen {
    /// The program that runs the code (`sh`, `eval`, `python3`).
    pub program: String,
    /// Where the code comes from.
    pub source: UnseenSource,
}

/// Everything one command line would run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Analysis {
    /// Every program, including those inside substitutions and nested scripts.
    pub invocations: Vec<Invocation>,
    /// Code that runs but could not be read.
    pub unseen: Vec<Unseen>,
    /// Every script text parsed (the command line first).
    pub scripts: Vec<String>,
    /// Nesting or size went past the bounds; part of the input was not parsed.
    pub truncated: bool,
}

/// What the analysis needs from outside: the home folder and known variables.
#[derive(Debug, Clone, Default)]
pub struct ShellEnv {
    /// The home folder, for `~` and `$HOME`.
    pub home: Option<PathBuf>,
    /// Variables with known values (the environment bash would get).
    pub vars: HashMap<String, String>,
}
