//! git configuration given on the command line or written by `git config`: which keys make
//! git run a program (`core.fsmonitor`, `diff.external`, `alias.x=!cmd`, …), the dangers of a
//! git command line, and configuration that moves where hooks come from.

use super::args::{has_flag, option_values, positional};
use super::git::{GitLine, parse};
use crate::shell::Arg;

/// Whether setting `key` to `value` makes git run a program (or load configuration that can).
pub fn runs_program(key: &str, value: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let parts: Vec<&str> = key.split('.').collect();
    let (section, name) = match parts.as_slice() {
        [section, .., name] => (*section, *name),
        _ => return false,
    };
    let middle = parts.len() > 2;
    match (section, name) {
        ("core", n) => matches!(
            n,
            "fsmonitor"
                | "hookspath"
                | "pager"
                | "editor"
                | "sshcommand"
                | "askpass"
                | "gitproxy"
                | "alternaterefscommand"
        ),
        ("diff", "external") => !middle,
        ("diff", "textconv" | "command") => middle,
        ("filter", _) | ("pager", _) | ("protocol", _) | ("includeif", _) => true,
        ("merge", "driver") => middle,
        ("credential", "helper") => true,
        ("alias", _) => value.trim_start().starts_with('!'),
        ("sequence", "editor") => true,
        ("gpg", "program") => true,
        ("uploadpack", "packobjectshook") => true,
        ("remote", "uploadpack" | "receivepack" | "proxy") => middle,
        ("include", "path") => true,
        ("interactive", "difffilter") => true,
        ("web", "browser") => true,
        ("man" | "browser" | "difftool" | "mergetool", "cmd" | "path" | "viewer") => true,
        ("tar", "command") => middle,
        ("submodule", "update") => value.trim_start().starts_with('!'),
        ("url", "insteadof" | "pushinsteadof") => value.contains("ext::"),
        ("safe", "directory") => true,
        ("ssh", "variant") => true,
        ("sendemail", "sendmailcmd" | "smtpserver") => true,
        ("instaweb", "httpd") => true,
        _ => false,
    }
}

/// Why this git command is a danger, for each reason.
pub fn dangers(args: &[Arg]) -> Vec<String> {
    let line = parse(args);
    let mut out = Vec::new();
    let mut config = line.config();
    if let Some(sub @ ("clone" | "init" | "submodule")) = line.sub {
        config.extend(
            option_values(line.rest, Some('c'), "config")
                .into_iter()
                .map(|a| a.text),
        );
        if has_flag(line.rest, None, "template") {
            out.push(format!(
                "`git {sub} --template` copies hooks into the new repository, which git then runs"
            ));
        }
    }
    if let Some((key, value)) = config_set(&line) {
        config.push(format!("{key}={value}"));
    }
    for entry in config {
        let (key, value) = entry.split_once('=').unwrap_or((&entry, ""));
        if runs_program(key, value) {
            out.push(format!(
                "sets the git configuration `{key}`, which makes git run a program"
            ));
        }
    }
    for path in line.global_values("--exec-path") {
        out.push(format!("makes git run its commands from {path}"));
    }
    for dir in line.global_values("--git-dir") {
        if !dir.trim_end_matches('/').ends_with(".git") {
            out.push(format!(
                "makes git use the repository in {dir}, whose configuration can run programs"
            ));
        }
    }
    let pager_flag = |a: &Arg| {
        let t = a.text.as_str();
        (t.starts_with("-O") && t.len() > 2) || t.starts_with("--open-files-in-pager=")
    };
    if line.sub == Some("grep") && line.rest.iter().any(pager_flag) {
        out.push("`git grep -O…` runs the program it names on the files found".to_owned());
    }
    let runs_remote_program = line.rest.iter().any(|a| {
        ["--upload-pack", "--receive-pack", "--exec"]
            .iter()
            .any(|flag| a.text == *flag || a.text.starts_with(&format!("{flag}=")))
    }) || (matches!(line.sub, Some("clone" | "ls-remote"))
        && line.rest.iter().any(|a| a.text == "-u"));
    if runs_remote_program {
        out.push(
            "gives git a program to run for the transfer (`--upload-pack`, `--receive-pack`)"
                .to_owned(),
        );
    }
    out
}

/// Why this git command writes a protected control file without naming it: configuration
/// that moves where hooks come from.
pub fn protected(args: &[Arg]) -> Option<String> {
    let line = parse(args);
    line.config().into_iter().find_map(|entry| {
        let key = entry.split_once('=').map_or(entry.as_str(), |(k, _)| k);
        key.eq_ignore_ascii_case("core.hooksPath").then(|| {
            format!("`git -c {entry}` makes git run hooks from outside .git/hooks (.git/hooks/**)")
        })
    })
}

/// For `git config` (and its new `set`/`unset` forms) that changes configuration: the
/// subcommand, key and value.
pub(super) fn config_set(line: &GitLine<'_>) -> Option<(String, String)> {
    if line.sub != Some("config") {
        return None;
    }
    let rest = line.rest;
    let reads = [
        "get",
        "get-all",
        "get-regexp",
        "get-urlmatch",
        "get-color",
        "get-colorbool",
        "list",
        "l",
        "show-origin",
        "show-scope",
        "name-only",
    ];
    if rest.iter().any(|a| {
        let t = a.text.trim_start_matches('-');
        a.text.starts_with('-') && reads.contains(&t)
    }) {
        return None;
    }
    let operands = positional(
        rest,
        "f",
        &["file", "blob", "type", "default", "comment", "value"],
    );
    let texts: Vec<&str> = operands.iter().map(|a| a.text.as_str()).collect();
    let writes_flag = rest.iter().any(|a| {
        matches!(
            a.text.as_str(),
            "--unset"
                | "--unset-all"
                | "--add"
                | "--replace-all"
                | "--rename-section"
                | "--remove-section"
                | "-e"
                | "--edit"
        )
    });
    match texts.as_slice() {
        ["get" | "list", ..] => None,
        ["set", key, value, ..] | [key, value, ..] if *key != "set" || texts.len() > 2 => {
            Some(((*key).to_owned(), (*value).to_owned()))
        }
        [
            "set" | "unset" | "edit" | "rename-section" | "remove-section",
            ..,
        ] => Some((String::new(), String::new())),
        _ if writes_flag => Some((String::new(), String::new())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_running_keys() {
        for key in [
            "core.fsmonitor",
            "core.hooksPath",
            "CORE.PAGER",
            "diff.external",
            "diff.pdf.textconv",
            "filter.lfs.smudge",
            "merge.ours.driver",
            "credential.helper",
            "credential.https://x.helper",
            "gpg.ssh.program",
            "remote.origin.uploadpack",
            "includeIf.gitdir:~/x.path",
            "include.path",
            "uploadpack.packObjectsHook",
            "sequence.editor",
        ] {
            assert!(runs_program(key, "x"), "{key}");
        }
        assert!(runs_program("alias.st", "!sh -c id"));
        assert!(!runs_program("alias.st", "status"));
        for key in ["user.name", "color.ui", "diff.renames", "core.autocrlf"] {
            assert!(!runs_program(key, "x"), "{key}");
        }
    }
}
