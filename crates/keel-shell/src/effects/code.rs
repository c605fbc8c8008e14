//! Code given on the command line: the inline programs of interpreters (`python -c`, `perl -e`,
//! `node -e`, awk and sed programs), so the danger list can look for credential locations in
//! them; and a reading of awk and sed programs precise enough to tell a plain text filter
//! (`sed -n 1,20p`, `awk '{print $1}'`) from one that writes files or runs commands.
//!
//! Trade-off: the sed reader follows the command grammar and gives up (the program counts as
//! unreadable code) on anything it does not know; the awk check is a word search that calls a
//! program unreadable if it could print to a file or a pipe, run a command or read a file.

use super::args::{has_flag, option_values};
use crate::shell::Arg;

/// The inline code an interpreter or text tool is given in its arguments.
pub fn inline_code(program: &str, args: &[Arg]) -> Vec<String> {
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match base {
        "python" | "pypy" => cluster_code(args, &['c'], "WXmQ", ""),
        "perl" => cluster_code(args, &['e', 'E'], "I", "xCdDMmiF"),
        "ruby" | "php" | "lua" | "luajit" => cluster_code(args, &['e', 'r'], "I", ""),
        "node" | "nodejs" | "bun" | "deno" => {
            let mut code: Vec<String> = ["eval", "print"]
                .iter()
                .flat_map(|long| {
                    option_values(args, Some(long.chars().next().unwrap_or('e')), long)
                })
                .map(|a| a.text)
                .collect();
            if base == "deno" && args.first().is_some_and(|a| a.text == "eval") {
                code.extend(args.get(1..).unwrap_or(&[]).iter().map(|a| a.text.clone()));
            }
            code
        }
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => awk_program(args).into_iter().collect(),
        "sed" => sed_scripts(args).0,
        _ => Vec::new(),
    }
}

/// Code after a short option in `flags` (`-c CODE`, `-ne CODE`, `-eCODE`); `valued` lists
/// other short options that take a value (inline or as the next word), `inline` those whose
/// value can only follow them in the same word (perl's `-l0`, `-MFoo`).
fn cluster_code(args: &[Arg], flags: &[char], valued: &str, inline: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.text.as_str();
        if text == "--" || !text.starts_with('-') || text == "-" {
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            if matches!(long, "eval" | "command" | "execute")
                && let Some(code) = args.get(i)
            {
                out.push(code.text.clone());
                i += 1;
            }
            continue;
        }
        let cluster: Vec<char> = text.chars().skip(1).collect();
        for (at, c) in cluster.iter().enumerate() {
            let inline_value: String = cluster.get(at + 1..).unwrap_or(&[]).iter().collect();
            if flags.contains(c) {
                if inline_value.is_empty() {
                    if let Some(code) = args.get(i) {
                        out.push(code.text.clone());
                        i += 1;
                    }
                } else {
                    out.push(inline_value);
                }
                break;
            }
            if valued.contains(*c) {
                if inline_value.is_empty() {
                    i += 1;
                }
                break;
            }
            if inline.contains(*c) {
                break;
            }
        }
    }
    out
}

/// The awk program text, unless it comes from a file (`-f`).
fn awk_program(args: &[Arg]) -> Option<String> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.text.as_str();
        if text == "--" {
            return args.get(i).map(|a| a.text.clone());
        }
        if !text.starts_with('-') || text == "-" {
            return Some(arg.text.clone());
        }
        if matches!(text, "-f" | "--file" | "-E" | "--exec" | "-i" | "--include") {
            return None;
        }
        if matches!(text, "-F" | "-v" | "--assign" | "--field-separator") {
            i += 1;
        }
    }
    None
}

/// Whether an awk command is a plain text filter: no program from a file or library, no
/// output to files or pipes, no commands, no reading of other files, no state files.
pub fn awk_is_filter(args: &[Arg]) -> bool {
    let options_ok = args
        .iter()
        .take_while(|a| a.text.starts_with('-'))
        .all(|a| {
            let t = a.text.as_str();
            t.starts_with("-F")
                || t.starts_with("-v")
                || t == "--"
                || t.starts_with("--field-separator")
                || t.starts_with("--assign")
        });
    let Some(program) = awk_program(args) else {
        return false;
    };
    options_ok
        && ![
            "system", "|", ">", "getline", "ENVIRON", "@load", "@include", "close", "fflush",
            "PROCINFO", "ARGV", "ARGC",
        ]
        .iter()
        .any(|w| program.contains(w))
}

/// What a sed program does beyond filtering text.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SedEffects {
    /// Files it writes (`w FILE`, `s///w FILE`).
    pub writes: Vec<String>,
    /// Files it reads (`r FILE`, `R FILE`).
    pub reads: Vec<String>,
    /// It runs commands (`e`, `s///e`) or could not be read.
    pub runs: bool,
}

/// The scripts of a sed command, and whether one comes from a file.
pub fn sed_scripts(args: &[Arg]) -> (Vec<String>, bool) {
    let from_file = has_flag(args, Some('f'), "file");
    let mut scripts: Vec<String> = option_values(args, Some('e'), "expression")
        .into_iter()
        .map(|a| a.text)
        .collect();
    if scripts.is_empty() && !from_file {
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            i += 1;
            let t = arg.text.as_str();
            if t.starts_with('-') && t != "-" {
                if matches!(t, "-l" | "--line-length") {
                    i += 1;
                }
                continue;
            }
            scripts.push(arg.text.clone());
            break;
        }
    }
    (scripts, from_file)
}

/// What a sed command's program does; a script from a file counts as running anything.
pub fn sed_effects(args: &[Arg]) -> SedEffects {
    let (scripts, from_file) = sed_scripts(args);
    let mut effects = SedEffects {
        runs: from_file,
        ..SedEffects::default()
    };
    if has_flag(args, None, "sandbox") {
        return effects;
    }
    for script in scripts {
        if !read_sed(&script, &mut effects) {
            effects.runs = true;
        }
    }
    effects
}

/// Reads one sed script; false when it does not follow the grammar as far as this reader
/// knows it.
fn read_sed(script: &str, effects: &mut SedEffects) -> bool {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied();
    let rest_of_line = |i: &mut usize| -> String {
        let start = *i;
        while at(*i).is_some_and(|c| c != '\n') {
            *i += 1;
        }
        chars
            .get(start..*i)
            .unwrap_or(&[])
            .iter()
            .collect::<String>()
            .trim()
            .to_owned()
    };
    // Skips a delimited part (`/re/`, `s|a|b|`) after its opening delimiter.
    let delimited = |i: &mut usize, delim: char| -> bool {
        while let Some(c) = at(*i) {
            *i += 1;
            if c == '\\' {
                *i += 1;
            } else if c == delim {
                return true;
            } else if c == '\n' {
                return false;
            }
        }
        false
    };
    loop {
        while at(i).is_some_and(|c| c.is_whitespace() || c == ';') {
            i += 1;
        }
        let Some(c) = at(i) else { return true };
        if c == '#' {
            rest_of_line(&mut i);
            continue;
        }
        // Up to two addresses, then an optional `!`.
        for n in 0..2 {
            match at(i) {
                Some(d) if d.is_ascii_digit() => {
                    while at(i).is_some_and(|c| c.is_ascii_digit() || c == '~') {
                        i += 1;
                    }
                }
                Some('$') => i += 1,
                Some('/') => {
                    i += 1;
                    if !delimited(&mut i, '/') {
                        return false;
                    }
                    while at(i).is_some_and(|c| c == 'I' || c == 'M') {
                        i += 1;
                    }
                }
                Some('\\') => {
                    let Some(d) = at(i + 1) else { return false };
                    i += 2;
                    if !delimited(&mut i, d) {
                        return false;
                    }
                }
                Some('+' | '~') if n == 1 => {
                    i += 1;
                    while at(i).is_some_and(|c| c.is_ascii_digit()) {
                        i += 1;
                    }
                }
                _ => {}
            }
            if n == 0 && at(i) == Some(',') {
                i += 1;
            } else {
                break;
            }
        }
        while at(i).is_some_and(|c| c == ' ' || c == '!') {
            i += 1;
        }
        let Some(command) = at(i) else { return false };
        i += 1;
        match command {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                while at(i).is_some_and(|c| c.is_ascii_digit() || c == ' ') {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => {
                // Text to the end of the line, continued by a trailing backslash.
                loop {
                    let line = rest_of_line(&mut i);
                    if line.ends_with('\\') && at(i).is_some() {
                        i += 1;
                        continue;
                    }
                    break;
                }
            }
            ':' | 'b' | 't' | 'T' | 'v' => {
                while at(i).is_some_and(|c| c != '\n' && c != ';') {
                    i += 1;
                }
            }
            'r' | 'R' => effects.reads.push(rest_of_line(&mut i)),
            'w' | 'W' => effects.writes.push(rest_of_line(&mut i)),
            'e' => {
                effects.runs = true;
                rest_of_line(&mut i);
            }
            's' | 'y' => {
                let Some(delim) = at(i) else { return false };
                if delim == '\n' || delim == '\\' {
                    return false;
                }
                i += 1;
                if !delimited(&mut i, delim) || !delimited(&mut i, delim) {
                    return false;
                }
                if command == 's' {
                    while let Some(flag) = at(i) {
                        match flag {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                            'e' => {
                                effects.runs = true;
                                i += 1;
                            }
                            'w' => {
                                i += 1;
                                effects.writes.push(rest_of_line(&mut i));
                            }
                            _ => break,
                        }
                    }
                }
            }
            _ => return false,
        }
    }
}

/// Whether code mentions something the danger list cares about: one of `needles`, `environ`
/// or `/proc/`.
pub fn mentions<'n>(code: &str, needles: &'n [String]) -> Option<&'n str> {
    needles
        .iter()
        .find(|n| !n.is_empty() && code.contains(n.as_str()))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn args(words: &[&str]) -> Vec<Arg> {
        words.iter().map(|w| Arg::literal(*w)).collect()
    }

    #[test]
    fn inline_code_is_found() {
        assert_eq!(
            inline_code("python3", &args(&["-c", "print(1)"])),
            vec!["print(1)"]
        );
        assert_eq!(inline_code("python3.12", &args(&["-Ic", "x"])), vec!["x"]);
        assert_eq!(
            inline_code("python3", &args(&["script.py", "-c", "x"])),
            Vec::<String>::new()
        );
        assert_eq!(
            inline_code("perl", &args(&["-lne", "print"])),
            vec!["print"]
        );
        assert_eq!(inline_code("node", &args(&["-e", "1"])), vec!["1"]);
        assert_eq!(inline_code("ruby", &args(&["-e", "1"])), vec!["1"]);
        assert_eq!(
            inline_code("awk", &args(&["-F:", "{print $1}", "f"])),
            vec!["{print $1}"]
        );
        assert_eq!(
            inline_code("sed", &args(&["-n", "1,5p", "f"])),
            vec!["1,5p"]
        );
    }

    #[test]
    fn sed_programs_are_read() {
        let effects = |script: &str| sed_effects(&args(&["-n", script, "f"]));
        assert_eq!(effects("1,20p"), SedEffects::default());
        assert_eq!(effects("s/a/b/g"), SedEffects::default());
        assert_eq!(effects("/x/,/y/{s|a|b|;p}"), SedEffects::default());
        assert_eq!(effects("$!d"), SedEffects::default());
        assert!(effects("s/x/id/e").runs);
        assert!(effects("1e id").runs);
        assert_eq!(effects("w out.txt").writes, vec!["out.txt"]);
        assert_eq!(effects("s/a/b/w /tmp/o").writes, vec!["/tmp/o"]);
        assert_eq!(effects("r /etc/passwd").reads, vec!["/etc/passwd"]);
        assert!(effects("k").runs);
        assert!(sed_effects(&args(&["-f", "prog.sed", "f"])).runs);
    }

    #[test]
    fn awk_filters() {
        assert!(awk_is_filter(&args(&["{print $1}", "f"])));
        // `>` may be a redirection: a comparison counts as one too.
        assert!(!awk_is_filter(&args(&["-F,", "NR>1{print $2}"])));
        assert!(!awk_is_filter(&args(&["{system(\"id\")}"])));
        assert!(!awk_is_filter(&args(&["{print > \"/tmp/x\"}"])));
        assert!(!awk_is_filter(&args(&["-f", "prog.awk"])));
        // Files named in the program are read whatever the operands say.
        assert!(!awk_is_filter(&args(&[
            "BEGIN{ARGV[1]=\"/etc/shadow\";ARGC=2}1"
        ])));
    }
}
