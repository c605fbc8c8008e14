//! Extension events as one-line notices: context management, the runaway guard, terminal
//! recovery, dropped reminders. Unknown events still show, by extension and kind.

use serde_json::Value;

use crate::app::short_count;
use crate::cells::Tone;

fn tokens(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    value
        .as_u64()
        .or_else(|| value.get("tokens").and_then(Value::as_u64))
}

fn text<'a>(details: &'a Value, key: &str) -> &'a str {
    details.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The notice an extension event shows, if any.
pub fn describe(extension: &str, kind: &str, details: &Value) -> Option<(Tone, String)> {
    let sizes = || match (tokens(details.get("before")), tokens(details.get("after"))) {
        (Some(before), Some(after)) => {
            format!(" ({} → {} tokens)", short_count(before), short_count(after))
        }
        _ => String::new(),
    };
    Some(match (extension, kind) {
        ("host.context", "archived") => {
            let outputs = details.get("outputs").and_then(Value::as_u64).unwrap_or(0);
            (
                Tone::Info,
                format!(
                    "archived {outputs} old tool output{}{}",
                    if outputs == 1 { "" } else { "s" },
                    sizes()
                ),
            )
        }
        ("host.context", "compaction_started") => (
            Tone::Info,
            format!("compacting the conversation ({})…", text(details, "reason")),
        ),
        ("host.context", "compaction_finished") => {
            (Tone::Info, format!("conversation compacted{}", sizes()))
        }
        ("host.context", "compaction_failed") => (
            Tone::Error,
            format!(
                "compaction failed ({}): {}",
                text(details, "code"),
                text(details, "error")
            ),
        ),
        ("host.context", "overflow_recovery") => (
            Tone::Warn,
            "the model rejected the request as too long; shrinking it and sending again".to_owned(),
        ),
        ("host.context", "archive_failed") => (
            Tone::Error,
            format!("cannot archive old outputs: {}", text(details, "error")),
        ),
        ("runaway-guard", kind) => (
            Tone::Warn,
            format!("runaway guard: {}", kind.replace('_', " ")),
        ),
        ("terminal-recovery", "retry") | ("terminal-recovery", "retried") => (
            Tone::Warn,
            "the model answered with nothing; asking it once more for a final answer".to_owned(),
        ),
        (extension, kind) if kind.contains("dropped") => (
            Tone::Warn,
            format!(
                "{extension}: {} {}",
                kind.replace('_', " "),
                text(details, "reminder")
            ),
        ),
        (extension, kind) => (
            Tone::Info,
            format!("{extension}: {}", kind.replace('_', " ")),
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn context_events_read_as_sentences() {
        let (_, text) = describe(
            "host.context",
            "archived",
            &json!({"outputs": 3, "before": {"tokens": 120000, "bytes": 1}, "after": {"tokens": 40000, "bytes": 1}}),
        )
        .unwrap();
        assert_eq!(text, "archived 3 old tool outputs (120.0k → 40.0k tokens)");
        let (tone, _) =
            describe("host.context", "compaction_failed", &json!({"code": "x"})).unwrap();
        assert_eq!(tone, Tone::Error);
        let (_, text) = describe("other", "did_a_thing", &json!({})).unwrap();
        assert_eq!(text, "other: did a thing");
    }
}
