use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn hook(command: &str) -> CommandHook {
    CommandHook {
        command: command.into(),
        timeout: Duration::from_secs(7),
    }
}

fn exited(code: i32, stdout: &str, stderr: &str) -> Finished {
    Finished {
        status: Status::Exited(code),
        stdout: stdout.into(),
        stderr: stderr.into(),
        truncated: false,
    }
}

/// The outcome of hooks `h0`, `h1`, … ending as `ends` on `event`.
fn outcome(event: HookEvent, ends: Vec<Finished>) -> Outcome {
    let verdicts = ends
        .into_iter()
        .enumerate()
        .map(|(i, end)| interpret(event, &hook(&format!("h{i}")), end))
        .collect();
    combine(verdicts)
}

fn one(event: HookEvent, end: Finished) -> Outcome {
    outcome(event, vec![end])
}

fn report(command: &str, problem: Problem) -> Report {
    Report {
        command: command.into(),
        problem,
    }
}

#[test]
fn exit_2_blocks_per_event() {
    let end = || exited(2, "{\"ignored\": true}", "  no rm -rf here\n");
    assert_eq!(
        one(HookEvent::PreToolUse, end()),
        Outcome {
            block: Some("no rm -rf here".into()),
            permission: Some((Decision::Deny, "no rm -rf here".into())),
            ..Outcome::default()
        }
    );
    for event in [
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
    ] {
        assert_eq!(
            one(event, end()),
            Outcome {
                block: Some("no rm -rf here".into()),
                ..Outcome::default()
            }
        );
    }
    for event in [
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ] {
        assert_eq!(
            one(event, end()),
            Outcome {
                system_messages: vec!["no rm -rf here".into()],
                ..Outcome::default()
            }
        );
    }
    assert_eq!(
        one(HookEvent::Stop, exited(2, "", "")).block.as_deref(),
        Some("blocked by hook `h0`")
    );
}

#[test]
fn json_permission_decisions() {
    let answer = |decision: &str| {
        exited(
            0,
            &json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": format!("because {decision}")
            }})
            .to_string(),
            "",
        )
    };
    assert_eq!(
        one(HookEvent::PreToolUse, answer("deny")),
        Outcome {
            block: Some("because deny".into()),
            permission: Some((Decision::Deny, "because deny".into())),
            ..Outcome::default()
        }
    );
    for (text, decision) in [("allow", Decision::Allow), ("ask", Decision::Ask)] {
        assert_eq!(
            one(HookEvent::PreToolUse, answer(text)),
            Outcome {
                permission: Some((decision, format!("because {text}"))),
                ..Outcome::default()
            }
        );
    }
}

#[test]
fn a_deny_without_reason_still_gives_one() {
    let deny =
        r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}"#;
    assert_eq!(
        one(HookEvent::PreToolUse, exited(0, deny, ""))
            .block
            .as_deref(),
        Some("denied by hook `h0`")
    );
}

#[test]
fn the_older_decision_field_still_works() {
    let block = exited(0, r#"{"decision": "block", "reason": "not now"}"#, "");
    assert_eq!(
        one(HookEvent::PreToolUse, block.clone()).permission,
        Some((Decision::Deny, "not now".into()))
    );
    assert_eq!(
        one(HookEvent::Stop, block.clone()).block.as_deref(),
        Some("not now")
    );
    assert_eq!(
        one(HookEvent::SessionEnd, block).system_messages,
        ["not now"]
    );
    let approve = exited(0, r#"{"decision": "approve", "reason": "fine"}"#, "");
    assert_eq!(
        one(HookEvent::PreToolUse, approve).permission,
        Some((Decision::Allow, "fine".into()))
    );
}

#[test]
fn common_fields_and_context() {
    let answer = json!({
        "continue": false,
        "stopReason": "build is red",
        "suppressOutput": true,
        "systemMessage": "checked",
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint: 2 warnings"},
        "someFutureField": [1, 2]
    });
    assert_eq!(
        one(HookEvent::PostToolUse, exited(0, &answer.to_string(), "")),
        Outcome {
            context: vec!["lint: 2 warnings".into()],
            system_messages: vec!["checked".into()],
            stop: Some("build is red".into()),
            ..Outcome::default()
        }
    );
}

#[test]
fn plain_stdout_is_context_only_for_prompts_and_session_start() {
    let end = || exited(0, "  branch: main\n", "");
    for event in [HookEvent::UserPromptSubmit, HookEvent::SessionStart] {
        assert_eq!(one(event, end()).context, ["branch: main"]);
    }
    for event in [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
    ] {
        assert_eq!(one(event, end()), Outcome::default());
    }
}

#[test]
fn failures_are_reported_not_decisions() {
    let ends = vec![
        exited(1, "", "Traceback (most recent call last):\n  File x\n"),
        Finished {
            status: Status::Signalled(9),
            ..exited(0, "", "")
        },
        Finished {
            status: Status::TimedOut,
            ..exited(0, "", "")
        },
        Finished {
            status: Status::NotStarted("cannot start: no such folder".into()),
            ..exited(0, "", "")
        },
        exited(0, "{\"decision\": ", ""),
        Finished {
            truncated: true,
            ..exited(0, "", "")
        },
    ];
    let outcome = outcome(HookEvent::PreToolUse, ends);
    assert_eq!(outcome.block, None);
    assert_eq!(outcome.permission, None);
    let mut reports = outcome.reports;
    let Problem::BadJson(_) = reports.remove(4).problem else {
        panic!("no bad JSON report");
    };
    assert_eq!(
        reports,
        [
            report(
                "h0",
                Problem::Failed {
                    code: Some(1),
                    stderr: "Traceback (most recent call last):".into()
                }
            ),
            report(
                "h1",
                Problem::Failed {
                    code: None,
                    stderr: String::new()
                }
            ),
            report("h2", Problem::TimedOut(Duration::from_secs(7))),
            report(
                "h3",
                Problem::NotStarted("cannot start: no such folder".into())
            ),
            report("h5", Problem::Truncated),
        ]
    );
    assert_eq!(
        reports[0].to_string(),
        "hook `h0` failed with exit code 1: Traceback (most recent call last):"
    );
    assert_eq!(
        reports[2].to_string(),
        "hook `h2` timed out after 7 s and was stopped"
    );
}

#[test]
fn answers_for_another_event_or_of_the_wrong_shape_are_ignored() {
    let other = json!({"hookSpecificOutput": {
        "hookEventName": "PostToolUse", "permissionDecision": "deny"
    }});
    let odd = json!({
        "decision": "maybe",
        "hookSpecificOutput": {"permissionDecision": "perhaps", "updatedInput": "rm"}
    });
    let outcome = outcome(
        HookEvent::PreToolUse,
        vec![
            exited(0, &other.to_string(), ""),
            exited(0, &odd.to_string(), ""),
        ],
    );
    assert_eq!(
        outcome,
        Outcome {
            reports: vec![
                report(
                    "h0",
                    Problem::Ignored(
                        "hookSpecificOutput for `PostToolUse` ignored on PreToolUse".into()
                    )
                ),
                report(
                    "h1",
                    Problem::Ignored("unknown decision `maybe` ignored".into())
                ),
                report(
                    "h1",
                    Problem::Ignored("unknown permissionDecision ignored".into())
                ),
                report(
                    "h1",
                    Problem::Ignored("updatedInput is not an object; ignored".into())
                ),
            ],
            ..Outcome::default()
        }
    );
}

#[test]
fn strictest_wins_and_the_last_rewrite_applies() {
    let say = |decision: &str, reason: &str, input: Value| {
        exited(
            0,
            &json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
                "updatedInput": input,
                "additionalContext": format!("from {reason}")
            }})
            .to_string(),
            "",
        )
    };
    let asked = outcome(
        HookEvent::PreToolUse,
        vec![
            say("allow", "a", json!({"command": "ls"})),
            say("ask", "b", json!({"command": "ls -a"})),
            say("ask", "c", json!({"command": "ls -l"})),
        ],
    );
    assert_eq!(
        asked,
        Outcome {
            permission: Some((Decision::Ask, "b\nc".into())),
            updated_input: Some(json!({"command": "ls -l"})),
            context: vec!["from a".into(), "from b".into(), "from c".into()],
            reports: vec![report(
                "h2",
                Problem::Ignored("3 hooks gave updatedInput; only this last one's is used".into())
            )],
            ..Outcome::default()
        }
    );
    let denied = outcome(
        HookEvent::PreToolUse,
        vec![
            say("allow", "a", json!({"command": "ls"})),
            exited(2, "", "no"),
            say("ask", "c", json!({"command": "ls -l"})),
        ],
    );
    assert_eq!(denied.block.as_deref(), Some("no"));
    assert_eq!(denied.permission, Some((Decision::Deny, "no".into())));
    assert_eq!(denied.updated_input, None);
}

#[test]
fn several_blocks_and_stops_are_joined() {
    let outcome = outcome(
        HookEvent::Stop,
        vec![
            exited(2, "", "tests fail"),
            exited(0, r#"{"decision": "block", "reason": "docs missing"}"#, ""),
            exited(0, r#"{"continue": false, "stopReason": "quota"}"#, ""),
        ],
    );
    assert_eq!(outcome.block.as_deref(), Some("tests fail\ndocs missing"));
    assert_eq!(outcome.stop.as_deref(), Some("quota"));
}
