//! Secrets known by shape, matched by hand in one pass over the bytes: tokens by their
//! prefix (provider keys, GitHub, GitLab, Slack, npm, PyPI, Hugging Face, AWS and Google
//! ids), JWTs, PEM private keys, passwords in URLs and the values of secret variables.

use super::{Found, Secret};

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
pub(super) fn url_passwords(segment: &[u8], start: usize, found: &mut Vec<Found>) {
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
pub(super) fn tokens(
    text: &str,
    segment: &[u8],
    start: usize,
    secrets: &[Secret],
    found: &mut Vec<Found>,
) {
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
            .filter(|_| !super::rules::names_a_fixture(&segment[..at]))
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
