//! What a program does to files and the network, judged from its arguments: `rm` deletes its
//! operands, `cp` reads its sources and writes its destination, `curl -o` writes, and so on.
//!
//! Trade-off: a table of common programs, not a model of every CLI. For a program it does not
//! know, every argument that looks like a path counts as a read, so that reaching credentials
//! through an unusual tool is still seen; writes by unknown programs are left to the mode
//! (an unknown program in `plan` is not read-only, in `ask` it asks).
//!
//! The pieces: `args` reads options and operands the way most CLIs lay them out, `tables`
//! lists programs by what they do, `files` says which files each known program touches; this
//! file holds the verdicts built from them ([`classify`], [`uses_network`]).

mod args;
mod files;
mod tables;

use super::rules::Action;
use super::shell::Arg;
use args::{is_remote, option_values};
use tables::{GIT_NETWORK, GIT_READ_ONLY, NETWORK, READ_ONLY};

pub use args::has_flag;
pub use files::file_effects;

/// How a command counts for the modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandClass {
    /// Only reads (allowed in `plan`, and counts as a read in `ask`).
    ReadOnly,
    /// Mostly reaches the network (asks in `plan`).
    Network,
    /// Anything else.
    Other,
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
}

/// The git subcommand and its arguments, global options (`-C dir`, `-c k=v`) skipped.
pub fn git_subcommand(args: &[Arg]) -> Option<(&str, &[Arg])> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let text = arg.text.as_str();
        if matches!(
            text,
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace"
        ) {
            i += 2;
        } else if text.starts_with('-') {
            i += 1;
        } else {
            return Some((text, args.get(i + 1..).unwrap_or(&[])));
        }
    }
    None
}

/// How a command counts for the modes.
pub fn classify(program: &str, args: &[Arg]) -> CommandClass {
    match program {
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
        "sort" if has_flag(args, Some('o'), "output") => CommandClass::Other,
        "tree" if has_flag(args, Some('o'), "output") => CommandClass::Other,
        "rg" if args.iter().any(|a| a.text.starts_with("--pre")) => CommandClass::Other,
        "env" if !args.is_empty() => CommandClass::Other,
        "git" => match git_subcommand(args) {
            Some(("branch", rest)) => {
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
                    )
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
            Some((sub, _)) if GIT_READ_ONLY.contains(&sub) => CommandClass::ReadOnly,
            Some(("ls-remote", _)) => CommandClass::Network,
            _ => CommandClass::Other,
        },
        "curl" => {
            let writes = has_flag(args, Some('o'), "output")
                || has_flag(args, Some('O'), "remote-name")
                || has_flag(args, None, "remote-name-all")
                || has_flag(args, Some('c'), "cookie-jar")
                || has_flag(args, Some('D'), "dump-header");
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
                || has_flag(args, None, "spider");
            if to_stdout {
                CommandClass::Network
            } else {
                CommandClass::Other
            }
        }
        "ping" | "dig" | "nslookup" | "host" | "ssh" | "nc" | "ncat" | "netcat" | "telnet"
        | "http" | "https" | "xh" => CommandClass::Network,
        _ if READ_ONLY.contains(&program) => CommandClass::ReadOnly,
        _ => CommandClass::Other,
    }
}

/// Whether the program reaches the network with these arguments.
pub fn uses_network(program: &str, args: &[Arg]) -> bool {
    match program {
        "git" => git_subcommand(args).is_some_and(|(sub, _)| GIT_NETWORK.contains(&sub)),
        "rsync" => args.iter().any(|a| is_remote(&a.text)),
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
        assert_eq!(classify("make", &args("")), CommandClass::Other);
    }
}
