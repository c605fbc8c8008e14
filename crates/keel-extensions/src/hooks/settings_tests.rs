use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn settings(value: Value) -> HookSettings {
    serde_json::from_value(value).unwrap()
}

fn commands(settings: &HookSettings, event: HookEvent, subject: Option<&str>) -> Vec<String> {
    settings
        .matching(event, subject)
        .into_iter()
        .map(|h| h.command.clone())
        .collect()
}

fn tool_hooks(matcher: &str) -> HookSettings {
    settings(json!({
        "PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": "x"}]}]
    }))
}

fn matches(matcher: &str, tool: &str) -> bool {
    !tool_hooks(matcher)
        .matching(HookEvent::PreToolUse, Some(tool))
        .is_empty()
}

#[test]
fn matchers_follow_claude_code() {
    let cases = [
        ("Bash", "Bash", true),
        ("Bash", "bash", false),
        ("Bash", "BashOutput", false),
        ("Bash|Edit", "Edit", true),
        ("Bash|Edit", "Write", false),
        ("*", "Anything", true),
        ("", "Anything", true),
        ("mcp__.*", "mcp__github__create_issue", true),
        ("mcp__.*", "Read", false),
        ("Notebook.*", "NotebookEdit", true),
        ("mcp__memory__.*", "mcp__github__x", false),
        // A regular expression is searched, not anchored (JavaScript's `RegExp.test`).
        ("Edit|Write.*", "MultiEdit", true),
        ("^Edit$|^Write$", "MultiEdit", false),
        (
            "mcp__github__create_issue",
            "mcp__github__create_issue",
            true,
        ),
    ];
    for (matcher, tool, expected) in cases {
        assert_eq!(matches(matcher, tool), expected, "{matcher} on {tool}");
    }
}

#[test]
fn a_group_without_matcher_matches_all() {
    let s = settings(json!({"PostToolUse": [{"hooks": [{"type": "command", "command": "x"}]}]}));
    assert_eq!(commands(&s, HookEvent::PostToolUse, Some("Read")), ["x"]);
}

#[test]
fn session_start_and_pre_compact_match_their_source_and_trigger() {
    let s = settings(json!({
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "fresh"}]},
            {"matcher": "resume|compact", "hooks": [{"type": "command", "command": "again"}]}
        ],
        "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "auto"}]}]
    }));
    assert_eq!(
        commands(&s, HookEvent::SessionStart, Some("startup")),
        ["fresh"]
    );
    assert_eq!(
        commands(&s, HookEvent::SessionStart, Some("compact")),
        ["again"]
    );
    assert!(commands(&s, HookEvent::SessionStart, Some("clear")).is_empty());
    assert_eq!(commands(&s, HookEvent::PreCompact, Some("auto")), ["auto"]);
    assert!(commands(&s, HookEvent::PreCompact, Some("manual")).is_empty());
}

#[test]
fn events_without_a_subject_ignore_the_matcher() {
    let s = settings(json!({
        "Stop": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "s"}]}]
    }));
    assert_eq!(commands(&s, HookEvent::Stop, None), ["s"]);
}

#[test]
fn identical_commands_run_once_in_settings_order() {
    let s = settings(json!({
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [
                {"type": "command", "command": "a"},
                {"type": "command", "command": "b"}
            ]},
            {"matcher": "*", "hooks": [
                {"type": "command", "command": "a", "timeout": 5},
                {"type": "command", "command": "c"}
            ]}
        ]
    }));
    assert_eq!(
        commands(&s, HookEvent::PreToolUse, Some("Bash")),
        ["a", "b", "c"]
    );
    assert_eq!(
        commands(&s, HookEvent::PreToolUse, Some("Read")),
        ["a", "c"]
    );
}

#[test]
fn timeouts_are_seconds_with_claudes_default() {
    let s = settings(json!({
        "PreToolUse": [{"hooks": [
            {"type": "command", "command": "a", "timeout": 30},
            {"type": "command", "command": "b"},
            {"type": "command", "command": "c", "timeout": 0.5},
            {"type": "command", "command": "d", "timeout": -1}
        ]}]
    }));
    let timeouts: Vec<Duration> = s
        .matching(HookEvent::PreToolUse, Some("Bash"))
        .iter()
        .map(|h| h.timeout)
        .collect();
    assert_eq!(
        timeouts,
        [
            Duration::from_secs(30),
            DEFAULT_TIMEOUT,
            Duration::from_millis(500),
            DEFAULT_TIMEOUT
        ]
    );
    assert_eq!(
        s.problems(),
        [
            "hooks.PreToolUse[0].hooks[3].timeout: expected a positive number of seconds, found -1; \
          using 60 s"
        ]
    );
}

#[test]
fn unknown_events_other_types_and_bad_entries_are_problems_not_errors() {
    let s = settings(json!({
        "SubagentStop": [{"hooks": [{"type": "command", "command": "x"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "futureField": 1, "hooks": [
                {"type": "prompt", "prompt": "is this safe?"},
                {"type": "command", "command": "ok", "async": true},
                {"type": "command"},
                {"command": "untyped"}
            ]},
            {"matcher": "(", "hooks": [{"type": "command", "command": "never"}]},
            "not a group"
        ],
        "Stop": {"hooks": []}
    }));
    assert_eq!(commands(&s, HookEvent::PreToolUse, Some("Bash")), ["ok"]);
    assert!(commands(&s, HookEvent::PreToolUse, Some("(")).is_empty());
    let problems = s.problems();
    assert_eq!(problems.len(), 7, "{problems:#?}");
    assert_eq!(
        problems[0],
        "hooks.PreToolUse[0].hooks[0]: hook type `prompt` is not supported by keel (only \
         `command`); skipped"
    );
    assert_eq!(
        problems[1],
        "hooks.PreToolUse[0].hooks[2]: `command` is missing or empty; skipped"
    );
    assert_eq!(
        problems[2],
        "hooks.PreToolUse[0].hooks[3]: no `type` (keel runs `command` hooks); skipped"
    );
    assert!(problems[3].starts_with("hooks.PreToolUse[1].matcher: `(` is not a valid"));
    assert_eq!(
        problems[4],
        "hooks.PreToolUse[2]: expected a map with `hooks`, found a string; skipped"
    );
    assert_eq!(
        problems[5],
        "hooks.Stop: expected a list of matcher groups, found a map; skipped"
    );
    assert_eq!(
        problems[6],
        "hooks.SubagentStop: keel has no such event; its hooks are skipped"
    );
}

#[test]
fn reads_the_same_shape_from_yaml() {
    let yaml = r#"
PreToolUse:
  - matcher: "Write|Edit"
    hooks:
      - type: command
        command: "$CLAUDE_PROJECT_DIR/.claude/hooks/check.sh"
        timeout: 30
UserPromptSubmit:
  - hooks:
      - type: command
        command: date
"#;
    let s: HookSettings = yaml_serde::from_str(yaml).unwrap();
    assert!(s.problems().is_empty(), "{:?}", s.problems());
    assert_eq!(
        s.matching(HookEvent::PreToolUse, Some("Edit")),
        [&CommandHook {
            command: "$CLAUDE_PROJECT_DIR/.claude/hooks/check.sh".into(),
            timeout: Duration::from_secs(30),
        }]
    );
    assert_eq!(commands(&s, HookEvent::UserPromptSubmit, None), ["date"]);
    assert!(s.has(HookEvent::UserPromptSubmit));
    assert!(!s.has(HookEvent::Stop));
}

#[test]
fn null_is_empty_and_a_non_map_is_a_problem() {
    let empty = settings(Value::Null);
    assert!(empty.is_empty() && empty.problems().is_empty());
    let list = settings(json!([1]));
    assert!(list.is_empty());
    assert_eq!(list.problems().len(), 1);
}

#[test]
fn merge_runs_both_in_order_and_keeps_problems() {
    let user = settings(json!({
        "PreToolUse": [{"hooks": [{"type": "command", "command": "user"}]}],
        "Nope": []
    }));
    let project = settings(json!({
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "project"},
            {"type": "command", "command": "user"}
        ]}],
        "Stop": [{"hooks": [{"type": "command", "command": "stop"}]}]
    }));
    let merged = merge(user, project);
    assert_eq!(
        commands(&merged, HookEvent::PreToolUse, Some("Bash")),
        ["user", "project"]
    );
    assert_eq!(commands(&merged, HookEvent::Stop, None), ["stop"]);
    assert_eq!(merged.problems().len(), 1);
}

#[test]
fn event_names_round_trip() {
    for event in HookEvent::ALL {
        assert_eq!(HookEvent::from_name(event.name()), Some(event));
    }
    assert_eq!(HookEvent::from_name("pretooluse"), None);
}
