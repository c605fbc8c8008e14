//! Notices in the TUI's tones: the runtime words them (an extension event's `notice`, a
//! task's start and end), the TUI only colours them.

use keel_protocol::NoticeLevel;

use crate::cells::Tone;

/// The tone a notice of `level` is shown in.
pub fn tone(level: NoticeLevel) -> Tone {
    match level {
        NoticeLevel::Info => Tone::Info,
        NoticeLevel::Warn => Tone::Warn,
        NoticeLevel::Error => Tone::Error,
    }
}

/// The notice an extension event carries, in the TUI's tone.
#[cfg(test)]
fn describe(extension: &str, kind: &str, details: &serde_json::Value) -> Option<(Tone, String)> {
    keel_runtime::notice::for_event(extension, kind, details)
        .map(|notice| (tone(notice.level), notice.text))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn extension_events_read_as_sentences() {
        let cases = [
            (
                "mcp",
                "server",
                json!({"server": "files", "text": "connection refused"}),
            ),
            (
                "mcp",
                "server",
                json!({"server": "files", "text": "it exited; restarting (attempt 2)"}),
            ),
            (
                "mcp",
                "server",
                json!({"server": "files", "text": "is running again"}),
            ),
            ("mcp", "joined", json!({"servers": ["github"]})),
            ("mcp", "joined", json!({"servers": ["a", "b"]})),
            (
                "mcp",
                "disclosure",
                json!({"deferred": true, "reason": "x", "estimated_tokens": 15_000, "threshold_tokens": 9_600, "mcp_tools": 120}),
            ),
            (
                "mcp",
                "tool_skipped",
                json!({"server": "files", "reason": "tool `t` does not take an object of arguments"}),
            ),
            (
                "mcp",
                "warning",
                json!({"text": ".mcp.json is not trusted"}),
            ),
            (
                "skills",
                "problem",
                json!({"text": "/p/.keel/skills/x/SKILL.md: no description"}),
            ),
            (
                "commands",
                "problem",
                json!({"text": "/p/.claude/commands/r.md: bad front matter"}),
            ),
            (
                "hooks",
                "warning",
                json!({"text": "hooks.json: unknown event"}),
            ),
            (
                "hooks",
                "report",
                json!({"text": "PreToolUse blocked bash"}),
            ),
        ];
        let described: Vec<(Tone, String)> = cases
            .iter()
            .map(|(extension, kind, details)| describe(extension, kind, details).unwrap())
            .collect();
        let want = [
            (Tone::Error, "MCP: server files failed: connection refused"),
            (
                Tone::Warn,
                "MCP: server files: it exited; restarting (attempt 2)",
            ),
            (Tone::Info, "MCP: server files is running again"),
            (
                Tone::Info,
                "MCP: server github joined; its tools are offered from now on",
            ),
            (
                Tone::Info,
                "MCP: servers a, b joined; their tools are offered from now on",
            ),
            (
                Tone::Info,
                "MCP: 120 tools held back behind tool_search (≈15.0k tokens > 9.6k)",
            ),
            (
                Tone::Warn,
                "MCP: skipped a tool of server files: tool `t` does not take an object of arguments",
            ),
            (Tone::Warn, "MCP: .mcp.json is not trusted"),
            (
                Tone::Warn,
                "skills: /p/.keel/skills/x/SKILL.md: no description",
            ),
            (
                Tone::Warn,
                "commands: /p/.claude/commands/r.md: bad front matter",
            ),
            (Tone::Warn, "hook: hooks.json: unknown event"),
            (Tone::Info, "hook: PreToolUse blocked bash"),
        ]
        .map(|(severity, text)| (severity, text.to_owned()));
        assert_eq!(described, want);
        assert_eq!(
            describe(
                "mcp",
                "disclosure",
                &json!({"deferred": false, "mcp_tools": 3})
            ),
            None,
            "tools offered directly need no notice"
        );
    }
}
