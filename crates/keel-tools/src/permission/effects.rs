//! What a program does to files and the network, judged from its arguments: `rm` deletes its
//! operands, `cp` reads its sources and writes its destination, `curl -o` writes, and so on.
//!
//! Trade-off: a table of common programs, not a model of every CLI. For a program it does not
//! know, every argument that looks like a path counts as a read, so that reaching credentials
//! through an unusual tool is still seen; writes by unknown programs are left to the mode
//! (an unknown program in `plan` is not read-only, in `ask` it asks).

use super::rules::Action;
use super::shell::Arg;

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

fn effect(action: Action, path: &Arg, recursive: bool) -> FileEffect {
    FileEffect {
        action,
        path: path.clone(),
        recursive,
    }
}

/// Non-option arguments, with values of the listed options skipped. Short options taking a
/// value are given as a string of letters, long ones by name.
fn positional<'a>(args: &'a [Arg], short_values: &str, long_values: &[&str]) -> Vec<&'a Arg> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.text.as_str();
        if options_done || arg.opaque || !text.starts_with('-') || text == "-" {
            out.push(arg);
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            if !long.contains('=') && long_values.contains(&long) {
                i += 1;
            }
            continue;
        }
        let cluster = &text[1..];
        if let Some(at) = cluster.find(|c| short_values.contains(c))
            && at + 1 == cluster.len()
        {
            i += 1;
        }
    }
    out
}

/// The value of an option, from `-x VALUE`, `-xVALUE`, `--long VALUE` or `--long=VALUE`.
fn option_values(args: &[Arg], short: Option<char>, long: &str) -> Vec<Arg> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.text.as_str();
        if text == "--" {
            break;
        }
        if let Some(rest) = text.strip_prefix("--") {
            if let Some((name, value)) = rest.split_once('=') {
                if name == long {
                    out.push(Arg {
                        text: value.to_owned(),
                        ..arg.clone()
                    });
                }
            } else if rest == long
                && let Some(value) = args.get(i)
            {
                out.push(value.clone());
                i += 1;
            }
            continue;
        }
        let Some(short) = short else { continue };
        if let Some(cluster) = text.strip_prefix('-')
            && let Some(at) = cluster.find(short)
        {
            let inline = cluster.get(at + short.len_utf8()..).unwrap_or("");
            if inline.is_empty() {
                if let Some(value) = args.get(i) {
                    out.push(value.clone());
                    i += 1;
                }
            } else {
                out.push(Arg {
                    text: inline.to_owned(),
                    ..arg.clone()
                });
            }
        }
    }
    out
}

/// Whether a short flag (possibly in a cluster like `-rf`) or a long flag is present.
pub fn has_flag(args: &[Arg], short: Option<char>, long: &str) -> bool {
    args.iter().take_while(|a| a.text != "--").any(|a| {
        let text = a.text.as_str();
        if let Some(rest) = text.strip_prefix("--") {
            rest == long || rest.split_once('=').is_some_and(|(name, _)| name == long)
        } else if let (Some(cluster), Some(short)) = (text.strip_prefix('-'), short) {
            !cluster.is_empty()
                && cluster.chars().all(|c| c.is_ascii_alphanumeric())
                && cluster.contains(short)
        } else {
            false
        }
    })
}

fn is_recursive(args: &[Arg]) -> bool {
    has_flag(args, Some('r'), "recursive") || has_flag(args, Some('R'), "recursive")
}

/// `host:path` or `user@host:path`: a remote location, not a local file.
fn is_remote(text: &str) -> bool {
    match text.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

/// Whether a word looks like a file path rather than a pattern, option or name.
pub fn looks_like_path(text: &str) -> bool {
    if text.contains("://") || text.starts_with('-') || text.is_empty() {
        return false;
    }
    text.starts_with('/')
        || text.starts_with('~')
        || text.starts_with("./")
        || text.starts_with("../")
        || text == "."
        || text == ".."
        || (text.contains('/') && !is_remote(text))
}

/// Programs whose operands are files they read.
const READERS: &[&str] = &[
    "cat",
    "tac",
    "head",
    "tail",
    "less",
    "more",
    "nl",
    "wc",
    "base64",
    "base32",
    "basenc",
    "xxd",
    "od",
    "hexdump",
    "strings",
    "uniq",
    "cut",
    "paste",
    "diff",
    "cmp",
    "comm",
    "file",
    "stat",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "source",
    ".",
    "bat",
    "batcat",
    "column",
    "fold",
    "fmt",
    "iconv",
    "zcat",
    "bzcat",
    "xzcat",
    "gunzip",
    "gzip",
    "bzip2",
    "xz",
    "view",
    "readlink",
    "realpath",
    "ls",
    "tree",
    "du",
    "lsattr",
    "getfacl",
    "openssl",
    "gpg",
    "ssh-keygen",
    "ssh-add",
];
/// Programs whose arguments are not files.
const NO_FILES: &[&str] = &[
    "echo",
    "printf",
    "kill",
    "pkill",
    "killall",
    "true",
    "false",
    ":",
    "test",
    "[",
    "sleep",
    "exit",
    "export",
    "unset",
    "set",
    "cd",
    "pushd",
    "popd",
    "which",
    "type",
    "command",
    "date",
    "whoami",
    "id",
    "uname",
    "hostname",
    "pwd",
    "seq",
    "yes",
    "basename",
    "dirname",
    "env",
    "printenv",
    "alias",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "systemctl",
    "expr",
    "let",
    "read",
    "wait",
    "jobs",
];
/// Read-only programs (plan mode), beyond the special cases in [`classify`].
const READ_ONLY: &[&str] = &[
    "ls",
    "cat",
    "tac",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "printf",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "tree",
    "stat",
    "file",
    "which",
    "type",
    "whoami",
    "id",
    "date",
    "du",
    "df",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "true",
    "false",
    "test",
    "[",
    "uniq",
    "cut",
    "tr",
    "diff",
    "cmp",
    "comm",
    "less",
    "more",
    "nl",
    "env",
    "printenv",
    "uname",
    "hostname",
    "jq",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "cksum",
    "column",
    "seq",
    "sleep",
    "wait",
    "cd",
    "pushd",
    "popd",
    ":",
    "bat",
    "batcat",
    "strings",
    "od",
    "xxd",
    "hexdump",
    "fold",
    "fmt",
    "paste",
    "whereis",
    "lsattr",
    "command",
    "expr",
    "ps",
    "free",
    "uptime",
    "nproc",
    "lscpu",
    "sort",
    "find",
    "git",
];
/// Programs that reach the network.
pub const NETWORK: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "ping",
    "dig", "nslookup", "host", "http", "https", "xh", "aria2c", "fetch", "gh", "lynx",
];
/// Git subcommands that only read.
const GIT_READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "rev-parse",
    "ls-files",
    "blame",
    "grep",
    "shortlog",
    "describe",
    "ls-tree",
    "cat-file",
    "reflog",
];
/// Git subcommands that reach a remote.
const GIT_NETWORK: &[&str] = &["clone", "fetch", "pull", "push", "ls-remote", "submodule"];

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

/// Splits copy-like operands into sources and destination (`-t DIR` honoured).
fn sources_and_target<'a>(
    args: &'a [Arg],
    short_values: &str,
    long_values: &[&str],
) -> (Vec<&'a Arg>, Option<Arg>) {
    let mut operands = positional(args, short_values, long_values);
    let target = option_values(args, Some('t'), "target-directory")
        .into_iter()
        .next();
    match target {
        Some(target) => (operands, Some(target)),
        None => {
            let last = operands.pop().cloned();
            (operands, last)
        }
    }
}

/// Files a command reads, writes or deletes; `.` stands for the command's own folder.
pub fn file_effects(program: &str, args: &[Arg]) -> Vec<FileEffect> {
    let here = Arg::literal(".");
    let recursive = is_recursive(args);
    let mut out = Vec::new();
    match program {
        "rm" | "unlink" | "rmdir" => {
            for path in positional(args, "", &[]) {
                out.push(effect(Action::Delete, path, recursive));
            }
        }
        "shred" => {
            let removes = has_flag(args, Some('u'), "remove");
            for path in positional(args, "ns", &["iterations", "size", "random-source"]) {
                out.push(effect(Action::Write, path, false));
                if removes {
                    out.push(effect(Action::Delete, path, false));
                }
            }
        }
        "mv" => {
            let (sources, target) = sources_and_target(args, "tS", &["target-directory", "suffix"]);
            for source in sources {
                out.push(effect(Action::Delete, source, true));
            }
            if let Some(target) = target {
                out.push(effect(Action::Write, &target, true));
            }
        }
        "cp" | "install" | "ln" | "rsync" => {
            let (sources, target) = sources_and_target(
                args,
                "tSmogB",
                &[
                    "target-directory",
                    "suffix",
                    "mode",
                    "owner",
                    "group",
                    "backup-dir",
                    "exclude",
                    "include",
                    "filter",
                    "rsh",
                ],
            );
            let deep = recursive || has_flag(args, Some('a'), "archive");
            for source in sources.into_iter().filter(|a| !is_remote(&a.text)) {
                out.push(effect(Action::Read, source, deep));
            }
            if let Some(target) = target.filter(|a| !is_remote(&a.text)) {
                out.push(effect(Action::Write, &target, deep));
            }
        }
        "scp" => {
            let operands = positional(args, "iFoPlcJSD", &[]);
            let (target, sources) = match operands.split_last() {
                Some((target, sources)) => (Some(*target), sources.to_vec()),
                None => (None, Vec::new()),
            };
            for source in sources.into_iter().filter(|a| !is_remote(&a.text)) {
                out.push(effect(Action::Read, source, recursive));
            }
            if let Some(target) = target.filter(|a| !is_remote(&a.text)) {
                out.push(effect(Action::Write, target, recursive));
            }
        }
        "touch" | "mkdir" | "truncate" | "tee" | "mkfifo" | "mknod" => {
            for path in positional(args, "mdtrs", &["mode", "date", "reference", "size"]) {
                out.push(effect(Action::Write, path, false));
            }
        }
        "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" => {
            let operands = positional(args, "", &["reference"]);
            let skip = usize::from(!has_flag(args, None, "reference"));
            for path in operands.into_iter().skip(skip) {
                out.push(effect(Action::Write, path, recursive));
            }
        }
        "dd" => {
            for arg in args {
                if let Some(value) = arg.text.strip_prefix("if=") {
                    out.push(effect(
                        Action::Read,
                        &Arg {
                            text: value.to_owned(),
                            ..arg.clone()
                        },
                        false,
                    ));
                } else if let Some(value) = arg.text.strip_prefix("of=") {
                    out.push(effect(
                        Action::Write,
                        &Arg {
                            text: value.to_owned(),
                            ..arg.clone()
                        },
                        false,
                    ));
                }
            }
        }
        "sed" | "perl"
            if has_flag(args, Some('i'), "in-place")
                || args.iter().any(|a| a.text.starts_with("-i")) =>
        {
            let scripted =
                has_flag(args, Some('e'), "expression") || has_flag(args, Some('f'), "file");
            let operands = positional(args, "ef", &["expression", "file"]);
            for path in operands.into_iter().skip(usize::from(!scripted)) {
                out.push(effect(Action::Write, path, false));
            }
        }
        "sed" | "awk" | "gawk" | "mawk" | "jq" | "yq" => {
            let scripted =
                has_flag(args, Some('e'), "expression") || has_flag(args, Some('f'), "file");
            let operands = positional(args, "efvF", &["expression", "file", "arg", "argjson"]);
            for path in operands.into_iter().skip(usize::from(!scripted)) {
                out.push(effect(Action::Read, path, false));
            }
        }
        "sort" => {
            for path in positional(
                args,
                "otkST",
                &[
                    "output",
                    "key",
                    "field-separator",
                    "buffer-size",
                    "temporary-directory",
                ],
            ) {
                out.push(effect(Action::Read, path, false));
            }
            for path in option_values(args, Some('o'), "output") {
                out.push(effect(Action::Write, &path, false));
            }
        }
        "grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack" => {
            let explicit_pattern =
                has_flag(args, Some('e'), "regexp") || has_flag(args, Some('f'), "file");
            let operands = positional(
                args,
                "efmABCgtTM",
                &[
                    "regexp",
                    "file",
                    "max-count",
                    "after-context",
                    "before-context",
                    "context",
                    "glob",
                    "type",
                    "type-not",
                    "include",
                    "exclude",
                    "max-columns",
                ],
            );
            let paths: Vec<&Arg> = operands
                .into_iter()
                .skip(usize::from(!explicit_pattern))
                .collect();
            let deep = program != "grep" || recursive;
            if paths.is_empty() && deep {
                out.push(effect(Action::Read, &here, true));
            }
            for path in paths {
                out.push(effect(Action::Read, path, deep));
            }
            for file in option_values(args, Some('f'), "file") {
                out.push(effect(Action::Read, &file, false));
            }
        }
        "find" => {
            let starts: Vec<&Arg> = args
                .iter()
                .take_while(|a| !(a.text.starts_with('-') || a.text == "(" || a.text == "!"))
                .collect();
            let deletes = args.iter().any(|a| a.text == "-delete");
            let starts = if starts.is_empty() {
                vec![&here]
            } else {
                starts
            };
            for start in starts {
                // Lists names only; contents are not read.
                out.push(effect(Action::Read, start, false));
                if deletes {
                    out.push(effect(Action::Delete, start, true));
                }
            }
            for (i, arg) in args.iter().enumerate() {
                if matches!(
                    arg.text.as_str(),
                    "-fprint" | "-fprint0" | "-fprintf" | "-fls"
                ) && let Some(file) = args.get(i + 1)
                {
                    out.push(effect(Action::Write, file, false));
                }
            }
        }
        "tar" | "bsdtar" => tar_effects(args, &mut out),
        "zip" => {
            let operands = positional(args, "bnxit", &[]);
            if let Some((archive, files)) = operands.split_first() {
                out.push(effect(Action::Write, archive, false));
                for file in files {
                    out.push(effect(Action::Read, file, recursive));
                }
            }
        }
        "unzip" => {
            let operands = positional(args, "dx", &[]);
            if let Some(archive) = operands.first() {
                out.push(effect(Action::Read, archive, false));
            }
            let into = option_values(args, Some('d'), "")
                .into_iter()
                .next()
                .unwrap_or_else(|| here.clone());
            if !has_flag(args, Some('l'), "") && !has_flag(args, Some('p'), "") {
                out.push(effect(Action::Write, &into, true));
            }
        }
        "curl" => {
            for path in option_values(args, Some('o'), "output")
                .into_iter()
                .chain(option_values(args, Some('c'), "cookie-jar"))
                .chain(option_values(args, Some('D'), "dump-header"))
                .filter(|a| a.text != "-")
            {
                out.push(effect(Action::Write, &path, false));
            }
            if has_flag(args, Some('O'), "remote-name") || has_flag(args, None, "remote-name-all") {
                out.push(effect(Action::Write, &Arg::literal("./{download}"), false));
            }
            for path in option_values(args, Some('T'), "upload-file")
                .into_iter()
                .chain(option_values(args, Some('K'), "config"))
            {
                out.push(effect(Action::Read, &path, false));
            }
            for long in [
                "data",
                "data-binary",
                "data-urlencode",
                "data-ascii",
                "json",
                "form",
            ] {
                let short = match long {
                    "data" => Some('d'),
                    "form" => Some('F'),
                    _ => None,
                };
                for value in option_values(args, short, long) {
                    if let Some((_, file)) = value.text.split_once('@') {
                        let file = file.split(';').next().unwrap_or(file).to_owned();
                        out.push(effect(
                            Action::Read,
                            &Arg {
                                text: file,
                                ..value.clone()
                            },
                            false,
                        ));
                    }
                }
            }
        }
        "wget" => {
            let documents = option_values(args, Some('O'), "output-document");
            if documents.is_empty() && !has_flag(args, None, "spider") {
                let folder = option_values(args, Some('P'), "directory-prefix")
                    .into_iter()
                    .next();
                let folder = folder.unwrap_or_else(|| here.clone());
                out.push(effect(Action::Write, &folder, true));
            }
            for path in documents
                .into_iter()
                .chain(option_values(args, Some('o'), "output-file"))
                .chain(option_values(args, Some('a'), "append-output"))
                .filter(|a| a.text != "-")
            {
                out.push(effect(Action::Write, &path, false));
            }
            for path in option_values(args, None, "post-file")
                .into_iter()
                .chain(option_values(args, None, "body-file"))
                .chain(option_values(args, Some('i'), "input-file"))
            {
                out.push(effect(Action::Read, &path, false));
            }
        }
        "git" => match git_subcommand(args) {
            Some(("rm", rest)) => {
                let deep = is_recursive(rest);
                for path in positional(rest, "", &[]) {
                    out.push(effect(Action::Delete, path, deep));
                }
            }
            Some(("clean", rest)) => {
                let paths = positional(rest, "e", &["exclude"]);
                if paths.is_empty() {
                    out.push(effect(Action::Delete, &here, true));
                }
                for path in paths {
                    out.push(effect(Action::Delete, path, true));
                }
            }
            Some(("mv", rest)) => {
                let (sources, target) = sources_and_target(rest, "", &[]);
                for source in sources {
                    out.push(effect(Action::Delete, source, true));
                }
                if let Some(target) = target {
                    out.push(effect(Action::Write, &target, true));
                }
            }
            Some((
                "status" | "log" | "diff" | "show" | "branch" | "ls-files" | "blame" | "grep",
                _,
            )) => {
                out.push(effect(Action::Read, &here, true));
                generic_reads(args, &mut out);
            }
            _ => generic_reads(args, &mut out),
        },
        "ls" | "tree" | "du" => {
            let operands = positional(
                args,
                "IwTLoPB",
                &["ignore", "width", "tabsize", "block-size", "hide"],
            );
            // Listings read names and sizes, not contents.
            if operands.is_empty() {
                out.push(effect(Action::Read, &here, false));
            }
            for path in operands {
                out.push(effect(Action::Read, path, false));
            }
        }
        "head" | "tail" => {
            for path in positional(args, "nc", &["lines", "bytes"]) {
                out.push(effect(Action::Read, path, false));
            }
        }
        _ if READERS.contains(&program) => {
            for path in positional(args, "", &[]) {
                out.push(effect(Action::Read, path, recursive));
            }
        }
        _ if NO_FILES.contains(&program) => {}
        _ => generic_reads(args, &mut out),
    }
    out
}

fn generic_reads(args: &[Arg], out: &mut Vec<FileEffect>) {
    for arg in args {
        let value = match arg.text.split_once('=') {
            Some((name, value)) if name.starts_with('-') => value,
            _ => arg.text.as_str(),
        };
        if looks_like_path(value) {
            out.push(effect(
                Action::Read,
                &Arg {
                    text: value.to_owned(),
                    ..arg.clone()
                },
                false,
            ));
        }
    }
}

fn tar_effects(args: &[Arg], out: &mut Vec<FileEffect>) {
    let mut letters = String::new();
    let mut archive: Option<Arg> = None;
    let mut operands = Vec::new();
    let mut into: Option<Arg> = None;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.text.as_str();
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (
                    name,
                    Some(Arg {
                        text: value.to_owned(),
                        ..arg.clone()
                    }),
                ),
                None => (long, None),
            };
            let takes_value = matches!(name, "file" | "directory");
            let value = match (value, takes_value) {
                (Some(value), _) => Some(value),
                (None, true) => {
                    i += 1;
                    args.get(i - 1).cloned()
                }
                (None, false) => None,
            };
            match name {
                "file" => archive = value,
                "directory" => into = value,
                "create" => letters.push('c'),
                "extract" | "get" => letters.push('x'),
                "append" => letters.push('r'),
                "list" => letters.push('t'),
                _ => {}
            }
            continue;
        }
        let bundle = if let Some(cluster) = text.strip_prefix('-') {
            Some(cluster)
        } else if i == 1 && !text.is_empty() && text.chars().all(|c| c.is_ascii_alphabetic()) {
            // Old style: `tar czf out.tgz dir`.
            Some(text)
        } else {
            None
        };
        match bundle {
            Some(cluster) => {
                for c in cluster.chars() {
                    letters.push(c);
                    if c == 'f' {
                        archive = args.get(i).cloned();
                        i += 1;
                    } else if c == 'C' {
                        into = args.get(i).cloned();
                        i += 1;
                    }
                }
            }
            None => operands.push(arg.clone()),
        }
    }
    let creates = letters.contains('c') || letters.contains('r') || letters.contains('u');
    let extracts = letters.contains('x');
    if let Some(archive) = archive.filter(|a| a.text != "-") {
        let action = if creates { Action::Write } else { Action::Read };
        out.push(effect(action, &archive, false));
    }
    if creates {
        for operand in &operands {
            out.push(effect(Action::Read, operand, true));
        }
    }
    if extracts {
        let folder = into.unwrap_or_else(|| Arg::literal("."));
        out.push(effect(Action::Write, &folder, true));
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
