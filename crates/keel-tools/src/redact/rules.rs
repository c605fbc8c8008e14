//! Secrets known by pattern: the gitleaks rule set, carried as data
//! (`data/gitleaks-rules.json`, made from gitleaks' `config/gitleaks.toml` by
//! `scripts/gitleaks-rules.py`; MIT, see `data/GITLEAKS-LICENSE`), and keel's own rules in
//! the same form (`data/keel-rules.json`) for shapes it leaves to chance: `Authorization:`
//! headers, quoted passwords, Azure account keys.
//!
//! Matching follows gitleaks: a rule runs only on a line holding one of its keywords; the
//! secret is its secret group (else the first group that matched, else the whole match);
//! a secret under the rule's entropy, or allowed by the global or the rule's allowlists, is
//! not one; a `generic` rule's secret must hold a digit. keel adds: a `generic` rule's secret
//! must hold a letter too and is never a bare UUID or git object id, and a JWT named as a
//! fixture or example on its line is left alone. Patterns compile on first use.

use std::collections::BTreeSet;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::AhoCorasick;
use regex::bytes::Regex;
use serde::Deserialize;

/// The carried gitleaks rules.
const GITLEAKS: &str = include_str!("../../data/gitleaks-rules.json");
/// keel's own.
const KEEL: &str = include_str!("../../data/keel-rules.json");

/// How much text the patterns run over at once: whole lines up to this size (a longer line
/// is looked at in windows of it). Running a pattern has a cost of its own, so lines go
/// together; a rule runs on a block only when one of its keywords is in it.
const WINDOW: usize = 16 * 1024;
/// How far windows overlap, so a secret across a window's edge is still seen whole.
const OVERLAP: usize = 512;

#[derive(Deserialize)]
struct RuleSet {
    #[allow(dead_code, reason = "kept in the data to say where it came from")]
    source: String,
    allowlist: AllowData,
    rules: Vec<RuleData>,
}

#[derive(Deserialize, Default)]
struct AllowData {
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
}

#[derive(Deserialize)]
struct RuleData {
    id: String,
    regex: String,
    #[serde(default)]
    secret_group: usize,
    #[serde(default)]
    entropy: f64,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<AllowData>,
}

/// What an allowlist checks its patterns against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// An allowlist; its patterns and stopwords are built when a finding first needs them
/// (most rules never find anything in a given text).
struct Allow {
    all: bool,
    target: Target,
    data: AllowData,
    regexes: OnceLock<Vec<Regex>>,
    /// The stopwords, in one automaton (a list holds hundreds).
    stopwords: OnceLock<Option<AhoCorasick>>,
}

impl Allow {
    fn of(data: AllowData) -> Self {
        Self {
            all: data.condition.as_deref() == Some("AND"),
            target: match data.target.as_deref() {
                Some("match") => Target::Match,
                Some("line") => Target::Line,
                _ => Target::Secret,
            },
            data,
            regexes: OnceLock::new(),
            stopwords: OnceLock::new(),
        }
    }

    fn regexes(&self) -> &[Regex] {
        self.regexes.get_or_init(|| {
            self.data
                .regexes
                .iter()
                .filter_map(|r| compile(r))
                .collect()
        })
    }

    fn stopwords(&self) -> Option<&AhoCorasick> {
        self.stopwords
            .get_or_init(|| {
                (!self.data.stopwords.is_empty())
                    .then(|| {
                        AhoCorasick::builder()
                            .ascii_case_insensitive(true)
                            .build(&self.data.stopwords)
                            .ok()
                    })
                    .flatten()
            })
            .as_ref()
    }

    /// Whether this allowlist lets the finding through as no secret.
    fn allows(&self, secret: &str, matched: &str, line: &str) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        let by_regex = || self.regexes().iter().any(|r| r.is_match(target.as_bytes()));
        let by_word = || self.stopwords().is_some_and(|w| w.is_match(secret));
        let (has_regexes, has_words) = (
            !self.data.regexes.is_empty(),
            !self.data.stopwords.is_empty(),
        );
        if self.all {
            (!has_regexes || by_regex()) && (!has_words || by_word()) && (has_regexes || has_words)
        } else {
            (has_regexes && by_regex()) || (has_words && by_word())
        }
    }
}

struct Rule {
    id: String,
    pattern: String,
    regex: OnceLock<Option<Regex>>,
    secret_group: usize,
    entropy: f64,
    generic: bool,
    allowlists: Vec<Allow>,
}

impl Rule {
    fn regex(&self) -> Option<&Regex> {
        self.regex.get_or_init(|| compile(&self.pattern)).as_ref()
    }
}

/// Patterns run over bytes with ASCII classes, as gitleaks' (Go's RE2) do: `\w` is
/// `[0-9A-Za-z_]`, which also keeps the automata small and fast.
fn compile(pattern: &str) -> Option<Regex> {
    let built = regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
        .size_limit(64 * 1024 * 1024)
        .dfa_size_limit(16 * 1024 * 1024)
        .build();
    match built {
        Ok(regex) => Some(regex),
        Err(error) => {
            tracing::warn!(%pattern, %error, "a redaction pattern does not compile");
            None
        }
    }
}

/// Every rule, its keywords in one automaton.
struct Rules {
    rules: Vec<Rule>,
    global: Vec<Allow>,
    /// `None` if the automaton could not be built: then every rule runs on every line.
    keywords: Option<AhoCorasick>,
    /// The rules of each keyword, by the automaton's pattern index.
    keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords: they run on every line.
    always: Vec<usize>,
}

static RULES: LazyLock<Rules> = LazyLock::new(|| {
    let mut rules = Vec::new();
    let mut global = Vec::new();
    let mut keywords: Vec<String> = Vec::new();
    let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
    let mut always = Vec::new();
    for text in [GITLEAKS, KEEL] {
        let set: RuleSet = match serde_json::from_str(text) {
            Ok(set) => set,
            Err(error) => {
                tracing::error!(%error, "a redaction rule set does not read");
                continue;
            }
        };
        global.push(Allow::of(set.allowlist));
        for data in set.rules {
            let index = rules.len();
            if data.keywords.is_empty() {
                always.push(index);
            }
            for keyword in &data.keywords {
                match keywords.iter().position(|k| k == keyword) {
                    Some(at) => keyword_rules[at].push(index),
                    None => {
                        keywords.push(keyword.clone());
                        keyword_rules.push(vec![index]);
                    }
                }
            }
            rules.push(Rule {
                generic: data.id.starts_with("generic"),
                id: data.id,
                pattern: data.regex,
                regex: OnceLock::new(),
                secret_group: data.secret_group,
                entropy: data.entropy,
                allowlists: data.allowlists.into_iter().map(Allow::of).collect(),
            });
        }
    }
    let keywords = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(&keywords)
        .ok();
    Rules {
        rules,
        global,
        keywords,
        keyword_rules,
        always,
    }
});

/// The ids of every rule, as marker kinds.
pub(super) fn kinds() -> &'static BTreeSet<String> {
    static KINDS: LazyLock<BTreeSet<String>> =
        LazyLock::new(|| RULES.rules.iter().map(|r| r.id.clone()).collect());
    &KINDS
}

/// Shannon entropy of `text` in bits per character.
fn entropy(text: &str) -> f64 {
    let mut total = 0usize;
    let counts: Vec<usize> = if text.is_ascii() {
        let mut bytes = [0usize; 128];
        for b in text.bytes() {
            bytes[usize::from(b)] += 1;
            total += 1;
        }
        bytes.into_iter().filter(|n| *n > 0).collect()
    } else {
        let mut chars = std::collections::HashMap::new();
        for c in text.chars() {
            *chars.entry(c).or_insert(0usize) += 1;
            total += 1;
        }
        chars.into_values().collect()
    };
    if total == 0 {
        return 0.0;
    }
    counts
        .into_iter()
        .map(|n| {
            let p = n as f64 / total as f64;
            -p * p.log2()
        })
        .sum()
}

/// A UUID or a git object id: identifiers a generic rule must not take for secrets.
fn is_identifier(text: &str) -> bool {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let uuid = text.len() == 36
        && text.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && hex(&text.replace('-', ""));
    uuid || ((text.len() == 40 || text.len() == 64) && hex(text))
}

/// Whether the text before a JWT on its line names it a fixture or an example
/// (`FIXTURE_JWT = "`, `example_token: `): test data, not a credential.
pub(super) fn names_a_fixture(before: &[u8]) -> bool {
    static NAMED: LazyLock<Option<Regex>> = LazyLock::new(|| {
        compile(r"(?i)(?:fixture|example|sample|dummy|fake|mock|placeholder)[\w.-]*\W{0,6}$")
    });
    let line = before.rsplit(|b| *b == b'\n').next().unwrap_or(before);
    let line = &line[line.len().saturating_sub(80)..];
    NAMED.as_ref().is_some_and(|r| r.is_match(line))
}

/// The secrets the rules find in `line` (whole lines of the text, from its byte `offset`),
/// as (start, end, rule id), in order and not overlapping.
pub(super) fn find(line: &str, offset: usize, found: &mut Vec<(usize, usize, &'static str)>) {
    let rules = &*RULES;
    let mut from = 0;
    let mut local: Vec<(usize, usize, &'static str)> = Vec::new();
    while from < line.len() {
        let mut to = line.ceil_char_boundary((from + WINDOW).min(line.len()));
        // End the block at a line's end when one is in reach.
        if to < line.len()
            && let Some(at) = line[from..to].rfind('\n')
            && at > 0
        {
            to = from + at + 1;
        }
        if to <= from {
            to = line.len();
        }
        let window = &line[from..to];
        let mut candidates: BTreeSet<usize> = rules.always.iter().copied().collect();
        match &rules.keywords {
            Some(keywords) => {
                for hit in keywords.find_overlapping_iter(window) {
                    candidates.extend(&rules.keyword_rules[hit.pattern().as_usize()]);
                }
            }
            None => candidates.extend(0..rules.rules.len()),
        }
        for index in candidates {
            let rule = &rules.rules[index];
            let Some(regex) = rule.regex() else { continue };
            for caps in regex.captures_iter(window.as_bytes()) {
                let Some(whole) = caps.get(0) else { continue };
                let secret = if rule.secret_group > 0 {
                    caps.get(rule.secret_group)
                } else {
                    caps.iter().skip(1).flatten().next()
                }
                .unwrap_or(whole);
                // ASCII classes may stop inside a character: widen to whole characters.
                let start = window.floor_char_boundary(secret.start());
                let end = window.ceil_char_boundary(secret.end());
                let text = &window[start..end];
                if text.is_empty() || (rule.entropy > 0.0 && entropy(text) < rule.entropy) {
                    continue;
                }
                if rule.generic
                    && (!text.bytes().any(|b| b.is_ascii_digit())
                        || !text.bytes().any(|b| b.is_ascii_alphabetic())
                        || is_identifier(text))
                {
                    continue;
                }
                if rule.id.starts_with("jwt") && names_a_fixture(&window.as_bytes()[..start]) {
                    continue;
                }
                let matched = &window[window.floor_char_boundary(whole.start())
                    ..window.ceil_char_boundary(whole.end())];
                let line_start = window[..start].rfind('\n').map_or(0, |at| at + 1);
                let line_end = window[end..].find('\n').map_or(window.len(), |at| end + at);
                let allowed = rules
                    .global
                    .iter()
                    .chain(&rule.allowlists)
                    .any(|a| a.allows(text, matched, &window[line_start..line_end]));
                if allowed {
                    continue;
                }
                local.push((from + start, from + end, id_of(index)));
            }
        }
        if to == line.len() {
            break;
        }
        // A block that ends at a line's end needs no overlap: no secret spans lines.
        from = if line.as_bytes()[to - 1] == b'\n' {
            to
        } else {
            line.floor_char_boundary(to - OVERLAP.min(to - from))
        };
    }
    local.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
    let mut last_end = 0;
    for (start, end, id) in local {
        if start < last_end {
            continue;
        }
        last_end = end;
        found.push((offset + start, offset + end, id));
    }
}

/// The id of rule `index`, for as long as the program runs.
fn id_of(index: usize) -> &'static str {
    RULES.rules[index].id.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_carried_pattern_compiles() {
        let broken: Vec<&str> = RULES
            .rules
            .iter()
            .filter(|r| r.regex().is_none())
            .map(|r| r.id.as_str())
            .collect();
        assert!(broken.is_empty(), "{broken:?}");
        assert!(RULES.rules.len() > 200, "{}", RULES.rules.len());
    }

    #[test]
    fn identifiers_and_entropy() {
        assert!(is_identifier("123e4567-e89b-12d3-a456-426614174000"));
        assert!(is_identifier("3f786850e387550fdab836ed7e6dc881de23001b"));
        assert!(!is_identifier("3f786850e387550fdab836ed7e6dc881de23001z"));
        assert!(entropy("aaaa") < 0.1);
        assert!(entropy("a1B2c3D4e5F6") > 3.0);
    }
}
