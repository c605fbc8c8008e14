//! What a program does to files and the network, judged from its arguments: `rm` deletes its
//! operands, `cp` reads its sources and writes its destination, `curl -o` writes, and so on.
//!
//! Trade-off: a table of common programs, not a model of every CLI. For a program it does not
//! know, every argument that looks like a path counts as a read, so that reaching credentials
//! through an unusual tool is still seen, and the program is [`CommandClass::Opaque`]: what
//! it runs is left to the mode and the sandbox.
//!
//! The pieces: `args` reads options and operands the way most CLIs lay them out, `tables`
//! lists programs by what they do, `files` and `archive` say which files each known program
//! touches, `git` takes git apart, `audit` lists the options that make an otherwise harmless
//! program write files or run other programs, `code` reads inline programs; this file holds
//! the verdicts built from them ([`classify`], [`uses_network`]).

mod archive;
mod args;
mod audit;
mod code;
mod files;
mod git;
mod git_config;
mod links;
mod tables;

use crate::Action;
use crate::shell::Arg;
use args::{has_flag as flag, is_remote, option_values};
use tables::{FILE_PROGRAMS, NETWORK, NO_FILES, READ_ONLY, READERS};

pub use args::has_flag;
pub use code::{inline_code, mentions};
pub use files::file_effects;
pub use git::start as git_start;
pub use git_config::{
    dangers as git_dangers, protected as git_protected, runs_program as git_key_runs_program,
};
pub use links::link_effects;

/// How a command counts for the modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandClass {
    /// Only reads (allowed in `plan`, and counts as a read in `ask`).
    ReadOnly,
    /// Mostly reaches the network (denied in `plan`: commands have no network there).
    Network,
    /// Known effects beyond reading, each judged on its own.
    Other,
    /// Runs code the gate cannot read (an unknown program, a script, inline interpreter code,
    /// a program named in an option); the modes decide how far to trust the sandbox with it.
    Opaque,
}

/// One file effect of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEffect {
    /// What it does to the file.
    pub action: Action,
    /// The path as an argument (relative to the command's folder).
    pub path: Arg,
    /// Whether it applies to a whole tree.
    pub recursive: bool,
    /// For a symlink's target: a relative target resolves against the folder of this link
    /// (the link itself when it is an existing folder), not the command's.
    pub anchor: Option<Arg>,
}

/// A link a command may create: later paths through it cannot be judged from the file system
/// as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEffect {
    /// The link (or the folder links are made in).
    pub at: Arg,
    /// When `at` is an existing folder, the names made in it.
    pub names: Vec<String>,
    /// `at` is a folder in which any new path may turn out to be a link (an extracted
    /// archive, a checkout).
    pub tree: bool,
}

/// The git subcommand and its arguments, global options (`-C dir`, `-c k=v`) skipped.
pub fn git_subcommand(args: &[Arg]) -> Option<(&str, &[Arg])> {
    let line = git::parse(args);
    line.sub.map(|sub| (sub, line.rest))
}

/// Whether the analyzer knows what `program` does with its arguments.
fn known(program: &str) -> bool {
    READ_ONLY.contains(&program)
        || READERS.contains(&program)
        || NO_FILES.contains(&program)
        || FILE_PROGRAMS.contains(&program)
        || NETWORK.contains(&program)
}

/// How a command counts for the modes.
pub fn classify(program: &str, args: &[Arg]) -> CommandClass {
    if audit::runs_programs(program, args) {
        return CommandClass::Opaque;
    }
    match program {
        "source" | "." => CommandClass::Opaque,
        "find" => {
            let writes = args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "-delete"
                        | "-exec"
                        | "-execdir"
                        | "-ok"
                        | "-okdir"
                        | "-fprint"
                        | "-fprint0"
                        | "-fprintf"
                        | "-fls"
                )
            });
            if writes {
                CommandClass::Other
            } else {
                CommandClass::ReadOnly
            }
        }
        "git" => git::classify(args),
        "sed" => {
            let effects = code::sed_effects(args);
            if effects.runs {
                CommandClass::Opaque
            } else if effects.writes.is_empty()
                && !flag(args, Some('i'), "in-place")
                && !args.iter().any(|a| a.text.starts_with("-i"))
            {
                CommandClass::ReadOnly
            } else {
                CommandClass::Other
            }
        }
        "awk" | "gawk" | "mawk" | "nawk" => {
            if code::awk_is_filter(args) {
                CommandClass::ReadOnly
            } else {
                CommandClass::Opaque
            }
        }
        "env" if !args.is_empty() => CommandClass::Other,
        "curl" => {
            let writes = flag(args, Some('o'), "output")
                || flag(args, Some('O'), "remote-name")
                || flag(args, None, "remote-name-all")
                || flag(args, Some('c'), "cookie-jar")
                || flag(args, Some('D'), "dump-header");
            if writes {
                CommandClass::Other
            } else {
                CommandClass::Network
            }
        }
        "wget" => {
            let to_stdout = option_values(args, Some('O'), "output-document")
                .iter()
                .any(|v| v.text == "-")
                || flag(args, None, "spider");
            if to_stdout {
                CommandClass::Network
            } else {
                CommandClass::Other
            }
        }
        "ping" | "dig" | "nslookup" | "host" | "ssh" | "nc" | "ncat" | "netcat" | "telnet"
        | "http" | "https" | "xh" => CommandClass::Network,
        _ if audit::not_read_only(program, args) => CommandClass::Other,
        _ if READ_ONLY.contains(&program) => CommandClass::ReadOnly,
        _ if known(program) => CommandClass::Other,
        _ => CommandClass::Opaque,
    }
}

/// Whether the program reaches the network with these arguments.
pub fn uses_network(program: &str, args: &[Arg]) -> bool {
    match program {
        "git" => git::uses_network(args),
        "rsync" => args.iter().any(|a| is_remote(&a.text)),
        "openssl" => args.first().is_some_and(|a| {
            matches!(a.text.as_str(), "s_client" | "s_server" | "s_time" | "ocsp")
        }),
        _ => NETWORK.contains(&program),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn args(line: &str) -> Vec<Arg> {
        line.split_whitespace().map(Arg::literal).collect()
    }

    fn summary(program: &str, line: &str) -> Vec<(Action, String, bool)> {
        file_effects(program, &args(line))
            .into_iter()
            .map(|e| (e.action, e.path.text, e.recursive))
            .collect()
    }

    #[test]
    fn copy_like_programs_read_sources_and_write_targets() {
        assert_eq!(
            summary("cp", "-r a b dest"),
            vec![
                (Action::Read, "a".into(), true),
                (Action::Read, "b".into(), true),
                (Action::Write, "dest".into(), true)
            ]
        );
        assert_eq!(
            summary("mv", "-t dir x"),
            vec![
                (Action::Delete, "x".into(), true),
                (Action::Write, "dir".into(), true)
            ]
        );
        assert_eq!(
            summary("scp", "-i key f host:"),
            vec![(Action::Read, "f".into(), false)]
        );
    }

    #[test]
    fn tar_modes_are_read() {
        assert_eq!(
            summary("tar", "czf out.tgz src"),
            vec![
                (Action::Write, "out.tgz".into(), false),
                (Action::Read, "src".into(), true)
            ]
        );
        assert_eq!(
            summary("tar", "-xzf a.tgz -C /opt"),
            vec![
                (Action::Read, "a.tgz".into(), false),
                (Action::Write, "/opt".into(), true)
            ]
        );
    }

    #[test]
    fn grep_skips_its_pattern() {
        assert_eq!(
            summary("grep", "-rn foo src"),
            vec![(Action::Read, "src".into(), true)]
        );
        assert_eq!(summary("rg", "foo"), vec![(Action::Read, ".".into(), true)]);
        assert_eq!(
            summary("grep", "-e foo a b"),
            vec![
                (Action::Read, "a".into(), false),
                (Action::Read, "b".into(), false)
            ]
        );
    }

    #[test]
    fn classes() {
        assert_eq!(
            classify("git", &args("status --short")),
            CommandClass::ReadOnly
        );
        assert_eq!(classify("git", &args("-C x log")), CommandClass::ReadOnly);
        assert_eq!(classify("git", &args("branch -D x")), CommandClass::Other);
        assert_eq!(classify("git", &args("branch new")), CommandClass::Other);
        assert_eq!(classify("git", &args("branch -a")), CommandClass::ReadOnly);
        assert_eq!(
            classify("find", &args(". -name x -delete")),
            CommandClass::Other
        );
        assert_eq!(
            classify("curl", &args("-s https://x")),
            CommandClass::Network
        );
        assert_eq!(
            classify("curl", &args("-o f https://x")),
            CommandClass::Other
        );
        assert_eq!(classify("make", &args("")), CommandClass::Opaque);
    }
}
