use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::exec::tests::{gone, path_env, pid_in};
use super::*;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an executable script `name` and returns the command that runs it.
    fn script(&self, name: &str, body: &str) -> String {
        let path = self.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("\"$CLAUDE_PROJECT_DIR\"/{name}")
    }

    fn common(&self) -> Common {
        Common {
            session_id: "s-1".into(),
            transcript_path: None,
            cwd: self.path().to_owned(),
            permission_mode: PermissionMode::Default,
        }
    }

    fn env(&self) -> Environment {
        let mut vars = path_env();
        vars.push(("KEEL_PROJECT_DIR".into(), "/stale".into()));
        Environment {
            vars,
            project_dir: self.path().to_owned(),
        }
    }

    async fn run(&self, settings: Value, event: &EventData) -> Outcome {
        let settings: HookSettings = serde_json::from_value(settings).unwrap();
        assert!(settings.problems().is_empty(), "{:?}", settings.problems());
        run(&settings, event, &self.common(), &self.env()).await
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).unwrap()
    }
}

fn on_tools(commands: &[&str]) -> Value {
    let hooks: Vec<Value> = commands
        .iter()
        .map(|c| json!({"type": "command", "command": c, "timeout": 5}))
        .collect();
    json!({"PreToolUse": [{"matcher": "Bash|Write", "hooks": hooks}]})
}

fn bash(command: &str) -> EventData {
    EventData::PreToolUse {
        tool: "bash".into(),
        input: json!({"command": command}),
        tool_use_id: "call-1".into(),
    }
}

#[tokio::test]
async fn exit_2_blocks_and_the_script_sees_claude_codes_input() {
    let p = Project::new();
    let guard = p.script(
        "guard.sh",
        "cat > input.json\n\
         printf '%s %s' \"$CLAUDE_PROJECT_DIR\" \"$KEEL_PROJECT_DIR\" > dirs\n\
         echo 'rm -rf is not allowed' >&2\n\
         exit 2",
    );
    let outcome = p.run(on_tools(&[&guard]), &bash("rm -rf /")).await;
    assert_eq!(
        outcome,
        Outcome {
            block: Some("rm -rf is not allowed".into()),
            permission: Some((Decision::Deny, "rm -rf is not allowed".into())),
            ..Outcome::default()
        }
    );
    let input: Value = serde_json::from_str(&p.read("input.json")).unwrap();
    assert_eq!(
        input,
        json!({
            "session_id": "s-1",
            "transcript_path": "",
            "cwd": p.path().to_string_lossy(),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf /"},
            "tool_use_id": "call-1"
        })
    );
    let dir = p.path().to_string_lossy();
    assert_eq!(p.read("dirs"), format!("{dir} {dir}"));
}

#[tokio::test]
async fn json_deny_allow_and_ask() {
    let p = Project::new();
    let answer = |decision: &str| {
        let json = json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": format!("policy says {decision}")
        }});
        p.script(&format!("{decision}.sh"), &format!("echo '{json}'"))
    };
    for (text, decision) in [
        ("deny", Decision::Deny),
        ("allow", Decision::Allow),
        ("ask", Decision::Ask),
    ] {
        let outcome = p.run(on_tools(&[&answer(text)]), &bash("ls")).await;
        let reason = format!("policy says {text}");
        assert_eq!(outcome.permission, Some((decision, reason.clone())));
        let block = (decision == Decision::Deny).then_some(reason);
        assert_eq!(outcome.block, block);
    }
}

#[tokio::test]
async fn updated_input_comes_back_in_keels_shape() {
    let p = Project::new();
    // A Claude Code script: rewrites `file_path` and echoes the rest of the input it got.
    let redirect = p.script(
        "redirect.sh",
        "input=$(cat)\n\
         tool_input=$(printf '%s' \"$input\" | sed 's/.*\"tool_input\":\\({[^}]*}\\).*/\\1/')\n\
         new=$(printf '%s' \"$tool_input\" | sed 's#\"file_path\":\"[^\"]*\"#\"file_path\":\"/tmp/elsewhere.txt\"#')\n\
         printf '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\",\"updatedInput\":%s}}' \"$new\"",
    );
    let event = EventData::PreToolUse {
        tool: "write".into(),
        input: json!({"path": "notes.txt", "content": "hi"}),
        tool_use_id: "call-2".into(),
    };
    let outcome = p.run(on_tools(&[&redirect]), &event).await;
    assert_eq!(outcome.reports, []);
    assert_eq!(
        outcome.updated_input,
        Some(json!({"path": "/tmp/elsewhere.txt", "content": "hi"}))
    );
    assert_eq!(outcome.permission, Some((Decision::Allow, String::new())));
}

#[tokio::test]
async fn context_from_json_and_from_plain_text() {
    let p = Project::new();
    let json_context = p.script(
        "ctx.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ticket KEEL-1 is open"}}'"#,
    );
    let plain = p.script("plain.sh", "echo 'branch: main'");
    let settings = json!({"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": json_context},
        {"type": "command", "command": plain}
    ]}]});
    let prompt = EventData::UserPromptSubmit {
        prompt: "fix the bug".into(),
    };
    let outcome = p.run(settings, &prompt).await;
    assert_eq!(
        outcome,
        Outcome {
            context: vec!["ticket KEEL-1 is open".into(), "branch: main".into()],
            ..Outcome::default()
        }
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_hanging_hook_is_killed_at_its_timeout_and_reported() {
    let p = Project::new();
    let hang = p.script(
        "hang.sh",
        "echo $$ > hang.pid\nsleep 30 & echo $! > child.pid\nwait",
    );
    let settings = json!({"Stop": [{"hooks": [
        {"type": "command", "command": hang, "timeout": 1}
    ]}]});
    let stop = EventData::Stop {
        stop_hook_active: false,
    };
    let outcome = p.run(settings, &stop).await;
    assert_eq!(
        outcome,
        Outcome {
            reports: vec![Report {
                command: hang,
                problem: Problem::TimedOut(Duration::from_secs(1)),
            }],
            ..Outcome::default()
        }
    );
    for file in ["hang.pid", "child.pid"] {
        let pid = pid_in(&p.path().join(file)).await;
        assert!(gone(pid).await, "{file}: {pid} still runs");
    }
}

#[tokio::test]
async fn crashes_and_bad_json_are_reported_and_the_rest_applies() {
    let p = Project::new();
    let crash = p.script("crash.sh", "echo 'boom: no config' >&2\nexit 1");
    let bad = p.script("bad.sh", "echo '{not json'");
    let deny = p.script(
        "deny.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}'"#,
    );
    let outcome = p.run(on_tools(&[&crash, &bad, &deny]), &bash("ls")).await;
    assert_eq!(outcome.permission, Some((Decision::Deny, "no".into())));
    assert_eq!(outcome.reports.len(), 2, "{:?}", outcome.reports);
    assert_eq!(
        outcome.reports[0],
        Report {
            command: crash,
            problem: Problem::Failed {
                code: Some(1),
                stderr: "boom: no config".into()
            },
        }
    );
    assert!(matches!(outcome.reports[1].problem, Problem::BadJson(_)));
}

#[tokio::test]
async fn hooks_run_in_parallel_and_combine() {
    let p = Project::new();
    // The first waits for a file only the second makes: run one after the other, it fails.
    let waiter = p.script(
        "wait.sh",
        "for i in $(seq 100); do [ -f flag ] && exit 0; sleep 0.01; done\nexit 1",
    );
    let maker = p.script(
        "make.sh",
        r#"touch flag; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "check"}}'"#,
    );
    let outcome = p.run(on_tools(&[&waiter, &maker]), &bash("ls")).await;
    assert_eq!(
        outcome,
        Outcome {
            permission: Some((Decision::Ask, "check".into())),
            ..Outcome::default()
        }
    );
}

#[tokio::test]
async fn an_identical_command_runs_once() {
    let p = Project::new();
    let count = p.script("count.sh", "echo run >> runs");
    let settings = json!({"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": count}]},
        {"matcher": "*", "hooks": [{"type": "command", "command": count}]}
    ]});
    p.run(settings, &bash("ls")).await;
    assert_eq!(p.read("runs"), "run\n");
}

#[tokio::test]
async fn nothing_runs_without_a_match() {
    let p = Project::new();
    let touch = p.script("touch.sh", "touch ran");
    let settings = json!({
        "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": touch}]}],
        "SessionStart": [{"matcher": "resume", "hooks": [{"type": "command", "command": touch}]}]
    });
    let start = EventData::SessionStart {
        source: SessionSource::Startup,
    };
    assert_eq!(
        p.run(settings.clone(), &bash("ls")).await,
        Outcome::default()
    );
    assert_eq!(p.run(settings, &start).await, Outcome::default());
    assert!(!p.path().join("ran").exists());
}
