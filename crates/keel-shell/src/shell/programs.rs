//! What the analysis knows about particular programs: which run scripts (shells and
//! interpreters) or download, how a wrapper (`env`, `sudo`, `timeout`, `xargs`, …) is peeled
//! off the command it runs, where a shell's `-c` script is, and whether stdin is read as code.
//! A table of program knowledge, kept apart from the walk that applies it.

use std::path::{Path, PathBuf};

use super::invocation::Arg;
use super::lexer::is_ident;
use crate::normalize;

/// Programs that run a script given as `-c STRING`, a file, or stdin.
pub const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh",
];
/// Programs that run code read from stdin when given no script.
pub const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "deno", "bun",
];
/// Programs that download from the network.
pub const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lynx",
];

/// The base name of a program path.
pub fn program_name(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

/// What a wrapper takes before the command it runs.
pub(super) struct Peel {
    /// Words taken by the wrapper, including its name.
    pub(super) taken: usize,
    /// A folder it changes into (`env -C`, `sudo -D`).
    pub(super) chdir: Option<Arg>,
    /// It appends arguments read from stdin (`xargs`).
    pub(super) appends_stdin: bool,
    /// Arguments containing this text are replaced by stdin (`xargs -I`).
    pub(super) replace: Option<String>,
    /// Words to split and put in front (`env -S`).
    pub(super) split: Option<String>,
    /// Variables it sets for the command (`env A=1`, `sudo A=1`).
    pub(super) assigns: Vec<(String, Arg)>,
    /// Files its own options name: (writes, option, file) (`time -o F`, `xargs -a F`).
    pub(super) files: Vec<(bool, String, Arg)>,
}

impl Peel {
    fn taking(taken: usize) -> Self {
        Self {
            taken,
            chdir: None,
            appends_stdin: false,
            replace: None,
            split: None,
            assigns: Vec::new(),
            files: Vec::new(),
        }
    }
}

/// `NAME=value` words from `at` on, as assignments; returns where the command starts.
fn assignments(argv: &[Arg], mut at: usize, out: &mut Vec<(String, Arg)>) -> usize {
    while let Some(arg) = argv.get(at) {
        let Some((name, value)) = arg.text.split_once('=') else {
            break;
        };
        if arg.opaque || name.is_empty() || !name.chars().all(is_ident) {
            break;
        }
        out.push((
            name.to_owned(),
            Arg {
                text: value.to_owned(),
                ..arg.clone()
            },
        ));
        at += 1;
    }
    at
}

/// Index of the first non-option word after `start`, with option values skipped.
/// `short_values` lists short options that take a value, `long_values` long ones.
pub fn skip_options(
    args: &[Arg],
    start: usize,
    short_values: &str,
    long_values: &[&str],
) -> (usize, Vec<(String, Arg)>) {
    let mut i = start;
    let mut seen = Vec::new();
    while let Some(arg) = args.get(i) {
        let text = arg.text.as_str();
        if text == "--" {
            return (i + 1, seen);
        }
        if arg.opaque || !text.starts_with('-') || text == "-" {
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            if let Some((name, value)) = long.split_once('=') {
                seen.push((name.to_owned(), Arg::literal(value)));
            } else if long_values.contains(&long) {
                seen.push((
                    long.to_owned(),
                    args.get(i + 1).cloned().unwrap_or_default(),
                ));
                i += 1;
            } else {
                seen.push((long.to_owned(), Arg::default()));
            }
            i += 1;
            continue;
        }
        let cluster: Vec<char> = text.chars().skip(1).collect();
        let mut consumed_next = false;
        for (at, c) in cluster.iter().enumerate() {
            if short_values.contains(*c) {
                let inline: String = cluster
                    .get(at + 1..)
                    .map(|s| s.iter().collect())
                    .unwrap_or_default();
                let value = if inline.is_empty() {
                    consumed_next = true;
                    args.get(i + 1).cloned().unwrap_or_default()
                } else {
                    Arg::literal(inline)
                };
                seen.push((c.to_string(), value));
                break;
            }
            seen.push((c.to_string(), Arg::default()));
        }
        i += if consumed_next { 2 } else { 1 };
    }
    (i, seen)
}

pub(super) fn peel(program: &str, argv: &[Arg]) -> Option<Peel> {
    match program {
        "nohup" | "builtin" => Some(Peel::taking(1)),
        "exec" => Some(Peel::taking(skip_options(argv, 1, "a", &[]).0)),
        "time" => {
            let (at, seen) = skip_options(argv, 1, "fo", &["format", "output"]);
            let mut peel = Peel::taking(at);
            for (flag, value) in seen {
                if flag == "o" || flag == "output" {
                    peel.files.push((true, format!("time -{flag}"), value));
                }
            }
            Some(peel)
        }
        "command" => {
            let (at, seen) = skip_options(argv, 1, "", &[]);
            // `command -v x` only looks a name up.
            if seen.iter().any(|(flag, _)| flag == "v" || flag == "V") {
                None
            } else {
                Some(Peel::taking(at))
            }
        }
        "nice" => {
            let mut at = 1;
            if argv.get(1).is_some_and(|a| {
                a.text.len() > 1
                    && a.text.starts_with('-')
                    && a.text[1..].chars().all(|c| c.is_ascii_digit())
            }) {
                at = 2;
            }
            Some(Peel::taking(skip_options(argv, at, "n", &["adjustment"]).0))
        }
        "stdbuf" => Some(Peel::taking(
            skip_options(argv, 1, "ioe", &["input", "output", "error"]).0,
        )),
        "ionice" => Some(Peel::taking(
            skip_options(argv, 1, "cnp", &["class", "classdata", "pid"]).0,
        )),
        "chrt" | "taskset" => {
            let (at, _) = skip_options(argv, 1, "", &[]);
            Some(Peel::taking(at + 1))
        }
        "timeout" => {
            let (at, _) = skip_options(argv, 1, "sk", &["signal", "kill-after"]);
            Some(Peel::taking(at + 1))
        }
        "sudo" | "doas" => {
            let (at, seen) = skip_options(
                argv,
                1,
                "ugCDhprtTUa",
                &[
                    "user",
                    "group",
                    "chdir",
                    "host",
                    "prompt",
                    "role",
                    "type",
                    "command-timeout",
                    "other-user",
                    "close-from",
                ],
            );
            let mut assigns = Vec::new();
            let at = assignments(argv, at, &mut assigns);
            let mut peel = Peel::taking(at);
            peel.assigns = assigns;
            peel.chdir = seen
                .into_iter()
                .find(|(flag, _)| flag == "D" || flag == "chdir")
                .map(|(_, value)| value);
            Some(peel)
        }
        "env" => {
            let (at, seen) = skip_options(argv, 1, "uCS", &["unset", "chdir", "split-string"]);
            let mut assigns = Vec::new();
            let at = assignments(argv, at, &mut assigns);
            let mut peel = Peel::taking(at);
            peel.assigns = assigns;
            for (flag, value) in seen {
                match flag.as_str() {
                    "C" | "chdir" => peel.chdir = Some(value),
                    "S" | "split-string" => peel.split = Some(value.text),
                    _ => {}
                }
            }
            Some(peel)
        }
        "xargs" => {
            let (at, seen) = skip_options(
                argv,
                1,
                "IinPLldsEea",
                &[
                    "replace",
                    "max-args",
                    "max-procs",
                    "max-lines",
                    "delimiter",
                    "max-chars",
                    "eof",
                    "arg-file",
                ],
            );
            let mut peel = Peel::taking(at);
            peel.appends_stdin = true;
            for (flag, value) in &seen {
                if flag == "a" || flag == "arg-file" {
                    peel.files
                        .push((false, format!("xargs -{flag}"), value.clone()));
                }
            }
            peel.replace = seen
                .into_iter()
                .find(|(flag, _)| flag == "I" || flag == "i" || flag == "replace")
                .map(|(_, value)| {
                    if value.text.is_empty() {
                        "{}".to_owned()
                    } else {
                        value.text
                    }
                });
            Some(peel)
        }
        _ => None,
    }
}

pub(super) fn resolve_dir(arg: &Arg, cwd: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    if arg.opaque {
        return None;
    }
    let path = Path::new(&arg.text);
    if path.is_absolute() {
        Some(normalize(path))
    } else if arg.text.is_empty() {
        home.map(Path::to_path_buf)
    } else {
        cwd.map(|c| normalize(&c.join(path)))
    }
}

/// For a shell invocation: the `-c` script argument, or `None` when it runs a file or stdin.
pub(super) fn shell_c_script(argv: &[Arg]) -> Option<Option<&Arg>> {
    let mut i = 1;
    let mut has_c = false;
    while let Some(arg) = argv.get(i) {
        let text = arg.text.as_str();
        if text == "--" {
            i += 1;
            break;
        }
        if arg.opaque || !(text.starts_with('-') || text.starts_with('+')) || text == "-" {
            break;
        }
        if text.starts_with("--") {
            if matches!(text, "--rcfile" | "--init-file") {
                i += 1;
            }
        } else {
            let flags = &text[1..];
            if flags.contains('c') {
                has_c = true;
            }
            if flags.ends_with('o') || flags.ends_with('O') {
                i += 1;
            }
        }
        i += 1;
    }
    if has_c { Some(argv.get(i)) } else { None }
}

/// Whether an interpreter invocation reads its program from stdin.
pub fn reads_stdin(program: &str, args: &[Arg]) -> bool {
    if SHELLS.contains(&program) {
        let argv: Vec<Arg> = std::iter::once(Arg::literal(program))
            .chain(args.iter().cloned())
            .collect();
        if shell_c_script(&argv).is_some() {
            return false;
        }
        let (at, seen) = skip_options(args, 0, "oO", &["rcfile", "init-file"]);
        return seen.iter().any(|(flag, _)| flag == "s")
            || args.get(at).is_none_or(|a| a.text == "-");
    }
    if INTERPRETERS.contains(&program) {
        let (at, seen) = skip_options(args, 0, "cemEWXIr", &["eval", "require", "import"]);
        if seen.iter().any(|(flag, _)| {
            matches!(
                flag.as_str(),
                "c" | "e" | "E" | "m" | "eval" | "p" | "print"
            )
        }) {
            return false;
        }
        return args.get(at).is_none_or(|a| a.text == "-");
    }
    false
}

pub(super) fn is_download(programs: &[String]) -> Option<String> {
    programs
        .iter()
        .find(|p| DOWNLOADERS.contains(&p.as_str()))
        .cloned()
}
