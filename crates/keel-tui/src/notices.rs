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
