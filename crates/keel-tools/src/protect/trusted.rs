//! What a command the user trusted runs from the project: a hook in a trusted
//! `.claude/settings.json` (`sh scripts/lint.sh`), a server of a trusted `.mcp.json`
//! (`python3 tools/server.py`). Such commands run outside the sandbox, so the files they
//! run must not be the model's to rewrite while the trust stands: each project path a
//! trusted command line names becomes a control file, and for an interpreter also its
//! script's folder (Python puts it first on the import path, Node resolves `./x` from it).
//!
//! Some commands run whatever the project says, through files no list can name: a build
//! tool (`make`, `cargo`), a package script (`npm run`), a module looked up in the project
//! (`python -m`). Those cannot be protected by path; [`Reach::any_code`] says so, in words the
//! trust question shows the user.
//!
//! Trade-off: the command line is read with the gate's shell analysis, so wrappers
//! (`env`, `bash -c`) are seen through, but what a program decides at run time (a config
//! file it looks for by itself) is not; the words "runs any code in this project" cover the
//! programs known to do that. A file an argument names is protected, a folder only when it
//! holds an interpreter's script or is on a module path (`PYTHONPATH`, `--require`): a
//! folder argument (`prettier --write src/`) is what the command works on, and protecting it
//! would lock the model out of the project; so are the arguments of a command that runs any
//! project code.

use std::path::{Path, PathBuf};

use crate::env::normalize;
use crate::permission::shell::{self, Arg, Invocation, ShellEnv, program_name, skip_options};

/// A file or folder a trusted command runs, and which command: a control file while the
/// trust stands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrustedPath {
    /// The path, absolute.
    pub path: PathBuf,
    /// Who runs it, completing "PATH, which …": "the trusted hook `sh lint.sh` runs".
    pub why: String,
}

/// A trusted command as it is configured.
#[derive(Debug, Clone, Copy)]
pub enum CommandLine<'a> {
    /// A shell command line (hooks run with `bash -c`).
    Shell(&'a str),
    /// A program, its arguments and the variables it is given (an MCP server).
    Argv {
        /// The program.
        program: &'a str,
        /// Its arguments.
        args: &'a [String],
        /// Variables set for it.
        env: &'a [(String, String)],
    },
}

/// What a trusted command line reaches in the project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Project files and folders it runs or names (absolute): protected while trusted.
    pub paths: Vec<PathBuf>,
    /// Why it runs code of the project that no path covers, one line each.
    pub any_code: Vec<String>,
}

impl Reach {
    fn protect(&mut self, path: PathBuf) {
        if !self.paths.contains(&path) {
            self.paths.push(path);
        }
    }

    fn any(&mut self, why: String) {
        if !self.any_code.contains(&why) {
            self.any_code.push(why);
        }
    }
}

/// Programs that run code the project defines (build files, package scripts, tests,
/// modules found in it), with what they run.
const RUNNERS: &[(&str, &str)] = &[
    ("make", "runs the project's Makefile"),
    ("gmake", "runs the project's Makefile"),
    ("just", "runs the project's justfile"),
    (
        "cargo",
        "builds and runs the project's code (build scripts included)",
    ),
    ("npm", "runs the project's package scripts and packages"),
    ("pnpm", "runs the project's package scripts and packages"),
    ("yarn", "runs the project's package scripts and packages"),
    ("uv", "runs code in the project's Python environment"),
    ("poetry", "runs code in the project's Python environment"),
    ("pipenv", "runs code in the project's Python environment"),
    ("pdm", "runs code in the project's Python environment"),
    ("hatch", "runs code in the project's Python environment"),
    ("rye", "runs code in the project's Python environment"),
    ("tox", "runs the project's test environments"),
    ("nox", "runs the project's noxfile"),
    ("pytest", "runs the project's tests and conftest files"),
    ("go", "builds and runs the project's code"),
    ("gradle", "runs the project's build scripts"),
    ("gradlew", "runs the project's build scripts"),
    ("mvn", "runs the project's build"),
    ("mvnw", "runs the project's build"),
    ("ant", "runs the project's build file"),
    ("rake", "runs the project's Rakefile"),
    ("bundle", "runs code from the project's Gemfile"),
    ("composer", "runs the project's package scripts"),
    ("dotnet", "builds and runs the project's code"),
    ("cmake", "runs the project's build files"),
    ("ninja", "runs the project's build files"),
    ("meson", "runs the project's build files"),
    ("bazel", "runs the project's build files"),
    ("bazelisk", "runs the project's build files"),
    ("sbt", "runs the project's build"),
    ("mix", "runs the project's build"),
    ("lein", "runs the project's build"),
    ("swift", "builds and runs the project's code"),
    ("zig", "runs the project's build file"),
    ("tsc", "loads the project's configuration and plugins"),
    (
        "pre-commit",
        "runs the hooks the project's .pre-commit-config.yaml names",
    ),
    (
        "lefthook",
        "runs the hooks the project's lefthook.yml names",
    ),
    ("husky", "runs the project's hooks"),
    (
        "lint-staged",
        "runs the commands the project's configuration names",
    ),
    (
        "eslint",
        "loads the project's configuration and plugins, which are code",
    ),
    (
        "prettier",
        "loads the project's configuration and plugins, which are code",
    ),
    (
        "stylelint",
        "loads the project's configuration and plugins, which are code",
    ),
    ("jest", "runs the project's tests and configuration"),
    ("vitest", "runs the project's tests and configuration"),
    ("mocha", "runs the project's tests and configuration"),
    (
        "pylint",
        "loads the project's configuration, which can run code",
    ),
    ("mypy", "loads the project's configuration and plugins"),
    ("flake8", "loads the project's configuration and plugins"),
    (
        "rubocop",
        "loads the project's configuration, which can require code",
    ),
    ("direnv", "runs the project's .envrc"),
    (
        "docker",
        "builds and runs what the project's files describe",
    ),
    (
        "podman",
        "builds and runs what the project's files describe",
    ),
    ("nx", "runs the project's tasks"),
    ("turbo", "runs the project's tasks"),
    ("lerna", "runs the project's package scripts"),
    ("phpunit", "runs the project's tests and configuration"),
    ("ctest", "runs the project's tests"),
];

/// Programs that run a package, from the project's own `node_modules` when it has one.
const PACKAGE_RUNNERS: &[&str] = &["npx", "pnpx", "bunx"];

/// Interpreters that take a script file, and how their options read: short options that
/// take a value, long ones that do, and options whose value is code or a module to load.
struct Interpreter {
    names: &'static [&'static str],
    short_values: &'static str,
    long_values: &'static [&'static str],
    /// Loads modules next to its script (Python, Node): the script's folder is code too.
    loads_beside: bool,
}

const INTERPRETER_TABLE: &[Interpreter] = &[
    Interpreter {
        names: &["python", "pypy"],
        short_values: "cmWXQ",
        long_values: &["check-hash-based-pycs"],
        loads_beside: true,
    },
    Interpreter {
        names: &["node", "nodejs", "tsx", "ts-node"],
        short_values: "epr",
        long_values: &[
            "eval",
            "print",
            "require",
            "import",
            "loader",
            "experimental-loader",
            "env-file",
            "conditions",
            "title",
        ],
        loads_beside: true,
    },
    Interpreter {
        names: &["ruby"],
        short_values: "eIrCE",
        long_values: &[],
        loads_beside: false,
    },
    Interpreter {
        names: &["perl"],
        short_values: "eEIMmx",
        long_values: &[],
        loads_beside: false,
    },
    Interpreter {
        names: &["php"],
        short_values: "cdrzf",
        long_values: &[],
        loads_beside: true,
    },
    Interpreter {
        names: &["lua", "luajit"],
        short_values: "el",
        long_values: &[],
        loads_beside: false,
    },
    Interpreter {
        names: &["Rscript"],
        short_values: "e",
        long_values: &[],
        loads_beside: false,
    },
];

/// The interpreter `name` is (`python3.11` is `python`).
fn interpreter(name: &str) -> Option<&'static Interpreter> {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETER_TABLE.iter().find(|i| i.names.contains(&base))
}

/// What `line`, run in `cwd`, reaches inside the `project` folders (the project root and
/// the workspace roots): the paths to protect, and what no path covers.
pub fn reach(line: CommandLine<'_>, cwd: &Path, project: &[PathBuf], env: &ShellEnv) -> Reach {
    let mut out = Reach::default();
    let walk = Walk {
        project,
        cwd,
        env,
        depth: std::cell::Cell::new(0),
    };
    let text = match line {
        CommandLine::Shell(text) => text.to_owned(),
        CommandLine::Argv { program, args, env } => {
            for (name, value) in env {
                walk.values(name, value, &mut out);
            }
            words_line(std::iter::once(program).chain(args.iter().map(String::as_str)))
        }
    };
    walk.line(&text, cwd, &mut out);
    out
}

/// Words as one shell line, each quoted as needed.
fn words_line<'w>(words: impl Iterator<Item = &'w str>) -> String {
    words.map(quote).collect::<Vec<_>>().join(" ")
}

/// Deepest nesting of command lines inside command lines that is read (`setsid sh -c
/// "…"`, `script -c "…"`); deeper is code only known at run time.
const MAX_NESTING: usize = 4;

/// One word quoted for the shell, as an MCP server's argument vector is passed unchanged.
fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,%".contains(c))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A command as shown in a message: one line, at most 120 characters.
fn shown(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= 120 {
        line
    } else {
        let cut: String = line.chars().take(119).collect();
        format!("{cut}…")
    }
}

struct Walk<'a> {
    project: &'a [PathBuf],
    cwd: &'a Path,
    env: &'a ShellEnv,
    depth: std::cell::Cell<usize>,
}

impl Walk<'_> {
    /// Reads one command line run in `cwd`.
    fn line(&self, text: &str, cwd: &Path, out: &mut Reach) {
        if self.depth.get() >= MAX_NESTING {
            out.any(format!(
                "`{}` nests commands too deeply to be read",
                shown(text)
            ));
            return;
        }
        self.depth.set(self.depth.get() + 1);
        let analysis = shell::analyze(text, Some(cwd), self.env);
        if analysis.truncated || !analysis.unseen.is_empty() {
            out.any(format!(
                "`{}` runs code it only finds at run time",
                shown(text)
            ));
        }
        for invocation in &analysis.invocations {
            self.invocation(invocation, out);
        }
        self.depth.set(self.depth.get() - 1);
    }

    /// Where a bare program name is found on the `PATH` the command gets, when that is a
    /// file of the project (an activated virtual environment, `node_modules/.bin`, a
    /// `PATH=./scripts:$PATH` in front of the command); `None` when it is the system's.
    fn on_path(&self, name: &str, path_var: Option<&str>, cwd: &Path) -> Option<PathBuf> {
        let fallback = std::env::var("PATH").ok();
        let path = path_var
            .or_else(|| self.env.vars.get("PATH").map(String::as_str))
            .or(fallback.as_deref())?;
        let found = path
            .split(':')
            .filter(|dir| !dir.is_empty() && !dir.contains('$'))
            .map(|dir| self.absolute(dir, cwd).join(name))
            .find(|candidate| std::fs::metadata(candidate).is_ok_and(|m| m.is_file()))?;
        self.inside(&found).then_some(found)
    }
    /// `path` when it lies inside a project folder, but is not one (a whole project is
    /// never a control file: the model works there).
    fn inside(&self, path: &Path) -> bool {
        self.project
            .iter()
            .any(|root| path.starts_with(root) && path != root.as_path())
            && !self.project.iter().any(|root| root.starts_with(path))
    }

    fn is_root(&self, path: &Path) -> bool {
        self.project.iter().any(|root| root.starts_with(path))
    }

    fn absolute(&self, text: &str, cwd: &Path) -> PathBuf {
        let path = Path::new(text);
        if path.is_absolute() {
            normalize(path)
        } else {
            normalize(&cwd.join(path))
        }
    }

    fn invocation(&self, invocation: &Invocation, out: &mut Reach) {
        if invocation.transparent {
            return;
        }
        let cwd = invocation.cwd.as_deref().unwrap_or(self.cwd);
        let Some(first) = invocation.argv.first() else {
            return;
        };
        let line = shown(&invocation.words().join(" "));
        if first.opaque {
            out.any(format!("`{line}` runs a program only known at run time"));
            return;
        }
        for (name, value) in &invocation.env {
            self.values(name, &value.text, out);
        }
        let name = program_name(&first.text).to_owned();
        if matches!(name.as_str(), "cd" | "pushd" | "popd") {
            return;
        }
        let runs_any_before = out.any_code.len();
        let args = invocation.args();
        let mut consumed = vec![false; args.len()];
        // The program itself, when it is a file of the project: named by a path, or found
        // on a PATH that leads into the project.
        let path_var = invocation
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.text.as_str());
        let program = if first.text.contains('/') {
            Some(self.absolute(&first.text, cwd)).filter(|p| self.inside(p))
        } else {
            self.on_path(&name, path_var, cwd)
        };
        if let Some(program) = program {
            let by_name = interpreter(&name);
            let by_shebang = shebang(&program).and_then(|i| interpreter(&i));
            let loads = by_name.or(by_shebang).is_some_and(|i| i.loads_beside);
            self.script(&program, loads, &line, out);
            if by_name.is_some() {
                out.any(format!(
                    "`{line}` runs the project's own interpreter, with the packages the project holds"
                ));
            }
        }
        if shell::SHELLS.contains(&name.as_str()) || matches!(name.as_str(), "." | "source") {
            let (at, seen) = if matches!(name.as_str(), "." | "source") {
                (0, Vec::new())
            } else {
                skip_options(args, 0, "oO", &["rcfile", "init-file"])
            };
            for (flag, value) in seen {
                if matches!(flag.as_str(), "rcfile" | "init-file") && !value.opaque {
                    self.script(&self.absolute(&value.text, cwd), false, &line, out);
                }
            }
            match args.get(at) {
                Some(script) if script.opaque => {
                    out.any(format!("`{line}` runs a script only known at run time"))
                }
                Some(script) if script.text != "-" => {
                    self.script(&self.absolute(&script.text, cwd), false, &line, out);
                    mark(&mut consumed, at);
                }
                _ => self.stdin_script(invocation, cwd, false, &line, out),
            }
        } else if let Some(kind) = interpreter(&name) {
            self.interpreted(kind, &name, invocation, cwd, &line, &mut consumed, out);
        } else if let Some((_, what)) = RUNNERS.iter().find(|(n, _)| *n == name) {
            if !(name == "uv" && args.first().is_some_and(|a| a.text == "tool")) {
                out.any(format!("`{line}` {what}"));
            }
        } else if PACKAGE_RUNNERS.contains(&name.as_str()) && self.has_node_modules(cwd) {
            out.any(format!(
                "`{line}` runs packages from the project's node_modules"
            ));
        } else if name == "deno" {
            self.deno(args, cwd, &line, &mut consumed, out);
        } else if name == "bun" {
            self.bun(args, cwd, &line, &mut consumed, out);
        } else if name == "run-parts" {
            // Every program in the folders it is given.
            for arg in args
                .iter()
                .filter(|a| !a.opaque && !a.text.starts_with('-'))
            {
                self.named(&arg.text, cwd, Named::Any, out);
            }
            return;
        } else if let Some(at) = args.iter().position(|a| !a.opaque && starts_code(&a.text)) {
            // A wrapper the analysis does not peel (`setsid`, `flock LOCK`, `chpst`): what
            // follows the first program it names is a command of its own.
            let rest: Vec<&str> = args[at..].iter().map(|a| a.text.as_str()).collect();
            self.line(&words_line(rest.into_iter()), cwd, out);
            for slot in consumed.iter_mut().skip(at) {
                *slot = true;
            }
        }
        // What a build tool or package script is given is data to code that no path covers
        // (`npm run lint src/`): protecting it would only lock the model out of the project.
        if out.any_code.len() > runs_any_before {
            return;
        }
        for (i, arg) in args.iter().enumerate() {
            if consumed.get(i).copied().unwrap_or(true) || arg.opaque {
                continue;
            }
            let text = arg.text.as_str();
            if text.contains(char::is_whitespace) {
                // A command line given as an argument (`script -c "python3 x.py"`).
                self.line(text, cwd, out);
                continue;
            }
            match text.split_once('=') {
                Some((option, value)) if option.starts_with('-') => {
                    self.named(value, cwd, Named::File, out);
                }
                // `core.hooksPath=scripts`, `--plugin-dir=x`: a folder of code.
                Some((key, value)) if names_folder(key) => {
                    self.named(value, cwd, Named::Any, out);
                }
                _ => self.named(text, cwd, Named::File, out),
            }
        }
    }

    /// The script a shell or interpreter reads on its standard input from a project file
    /// (`python3 < tools/hook.py`).
    fn stdin_script(
        &self,
        invocation: &Invocation,
        cwd: &Path,
        loads_beside: bool,
        line: &str,
        out: &mut Reach,
    ) {
        for redirect in invocation
            .redirects
            .iter()
            .filter(|r| !r.writes && r.via.is_none())
        {
            if redirect.target.opaque {
                out.any(format!("`{line}` runs a script only known at run time"));
            } else {
                self.script(
                    &self.absolute(&redirect.target.text, cwd),
                    loads_beside,
                    line,
                    out,
                );
            }
        }
    }

    /// A script (or program) the command runs: itself, and its folder unless that is a
    /// project's top folder, where `loads_beside` means any module there may be loaded.
    fn script(&self, path: &Path, loads_beside: bool, line: &str, out: &mut Reach) {
        if !self.inside(path) {
            return;
        }
        out.protect(path.to_path_buf());
        let Some(folder) = path.parent() else {
            return;
        };
        if self.is_root(folder) {
            if loads_beside {
                out.any(format!(
                    "`{line}` loads modules from the project's top folder {}",
                    folder.display()
                ));
            }
        } else {
            out.protect(folder.to_path_buf());
        }
    }

    /// A word that names an existing project path the command reads or runs: a file (a
    /// configuration, a module), or with [`Named::Any`] a folder too (a module path). A
    /// folder given as an argument is most often data the command works on (`src/`), which
    /// must stay the model's to change.
    fn named(&self, text: &str, cwd: &Path, what: Named, out: &mut Reach) {
        if text.is_empty() || text.starts_with('-') || text.contains("://") {
            return;
        }
        let path = self.absolute(text, cwd);
        let fits =
            std::fs::symlink_metadata(&path).is_ok_and(|meta| what == Named::Any || !meta.is_dir());
        if self.inside(&path) && fits {
            out.protect(path);
        }
    }

    /// A variable's value: every part that names a project path (`PYTHONPATH=lib:vendor`,
    /// `NODE_OPTIONS=--require ./x.js`) is code or configuration the command loads.
    fn values(&self, _name: &str, value: &str, out: &mut Reach) {
        for part in value.split([':', ' ', ',', ';']) {
            let part = part.split_once('=').map_or(part, |(_, v)| v);
            // `PYTHONPATH=lib:$PYTHONPATH`: the known parts count, the unknown one is the
            // environment's.
            if part.contains(['$', '`']) {
                continue;
            }
            self.named(part, self.cwd, Named::Any, out);
        }
    }

    #[expect(clippy::too_many_arguments, reason = "one walk's state, passed down")]
    fn interpreted(
        &self,
        kind: &Interpreter,
        name: &str,
        invocation: &Invocation,
        cwd: &Path,
        line: &str,
        consumed: &mut [bool],
        out: &mut Reach,
    ) {
        let args = invocation.args();
        let (at, seen) = skip_options(args, 0, kind.short_values, kind.long_values);
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        for (flag, value) in &seen {
            match (base, flag.as_str()) {
                ("python" | "pypy", "m") => out.any(format!(
                    "`{line}` imports the module `{}` from wherever Python finds it, the project included",
                    value.text
                )),
                ("python" | "pypy", "c") if self.inside_or_root(cwd) => out.any(format!(
                    "`{line}` imports modules from the folder it runs in, {}",
                    cwd.display()
                )),
                (_, "r" | "require" | "import" | "loader" | "experimental-loader" | "I" | "M")
                    if !value.opaque =>
                {
                    // A module or a folder of modules the interpreter loads.
                    self.named(&value.text, cwd, Named::Any, out);
                }
                _ => {}
            }
        }
        // Options and their values were read above; only what follows the script is data.
        for slot in consumed.iter_mut().take(at) {
            *slot = true;
        }
        let inline = seen
            .iter()
            .any(|(f, _)| matches!(f.as_str(), "c" | "e" | "m" | "eval" | "print" | "p"));
        if inline {
            return;
        }
        let script = match args.get(at) {
            Some(script) if script.opaque => {
                out.any(format!("`{line}` runs a script only known at run time"));
                return;
            }
            Some(script) if script.text != "-" => script,
            _ => {
                self.stdin_script(invocation, cwd, kind.loads_beside, line, out);
                return;
            }
        };
        mark(consumed, at);
        let path = self.absolute(&script.text, cwd);
        self.script(&path, kind.loads_beside, line, out);
        if matches!(base, "node" | "nodejs" | "tsx" | "ts-node") && self.inside(&path) {
            let from = path.parent().unwrap_or(cwd);
            if self.has_node_modules(from) {
                out.any(format!(
                    "`{line}` loads packages from the project's node_modules"
                ));
            }
        }
    }

    fn deno(&self, args: &[Arg], cwd: &Path, line: &str, consumed: &mut [bool], out: &mut Reach) {
        match args.first().map(|a| a.text.as_str()) {
            Some("task") => out.any(format!("`{line}` runs the project's deno tasks")),
            Some("run" | "serve" | "test" | "bench") => {
                let (at, _) = skip_options(args, 1, "", &["config", "import-map", "env-file"]);
                if let Some(script) = args.get(at).filter(|a| !a.opaque) {
                    mark(consumed, at);
                    self.script(&self.absolute(&script.text, cwd), true, line, out);
                }
            }
            _ => {}
        }
    }

    fn bun(&self, args: &[Arg], cwd: &Path, line: &str, consumed: &mut [bool], out: &mut Reach) {
        let at = usize::from(args.first().is_some_and(|a| a.text == "run"));
        let Some(target) = args.get(at).filter(|a| !a.opaque) else {
            return;
        };
        let file_like = target.text.contains('/')
            || [".js", ".ts", ".mjs", ".cjs", ".tsx", ".jsx"]
                .iter()
                .any(|ext| target.text.ends_with(ext));
        if file_like {
            mark(consumed, at);
            self.script(&self.absolute(&target.text, cwd), true, line, out);
            if self.has_node_modules(cwd) {
                out.any(format!(
                    "`{line}` loads packages from the project's node_modules"
                ));
            }
        } else if target.text == "x" {
            out.any(format!(
                "`{line}` runs packages from the project's node_modules"
            ));
        } else {
            out.any(format!("`{line}` runs the project's package scripts"));
        }
    }

    fn inside_or_root(&self, path: &Path) -> bool {
        self.project.iter().any(|root| path.starts_with(root))
    }

    /// Whether Node would look in a `node_modules` of the project from `from`: one in a
    /// folder between `from` and the project's top, or a `package.json` that would have one.
    fn has_node_modules(&self, from: &Path) -> bool {
        let Some(top) = self
            .project
            .iter()
            .filter(|root| from.starts_with(root))
            .min_by_key(|root| root.components().count())
        else {
            return false;
        };
        from.ancestors()
            .take_while(|dir| dir.starts_with(top))
            .any(|dir| dir.join("node_modules").exists() || dir.join("package.json").exists())
    }
}

/// The interpreter a script's `#!` line names (`#!/usr/bin/env python3` is `python3`).
fn shebang(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let text = std::str::from_utf8(head.get(..n)?).ok()?;
    let line = text.strip_prefix("#!")?.lines().next()?;
    let mut words = line.split_whitespace();
    let program = program_name(words.next()?);
    if program != "env" {
        return Some(program.to_owned());
    }
    words
        .find(|w| !w.starts_with('-') && !w.contains('='))
        .map(|w| program_name(w).to_owned())
}

/// Whether `word` names a program that runs code: a shell, an interpreter, a build tool or
/// a package runner (what follows it in a wrapper's arguments is a command).
fn starts_code(word: &str) -> bool {
    let name = program_name(word);
    shell::SHELLS.contains(&name)
        || interpreter(name).is_some()
        || RUNNERS.iter().any(|(n, _)| *n == name)
        || PACKAGE_RUNNERS.contains(&name)
        || matches!(name, "deno" | "bun" | "run-parts")
}

/// Whether a `key=value` argument's key names a folder of code (`core.hooksPath`,
/// `plugin_dir`).
fn names_folder(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["path", "dir", "dirs", "paths"]
        .iter()
        .any(|end| key.ends_with(end))
}

/// What a named path may be to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    /// Only a file.
    File,
    /// A file or a folder.
    Any,
}

fn mark(consumed: &mut [bool], at: usize) {
    if let Some(slot) = consumed.get_mut(at) {
        *slot = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn project() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for folder in ["scripts", "tools", "conf", "lib"] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        for file in [
            "scripts/lint.sh",
            "tools/server.py",
            "tools/helpers.py",
            "conf/server.toml",
            "server.py",
        ] {
            std::fs::write(root.join(file), "x").unwrap();
        }
        (dir, root)
    }

    fn shell(root: &Path, line: &str) -> Reach {
        let env = ShellEnv {
            home: Some(PathBuf::from("/home/u")),
            vars: [("CLAUDE_PROJECT_DIR".to_owned(), root.display().to_string())]
                .into_iter()
                .collect(),
        };
        reach(CommandLine::Shell(line), root, &[root.to_path_buf()], &env)
    }

    fn argv(root: &Path, program: &str, args: &[&str]) -> Reach {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        reach(
            CommandLine::Argv {
                program,
                args: &args,
                env: &[],
            },
            root,
            &[root.to_path_buf()],
            &ShellEnv::default(),
        )
    }

    #[test]
    fn a_hook_script_and_its_folder_are_protected() {
        let (_dir, root) = project();
        let found = shell(&root, "sh scripts/lint.sh --fix");
        assert_eq!(
            found.paths,
            vec![root.join("scripts/lint.sh"), root.join("scripts")]
        );
        assert!(found.any_code.is_empty(), "{:?}", found.any_code);
        let found = shell(&root, "\"$CLAUDE_PROJECT_DIR\"/scripts/lint.sh");
        assert_eq!(
            found.paths,
            vec![root.join("scripts/lint.sh"), root.join("scripts")]
        );
        let found = shell(&root, "bash -c 'cd tools && python3 server.py'");
        assert_eq!(
            found.paths,
            vec![root.join("tools/server.py"), root.join("tools")]
        );
        // A script that does not exist yet is protected too: the model must not create it.
        let found = shell(&root, "sh scripts/missing.sh");
        assert_eq!(
            found.paths,
            vec![root.join("scripts/missing.sh"), root.join("scripts")]
        );
    }

    #[test]
    fn a_server_script_its_folder_and_its_files_are_protected() {
        let (_dir, root) = project();
        let found = argv(
            &root,
            "python3",
            &["-u", "tools/server.py", "--config", "conf/server.toml"],
        );
        assert_eq!(
            found.paths,
            vec![
                root.join("tools/server.py"),
                root.join("tools"),
                root.join("conf/server.toml")
            ]
        );
        assert!(found.any_code.is_empty());
        let env = vec![("PYTHONPATH".to_owned(), "lib:/usr/lib".to_owned())];
        let found = reach(
            CommandLine::Argv {
                program: "python3",
                args: &["tools/server.py".to_owned()],
                env: &env,
            },
            &root,
            std::slice::from_ref(&root),
            &ShellEnv::default(),
        );
        assert!(found.paths.contains(&root.join("lib")), "{:?}", found.paths);
    }

    #[test]
    fn a_script_in_the_top_folder_says_it_loads_anything_there() {
        let (_dir, root) = project();
        let found = argv(&root, "python3", &["server.py"]);
        assert_eq!(found.paths, vec![root.join("server.py")]);
        assert_eq!(found.any_code.len(), 1, "{:?}", found.any_code);
        assert!(found.any_code[0].contains("top folder"));
    }

    #[test]
    fn build_tools_and_package_scripts_run_any_code() {
        let (_dir, root) = project();
        for line in [
            "npm run lint",
            "make check",
            "cargo clippy",
            "python -m tools.server",
            "uv run server.py",
            "just fmt",
            "env FOO=1 make",
        ] {
            let found = shell(&root, line);
            assert_eq!(found.any_code.len(), 1, "{line}: {:?}", found.any_code);
        }
        // A package fetched by npx runs no project code until the project has packages.
        assert!(
            argv(&root, "npx", &["-y", "@scope/server"])
                .any_code
                .is_empty()
        );
        std::fs::write(root.join("package.json"), "{}").unwrap();
        assert_eq!(
            argv(&root, "npx", &["-y", "@scope/server"]).any_code.len(),
            1
        );
        // Nothing at all from a program outside the project.
        let found = shell(&root, "/usr/bin/true");
        assert_eq!(found, Reach::default());
    }

    #[test]
    fn folders_a_command_works_on_stay_the_models() {
        let (_dir, root) = project();
        // A formatter's folder is data; its configuration file is not.
        let found = shell(
            &root,
            "/usr/bin/shfmt --write tools/ --config conf/server.toml",
        );
        assert_eq!(found.paths, vec![root.join("conf/server.toml")]);
        // A build tool's arguments: nothing to protect, it runs any code anyway.
        let found = shell(&root, "npm run lint -- conf/server.toml");
        assert!(found.paths.is_empty(), "{:?}", found.paths);
        assert_eq!(found.any_code.len(), 1);
    }

    /// The forms an attack round found unprotected (issue 27).
    #[test]
    fn scripts_behind_shebangs_wrappers_stdin_and_paths_are_found() {
        let (_dir, root) = project();
        // A shebang script in the top folder loads any module there.
        std::fs::write(
            root.join("hook.py"),
            "#!/usr/bin/env python3\nimport json\n",
        )
        .unwrap();
        let found = shell(&root, "\"$CLAUDE_PROJECT_DIR\"/hook.py");
        assert_eq!(found.paths, vec![root.join("hook.py")]);
        assert_eq!(found.any_code.len(), 1, "{:?}", found.any_code);
        // A module path with the environment's part after it.
        let found = shell(&root, "PYTHONPATH=lib:$PYTHONPATH python3 tools/server.py");
        assert!(found.paths.contains(&root.join("lib")), "{:?}", found.paths);
        // A script only known at run time.
        let found = shell(&root, "for f in scripts/*.sh; do sh \"$f\"; done");
        assert!(!found.any_code.is_empty(), "{found:?}");
        // A script on the interpreter's standard input.
        let found = shell(&root, "python3 < tools/server.py");
        assert_eq!(
            found.paths,
            vec![root.join("tools/server.py"), root.join("tools")]
        );
        // A wrapper the analysis does not peel, and a command line in an argument.
        for line in [
            "setsid python3 tools/server.py",
            "flock /tmp/x.lock python3 tools/server.py",
            "script -qc 'python3 tools/server.py' /dev/null",
        ] {
            let found = shell(&root, line);
            assert!(
                found.paths.contains(&root.join("tools")),
                "{line}: {found:?}"
            );
        }
        // A folder of programs, a hooks path, a script sourced before it exists.
        let found = shell(&root, "run-parts scripts");
        assert_eq!(found.paths, vec![root.join("scripts")]);
        let found = shell(&root, "/usr/bin/git -c core.hooksPath=scripts commit");
        assert!(found.paths.contains(&root.join("scripts")), "{found:?}");
        let found = shell(&root, ". scripts/later.sh");
        assert_eq!(
            found.paths,
            vec![root.join("scripts/later.sh"), root.join("scripts")]
        );
    }

    #[test]
    fn a_program_found_on_a_path_into_the_project_is_the_projects() {
        let (_dir, root) = project();
        std::fs::create_dir_all(root.join(".venv/bin")).unwrap();
        std::fs::write(root.join(".venv/bin/python3"), "").unwrap();
        let env = ShellEnv {
            home: None,
            vars: [(
                "PATH".to_owned(),
                format!("{}:/usr/bin:/bin", root.join(".venv/bin").display()),
            )]
            .into_iter()
            .collect(),
        };
        let found = reach(
            CommandLine::Shell("python3 tools/server.py"),
            &root,
            std::slice::from_ref(&root),
            &env,
        );
        assert!(
            found.paths.contains(&root.join(".venv/bin/python3")),
            "{found:?}"
        );
        assert!(found.paths.contains(&root.join(".venv/bin")), "{found:?}");
        assert!(!found.any_code.is_empty(), "{found:?}");
    }

    #[test]
    fn the_project_itself_is_never_protected_whole() {
        let (_dir, root) = project();
        let shown = root.display().to_string();
        let found = argv(&root, "npx", &["server-filesystem", &shown, "."]);
        assert!(found.paths.is_empty(), "{:?}", found.paths);
    }
}
