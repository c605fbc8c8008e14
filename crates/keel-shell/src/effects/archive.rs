//! Archives and compressors: `tar` in its three option styles, `zip`/`unzip`, and the
//! single-file compressors that replace their operand (`gzip f` writes `f.gz` and deletes `f`).

use super::args::{has_flag, is_recursive, option_values, positional};
use super::{FileEffect, LinkEffect};
use crate::Action;
use crate::shell::Arg;

fn effect(action: Action, path: &Arg, recursive: bool) -> FileEffect {
    FileEffect {
        action,
        path: path.clone(),
        recursive,
        anchor: None,
    }
}

/// Suffixes a decompressor strips, longest first.
const SUFFIXES: &[&str] = &[
    ".tar.gz", ".tgz", ".gz", ".bz2", ".tbz2", ".xz", ".txz", ".lzma", ".z", ".Z",
];

/// Whether a compressor only prints (`-c`, `-l`, `-t`, or a `zcat`-like name).
pub(super) fn compressor_to_stdout(program: &str, args: &[Arg]) -> bool {
    has_flag(args, Some('c'), "stdout")
        || has_flag(args, None, "to-stdout")
        || has_flag(args, Some('l'), "list")
        || has_flag(args, Some('t'), "test")
        || program.ends_with("cat")
}

pub(super) fn file_effects(program: &str, args: &[Arg], out: &mut Vec<FileEffect>) {
    let here = Arg::literal(".");
    let recursive = is_recursive(args);
    match program {
        "tar" | "bsdtar" => tar_effects(args, out),
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
        _ => {
            let stdout = compressor_to_stdout(program, args);
            let keeps = has_flag(args, Some('k'), "keep");
            let decompress = program.starts_with("un")
                || program == "gunzip"
                || has_flag(args, Some('d'), "decompress")
                || has_flag(args, None, "uncompress");
            for path in positional(args, "S", &["suffix"]) {
                out.push(effect(Action::Read, path, recursive));
                if stdout {
                    continue;
                }
                let made = if decompress {
                    SUFFIXES
                        .iter()
                        .find_map(|s| path.text.strip_suffix(s))
                        .map(str::to_owned)
                } else {
                    let suffix = match program {
                        "bzip2" => "bz2",
                        "xz" => "xz",
                        "lzma" => "lzma",
                        _ => "gz",
                    };
                    Some(format!("{}.{suffix}", path.text))
                };
                if let Some(made) = made {
                    out.push(effect(
                        Action::Write,
                        &Arg {
                            text: made,
                            ..path.clone()
                        },
                        recursive,
                    ));
                }
                if !keeps {
                    out.push(effect(Action::Delete, path, false));
                }
            }
        }
    }
}

/// The folder an extraction writes into, where any new path may be a link from the archive.
pub(super) fn link_effects(program: &str, args: &[Arg]) -> Vec<LinkEffect> {
    let mut effects = Vec::new();
    file_effects(program, args, &mut effects);
    effects
        .into_iter()
        .filter(|e| e.action == Action::Write && e.recursive)
        .map(|e| LinkEffect {
            at: e.path,
            names: Vec::new(),
            tree: true,
        })
        .collect()
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
