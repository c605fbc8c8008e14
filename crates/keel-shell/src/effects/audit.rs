//! Options that change what a known program is: those that make it run another program
//! (`sort --compress-program`, `tar -I`, `rsync -e`, `ssh -o ProxyCommand=…`), and those that
//! make a reader write or change the system (`uniq IN OUT`, `date -s`, `hostname NAME`).
//! The result of auditing every program the read-only tables list.

use super::args::{has_flag, option_values, positional};
use crate::shell::Arg;

/// ssh options that run a local command.
const SSH_COMMAND_OPTIONS: &[&str] = &[
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "remotecommand",
    "proxyjump",
    "include",
];

fn any_prefix(args: &[Arg], prefixes: &[&str]) -> bool {
    args.iter().any(|a| {
        prefixes
            .iter()
            .any(|p| a.text == *p || a.text.starts_with(&format!("{p}=")))
    })
}

/// Whether these arguments make the program run another program the gate cannot read.
pub(super) fn runs_programs(program: &str, args: &[Arg]) -> bool {
    match program {
        "sort" => any_prefix(args, &["--compress-program"]),
        "rg" => args
            .iter()
            .any(|a| a.text.starts_with("--pre") && !a.text.starts_with("--pre-glob")),
        "tar" | "bsdtar" => {
            any_prefix(
                args,
                &[
                    "--use-compress-program",
                    "--to-command",
                    "--info-script",
                    "--new-volume-script",
                    "--rsh-command",
                    "--rmt-command",
                    "--checkpoint-action",
                ],
            ) || has_flag(args, Some('I'), "use-compress-program")
                || has_flag(args, Some('F'), "info-script")
        }
        "rsync" => any_prefix(args, &["--rsh", "--rsync-path"]) || has_flag(args, Some('e'), "rsh"),
        "zip" => args
            .iter()
            .any(|a| a.text == "-TT" || a.text.starts_with("--unzip-command")),
        "ssh" | "scp" | "sftp" => {
            let options = option_values(args, Some('o'), "");
            options.iter().any(|o| {
                let name = o
                    .text
                    .split(['=', ' '])
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                SSH_COMMAND_OPTIONS.contains(&name.as_str())
            }) || has_flag(args, Some('F'), "")
                || (program != "ssh" && has_flag(args, Some('S'), ""))
        }
        "curl" => has_flag(args, Some('K'), "config"),
        "wget" => {
            any_prefix(args, &["--execute", "--config", "--use-askpass"])
                || has_flag(args, Some('e'), "execute")
        }
        "install" => any_prefix(args, &["--strip-program"]),
        "openssl" => args
            .iter()
            .any(|a| matches!(a.text.as_str(), "-engine" | "-provider" | "-provider-path")),
        "bat" | "batcat" => any_prefix(args, &["--pager"]),
        "ag" => any_prefix(args, &["--pager"]),
        "less" | "more" => {
            args.iter().any(|a| a.text.starts_with('+'))
                || has_flag(args, Some('k'), "lesskey-file")
                || any_prefix(args, &["--lesskey-src", "--lesskey-content"])
        }
        _ => false,
    }
}

/// Whether these arguments make an otherwise read-only program write files or change the
/// system.
pub(super) fn not_read_only(program: &str, args: &[Arg]) -> bool {
    match program {
        "sort" => {
            has_flag(args, Some('o'), "output") || has_flag(args, Some('T'), "temporary-directory")
        }
        "tree" => has_flag(args, Some('o'), ""),
        "uniq" => positional(args, "fsw", &["skip-fields", "skip-chars", "check-chars"]).len() > 1,
        "xxd" => positional(args, "cglso", &["cols", "groupsize", "len", "seek", "name"]).len() > 1,
        "iconv" => has_flag(args, Some('o'), "output"),
        "file" => has_flag(args, Some('C'), "compile"),
        "date" => has_flag(args, Some('s'), "set"),
        "hostname" => {
            !positional(args, "F", &["file"]).is_empty()
                || has_flag(args, Some('F'), "file")
                || has_flag(args, Some('b'), "boot")
        }
        "less" | "more" => {
            has_flag(args, Some('o'), "log-file") || has_flag(args, Some('O'), "LOG-FILE")
        }
        "bat" | "batcat" => {
            args.iter().any(|a| a.text == "cache") || has_flag(args, None, "generate-config-file")
        }
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "lzma" | "unlzma" => {
            !super::archive::compressor_to_stdout(program, args)
        }
        _ => false,
    }
}
