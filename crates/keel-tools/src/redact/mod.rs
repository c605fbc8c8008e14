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

/// A token known by its prefix.
struct Shape {
    prefix: &'static [u8],
    /// Characters of the body after the prefix.
    body: fn(u8) -> bool,
    /// Shortest body.
    least: usize,
    /// The body is exactly `least` long (AWS key ids, Google keys); otherwise it runs on.
    exact: bool,
    kind: &'static str,
}

const fn shape(
    prefix: &'static [u8],
    body: fn(u8) -> bool,
    least: usize,
    exact: bool,
    kind: &'static str,
) -> Shape {
    Shape {
        prefix,
        body,
        least,
        exact,
        kind,
    }
}

/// Prefixed tokens, most specific first (`sk-ant-` before the `sk-` catch-all below them).
const SHAPES: &[Shape] = &[
    shape(b"sk-ant-", is_token_char, 20, false, "anthropic_key"),
    shape(b"sk_live_", is_alnum, 16, false, "stripe_key"),
    shape(b"sk_test_", is_alnum, 16, false, "stripe_key"),
    shape(b"rk_live_", is_alnum, 16, false, "stripe_key"),
    shape(b"rk_test_", is_alnum, 16, false, "stripe_key"),
    shape(b"ghp_", is_alnum, 20, false, "github_token"),
    shape(b"gho_", is_alnum, 20, false, "github_token"),
    shape(b"ghu_", is_alnum, 20, false, "github_token"),
    shape(b"ghs_", is_alnum, 20, false, "github_token"),
    shape(b"ghr_", is_alnum, 20, false, "github_token"),
    shape(b"github_pat_", is_word, 20, false, "github_token"),
    shape(b"glpat-", is_token_char, 20, false, "gitlab_token"),
    shape(b"xoxb-", is_slack_char, 10, false, "slack_token"),
    shape(b"xoxp-", is_slack_char, 10, false, "slack_token"),
    shape(b"xoxa-", is_slack_char, 10, false, "slack_token"),
    shape(b"xoxs-", is_slack_char, 10, false, "slack_token"),
    shape(b"xoxr-", is_slack_char, 10, false, "slack_token"),
    shape(b"xapp-", is_slack_char, 10, false, "slack_token"),
    shape(b"AKIA", is_upper_or_digit, 16, true, "aws_access_key_id"),
    shape(b"ASIA", is_upper_or_digit, 16, true, "aws_access_key_id"),
    shape(b"AIza", is_token_char, 35, true, "google_api_key"),
    shape(b"hf_", is_alnum, 30, false, "huggingface_token"),
    shape(b"npm_", is_alnum, 36, false, "npm_token"),
    shape(b"pypi-", is_token_char, 16, false, "pypi_token"),
];

/// The first two bytes of every prefix (and of `sk-`), as a table: a word that starts with
/// no such pair is no token, which rules out most words at one look.
static PREFIX_PAIRS: [bool; 65536] = {
    let mut table = [false; 65536];
    let mut i = 0;
    while i < SHAPES.len() {
        let prefix = SHAPES[i].prefix;
        table[(prefix[0] as usize) << 8 | prefix[1] as usize] = true;
        i += 1;
    }
    table[(b's' as usize) << 8 | b'k' as usize] = true;
    table
};

/// Longest body of a token matched; longer runs are cut there (no real token is longer).
const TOKEN_MAX: usize = 16 * 1024;

/// How far after a private key's header its footer is looked for.
const PRIVATE_KEY_MAX: usize = 64 * 1024;

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
            Rule::UrlPassword => url_passwords(segment, start, &mut found),
            Rule::Tokens => tokens(text, segment, start, secrets, &mut found),
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

fn is_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

fn is_alnum(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
}

fn is_upper_or_digit(byte: u8) -> bool {
    byte.is_ascii_uppercase() || byte.is_ascii_digit()
}

fn is_slack_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-'
}

fn is_token_char(byte: u8) -> bool {
    is_word(byte) || byte == b'-'
}

fn is_scheme_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'.' | b'-')
}

/// Passwords in `scheme://user:password@host` within `segment[start..]`: only the password
/// is masked; scheme, user and host stay readable.
fn url_passwords(segment: &[u8], start: usize, found: &mut Vec<Found>) {
    let mut floor = start;
    let mut search = start;
    while let Some(offset) = find_bytes(&segment[search..], b"://") {
        let colon = search + offset;
        search = colon + 3;
        // The scheme: the longest run of scheme characters before `://` that starts with a
        // letter and does not reach into an earlier finding.
        let mut scheme = colon;
        while scheme > floor && is_scheme_char(segment[scheme - 1]) {
            scheme -= 1;
        }
        while scheme < colon && !segment[scheme].is_ascii_alphabetic() {
            scheme += 1;
        }
        if scheme == colon {
            continue;
        }
        let user_start = colon + 3;
        let user_end = user_start
            + count(&segment[user_start..], usize::MAX, |b| {
                !b.is_ascii_whitespace()
                    && !matches!(b, b':' | b'/' | b'?' | b'#' | b'@' | b'[' | b']')
            });
        if segment.get(user_end) != Some(&b':') {
            continue;
        }
        let pass_start = user_end + 1;
        let pass_end = pass_start
            + count(&segment[pass_start..], usize::MAX, |b| {
                !b.is_ascii_whitespace() && !matches!(b, b'/' | b'?' | b'#' | b'@')
            });
        if pass_end == pass_start || segment.get(pass_end) != Some(&b'@') {
            continue;
        }
        found.push(Found {
            start: pass_start,
            end: pass_end,
            kind: "url_password".into(),
        });
        floor = pass_end;
        search = pass_end;
    }
}

/// Environment values and token shapes within `segment[start..]`, leftmost first.
fn tokens(text: &str, segment: &[u8], start: usize, secrets: &[Secret], found: &mut Vec<Found>) {
    // First bytes of the secret values: most positions need no comparison at all.
    let mut starts = [false; 256];
    for secret in secrets {
        if let Some(first) = secret.value.bytes().next() {
            starts[usize::from(first)] = true;
        }
    }
    let mut at = start;
    // Where the last finding ended: the marker written there will be a word boundary.
    let mut after_finding = start;
    while at < segment.len() {
        let byte = segment[at];
        let boundary = at == after_finding || !is_word(segment[at - 1]);
        // Inside a word only a private key's dashes or a secret value can start.
        if !boundary && byte != b'-' && !starts[usize::from(byte)] {
            at += utf8_width(byte);
            continue;
        }
        let secret = if starts[usize::from(byte)] {
            secret_at(segment, at, secrets)
        } else {
            None
        };
        if let Some((end, kind)) = secret
            .or_else(|| token_at(segment, at, boundary).map(|(end, kind)| (end, kind.to_owned())))
        {
            found.push(Found {
                start: at,
                end,
                kind,
            });
            at = end;
            after_finding = end;
            continue;
        }
        at += text[at..].chars().next().map_or(1, char::len_utf8);
    }
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

/// The length of the character whose first byte is `lead` (1 for a byte that starts none).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xF0..=0xF7 => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// A secret environment value starting at `at`.
fn secret_at(segment: &[u8], at: usize, secrets: &[Secret]) -> Option<(usize, String)> {
    let rest = &segment[at..];
    secrets
        .iter()
        .find(|secret| rest.starts_with(secret.value.as_bytes()))
        .map(|secret| (at + secret.value.len(), format!("env:{}", secret.name)))
}

/// How many bytes from the start of `bytes` satisfy `class`, at most `max`.
fn count(bytes: &[u8], max: usize, class: impl Fn(u8) -> bool) -> usize {
    bytes.iter().take(max).take_while(|b| class(**b)).count()
}

fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// A token-shaped secret starting at `at`: its end and kind. `boundary` says whether `at`
/// starts a word; prefixed tokens must, so `task-…` is not an `sk-` key.
fn token_at(segment: &[u8], at: usize, boundary: bool) -> Option<(usize, &'static str)> {
    let rest = &segment[at..];
    let first = rest.first().copied()?;
    if first == b'-' && rest.starts_with(b"-----BEGIN") {
        return private_key(segment, at).map(|end| (end, "private_key"));
    }
    if !boundary {
        return None;
    }
    if first == b'e' && rest.starts_with(b"eyJ") {
        return jwt(segment, at)
            .filter(|_| !rules::names_a_fixture(&segment[..at]))
            .map(|end| (end, "jwt"));
    }
    // Most words start with two bytes no prefix does.
    let second = rest.get(1).copied().unwrap_or(0);
    if !PREFIX_PAIRS[usize::from(first) << 8 | usize::from(second)] {
        return None;
    }
    for shape in SHAPES {
        if shape.prefix[0] != first || !rest.starts_with(shape.prefix) {
            continue;
        }
        let body_at = at + shape.prefix.len();
        let body = count(&segment[body_at..], TOKEN_MAX, shape.body);
        if body < shape.least {
            continue;
        }
        let body = if shape.exact { shape.least } else { body };
        return Some((body_at + body, shape.kind));
    }
    if first == b's' && rest.starts_with(b"sk-") {
        // Any other `sk-` key (OpenAI, DeepSeek, …). A digit in the body tells a random key
        // from a long hyphenated word such as `sk-learn-…`.
        let body_at = at + 3;
        let body = count(&segment[body_at..], TOKEN_MAX, is_token_char);
        if body >= 20
            && segment[body_at..body_at + body]
                .iter()
                .any(u8::is_ascii_digit)
        {
            return Some((body_at + body, "api_key"));
        }
    }
    None
}

/// `eyJ….eyJ….…` (header, payload, signature in base64url) starting at `at`.
fn jwt(segment: &[u8], at: usize) -> Option<usize> {
    let header = 3 + count(&segment[at + 3..], TOKEN_MAX, is_token_char);
    let mut end = at + header;
    if header < 8 || segment.get(end) != Some(&b'.') || !segment[end + 1..].starts_with(b"eyJ") {
        return None;
    }
    let payload = 3 + count(&segment[end + 4..], TOKEN_MAX, is_token_char);
    if payload < 8 {
        return None;
    }
    end += 1 + payload;
    if segment.get(end) != Some(&b'.') {
        return None;
    }
    end += 1;
    Some(end + count(&segment[end..], TOKEN_MAX, is_token_char))
}

/// A PEM private key block starting at `at`: through its footer, or (cut short, as output
/// often is) through the key material that follows the header.
fn private_key(segment: &[u8], at: usize) -> Option<usize> {
    let header_label = at + "-----BEGIN".len();
    let label_len = find_bytes(
        &segment[header_label..segment.len().min(header_label + 80)],
        b"-----",
    )?;
    let label = &segment[header_label..header_label + label_len];
    if !is_key_label(label) {
        return None;
    }
    let body = header_label + label_len + 5;
    let window = segment.len().min(body + PRIVATE_KEY_MAX);
    let mut search = body;
    while let Some(offset) = find_bytes(&segment[search..window], b"-----END") {
        let footer_label = search + offset + "-----END".len();
        if let Some(len) = find_bytes(
            &segment[footer_label..window.min(footer_label + 80)],
            b"-----",
        ) && is_key_label(&segment[footer_label..footer_label + len])
        {
            return Some(footer_label + len + 5);
        }
        search = footer_label;
    }
    // No footer: the base64 body, PEM headers and line breaks (also escaped ones, `\n`).
    Some(
        body + count(&segment[body..window], usize::MAX, |b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'+' | b'/' | b'=' | b'\\' | b':' | b',' | b'-')
                || b.is_ascii_whitespace()
        }),
    )
}

fn is_key_label(label: &[u8]) -> bool {
    label
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
        && find_bytes(label, b"PRIVATE KEY").is_some()
}

#[cfg(test)]
mod tests;
