//! Extension events as one-line notices, in the runtime's shared wording
//! ([`keel_runtime::notice`]) and the TUI's tones.

use serde_json::Value;

use crate::cells::Tone;

/// The notice an extension event shows, if any.
pub fn describe(extension: &str, kind: &str, details: &Value) -> Option<(Tone, String)> {
    use keel_runtime::notice::Severity;
    keel_runtime::notice::describe(extension, kind, details).map(|(severity, text)| {
        let tone = match severity {
            Severity::Info => Tone::Info,
            Severity::Warn => Tone::Warn,
            Severity::Error => Tone::Error,
        };
        (tone, text)
    })
}
