//! Pathname expansion against the real file system, as bash does it before a program runs:
//! `cat ~/.ss?/id_*` is judged as `cat /home/u/.ssh/id_rsa …`, not as a pattern.
//!
//! Trade-off: the gate runs per call, so the work is bounded: a [`Budget`] of folder entries
//! read per command and [`MAX_MATCHES`] per pattern. A pattern past either bound is reported
//! as not expandable and the gate asks. When the script may have changed bash's matching
//! rules (`shopt`, `GLOBIGNORE`), matching is widened to a superset (hidden files, any case),
//! so what bash could match is always among what is judged.

use std::path::{Path, PathBuf};

/// Most paths one pattern may match (design choice: enough for `rm *.o` in a big folder).
pub const MAX_MATCHES: usize = 1000;
/// Most folder entries read for all the patterns of one command.
pub const MAX_ENTRIES: usize = 20_000;

/// What is left of the work one command may cause.
#[derive(Debug, Clone)]
pub(super) struct Budget {
    pub(super) entries: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            entries: MAX_ENTRIES,
        }
    }
}

/// How bash matches: its defaults, or a superset when the script may have changed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Matching {
    /// Hidden files only by an explicit `.`, case-sensitive, `**` like `*`.
    Default,
    /// Hidden files and any case match; a `**` component cannot be bounded and is refused.
    Widened,
}

/// The paths `pattern` matches, sorted, spelled as bash would (relative patterns stay
/// relative); empty when nothing matches. `pattern` holds each character with whether it is
/// an unquoted glob character; `cwd` is where relative patterns start.
pub(super) fn expand(
    pattern: &[(char, bool)],
    cwd: Option<&Path>,
    matching: Matching,
    budget: &mut Budget,
) -> Result<Vec<String>, String> {
    let absolute = pattern.first().is_some_and(|(c, _)| *c == '/');
    let base = if absolute {
        PathBuf::from("/")
    } else {
        match cwd {
            Some(cwd) => cwd.to_path_buf(),
            None => return Err("the folder it is relative to is only known at run time".into()),
        }
    };
    let components: Vec<&[(char, bool)]> = pattern
        .split(|(c, _)| *c == '/')
        .filter(|part| !part.is_empty())
        .collect();
    // (real path to read, spelling so far)
    let mut candidates: Vec<(PathBuf, String)> =
        vec![(base, if absolute { "/".into() } else { String::new() })];
    let mut magic_seen = false;
    for component in components {
        let text: String = component.iter().map(|(c, _)| c).collect();
        let join = |shown: &str, name: &str| {
            if shown.is_empty() || shown.ends_with('/') {
                format!("{shown}{name}")
            } else {
                format!("{shown}/{name}")
            }
        };
        if !is_magic(component) {
            for (path, shown) in &mut candidates {
                path.push(&text);
                *shown = join(shown, &text);
            }
            continue;
        }
        if matching == Matching::Widened && text == "**" {
            return Err("`**` may match a whole tree (globstar)".into());
        }
        magic_seen = true;
        let mut next = Vec::new();
        for (path, shown) in &candidates {
            let Ok(entries) = std::fs::read_dir(path) else {
                continue;
            };
            for entry in entries.flatten() {
                if budget.entries == 0 {
                    return Err(format!(
                        "expanding it reads more than {MAX_ENTRIES} folder entries"
                    ));
                }
                budget.entries -= 1;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with('.') && matching == Matching::Default && !text.starts_with('.')
                {
                    continue;
                }
                if matches(component, name, matching == Matching::Widened) {
                    if next.len() >= MAX_MATCHES {
                        return Err(format!("it matches more than {MAX_MATCHES} paths"));
                    }
                    next.push((path.join(name), join(shown, name)));
                }
            }
        }
        candidates = next;
        if candidates.is_empty() {
            break;
        }
    }
    if !magic_seen {
        return Ok(Vec::new());
    }
    let mut found: Vec<String> = candidates
        .into_iter()
        .filter(|(path, _)| std::fs::symlink_metadata(path).is_ok())
        .map(|(_, shown)| shown)
        .collect();
    if pattern.last().is_some_and(|(c, _)| *c == '/') {
        found.iter_mut().for_each(|f| f.push('/'));
    }
    found.sort();
    Ok(found)
}

fn is_magic(component: &[(char, bool)]) -> bool {
    component
        .iter()
        .any(|(c, active)| *active && matches!(c, '*' | '?' | '['))
}

/// Whether `name` matches one pattern component (`*`, `?`, `[…]` with `!`/`^`, ranges and
/// classes; an unknown class matches any character, which only widens the match).
fn matches(pattern: &[(char, bool)], name: &str, fold: bool) -> bool {
    let name: Vec<char> = name.chars().collect();
    let eq = |a: char, b: char| {
        if fold {
            a.to_lowercase().eq(b.to_lowercase())
        } else {
            a == b
        }
    };
    // Iterative matcher with one backtrack point for the last `*`.
    let (mut p, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let here = name.get(n).copied().unwrap_or_default();
        match pattern.get(p) {
            Some(('*', true)) => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some(('?', true)) => {
                p += 1;
                n += 1;
                continue;
            }
            Some(('[', true)) => {
                if let Some((hit, len)) = bracket(pattern.get(p + 1..).unwrap_or(&[]), here, fold) {
                    if hit {
                        p += len + 1;
                        n += 1;
                        continue;
                    }
                } else if eq('[', here) {
                    p += 1;
                    n += 1;
                    continue;
                }
            }
            Some((c, _)) if eq(*c, here) => {
                p += 1;
                n += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, sn)) => {
                p = sp + 1;
                n = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    pattern
        .get(p..)
        .unwrap_or(&[])
        .iter()
        .all(|(c, active)| *active && *c == '*')
}

/// A bracket expression after its `[`: whether `c` is in it, and its length up to and
/// including the closing `]`; `None` when it is not closed (then `[` is literal).
fn bracket(rest: &[(char, bool)], c: char, fold: bool) -> Option<(bool, usize)> {
    let same = |a: char, b: char| a == b || (fold && a.to_lowercase().eq(b.to_lowercase()));
    let mut i = 0;
    let negate = matches!(rest.first(), Some(('!' | '^', _)));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let (ch, _) = *rest.get(i)?;
        if ch == ']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if ch == '[' && matches!(rest.get(i + 1), Some((':' | '=' | '.', _))) {
            // `[:alpha:]` and friends: skip to `:]`; any character counts as in the class.
            let mut j = i + 2;
            while let Some((x, _)) = rest.get(j) {
                if *x == ']' && j > i + 2 {
                    break;
                }
                j += 1;
            }
            hit = true;
            i = j + 1;
            continue;
        }
        if let (Some(('-', _)), Some((end, _))) = (rest.get(i + 1), rest.get(i + 2))
            && *end != ']'
        {
            let (lo, hi) = (ch.min(*end), ch.max(*end));
            let within = |x: char| (lo..=hi).contains(&x);
            if within(c)
                || (fold && (within(c.to_ascii_lowercase()) || within(c.to_ascii_uppercase())))
            {
                hit = true;
            }
            i += 3;
            continue;
        }
        if same(ch, c) {
            hit = true;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn pat(text: &str) -> Vec<(char, bool)> {
        text.chars()
            .map(|c| (c, matches!(c, '*' | '?' | '[')))
            .collect()
    }

    #[test]
    fn component_matching() {
        let m = |p: &str, n: &str| matches(&pat(p), n, false);
        assert!(m("*", "abc"));
        assert!(m("id_*", "id_rsa"));
        assert!(m(".ss?", ".ssh"));
        assert!(m("*.rs", "main.rs"));
        assert!(!m("*.rs", "main.rc"));
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("[[:alpha:]]", "q"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("[x", "[x"));
        assert!(matches(&pat("*.RS"), "main.rs", true));
        let quoted: Vec<(char, bool)> = "*".chars().map(|c| (c, false)).collect();
        assert!(!matches(&quoted, "abc", false));
        assert!(matches(&quoted, "*", false));
    }

    #[test]
    fn patterns_expand_against_the_file_system_and_hidden_files_need_a_dot() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        std::fs::create_dir_all(base.join("h/.ssh")).unwrap();
        std::fs::write(base.join("h/.ssh/id_rsa"), "").unwrap();
        std::fs::write(base.join("h/.ssh/id_ed25519"), "").unwrap();
        std::fs::write(base.join("h/notes"), "").unwrap();
        let mut budget = Budget::default();
        let run = |p: &str, m: Matching, budget: &mut Budget| {
            expand(&pat(p), Some(base), m, budget).unwrap()
        };
        assert_eq!(
            run("h/.ss?/id_*", Matching::Default, &mut budget),
            vec!["h/.ssh/id_ed25519", "h/.ssh/id_rsa"]
        );
        assert_eq!(run("h/*", Matching::Default, &mut budget), vec!["h/notes"]);
        assert_eq!(
            run("h/*", Matching::Widened, &mut budget),
            vec!["h/.ssh", "h/notes"]
        );
        assert_eq!(
            run("*/*/id_rsa", Matching::Widened, &mut budget),
            vec!["h/.ssh/id_rsa"]
        );
        assert!(run("nothing*", Matching::Default, &mut budget).is_empty());
        let absolute = format!("{}/h/.ssh/*", base.display());
        assert_eq!(
            expand(&pat(&absolute), None, Matching::Default, &mut budget)
                .unwrap()
                .len(),
            2
        );
        assert!(expand(&pat("*"), None, Matching::Default, &mut budget).is_err());
        let mut tiny = Budget { entries: 1 };
        assert!(expand(&pat("h/*"), Some(base), Matching::Default, &mut tiny).is_err());
    }
}
