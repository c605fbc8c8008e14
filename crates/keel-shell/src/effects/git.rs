//! git, option by option: the global options before the subcommand (`-C`, `-c key=value`,
//! `--exec-path`, …), the configuration keys that make git run a program, which subcommands
//! only read, and what the others write (`--output`, the repository's configuration).
//!
//! Trade-off: git can run programs from its configuration almost anywhere (`core.fsmonitor`
//! on `status`, `diff.external` on `diff`, hooks on `commit`). The repository's own
//! configuration and hooks are protected control files, so the gate trusts them; what it
//! judges is what the command line adds: `-c`, `--config-env`, `--exec-path`, `--upload-pack`,
//! a pager given to `grep -O`, and configuration written by `git config`.

use super::args::{has_flag, option_values, positional};
use super::git_config::config_set;
use super::tables::{GIT_KNOWN, GIT_NETWORK, GIT_READ_ONLY};
use super::{CommandClass, FileEffect, LinkEffect};
use crate::Action;
use crate::shell::Arg;

/// git's global options that take a value as the next word.
const VALUED_GLOBALS: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--attr-source",
];

/// A git command line taken apart.
#[derive(Debug, Default)]
pub struct GitLine<'a> {
    /// Global options with their values (`-c` → `key=value`).
    pub globals: Vec<(&'a str, Option<&'a Arg>)>,
    /// Global options written as `--name=value`.
    pub inline: Vec<(&'a str, String)>,
    /// The subcommand.
    pub sub: Option<&'a str>,
    /// Its arguments.
    pub rest: &'a [Arg],
}

impl GitLine<'_> {
    pub(super) fn global_values(&self, name: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .globals
            .iter()
            .filter(|(n, _)| *n == name)
            .filter_map(|(_, v)| v.map(|a| a.text.clone()))
            .collect();
        out.extend(
            self.inline
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.clone()),
        );
        out
    }

    pub(super) fn has_global(&self, name: &str) -> bool {
        self.globals.iter().any(|(n, _)| *n == name) || self.inline.iter().any(|(n, _)| *n == name)
    }

    /// Configuration given on the command line (`-c`, `--config-env`), as `key=value`.
    pub(super) fn config(&self) -> Vec<String> {
        let mut out = self.global_values("-c");
        out.extend(self.global_values("--config-env"));
        out
    }
}

/// Splits a git command line into global options, subcommand and its arguments.
pub fn parse(args: &[Arg]) -> GitLine<'_> {
    let mut line = GitLine::default();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let text = arg.text.as_str();
        if let Some((name, value)) = text.split_once('=').filter(|(n, _)| n.starts_with("--")) {
            line.inline.push((name, value.to_owned()));
            i += 1;
        } else if VALUED_GLOBALS.contains(&text) {
            line.globals.push((text, args.get(i + 1)));
            i += 2;
        } else if text.starts_with('-') {
            line.globals.push((text, None));
            i += 1;
        } else {
            line.sub = Some(text);
            line.rest = args.get(i + 1..).unwrap_or(&[]);
            break;
        }
    }
    line
}

/// The configuration file a git command writes, if it writes one.
fn config_written(line: &GitLine<'_>) -> Option<Arg> {
    let rest = line.rest;
    let repo = || Some(Arg::literal(".git/config"));
    match line.sub? {
        "config" => {
            config_set(line)?;
            if has_flag(rest, None, "global") {
                Some(Arg::literal("~/.gitconfig"))
            } else if has_flag(rest, None, "system") {
                Some(Arg::literal("/etc/gitconfig"))
            } else if let Some(file) = option_values(rest, Some('f'), "file").into_iter().next() {
                Some(file)
            } else if has_flag(rest, None, "worktree") {
                Some(Arg::literal(".git/config.worktree"))
            } else {
                repo()
            }
        }
        "remote" => {
            let first = rest.iter().find(|a| !a.text.starts_with('-'))?;
            matches!(
                first.text.as_str(),
                "add" | "set-url" | "remove" | "rm" | "rename" | "set-branches" | "set-head"
            )
            .then(repo)?
        }
        "branch" => (has_flag(rest, Some('u'), "set-upstream-to")
            || has_flag(rest, None, "unset-upstream")
            || has_flag(rest, None, "edit-description")
            || has_flag(rest, Some('t'), "track"))
        .then(repo)?,
        "push" => has_flag(rest, Some('u'), "set-upstream").then(repo)?,
        "checkout" | "switch" => has_flag(rest, Some('t'), "track").then(repo)?,
        _ => None,
    }
}

/// The folders `-C` moves git to, in order, and whether the command names its repository
/// itself (`--git-dir`, `--work-tree`).
pub fn start(args: &[Arg]) -> (Vec<String>, bool) {
    let line = parse(args);
    let names_repository = line.has_global("--git-dir") || line.has_global("--work-tree");
    (line.global_values("-C"), names_repository)
}

/// How a git command counts for the modes.
pub fn classify(args: &[Arg]) -> CommandClass {
    let line = parse(args);
    let adds_config = ["-c", "--config-env", "--exec-path", "--git-dir"]
        .iter()
        .any(|g| line.has_global(g));
    let class = classify_sub(&line);
    if adds_config && class == CommandClass::ReadOnly {
        CommandClass::Other
    } else {
        class
    }
}

fn classify_sub(line: &GitLine<'_>) -> CommandClass {
    let rest = line.rest;
    let Some(sub) = line.sub else {
        return CommandClass::ReadOnly;
    };
    let writes_output = rest
        .iter()
        .any(|a| a.text == "--output" || a.text.starts_with("--output=") || a.text == "--ext-diff");
    let pager = rest
        .iter()
        .any(|a| a.text.starts_with("-O") || a.text.starts_with("--open-files-in-pager"));
    match sub {
        "submodule" if rest.iter().any(|a| a.text == "foreach") => CommandClass::Opaque,
        "bisect" if rest.iter().any(|a| a.text == "run") => CommandClass::Opaque,
        "rebase" if has_flag(rest, Some('x'), "exec") => CommandClass::Opaque,
        "filter-branch" | "difftool" | "mergetool" | "daemon" | "instaweb" | "send-email"
        | "web--browse" | "credential" => CommandClass::Opaque,
        "branch" => {
            let changes = rest.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "-d" | "-D"
                        | "--delete"
                        | "-m"
                        | "-M"
                        | "--move"
                        | "-c"
                        | "-C"
                        | "--copy"
                        | "-u"
                        | "--set-upstream-to"
                        | "--unset-upstream"
                        | "-f"
                        | "--force"
                        | "--edit-description"
                        | "-t"
                        | "--track"
                ) || a.text.starts_with("--set-upstream-to=")
            });
            let lists = rest.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "--list" | "-l" | "--contains" | "--merged" | "--no-merged" | "--points-at"
                )
            });
            let names = rest.iter().any(|a| !a.text.starts_with('-'));
            if changes || (names && !lists) {
                CommandClass::Other
            } else {
                CommandClass::ReadOnly
            }
        }
        "reflog" => match rest.iter().find(|a| !a.text.starts_with('-')) {
            Some(a) if matches!(a.text.as_str(), "expire" | "delete") => CommandClass::Other,
            _ => CommandClass::ReadOnly,
        },
        "config" => {
            if config_set(line).is_some() {
                CommandClass::Other
            } else {
                CommandClass::ReadOnly
            }
        }
        "remote" => match rest.iter().find(|a| !a.text.starts_with('-')) {
            None => CommandClass::ReadOnly,
            Some(a) if a.text == "get-url" => CommandClass::ReadOnly,
            Some(a) if matches!(a.text.as_str(), "show" | "update" | "prune") => {
                if a.text == "show" && rest.iter().any(|a| a.text == "-n") {
                    CommandClass::ReadOnly
                } else {
                    CommandClass::Network
                }
            }
            Some(_) => CommandClass::Other,
        },
        "grep" if pager => CommandClass::Other,
        "diff" | "log" | "show" | "whatchanged" if writes_output => CommandClass::Other,
        _ if GIT_READ_ONLY.contains(&sub) => CommandClass::ReadOnly,
        "ls-remote" => CommandClass::Network,
        _ if GIT_KNOWN.contains(&sub) || GIT_NETWORK.contains(&sub) => CommandClass::Other,
        // An alias or a `git-NAME` program found on PATH.
        _ => CommandClass::Opaque,
    }
}

/// Whether the git command reaches a remote.
pub fn uses_network(args: &[Arg]) -> bool {
    let line = parse(args);
    match line.sub {
        Some("remote") => line.rest.iter().any(|a| {
            matches!(a.text.as_str(), "update" | "prune")
                || (a.text == "show" && !line.rest.iter().any(|a| a.text == "-n"))
                || a.text == "-f"
        }),
        Some(sub) => GIT_NETWORK.contains(&sub),
        None => false,
    }
}

/// Files a git command reads, writes or deletes (relative to its `-C` folder).
pub fn file_effects(
    args: &[Arg],
    generic: impl Fn(&[Arg], &mut Vec<FileEffect>),
) -> Vec<FileEffect> {
    let line = parse(args);
    let rest = line.rest;
    let here = Arg::literal(".");
    let mut out = Vec::new();
    let effect = |action, path: &Arg, recursive| FileEffect {
        action,
        path: path.clone(),
        recursive,
        anchor: None,
    };
    match line.sub {
        Some("rm") => {
            let deep = super::args::is_recursive(rest);
            for path in positional(rest, "", &[]) {
                out.push(effect(Action::Delete, path, deep));
            }
        }
        Some("clean") => {
            let paths = positional(rest, "e", &["exclude"]);
            if paths.is_empty() {
                out.push(effect(Action::Delete, &here, true));
            }
            for path in paths {
                out.push(effect(Action::Delete, path, true));
            }
        }
        Some("mv") => {
            let mut operands = positional(rest, "", &[]);
            let target = operands.pop();
            for source in operands {
                out.push(effect(Action::Delete, source, true));
            }
            if let Some(target) = target {
                out.push(effect(Action::Write, target, true));
            }
        }
        Some("diff") if rest.iter().any(|a| a.text == "--no-index") => {
            for path in positional(rest, "", &["output"]) {
                out.push(effect(Action::Read, path, true));
            }
        }
        Some("clone") => {
            let operands = positional(
                rest,
                "cbou",
                &[
                    "config",
                    "branch",
                    "origin",
                    "upload-pack",
                    "depth",
                    "reference",
                    "separate-git-dir",
                    "template",
                    "filter",
                ],
            );
            let dest = operands
                .get(1)
                .map(|a| (*a).clone())
                .unwrap_or(here.clone());
            out.push(effect(Action::Write, &dest, true));
        }
        Some("status" | "log" | "diff" | "show" | "branch" | "ls-files" | "blame" | "grep") => {
            out.push(effect(Action::Read, &here, true));
            generic(args, &mut out);
        }
        _ => generic(args, &mut out),
    }
    for file in option_values(rest, None, "output") {
        out.push(effect(Action::Write, &file, false));
    }
    if line.sub == Some("format-patch") {
        let dirs = option_values(rest, Some('o'), "output-directory");
        if dirs.is_empty() {
            out.push(effect(Action::Write, &here, false));
        }
        for dir in dirs {
            out.push(effect(Action::Write, &dir, true));
        }
    }
    if line.sub == Some("archive") {
        for file in option_values(rest, Some('o'), "output") {
            out.push(effect(Action::Write, &file, false));
        }
    }
    if line.sub == Some("blame") {
        for file in option_values(rest, None, "contents") {
            out.push(effect(Action::Read, &file, false));
        }
    }
    if let Some(config) = config_written(&line) {
        out.push(effect(Action::Write, &config, false));
    }
    // `-C dir` moves where relative paths start.
    let dirs = line.global_values("-C");
    if !dirs.is_empty() {
        let base = dirs.iter().fold(String::new(), |acc, dir| {
            if dir.starts_with('/') || dir.starts_with('~') || acc.is_empty() {
                dir.clone()
            } else {
                format!("{}/{dir}", acc.trim_end_matches('/'))
            }
        });
        for e in &mut out {
            let t = &e.path.text;
            if !(t.starts_with('/') || t.starts_with('~')) {
                e.path.text = format!("{}/{t}", base.trim_end_matches('/'));
            }
        }
    }
    out
}

/// Links a git command may create in the work tree (checking out content can create
/// symlinks): the work tree, as a tree where anything new may be one.
pub fn link_effects(args: &[Arg]) -> Vec<LinkEffect> {
    let line = parse(args);
    let checks_out = matches!(
        line.sub,
        Some(
            "checkout"
                | "switch"
                | "restore"
                | "reset"
                | "merge"
                | "pull"
                | "rebase"
                | "cherry-pick"
                | "revert"
                | "stash"
                | "am"
                | "apply"
                | "worktree"
                | "submodule"
                | "clone"
        )
    );
    // `checkout -b NAME` without a start point changes no file.
    let new_branch_here = matches!(line.sub, Some("checkout" | "switch"))
        && line
            .rest
            .iter()
            .any(|a| matches!(a.text.as_str(), "-b" | "-B" | "-c" | "-C" | "--orphan"))
        && positional(line.rest, "bBcC", &["orphan"]).is_empty();
    if !checks_out || new_branch_here {
        return Vec::new();
    }
    let at = line
        .global_values("-C")
        .last()
        .cloned()
        .unwrap_or_else(|| ".".to_owned());
    vec![LinkEffect {
        at: Arg::literal(at),
        names: Vec::new(),
        tree: true,
    }]
}

#[cfg(test)]
mod tests {
    use super::super::git_config::{dangers, protected};
    use super::*;
    use pretty_assertions::assert_eq;

    fn args(line: &str) -> Vec<Arg> {
        line.split_whitespace().map(Arg::literal).collect()
    }

    #[test]
    fn git_classes() {
        let class = |line: &str| classify(&args(line));
        assert_eq!(class("status"), CommandClass::ReadOnly);
        assert_eq!(class("-c core.fsmonitor=x status"), CommandClass::Other);
        assert_eq!(class("--exec-path"), CommandClass::Other);
        assert_eq!(class("log --output=f"), CommandClass::Other);
        assert_eq!(class("diff --ext-diff"), CommandClass::Other);
        assert_eq!(class("grep -Ovim x"), CommandClass::Other);
        assert_eq!(class("reflog"), CommandClass::ReadOnly);
        assert_eq!(class("reflog expire --all"), CommandClass::Other);
        assert_eq!(class("config --get user.name"), CommandClass::ReadOnly);
        assert_eq!(class("config user.name"), CommandClass::ReadOnly);
        assert_eq!(class("config user.name me"), CommandClass::Other);
        assert_eq!(class("config --list"), CommandClass::ReadOnly);
        assert_eq!(class("remote -v"), CommandClass::ReadOnly);
        assert_eq!(class("remote add o u"), CommandClass::Other);
        assert_eq!(class("frobnicate"), CommandClass::Opaque);
        assert_eq!(class("commit -m x"), CommandClass::Other);
    }

    #[test]
    fn config_writes_go_to_the_right_file() {
        let written = |line: &str| {
            file_effects(&args(line), |_, _| {})
                .into_iter()
                .filter(|e| e.action == Action::Write)
                .map(|e| e.path.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(written("config core.pager x"), vec![".git/config"]);
        assert_eq!(written("config --global a.b c"), vec!["~/.gitconfig"]);
        assert_eq!(written("config --file f a.b c"), vec!["f"]);
        assert_eq!(written("-C sub config a.b c"), vec!["sub/.git/config"]);
        assert_eq!(written("config --get a.b"), Vec::<String>::new());
        assert_eq!(written("remote add o https://x"), vec![".git/config"]);
        assert_eq!(written("branch -u origin/main"), vec![".git/config"]);
        assert_eq!(written("diff --output=out.txt"), vec!["out.txt"]);
        assert!(protected(&args("-c core.hooksPath=h commit")).is_some());
        assert_eq!(dangers(&args("-c core.fsmonitor=x status")).len(), 1);
        assert_eq!(dangers(&args("-c user.name=x status")).len(), 0);
        assert_eq!(dangers(&args("config core.sshCommand x")).len(), 1);
    }
}
