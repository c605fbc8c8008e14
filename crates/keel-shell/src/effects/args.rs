//! Argument readers shared by the effect tables: operands with option values skipped, the
//! values of one option, flags in clusters like `-rf`, and whether a word looks like a path.
//! Generic over CLIs that follow the usual GNU/POSIX layout; programs that do not are handled
//! case by case in `files`.

use crate::shell::Arg;

/// Non-option arguments, with values of the listed options skipped. Short options taking a
/// value are given as a string of letters, long ones by name.
pub(super) fn positional<'a>(
    args: &'a [Arg],
    short_values: &str,
    long_values: &[&str],
) -> Vec<&'a Arg> {
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
pub(super) fn option_values(args: &[Arg], short: Option<char>, long: &str) -> Vec<Arg> {
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

/// Splits copy-like operands into sources and destination (`-t DIR` honoured).
pub(super) fn sources_and_target<'a>(
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

pub(super) fn is_recursive(args: &[Arg]) -> bool {
    has_flag(args, Some('r'), "recursive") || has_flag(args, Some('R'), "recursive")
}

/// `host:path` or `user@host:path`: a remote location, not a local file.
pub(super) fn is_remote(text: &str) -> bool {
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
