//! Which files a known program reads, writes or deletes, program by program (`rm`, `cp`,
//! `tar`, `curl -o`, `sed -i`, …), and the fallback for unknown programs: every argument that
//! looks like a path counts as a read. The longest table of program knowledge, kept apart from
//! the command classes.

use super::FileEffect;
use super::args::{has_flag, is_recursive, is_remote, looks_like_path, option_values, positional};
use super::git_subcommand;
use super::tables::{NO_FILES, READERS};
use crate::permission::rules::Action;
use crate::permission::shell::Arg;

fn effect(action: Action, path: &Arg, recursive: bool) -> FileEffect {
    FileEffect {
        action,
        path: path.clone(),
        recursive,
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
