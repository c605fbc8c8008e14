//! The built-in danger list: things that ask in every mode but `full` and are denied in
//! headless runs, whatever the rules say. Each check returns the reason shown to the user.
//!
//! Trade-off: the list errs towards asking. A false alarm costs one confirmation; a miss can
//! cost a home folder or a leaked key. Checks run on real (symlink-resolved) paths and on the
//! unwrapped command, so `sudo timeout 5 rm -rf ~` and a link to `/` are caught alike.

use std::path::{Component, Path, PathBuf};

use super::effects::{git_subcommand, has_flag};
use super::shell::{Invocation, Unseen, UnseenSource};

/// Credential locations under the home folder: reading (or writing) them asks.
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".azure",
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".gnupg",
    ".git-credentials",
];

/// Device files that are safe to write.
const HARMLESS_DEVICES: &[&str] = &[
    "null", "zero", "full", "random", "urandom", "stdout", "stderr", "tty", "ptmx",
];

/// Programs that partition, format or wipe disks.
const DISK_TOOLS: &[&str] = &[
    "fdisk",
    "sfdisk",
    "cfdisk",
    "gdisk",
    "sgdisk",
    "parted",
    "wipefs",
    "mkswap",
    "blkdiscard",
    "pvremove",
    "vgremove",
    "lvremove",
    "zpool",
    "badblocks",
];

/// The credential location (`~/.ssh`, …) that `path` is or lies in, for one of `homes`.
pub fn credential(path: &Path, homes: &[PathBuf]) -> Option<String> {
    for home in homes {
        for entry in CREDENTIALS {
            if path.starts_with(home.join(entry)) {
                return Some(format!("~/{entry}"));
            }
        }
    }
    None
}

fn normal_depth(path: &Path) -> usize {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// Whether a recursive delete (or `chmod -R`/`chown -R`) of `path` would wreck the system or
/// the home folder. `children` means the entries inside `path` (`/*`, `~/*`).
pub fn critical_tree(path: &Path, children: bool, homes: &[PathBuf]) -> Option<String> {
    let depth = normal_depth(path);
    if depth == 0 {
        return Some(if children {
            "everything in /".to_owned()
        } else {
            "the root folder /".to_owned()
        });
    }
    if depth == 1 && !children {
        return Some(format!("the top-level folder {}", path.display()));
    }
    for home in homes {
        if home.starts_with(path) {
            return Some(if path == home.as_path() {
                if children {
                    "everything in your home folder".to_owned()
                } else {
                    "your home folder".to_owned()
                }
            } else {
                format!("{}, which contains your home folder", path.display())
            });
        }
        if !children && path.parent() == Some(home.as_path()) {
            return Some(format!(
                "the whole home subfolder ~/{}",
                path.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
        }
    }
    if depth == 1 && children {
        return Some(format!(
            "everything in the top-level folder {}",
            path.display()
        ));
    }
    None
}

/// Whether writing `path` writes a device (a disk) rather than a file.
pub fn device_write(path: &Path) -> Option<String> {
    let rest = path.strip_prefix("/dev").ok()?;
    let first = rest.components().next()?;
    let name = first.as_os_str().to_string_lossy();
    if HARMLESS_DEVICES.contains(&name.as_ref())
        || matches!(name.as_ref(), "fd" | "shm" | "pts" | "mqueue")
    {
        return None;
    }
    Some(format!("writes the device {}", path.display()))
}

/// Dangers visible from a command alone: disk tools, power, `git push --force`, `kill -9 -1`.
pub fn invocation(invocation: &Invocation) -> Option<String> {
    let program = invocation.program()?;
    let args = invocation.args();
    let texts: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    let shown = || invocation.words().join(" ");
    if program.starts_with("mkfs") || program.starts_with("mke2fs") || DISK_TOOLS.contains(&program)
    {
        return Some(format!("runs the disk tool `{program}`"));
    }
    match program {
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            return Some(format!(
                "powers the machine off or restarts it (`{}`)",
                shown()
            ));
        }
        "init" | "telinit" if matches!(texts.first(), Some(&("0" | "6"))) => {
            return Some(format!(
                "powers the machine off or restarts it (`{}`)",
                shown()
            ));
        }
        "systemctl"
            if texts
                .iter()
                .any(|t| matches!(*t, "poweroff" | "reboot" | "halt" | "kexec")) =>
        {
            return Some(format!(
                "powers the machine off or restarts it (`{}`)",
                shown()
            ));
        }
        "kill" if kills_everything(&texts) => {
            return Some(format!("kills every process it can (`{}`)", shown()));
        }
        "git" => {
            if let Some(("push", rest)) = git_subcommand(args) {
                let force = has_flag(rest, Some('f'), "force")
                    || rest.iter().any(|a| {
                        a.text.starts_with("--force-with-lease")
                            || a.text == "--mirror"
                            || (a.text.starts_with('+') && a.text.len() > 1)
                    });
                if force {
                    return Some(format!(
                        "force-pushes to a remote, which can destroy others' commits (`{}`)",
                        shown()
                    ));
                }
            }
        }
        _ => {}
    }
    None
}

/// `kill -9 -1` and friends: a signal sent to pid -1 reaches every process.
fn kills_everything(args: &[&str]) -> bool {
    let mut i = 0;
    let mut signal_seen = false;
    let mut options_done = false;
    while let Some(arg) = args.get(i) {
        i += 1;
        if options_done || signal_seen {
            if *arg == "-1" {
                return true;
            }
            if *arg == "--" {
                options_done = true;
            }
            continue;
        }
        match *arg {
            "--" => options_done = true,
            "-s" | "-n" | "--signal" => {
                i += 1;
                signal_seen = true;
            }
            "-l" | "-L" | "--list" | "--table" => return false,
            other if other.starts_with('-') => signal_seen = true,
            _ => signal_seen = true,
        }
    }
    false
}

/// Whether a script defines a function that calls itself in a pipe or in the background
/// (`:(){ :|:& };:`), or is a known one-line fork bomb in another language.
pub fn fork_bomb(script: &str) -> bool {
    let compact: String = script.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("forkwhilefork")
        || (compact.contains("os.fork()") && compact.contains("while"))
    {
        return true;
    }
    let chars: Vec<char> = compact.chars().collect();
    let mut search = 0;
    while let Some(found) = compact.get(search..).and_then(|rest| rest.find("(){")) {
        let at = compact
            .get(..search + found)
            .map(|s| s.chars().count())
            .unwrap_or(0);
        search += found + 3;
        let name: String = chars
            .get(..at)
            .unwrap_or(&[])
            .iter()
            .rev()
            .take_while(|c| !matches!(c, ';' | '&' | '|' | '(' | ')' | '{' | '}'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let name = name.strip_prefix("function").unwrap_or(&name).to_owned();
        if name.is_empty() {
            continue;
        }
        let mut depth = 1usize;
        let mut body = String::new();
        for c in chars.iter().skip(at + 3) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            body.push(*c);
        }
        if body.contains(&format!("{name}|{name}")) || body.contains(&format!("{name}&")) {
            return true;
        }
    }
    false
}

/// The reason for code that runs unseen.
pub fn unseen(unseen: &Unseen) -> String {
    match &unseen.source {
        UnseenSource::Download(downloader) => format!(
            "runs code downloaded by `{downloader}` in `{}` without showing it (download it, read it, then run it)",
            unseen.program
        ),
        UnseenSource::Substitution => format!(
            "`{}` runs code produced at run time, which cannot be checked",
            unseen.program
        ),
        UnseenSource::Pipe => format!(
            "`{}` runs code piped in from another program, which cannot be checked",
            unseen.program
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn homes() -> Vec<PathBuf> {
        vec![PathBuf::from("/home/u")]
    }

    #[test]
    fn critical_trees() {
        assert!(critical_tree(Path::new("/"), false, &homes()).is_some());
        assert!(critical_tree(Path::new("/"), true, &homes()).is_some());
        assert!(critical_tree(Path::new("/usr"), false, &homes()).is_some());
        assert!(critical_tree(Path::new("/home"), false, &homes()).is_some());
        assert!(critical_tree(Path::new("/home/u"), true, &homes()).is_some());
        assert!(critical_tree(Path::new("/home/u/Documents"), false, &homes()).is_some());
        assert!(critical_tree(Path::new("/home/u/Documents"), true, &homes()).is_none());
        assert!(critical_tree(Path::new("/home/u/p/build"), false, &homes()).is_none());
        assert!(critical_tree(Path::new("/tmp/x"), false, &homes()).is_none());
    }

    #[test]
    fn devices_and_credentials() {
        assert!(device_write(Path::new("/dev/sda")).is_some());
        assert!(device_write(Path::new("/dev/nvme0n1p1")).is_some());
        assert!(device_write(Path::new("/dev/null")).is_none());
        assert!(device_write(Path::new("/dev/fd/2")).is_none());
        assert_eq!(
            credential(Path::new("/home/u/.ssh/id_rsa"), &homes()).as_deref(),
            Some("~/.ssh")
        );
        assert!(credential(Path::new("/home/u/.kube/config"), &homes()).is_some());
        assert!(credential(Path::new("/home/u/.kube/cache"), &homes()).is_none());
        assert!(credential(Path::new("/home/u/.sshrc"), &homes()).is_none());
    }

    #[test]
    fn kill_minus_one() {
        assert!(kills_everything(&["-9", "-1"]));
        assert!(kills_everything(&["-s", "KILL", "-1"]));
        assert!(kills_everything(&["--", "-1"]));
        assert!(!kills_everything(&["-1"]));
        assert!(!kills_everything(&["-9", "1234"]));
    }

    #[test]
    fn fork_bombs() {
        assert!(fork_bomb(":(){ :|:& };:"));
        assert!(fork_bomb("bomb() { bomb | bomb & }; bomb"));
        assert!(fork_bomb("perl -e 'fork while fork'"));
        assert!(!fork_bomb("f() { echo hi; }; f"));
        assert!(!fork_bomb("build() { make | tee log; }"));
    }
}
