//! Finding secrets in text and masking them, for what leaves a session: exports, the
//! feedback bundle, the session report, transcript files. Never for stored history or the
//! model's context, which must stay exact for replay and prompt caching.
//!
//! Three sources of secrets: the values of secret environment variables present when the
//! export runs, matched verbatim; token-shaped strings matched by prefix and shape (provider
//! keys, GitHub, GitLab, Slack, npm, PyPI and Hugging Face tokens, AWS key ids, Google API
//! keys, JWTs, PEM private keys, passwords in URLs), by hand, in one pass; and the patterns
//! of a maintained rule set ([`rules`]: gitleaks', carried as data, and keel's own in the
//! same form), which know assignments (`AWS_SECRET_ACCESS_KEY=…`, `"client_secret": …`,
//! `password="…"`), headers (`Authorization: Bearer …`) and hundreds of providers' shapes.
//! Each becomes `[REDACTED:kind]`. A false positive costs a masked word while a miss leaks a
//! secret, so the shapes lean wide.
//!
//! Redaction runs until a round finds nothing, and markers it writes are never matched again,
//! so masking one secret can never uncover another and redacted text comes back unchanged.
//! Detection never looks past a marker, and a position right after one counts as the start of
//! a word, exactly as it would in the next round.

#[doc(hidden)]
pub mod corpus;
mod rules;
mod shapes;

use std::collections::BTreeMap;

/// What every mask starts with.
pub const MARKER_PREFIX: &str = "[REDACTED:";

/// Shortest environment value treated as a secret; shorter ones would mask ordinary words.
pub const MIN_SECRET_CHARS: usize = 8;

/// Variables whose values are secrets whatever their names say.
pub const KNOWN_SECRET_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MINIMAX_API_KEY",
    "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "HF_TOKEN",
    "NPM_TOKEN",
    "SLACK_BOT_TOKEN",
    "DATABASE_URL",
    "SENTRY_DSN",
];

/// Kinds of token-shaped secrets; with `env:NAME`, every kind a marker can name.
const TOKEN_KINDS: &[&str] = &[
    "private_key",
    "jwt",
    "anthropic_key",
    "stripe_key",
    "api_key",
    "github_token",
    "gitlab_token",
    "slack_token",
    "aws_access_key_id",
    "google_api_key",
    "huggingface_token",
    "npm_token",
    "pypi_token",
    "url_password",
];

/// A secret known by value: a secret environment variable's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    /// The variable's name.
    pub name: String,
    /// Its value, trimmed.
    pub value: String,
}

/// What [`redact`] produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Redaction {
    /// The text with every secret masked.
    pub text: String,
    /// How many secrets were masked.
    pub count: usize,
    /// How many of each kind.
    pub kinds: BTreeMap<String, usize>,
}

impl Redaction {
    fn add(&mut self, kind: &str) {
        self.count += 1;
        *self.kinds.entry(kind.to_owned()).or_default() += 1;
    }

    /// Adds another redaction's counts (for several texts redacted one by one).
    pub fn merge_counts(&mut self, other: &Redaction) {
        self.count += other.count;
        for (kind, n) in &other.kinds {
            *self.kinds.entry(kind.clone()).or_default() += n;
        }
    }
}

/// One secret found: its byte range and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// `api_key`, `url_password`, `env:NAME`, …
    pub kind: String,
}

/// Whether a variable with this name holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    KNOWN_SECRET_VARS.contains(&upper.as_str()) || crate::bash::envclean::looks_secret(&upper)
}

/// The secrets of this process's environment (see [`secrets_from_env`]).
pub fn process_secrets() -> Vec<Secret> {
    secrets_from_env(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

/// The secrets among environment variables: those with a secret name and a value of at least
/// [`MIN_SECRET_CHARS`] characters, longest value first (so a value containing another is
/// masked whole), one entry per value.
pub fn secrets_from_env<I, K, V>(vars: I) -> Vec<Secret>
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: AsRef<str>,
{
    let mut secrets: Vec<Secret> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let name = name.into();
            let value = value.as_ref().trim();
            (is_secret_name(&name) && value.chars().count() >= MIN_SECRET_CHARS).then(|| Secret {
                name,
                value: value.to_owned(),
            })
        })
        .collect();
    secrets.sort_by(|a, b| {
        b.value
            .len()
            .cmp(&a.value.len())
            .then_with(|| a.name.cmp(&b.name))
    });
    secrets.dedup_by(|later, earlier| later.value == earlier.value);
    secrets
}

/// Masks every secret in `text`.
pub fn redact(text: &str, secrets: &[Secret]) -> Redaction {
    let mut out = Redaction {
        text: text.to_owned(),
        ..Redaction::default()
    };
    if !round(&mut out, secrets) || !out.text.contains(MARKER_PREFIX) {
        return out;
    }
    // Masking can only uncover something on a line that holds a marker (no shape found
    // after the first round spans lines), so later rounds run on those lines alone, each
    // until a round finds nothing there.
    let first = std::mem::take(&mut out.text);
    let mut text = String::with_capacity(first.len());
    for line in first.split_inclusive('\n') {
        if !line.contains(MARKER_PREFIX) {
            text.push_str(line);
            continue;
        }
        let mut again = Redaction {
            text: line.to_owned(),
            ..Redaction::default()
        };
        while round(&mut again, secrets) {}
        text.push_str(&again.text);
        out.merge_counts(&again);
    }
    out.text = text;
    out
}

/// One round of every pass over `out.text`; whether it masked anything. Each round masks
/// at least one character that was not masked before, so rounds end.
fn round(out: &mut Redaction, secrets: &[Secret]) -> bool {
    let before = out.count;
    for rule in [Rule::UrlPassword, Rule::Tokens, Rule::Patterns] {
        let found = scan(&out.text, secrets, rule);
        if !found.is_empty() {
            out.text = mask(&out.text, &found);
            for one in &found {
                out.add(&one.kind);
            }
        }
    }
    out.count != before
}

/// Masks every secret in the strings of a JSON value (object keys are left as they are);
/// returns what was masked.
pub fn redact_json(value: &mut serde_json::Value, secrets: &[Secret]) -> Redaction {
    let mut total = Redaction::default();
    walk(value, secrets, &mut total);
    total
}

fn walk(value: &mut serde_json::Value, secrets: &[Secret], total: &mut Redaction) {
    match value {
        serde_json::Value::String(text) => {
            let done = redact(text, secrets);
            if done.count > 0 {
                total.merge_counts(&done);
                *text = done.text;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                walk(item, secrets, total);
            }
        }
        serde_json::Value::Object(fields) => {
            for (_, item) in fields.iter_mut() {
                walk(item, secrets, total);
            }
        }
        _ => {}
    }
}

/// What one round of redaction would mask in `text`, in order (markers are never found).
pub fn find(text: &str, secrets: &[Secret]) -> Vec<Found> {
    let mut all = scan(text, secrets, Rule::UrlPassword);
    all.extend(scan(text, secrets, Rule::Tokens));
    all.extend(scan(text, secrets, Rule::Patterns));
    all.sort_by_key(|found| found.start);
    all
}

fn mask(text: &str, found: &[Found]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for one in found {
        out.push_str(&text[at..one.start]);
        out.push_str(MARKER_PREFIX);
        out.push_str(&one.kind);
        out.push(']');
        at = one.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The passes of a round: URL passwords first, so a token in a URL's user part does not
/// hide the password after it; then the shapes known by hand; then the rule set's patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    UrlPassword,
    Tokens,
    Patterns,
}

/// Findings of `rule` in the parts of `text` between markers.
fn scan(text: &str, secrets: &[Secret], rule: Rule) -> Vec<Found> {
    let mut found = Vec::new();
    for (start, end) in segments(text, secrets) {
        let segment = &text.as_bytes()[..end];
        match rule {
            Rule::UrlPassword => shapes::url_passwords(segment, start, &mut found),
            Rule::Tokens => shapes::tokens(text, segment, start, secrets, &mut found),
            Rule::Patterns => patterns(text, start, end, &mut found),
        }
    }
    found
}

/// Byte ranges of `text` outside markers this module could have written.
fn segments(text: &str, secrets: &[Secret]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut search = 0;
    while let Some(offset) = text[search..].find(MARKER_PREFIX) {
        let at = search + offset;
        match marker_len(&text[at..], secrets) {
            Some(len) => {
                if at > from {
                    out.push((from, at));
                }
                from = at + len;
                search = from;
            }
            None => search = at + MARKER_PREFIX.len(),
        }
    }
    if from < text.len() {
        out.push((from, text.len()));
    }
    out
}

/// The length of the marker `text` starts with, if it is one this module writes.
fn marker_len(text: &str, secrets: &[Secret]) -> Option<usize> {
    let rest = text.strip_prefix(MARKER_PREFIX)?;
    let close = rest.find(']')?;
    let kind = &rest[..close];
    let known = TOKEN_KINDS.contains(&kind)
        || rules::kinds().contains(kind)
        || kind
            .strip_prefix("env:")
            .is_some_and(|name| secrets.iter().any(|s| s.name == name));
    known.then_some(MARKER_PREFIX.len() + close + 1)
}

/// The rule set's findings in `text[start..end]`.
fn patterns(text: &str, start: usize, end: usize, found: &mut Vec<Found>) {
    let mut hits = Vec::new();
    rules::find(&text[start..end], start, &mut hits);
    found.extend(hits.into_iter().map(|(start, end, kind)| Found {
        start,
        end,
        kind: kind.to_owned(),
    }));
}

#[cfg(test)]
mod tests;
