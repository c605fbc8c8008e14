//! Which files a known program reads, writes or deletes, program by program (`rm`, `cp`,
//! `tar`, `curl -o`, `sed -i`, …), and the fallback for unknown programs: every argument that
//! looks like a path counts as a read. The longest table of program knowledge, kept apart from
//! the command classes.

use super::args::{
    has_flag, is_recursive, is_remote, looks_like_path, option_values, positional,
    sources_and_target,
};
use super::links::{link_targets, ln_operands};
use super::tables::{NO_FILES, READERS};
use super::{FileEffect, archive, code, git};
use crate::Action;
use crate::shell::Arg;

pub(super) fn effect(action: Action, path: &Arg, recursive: bool) -> FileEffect {
    FileEffect {
        action,
        path: path.clone(),
        recursive,
        anchor: None,
    }
}

/// Options of `cp` and friends that take a value.
pub(super) const COPY_VALUES: &[&str] = &[
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
];

fn with_text(arg: &Arg, text: impl Into<String>) -> Arg {
    Arg {
        text: text.into(),
        ..arg.clone()
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
        "ln" | "link" | "symlink" => {
            let (targets, link) = ln_operands(args);
            let symbolic = program == "symlink" || has_flag(args, Some('s'), "symbolic");
            let relative = has_flag(args, Some('r'), "relative");
            link_targets(&mut out, &targets, &link, symbolic, relative);
        }
        "cp" | "install" | "rsync" => {
            let (sources, target) = sources_and_target(args, "tSmogB", COPY_VALUES);
            let deep = recursive || has_flag(args, Some('a'), "archive");
            let sources: Vec<&Arg> = sources
                .into_iter()
                .filter(|a| !is_remote(&a.text))
                .collect();
            let symbolic = program == "cp" && has_flag(args, Some('s'), "symbolic-link");
            let hard = program == "cp" && has_flag(args, Some('l'), "link");
            match target.filter(|a| !is_remote(&a.text)) {
                Some(target) if symbolic || hard => {
                    // A symlink made by `cp -s` holds the source as written: relative to
                    // the command's folder, like a hard link's.
                    link_targets(&mut out, &sources, &target, false, false);
                }
                target => {
                    for source in sources {
                        out.push(effect(Action::Read, source, deep));
                    }
                    if let Some(target) = target {
                        out.push(effect(Action::Write, &target, deep));
                    }
                }
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
        "sed" => {
            let in_place = has_flag(args, Some('i'), "in-place")
                || args.iter().any(|a| a.text.starts_with("-i"));
            let scripted =
                has_flag(args, Some('e'), "expression") || has_flag(args, Some('f'), "file");
            let operands = positional(args, "efl", &["expression", "file", "line-length"]);
            let action = if in_place {
                Action::Write
            } else {
                Action::Read
            };
            for path in operands.into_iter().skip(usize::from(!scripted)) {
                out.push(effect(action, path, false));
            }
            for file in option_values(args, Some('f'), "file") {
                out.push(effect(Action::Read, &file, false));
            }
            let sed = code::sed_effects(args);
            for file in sed.writes.iter().filter(|f| !f.starts_with("/dev/std")) {
                out.push(effect(Action::Write, &Arg::literal(file.as_str()), false));
            }
            for file in &sed.reads {
                out.push(effect(Action::Read, &Arg::literal(file.as_str()), false));
            }
        }
        "perl"
            if has_flag(args, Some('i'), "in-place")
                || args.iter().any(|a| a.text.starts_with("-i")) =>
        {
            let operands = positional(args, "eEIMx", &[]);
            for path in operands {
                out.push(effect(Action::Write, path, false));
            }
        }
        "awk" | "gawk" | "mawk" | "nawk" | "jq" | "yq" => {
            let scripted =
                has_flag(args, Some('e'), "expression") || has_flag(args, Some('f'), "file");
            let operands = positional(
                args,
                "efvFL",
                &[
                    "expression",
                    "file",
                    "arg",
                    "argjson",
                    "rawfile",
                    "slurpfile",
                ],
            );
            for path in operands.into_iter().skip(usize::from(!scripted)) {
                out.push(effect(Action::Read, path, false));
            }
            for file in option_values(args, Some('f'), "file")
                .into_iter()
                .chain(option_values(args, None, "from-file"))
            {
                out.push(effect(Action::Read, &file, false));
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
            // `-exec` hands every file found to a command: the whole tree is read.
            let hands_out = args
                .iter()
                .any(|a| matches!(a.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"));
            let starts = if starts.is_empty() {
                vec![&here]
            } else {
                starts
            };
            for start in starts {
                // Lists names only; contents are not read unless handed to a command.
                out.push(effect(Action::Read, start, hands_out));
                if deletes {
                    // What it deletes is picked by its tests: files anywhere under the start.
                    let picked = Arg {
                        tree: true,
                        ..(*start).clone()
                    };
                    out.push(effect(Action::Delete, &picked, true));
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
        "tar" | "bsdtar" | "zip" | "unzip" | "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz"
        | "unxz" | "lzma" | "unlzma" => archive::file_effects(program, args, &mut out),
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
        "git" => out = git::file_effects(args, generic_reads),
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
            if program == "tree" {
                for file in option_values(args, Some('o'), "") {
                    out.push(effect(Action::Write, &file, false));
                }
            }
        }
        "head" | "tail" => {
            for path in positional(args, "nc", &["lines", "bytes"]) {
                out.push(effect(Action::Read, path, false));
            }
        }
        "uniq" | "xxd" => {
            let operands = if program == "uniq" {
                positional(args, "fsw", &["skip-fields", "skip-chars", "check-chars"])
            } else {
                positional(args, "cglso", &["cols", "groupsize", "len", "seek", "name"])
            };
            if let Some(input) = operands.first() {
                out.push(effect(Action::Read, input, false));
            }
            if let Some(output) = operands.get(1) {
                out.push(effect(Action::Write, output, false));
            }
        }
        "iconv" | "gpg" | "less" | "more" => {
            for path in positional(
                args,
                "oftOr",
                &[
                    "output",
                    "from-code",
                    "to-code",
                    "log-file",
                    "LOG-FILE",
                    "recipient",
                    "local-user",
                    "homedir",
                ],
            ) {
                out.push(effect(Action::Read, path, false));
            }
            for file in option_values(args, Some('o'), "output")
                .into_iter()
                .chain(option_values(args, None, "log-file"))
                .chain(option_values(args, Some('O'), "LOG-FILE"))
                .filter(|f| f.text != "-")
            {
                out.push(effect(Action::Write, &file, false));
            }
            if program == "gpg" {
                // Every gpg run opens the keyring, private keys included.
                let home = option_values(args, None, "homedir")
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Arg::literal("~/.gnupg"));
                out.push(effect(Action::Read, &home, true));
            }
        }
        "openssl" => {
            let mut i = 0;
            while let Some(arg) = args.get(i) {
                i += 1;
                let Some(name) = arg.text.strip_prefix('-') else {
                    continue;
                };
                let Some(value) = args.get(i) else { break };
                if name.ends_with("out") {
                    out.push(effect(Action::Write, value, false));
                    i += 1;
                } else if matches!(
                    name,
                    "in" | "key" | "inkey" | "cert" | "CAfile" | "passin" | "kfile" | "signkey"
                ) {
                    let file = value.text.strip_prefix("file:").unwrap_or(&value.text);
                    out.push(effect(Action::Read, &with_text(value, file), false));
                    i += 1;
                }
            }
        }
        "file" => {
            for path in positional(
                args,
                "mfFPe",
                &[
                    "magic-file",
                    "files-from",
                    "separator",
                    "parameter",
                    "exclude",
                ],
            ) {
                out.push(effect(Action::Read, path, false));
            }
            if has_flag(args, Some('C'), "compile") {
                out.push(effect(Action::Write, &here, false));
            }
        }
        "ssh-keygen" | "ssh-add" => {
            let files: Vec<Arg> = if program == "ssh-add" {
                positional(args, "tES", &[]).into_iter().cloned().collect()
            } else {
                option_values(args, Some('f'), "")
            };
            if files.is_empty() {
                out.push(effect(Action::Read, &Arg::literal("~/.ssh"), true));
            }
            for file in files {
                out.push(effect(Action::Read, &file, false));
                if program == "ssh-keygen" {
                    out.push(effect(Action::Write, &file, false));
                }
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

/// Every argument that looks like a path, as a read.
pub(super) fn generic_reads(args: &[Arg], out: &mut Vec<FileEffect>) {
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
