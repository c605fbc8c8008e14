//! The built-in danger list: things that ask in every mode but `full` and are denied in
//! headless runs, whatever the rules say. Each check returns the reason shown to the user.
//!
//! Trade-off: the list errs towards asking. A false alarm costs one confirmation; a miss can
//! cost a home folder or a leaked key. Checks run on real (symlink-resolved) paths and on the
//! unwrapped command, so `sudo timeout 5 rm -rf ~` and a link to `/` are caught alike.

use std::path::{Component, Path, PathBuf};

use super::effects::{git_dangers, git_subcommand, has_flag, inline_code, mentions};
use super::envvars::{self, VarKind};
use super::shell::{Arg, Invocation, Stdin, Unseen, UnseenSource};

/// Files under `/proc/<pid>/` that hold a process's secrets (its environment, memory, open
/// files) or reach into its view of the file system.
const PROCESS_SECRETS: &[&str] = &[
    "environ",
    "mem",
    "maps",
    "smaps",
    "auxv",
    "fd",
    "fdinfo",
    "map_files",
    "task",
    "root",
    "cwd",
    "pagemap",
    "stack",
    "syscall",
];

/// Protected control files as inline code would name them.
const CODE_CONTROL: &[&str] = &[
    ".git/config",
    ".git/hooks",
    ".keel/",
    ".mcp.json",
    ".claude/settings",
    "hooksPath",
];

/// Words in inline code that reach keel's or a process's secrets whatever the paths.
const CODE_SECRETS: &[&str] = &["environ", "/proc/", "id_rsa", "id_ed25519", "id_ecdsa"];

/// Where credentials are: [`crate::protect::credential_locations`] as given and with links
/// resolved, each with the form shown in messages (`~/.ssh`).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    locations: Vec<(PathBuf, String)>,
    needles: Vec<String>,
    own_pid: u32,
    /// Folders inside a credential location that may be read all the same (the session's
    /// own artifacts in `$KEEL_HOME`), as given and with links resolved.
    readable: Vec<PathBuf>,
}

/// Whether `path` is a regular file of this user's with exactly one name.
pub fn is_own_file(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let own = crate::env::own_uid();
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.nlink() == 1 && m.uid() == own)
}

impl Credentials {
    /// The list for `locations` (absolute), shown relative to `home` where they lie in it.
    pub fn new(locations: &[PathBuf], home: Option<&Path>) -> Self {
        let mut out = Self {
            own_pid: std::process::id(),
            ..Self::default()
        };
        let homes: Vec<PathBuf> = home
            .into_iter()
            .flat_map(|h| [h.to_path_buf(), super::paths::real_path(h)])
            .collect();
        for location in locations {
            let shown = homes
                .iter()
                .find_map(|h| location.strip_prefix(h).ok())
                .map(|rest| format!("~/{}", rest.display()))
                .unwrap_or_else(|| location.display().to_string());
            for path in [location.clone(), super::paths::real_path(location)] {
                if !out.locations.iter().any(|(p, _)| *p == path) {
                    out.locations.push((path, shown.clone()));
                }
            }
            let relative = shown.strip_prefix("~/").unwrap_or(&shown).to_owned();
            for needle in [location.display().to_string(), shown.clone(), relative] {
                if !out.needles.contains(&needle) {
                    out.needles.push(needle);
                }
            }
        }
        out.needles
            .extend(CODE_SECRETS.iter().map(|s| (*s).to_owned()));
        out
    }

    /// The same list, with reads allowed of keel's own files in `dir`, a folder as resolved
    /// paths show it ([`crate::ToolEnv::artifacts_root`]).
    #[must_use]
    pub fn readable_in(mut self, dir: PathBuf) -> Self {
        if !self.readable.contains(&dir) {
            self.readable.push(dir);
        }
        self
    }

    /// Whether `path` (real) may be read although it is in a credential location: a file
    /// keel made in a readable folder (a regular file of this user's with no other name: a
    /// hard link planted there to a credential is no artifact).
    pub fn is_readable(&self, path: &Path) -> bool {
        self.readable
            .iter()
            .any(|dir| path.starts_with(dir) && path != dir)
            && is_own_file(path)
    }

    /// The credential location (`~/.ssh`, …) that `path` (real) is or lies in.
    pub fn location(&self, path: &Path) -> Option<String> {
        if let Some(found) = self
            .locations
            .iter()
            .find(|(location, _)| path.starts_with(location))
        {
            return Some(found.1.clone());
        }
        process_secret(&path.to_string_lossy(), self.own_pid)
    }

    /// Whether reading the folder `path` (real) as a whole reaches credentials.
    pub fn held_in(&self, path: &Path) -> bool {
        self.locations
            .iter()
            .any(|(location, _)| location.starts_with(path))
            || Self::holds_process_secrets(path)
    }

    /// Whether the folder `path` (real) holds processes' secrets (`/proc`, `/proc/<pid>`),
    /// which keel's search tools do not walk around.
    pub fn holds_process_secrets(path: &Path) -> bool {
        Path::new("/proc").starts_with(path)
            || path
                .strip_prefix("/proc")
                .is_ok_and(|rest| rest.components().count() == 1)
    }

    /// A credential location or process secret named in a path known only at run time
    /// (`${HOME:-x}/.ssh/id_rsa`, `/proc/$PPID/environ`): its known tail is enough.
    pub fn in_unknown(&self, text: &str) -> Option<String> {
        if let Some(secret) = process_secret(text, self.own_pid) {
            return Some(secret);
        }
        self.locations.iter().find_map(|(_, shown)| {
            let tail = shown.strip_prefix("~/")?;
            let at = text.find(&format!("/{tail}"))?;
            let after = text.get(at + 1 + tail.len()..).unwrap_or("");
            (after.is_empty() || after.starts_with('/')).then(|| format!("credentials in {shown}"))
        })
    }

    /// The credential location or secret that code mentions, if any.
    pub fn in_code(&self, code: &str) -> Option<String> {
        mentions(code, &self.needles).map(str::to_owned)
    }
}

/// `/proc/<pid>/environ` and friends: the secrets of a process (keel's own when the pid is
/// `self`, keel's, or unknown). `path` may hold unexpanded parts (`/proc/$PPID/environ`).
pub fn process_secret(path: &str, own_pid: u32) -> Option<String> {
    let rest = path.strip_prefix("/proc/")?;
    let mut parts = rest.split('/').filter(|p| !p.is_empty() && *p != ".");
    let pid = parts.next()?;
    let file = parts.next()?;
    let own = matches!(pid, "self" | "thread-self") || pid == own_pid.to_string();
    let some_pid =
        pid.chars().all(|c| c.is_ascii_digit()) || pid.contains(['$', '*', '?', '[', '`', '(']);
    let secret = own
        || (some_pid
            && PROCESS_SECRETS
                .iter()
                .any(|s| file == *s || (file.contains(['*', '?', '[']) && !file.is_empty())));
    secret.then(|| format!("a process's secrets in /proc/{pid}/{file}"))
}

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

/// Dangers visible from a command alone: disk tools, power, `git push --force`, `kill -9 -1`,
/// git configuration that runs programs, variables that load code, inline code that names
/// credentials.
pub fn invocation(
    invocation: &Invocation,
    credentials: &Credentials,
    inherited: &std::collections::HashMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let shown = || invocation.words().join(" ");
    // A bare assignment runs nothing; the programs after it carry the variable.
    let runs = !invocation.argv.is_empty();
    for (name, value) in invocation.env.iter().filter(|_| runs) {
        if let VarKind::RunsCode(how) = envvars::kind_given(name, &value.text, inherited) {
            out.push(format!("sets {name}, which {how} (`{}`)", shown()));
        }
    }
    let Some(program) = invocation.program() else {
        return out;
    };
    let args = invocation.args();
    if program == "git" {
        out.extend(
            git_dangers(args)
                .into_iter()
                .map(|d| format!("{d} (`{}`)", shown())),
        );
    }
    if program == "ps"
        && args
            .iter()
            .any(|a| !a.text.starts_with('-') && a.text.contains('e'))
    {
        out.push(format!(
            "shows the environment of other processes, keel's keys included (`{}`)",
            shown()
        ));
    }
    let mut code = inline_code(program, args);
    if let Stdin::Text(text) = &invocation.stdin
        && super::shell::INTERPRETERS.contains(&program)
    {
        code.push(text.text.clone());
    }
    for code in code {
        if let Some(found) = credentials.in_code(&code) {
            out.push(format!(
                "runs inline code that mentions {found}, a credential or secret (`{}`)",
                shown()
            ));
        }
        if let Some(found) = CODE_CONTROL.iter().find(|c| code.contains(*c)) {
            out.push(format!(
                "runs inline code that mentions {found}, a protected control file (`{}`)",
                shown()
            ));
        }
    }
    out.extend(basic(invocation));
    out
}

fn basic(invocation: &Invocation) -> Option<String> {
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

/// Why a command leaves something to run later, outside keel and its sandbox, if it does:
/// a crontab installed or changed, a job for `at`, a user unit of systemd enabled or
/// changed, a user's services kept running after logout. Like the files that make programs
/// run code, only the user or `full` mode may do this.
pub fn schedules(program: &str, args: &[Arg]) -> Option<String> {
    let texts: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    let shown = || {
        std::iter::once(program)
            .chain(texts.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let scheduled = match program {
        // `crontab -l` only lists.
        "crontab" => !texts.contains(&"-l") || texts.iter().any(|t| matches!(*t, "-r" | "-e")),
        "at" | "batch" => !texts.iter().any(|t| matches!(*t, "-l" | "-c")),
        "systemd-run" => texts.contains(&"--user"),
        "systemctl" => {
            texts.contains(&"--user")
                && texts.iter().any(|t| {
                    matches!(
                        *t,
                        "enable"
                            | "reenable"
                            | "link"
                            | "edit"
                            | "preset"
                            | "set-environment"
                            | "import-environment"
                            | "add-wants"
                            | "add-requires"
                            | "revert"
                            | "unmask"
                    )
                })
        }
        "loginctl" => texts.contains(&"enable-linger"),
        _ => false,
    };
    scheduled.then(|| {
        format!(
            "`{}` leaves a command to run later, outside keel (crontabs, at jobs and the user's systemd units are control files)",
            shown()
        )
    })
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
        let credentials = Credentials::new(
            &crate::protect::credential_locations(Some(Path::new("/home/u")), None, &[]),
            Some(Path::new("/home/u")),
        );
        assert_eq!(
            credentials
                .location(Path::new("/home/u/.ssh/id_rsa"))
                .as_deref(),
            Some("~/.ssh")
        );
        assert!(
            credentials
                .location(Path::new("/home/u/.kube/config"))
                .is_some()
        );
        assert!(credentials.location(Path::new("/home/u/.sshrc")).is_none());
        assert!(credentials.held_in(Path::new("/home/u")));
        assert!(credentials.held_in(Path::new("/proc")));
        assert!(!credentials.held_in(Path::new("/home/u/src")));
        assert!(credentials.in_code("open('/home/u/.ssh/id_rsa')").is_some());
        assert!(credentials.in_code("os.environ['K']").is_some());
        assert!(credentials.in_code("print(1)").is_none());
    }

    /// Only files keel made in the session's artifacts folder are readable inside keel's
    /// home: no hard link planted there, and nothing a linked folder leads to.
    #[test]
    fn the_artifacts_exception_reaches_keels_own_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let keel = home.join(".keel");
        let artifacts = keel.join("sessions/s-1/artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "secret").unwrap();
        std::fs::write(artifacts.join("bash-1.log"), "output").unwrap();
        std::fs::hard_link(home.join(".ssh/id_rsa"), artifacts.join("planted.log")).unwrap();
        let env = {
            let mut env = crate::ToolEnv::new(home.join("work"));
            env.home = Some(home.clone());
            env.keel_home = Some(keel.clone());
            env.artifacts = Some(artifacts.clone());
            env
        };
        let credentials = Credentials::new(&env.credentials(), Some(&home))
            .readable_in(env.artifacts_root().unwrap());
        assert!(credentials.is_readable(&artifacts.join("bash-1.log")));
        assert!(!credentials.is_readable(&artifacts.join("planted.log")));
        assert!(!credentials.is_readable(&keel.join("config.yaml")));
        assert!(!credentials.is_readable(&artifacts));
        // A linked artifacts folder: resolved paths land where it points, outside the
        // exception.
        std::fs::remove_dir_all(&artifacts).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), &artifacts).unwrap();
        let linked = Credentials::new(&env.credentials(), Some(&home))
            .readable_in(env.artifacts_root().unwrap());
        let resolved = super::super::paths::real_path(&artifacts.join("id_rsa"));
        assert_eq!(resolved, home.join(".ssh/id_rsa"));
        assert!(!linked.is_readable(&resolved));
        assert!(linked.location(&resolved).is_some());
    }

    #[test]
    fn process_secrets() {
        let me = std::process::id();
        for path in [
            "/proc/self/environ",
            "/proc/self/status",
            "/proc/thread-self/mem",
            "/proc/1234/environ",
            "/proc/$PPID/environ",
            "/proc/1/task/1/environ",
            "/proc/*/environ",
        ] {
            assert!(process_secret(path, me).is_some(), "{path}");
        }
        assert!(process_secret(&format!("/proc/{me}/cmdline"), me).is_some());
        for path in [
            "/proc/1234/status",
            "/proc/cpuinfo",
            "/proc/self",
            "/etc/environ",
        ] {
            assert!(process_secret(path, me).is_none(), "{path}");
        }
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
