//! Projecting a step's tool calls into fingerprints (DESIGN §7, step 1).
//!
//! Every fingerprint is an HMAC-SHA-256 under a random 32-byte key drawn for the turn, so
//! the guard keeps, and reports, nothing from which a call's arguments or output could be
//! read back. Tool policies pick what counts: the stable fields of an action, the parts of
//! a result that do not change between identical runs (never timings or artifact paths),
//! which results are "no match" rather than errors, and which calls poll.

use hmac::{Hmac, KeyInit as _, Mac as _};
use keel_protocol::{ContentBlock, ToolCall, ToolResultMessage};
use regex::bytes::RegexSet;
use sha2::Sha256;
use std::sync::LazyLock;

/// An HMAC fingerprint.
pub type Print = [u8; 32];

/// The characters of an error text that make its family when nothing else does.
pub const ERROR_PREFIX: usize = 1024;

/// A per-turn HMAC key, kept keyed: each fingerprint starts from a copy of the keyed state
/// instead of deriving it from the key again.
#[derive(Clone)]
pub struct Key(Hmac<Sha256>);

impl Key {
    /// A fresh random key; `None` when the system has no randomness to give.
    pub fn random() -> Option<Self> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).ok()?;
        Self::keyed(&key)
    }

    /// A fixed key, for tests.
    pub fn fixed(bytes: [u8; 32]) -> Self {
        Self::keyed(&bytes).unwrap_or_else(|| Self(Hmac::<Sha256>::new(&Default::default())))
    }

    fn keyed(key: &[u8]) -> Option<Self> {
        Hmac::<Sha256>::new_from_slice(key).ok().map(Self)
    }

    /// The HMAC of `parts`, each length-prefixed so no two splits of the same bytes agree.
    pub fn print(&self, domain: &str, parts: &[&[u8]]) -> Print {
        let mut mac = self.0.clone();
        mac.update(domain.as_bytes());
        for part in parts {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }
}

/// What a call is for the guard, as decided by its tool's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An ordinary call.
    Plain,
    /// A search that found nothing: neither an error nor a result worth repeating.
    NoMatch,
    /// A call that waits on something else (task status, `sleep`): judged by whether what
    /// it sees changes.
    Poll,
}

/// One call of a step, fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPrint {
    /// Tool and stable arguments.
    pub action: Print,
    /// What came back, when it counts.
    pub result: Option<Print>,
    /// The error's family, when it failed.
    pub error: Option<Print>,
    /// The error family's class name (`timeout`, …), when one of the classes matched.
    pub error_class: Option<&'static str>,
    /// What the call is about and what it showed, for progress and polling.
    pub progress: Option<(Print, Print)>,
    /// How the policy sees the call.
    pub kind: Kind,
}

/// Names of tools that poll (DESIGN §14's task tools).
const POLLING_TOOLS: &[&str] = &["task_query", "task_output"];

/// The eight classes an error text is sorted into before its text is used (DESIGN §7).
pub const ERROR_CLASSES: [&str; 8] = [
    "timeout",
    "rate_limit",
    "permission_denied",
    "not_found",
    "network",
    "invalid_input",
    "resource_exhausted",
    "conflict",
];

/// ASCII-only (`-u`): the texts are English error messages, and without Unicode tables the
/// set compiles in a fraction of the time.
static CLASSES: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    RegexSet::new([
        r"(?i-u)\btimed? ?out\b|deadline exceeded|took too long",
        r"(?i-u)rate.?limit|too many requests|\b429\b|quota exceeded|throttl",
        r"(?i-u)permission denied|access denied|not permitted|\bforbidden\b|\b403\b|unauthori[sz]ed|\b401\b|\bdenied\b",
        r"(?i-u)no such file|not found|does not exist|cannot find|could not find|unknown (file|command|option)|\b404\b",
        r"(?i-u)connection (refused|reset|closed)|\bnetwork\b|unreachable|could not resolve|\bdns\b|broken pipe|\beconn",
        r"(?i-u)syntax error|parse error|invalid (argument|input|value|option)|unexpected token|malformed|expected [^\n]{0,80} found",
        r"(?i-u)no space left|out of memory|disk full|too many open files|resource (temporarily )?unavailable|\bkilled\b",
        r"(?i-u)already exists|\bconflicts?\b|\blocked\b|\bin use\b|\b409\b",
    ])
    .ok()
});

/// The class of an error text, in the order of [`ERROR_CLASSES`].
pub fn error_class(text: &str) -> Option<&'static str> {
    let set = CLASSES.as_ref()?;
    set.matches(text.as_bytes())
        .iter()
        .next()
        .and_then(|i| ERROR_CLASSES.get(i).copied())
}

/// The arguments that make an action, by tool: the command of a shell call (spacing
/// folded), the whole arguments otherwise.
fn stable_arguments(call: &ToolCall) -> String {
    if call.name == "bash"
        && let Some(command) = call.arguments.get("command").and_then(|c| c.as_str())
    {
        return command.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    // Canonical: equal arguments print equally whatever order the model wrote the keys in.
    keel_protocol::canonical::string(&call.arguments)
}

/// Whether a shell command only waits before looking (`sleep 5 && cat log`).
fn shell_polls(call: &ToolCall) -> bool {
    call.name == "bash"
        && call
            .arguments
            .get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| c.trim_start().starts_with("sleep "))
}

/// Whether a result is a search that found nothing: a lone `grep`/`rg`/`git grep` that
/// exited 1 (bash reports it so), or the grep tool's "no matches".
fn no_match(result: &ToolResultMessage, text: &str) -> bool {
    if result.is_error {
        return false;
    }
    match result.tool_name.as_str() {
        // bash's own verdict: exit 1 in its details and its footer last, not the words
        // anywhere in what a command printed.
        "bash" => {
            result
                .details
                .as_ref()
                .and_then(|d| d.get("exit_code"))
                .and_then(serde_json::Value::as_i64)
                == Some(1)
                && text.trim_end().ends_with("[exit code 1: no match]")
        }
        "grep" | "glob" => {
            let head = text.trim_start();
            head.starts_with("No matches") || head.starts_with("No files")
        }
        _ => false,
    }
}

/// The result's details without what changes between identical runs.
fn stable_details(details: Option<&serde_json::Value>) -> String {
    let Some(serde_json::Value::Object(map)) = details else {
        return String::new();
    };
    let kept: serde_json::Map<String, serde_json::Value> = map
        .iter()
        .filter(|(key, _)| !(key.ends_with("_ms") || *key == "artifact" || *key == "pgid"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    keel_protocol::canonical::string(&serde_json::Value::Object(kept))
}

/// The result's text, with the artifact path (new for every run) taken out.
fn stable_text(result: &ToolResultMessage) -> String {
    let mut text: String = result
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect();
    if let Some(path) = result
        .details
        .as_ref()
        .and_then(keel_tools::Artifact::from_details)
        .map(|a| a.path.display().to_string())
    {
        text = text.replace(&path, "<artifact>");
    }
    text
}

/// `text` with every run of digits, and every run of eight or more hex digits, as one `#`:
/// the same failure twice differs only there (`finished in 0.53s`, a pid, a temp name).
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_ascii_hexdigit() {
            let run_end = text[at..]
                .find(|ch: char| !ch.is_ascii_hexdigit())
                .map_or(text.len(), |n| at + n);
            let run = &text[at..run_end];
            if run.len() >= 8 || run.bytes().all(|b| b.is_ascii_digit()) {
                out.push('#');
                while chars.peek().is_some_and(|(i, _)| *i < run_end) {
                    chars.next();
                }
                continue;
            }
            if c.is_ascii_digit() {
                // Digits inside a shorter hex-looking word (`e2e`, `0x1f`): mask the digits.
                out.push('#');
                while chars.peek().is_some_and(|(_, ch)| ch.is_ascii_digit()) {
                    chars.next();
                }
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The error code a result's details carry (`error_code` or `code`).
fn error_code(result: &ToolResultMessage) -> Option<String> {
    let details = result.details.as_ref()?;
    ["error_code", "code"]
        .iter()
        .find_map(|key| details.get(*key)?.as_str().map(str::to_owned))
}

/// Fingerprints one call and its result under `key`.
pub fn print_call(key: &Key, call: &ToolCall, result: Option<&ToolResultMessage>) -> CallPrint {
    let name = call.name.as_bytes();
    let action = key.print("action", &[name, stable_arguments(call).as_bytes()]);
    let polls = POLLING_TOOLS.contains(&call.name.as_str()) || shell_polls(call);
    let Some(result) = result else {
        return CallPrint {
            action,
            result: None,
            error: None,
            error_class: None,
            progress: None,
            kind: if polls { Kind::Poll } else { Kind::Plain },
        };
    };
    let text = stable_text(result);
    let kind = if no_match(result, &text) {
        Kind::NoMatch
    } else if polls {
        Kind::Poll
    } else {
        Kind::Plain
    };
    let result_print = key.print(
        "result",
        &[
            name,
            text.as_bytes(),
            stable_details(result.details.as_ref()).as_bytes(),
            &[u8::from(result.is_error)],
        ],
    );
    // What a failure says, with what changes from run to run of the same failure
    // (timings, counts, pids, hashes) masked.
    let masked = result.is_error.then(|| mask(&text));
    let (error, error_class) = match &masked {
        Some(masked) => {
            let (family, class) = match error_code(result) {
                Some(code) => (format!("code:{code}"), None),
                None => match error_class(&text) {
                    Some(class) => (format!("class:{class}"), Some(class)),
                    None => (
                        format!("text:{}", crate::text::cut(masked, ERROR_PREFIX)),
                        None,
                    ),
                },
            };
            (Some(key.print("error", &[name, family.as_bytes()])), class)
        }
        None => (None, None),
    };
    // Progress: a polling call is about its target and shows what it saw; a failing call
    // is about its action, and what it showed is its failure, timings aside. A success is
    // progress.
    let progress = match (kind, &masked) {
        (Kind::Poll, _) => Some((action, result_print)),
        (Kind::Plain, Some(masked)) => Some((action, key.print("failure", &[masked.as_bytes()]))),
        _ => None,
    };
    CallPrint {
        action,
        result: (kind != Kind::NoMatch).then_some(result_print),
        error,
        error_class,
        progress,
        kind,
    }
}

/// The first bytes of a fingerprint as hex, for events that name a key without giving it.
pub fn short(print: &Print) -> String {
    print[..6].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments,
        }
    }

    fn result(name: &str, text: &str, is_error: bool) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: name.into(),
            content: vec![ContentBlock::text(text)],
            details: Some(json!({"exit_code": 1, "duration_ms": 12.5})),
            is_error,
            timestamp: 1,
        }
    }

    #[test]
    fn errors_fall_into_the_eight_classes_in_order() {
        assert_eq!(
            error_class("curl: (28) Operation timed out"),
            Some("timeout")
        );
        assert_eq!(
            error_class("HTTP 429 Too Many Requests"),
            Some("rate_limit")
        );
        assert_eq!(
            error_class("bash: ./x: Permission denied"),
            Some("permission_denied")
        );
        assert_eq!(
            error_class("cat: a.txt: No such file or directory"),
            Some("not_found")
        );
        assert_eq!(error_class("connection refused"), Some("network"));
        assert_eq!(
            error_class("syntax error near unexpected token"),
            Some("invalid_input")
        );
        assert_eq!(
            error_class("No space left on device"),
            Some("resource_exhausted")
        );
        assert_eq!(
            error_class("fatal: destination path already exists"),
            Some("conflict")
        );
        assert_eq!(error_class("assertion failed: left == right"), None);
        // Words inside other words are not the class.
        assert_eq!(
            error_class("the request was blocked; a skilled reviewer within user space"),
            None
        );
    }

    #[test]
    fn timings_and_spacing_do_not_change_a_print_and_the_key_does() {
        let key = Key::fixed([7; 32]);
        let a = print_call(
            &key,
            &call("bash", json!({"command": "cargo  test"})),
            Some(&result("bash", "boom", true)),
        );
        let mut later = result("bash", "boom", true);
        later.details = Some(json!({"exit_code": 1, "duration_ms": 99.0}));
        let b = print_call(
            &key,
            &call("bash", json!({"command": "cargo test"})),
            Some(&later),
        );
        assert_eq!(a, b);
        let other = print_call(
            &Key::fixed([8; 32]),
            &call("bash", json!({"command": "cargo test"})),
            Some(&later),
        );
        assert_ne!(a.action, other.action);
    }

    #[test]
    fn the_same_failure_with_other_timings_is_the_same_progress() {
        assert_eq!(
            mask("test result: FAILED. 3 passed; 1 failed; finished in 0.53s"),
            "test result: FAILED. # passed; # failed; finished in #.#s"
        );
        assert_eq!(
            mask("pid 48213 at /tmp/keel-0f3a9c21d4"),
            "pid # at /tmp/keel-#"
        );
        assert_eq!(mask("cafe face"), "cafe face");
        let key = Key::fixed([3; 32]);
        let call = call("bash", json!({"command": "cargo test"}));
        let one = print_call(
            &key,
            &call,
            Some(&result("bash", "1 failed; finished in 0.53s", true)),
        );
        let two = print_call(
            &key,
            &call,
            Some(&result("bash", "1 failed; finished in 0.61s", true)),
        );
        assert_eq!(one.progress, two.progress);
        assert_eq!(one.error, two.error);
        let other = print_call(
            &key,
            &call,
            Some(&result("bash", "2 passed; 0 failed; other error", true)),
        );
        assert_ne!(one.progress, other.progress);
    }

    #[test]
    fn a_search_that_found_nothing_is_no_match() {
        let key = Key::fixed([1; 32]);
        let text = "(no output)\n[exit code 1: no match]";
        let print = print_call(
            &key,
            &call("bash", json!({"command": "grep -r foo ."})),
            Some(&result("bash", text, false)),
        );
        assert_eq!(print.kind, Kind::NoMatch);
        assert_eq!((print.result, print.error), (None, None));
        let polled = print_call(
            &key,
            &call("task_output", json!({"id": "t1"})),
            Some(&result("task_output", "running", false)),
        );
        assert_eq!(polled.kind, Kind::Poll);
        assert!(polled.progress.is_some());
    }
}
