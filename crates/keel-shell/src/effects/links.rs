//! Links: `ln`, `link`, `cp -s`/`-l` make a second name for a file, so making one is a way
//! to write its target; and the links a command may create (including by copying, moving,
//! extracting or checking out), after which paths through them cannot be judged from the file
//! system as it is now.

use super::args::{has_flag, is_recursive, option_values, positional, sources_and_target};
use super::files::{COPY_VALUES, effect};
use super::{FileEffect, LinkEffect, archive, git};
use crate::Action;
use crate::shell::Arg;

/// `ln`, `link`, `cp -s`, `cp -l`: a link is a way to write its target, so each target is a
/// write; a relative symlink target is relative to the link's folder.
pub(super) fn link_targets(
    out: &mut Vec<FileEffect>,
    targets: &[&Arg],
    link: &Arg,
    symbolic: bool,
    relative: bool,
) {
    for target in targets {
        out.push(FileEffect {
            anchor: (symbolic && !relative).then(|| link.clone()),
            ..effect(Action::Write, target, false)
        });
    }
    out.push(effect(Action::Write, link, false));
}

/// `ln` operands: the targets and where the link goes (`ln TARGET` links into `.`).
pub(super) fn ln_operands(args: &[Arg]) -> (Vec<&Arg>, Arg) {
    let mut operands = positional(args, "tS", &["target-directory", "suffix"]);
    if let Some(dir) = option_values(args, Some('t'), "target-directory")
        .into_iter()
        .next()
    {
        return (operands, dir);
    }
    if operands.len() == 1 {
        return (operands, Arg::literal("."));
    }
    match operands.pop() {
        Some(link) => (operands, link.clone()),
        None => (operands, Arg::literal(".")),
    }
}

/// Links a command may create; see [`LinkEffect`].
pub fn link_effects(program: &str, args: &[Arg]) -> Vec<LinkEffect> {
    let basenames = |targets: &[&Arg]| {
        targets
            .iter()
            .map(|t| {
                t.text
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    match program {
        "ln" | "link" | "symlink" => {
            let (targets, link) = ln_operands(args);
            vec![LinkEffect {
                at: link,
                names: basenames(&targets),
                tree: false,
            }]
        }
        "cp" | "mv" | "rsync" => {
            let (sources, target) = sources_and_target(args, "tSmogB", COPY_VALUES);
            let Some(target) = target else {
                return Vec::new();
            };
            let links =
                has_flag(args, Some('s'), "symbolic-link") || has_flag(args, Some('l'), "link");
            let tree = program == "rsync"
                || is_recursive(args)
                || has_flag(args, Some('a'), "archive")
                || has_flag(args, Some('d'), "")
                || has_flag(args, Some('P'), "no-dereference");
            if program == "mv" || links {
                vec![LinkEffect {
                    at: target,
                    names: basenames(&sources),
                    tree: false,
                }]
            } else if tree {
                vec![LinkEffect {
                    at: target,
                    names: Vec::new(),
                    tree: true,
                }]
            } else {
                Vec::new()
            }
        }
        "tar" | "bsdtar" | "unzip" => archive::link_effects(program, args),
        "git" => git::link_effects(args),
        _ => Vec::new(),
    }
}
