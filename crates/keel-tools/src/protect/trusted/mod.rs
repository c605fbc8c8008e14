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

mod programs;

use programs::{
    Interpreter, PACKAGE_RUNNERS, RUNNERS, interpreter, names_folder, shebang, starts_code,
};

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
    /// Adds what `other` reaches, each path and reason once.
    pub fn merge(&mut self, other: Reach) {
        for path in other.paths {
            self.protect(path);
        }
        for why in other.any_code {
            self.any(why);
        }
    }

    /// Each path as a file a trusted command runs, `why` naming the command ("the trusted
    /// hook `…` runs").
    pub fn trusted_paths(&self, why: &str) -> Vec<TrustedPath> {
        self.paths
            .iter()
            .map(|path| TrustedPath {
                path: path.clone(),
                why: why.to_owned(),
            })
            .collect()
    }

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
            for (_, value) in env {
                walk.values(value, &mut out);
            }
            words_line(std::iter::once(program).chain(args.iter().map(String::as_str)))
        }
    };
    walk.line(&text, cwd, &mut out);
    out
}

/// Words as one shell line, each quoted as needed.
fn words_line<'w>(words: impl Iterator<Item = &'w str>) -> String {
    words.map(shell::quote_word).collect::<Vec<_>>().join(" ")
}

/// Deepest nesting of command lines inside command lines that is read (`setsid sh -c
/// "…"`, `script -c "…"`); deeper is code only known at run time.
const MAX_NESTING: usize = 4;

/// A command as shown in a message: one line, at most 120 characters.
pub fn shown(text: &str) -> String {
    crate::output::one_line(text, 120)
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
        self.inside_or_root(path) && !self.is_root(path)
    }

    /// `path` is a project folder or one above it.
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

    /// Reads one program the line runs into `out`.
    fn invocation(&self, invocation: &Invocation, out: &mut Reach) {
        let mut here = Reach::default();
        self.program(invocation, &mut here);
        out.merge(here);
    }

    /// [`Self::invocation`] into a reach of its own, so that what this program alone runs
    /// decides whether its arguments are data to code no path covers.
    fn program(&self, invocation: &Invocation, out: &mut Reach) {
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
        for (_, value) in &invocation.env {
            self.values(&value.text, out);
        }
        let name = program_name(&first.text).to_owned();
        if matches!(name.as_str(), "cd" | "pushd" | "popd") {
            return;
        }
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
            self.interpreted(kind, invocation, cwd, &line, &mut consumed, out);
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
        if !out.any_code.is_empty() {
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
    fn values(&self, value: &str, out: &mut Reach) {
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

    fn interpreted(
        &self,
        kind: &Interpreter,
        invocation: &Invocation,
        cwd: &Path,
        line: &str,
        consumed: &mut [bool],
        out: &mut Reach,
    ) {
        let args = invocation.args();
        let (at, seen) = skip_options(args, 0, kind.short_values, kind.long_values);
        // The family's first name: `python3.11` and `pypy` read as `python`.
        let family = kind.names.first().copied().unwrap_or_default();
        for (flag, value) in &seen {
            match (family, flag.as_str()) {
                ("python", "m") => out.any(format!(
                    "`{line}` imports the module `{}` from wherever Python finds it, the project included",
                    value.text
                )),
                ("python", "c") if self.inside_or_root(cwd) => out.any(format!(
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
        if family == "node" && self.inside(&path) {
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
mod tests;
