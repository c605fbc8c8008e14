//! Snapshots of rendered frames: the app is fed session events and keys, drawn through
//! ratatui's crossterm backend into a byte buffer, and the bytes are interpreted by a
//! terminal emulator (vt100), so the snapshot is what a terminal would show.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod approvals;
mod questions;
mod tasks;

use std::sync::Arc;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use keel_protocol::{
    Item, ItemBody, ItemEvent, PermissionRequest, SessionEvent, SessionEventBody, SessionId,
    ToolCallStatus, TurnId, Usage,
};
use keel_runtime::Reply;
use keel_tui::app::{App, Info, Tag, UiEvent};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::{Terminal, TerminalOptions, Viewport};
use serde_json::json;

fn info() -> Info {
    Info {
        thinking: None,
        notifications: Default::default(),
        cwd: "/work/project".into(),
        model: "anthropic/claude-sonnet-4-5".into(),
        mode: keel_protocol::PermissionMode::Auto,
        sandbox: keel_protocol::SandboxMode::WorkspaceWrite,
        models: vec!["anthropic/claude-sonnet-4-5".into(), "openai/gpt-5".into()],
        keel_home: None,
        warnings: Vec::new(),
    }
}

fn app(width: u16) -> App {
    let mut app = App::new(info(), width);
    app.session = Some(keel_runtime::SessionRecord {
        id: SessionId::from("s-test000001"),
        title: "a test".into(),
        cwd: "/work/project".into(),
        model: "anthropic/claude-sonnet-4-5".into(),
        parent_id: None,
        forked_from: None,
        created_ms: 0,
        updated_ms: 0,
        revision: 0,
        epoch: 0,
        length: 0,
        first_prompt: None,
    });
    app
}

fn event(app: &mut App, body: SessionEventBody) {
    app.update(UiEvent::Session(SessionEvent {
        session_id: SessionId::from("s-test000001"),
        seq: 0,
        body,
    }));
}

fn item(app: &mut App, event_body: ItemEvent) {
    event(
        app,
        SessionEventBody::Item {
            turn_id: TurnId::from("t-1"),
            event: event_body,
        },
    );
}

/// A permission question for a bash call.
fn ask(
    app: &mut App,
    summary: String,
    reasons: Vec<String>,
    scopes: Vec<String>,
    rules: Vec<String>,
) {
    event(
        app,
        SessionEventBody::PermissionRequested {
            turn_id: TurnId::from("t-1"),
            request: PermissionRequest {
                id: "p-1".into(),
                tool_call_id: "call-1".into(),
                tool: "bash".into(),
                summary,
                reasons,
                safety: false,
                scopes,
                rules,
                arguments: serde_json::Value::Null,
                preview: None,
            },
        },
    );
}

/// An answer or reasoning item begins.
fn started(app: &mut App, id: &str, kind: keel_protocol::ItemKind) {
    let body = match kind {
        keel_protocol::ItemKind::Reasoning => ItemBody::Reasoning {
            text: String::new(),
        },
        _ => ItemBody::AgentMessage {
            text: String::new(),
        },
    };
    item(
        app,
        ItemEvent::Started {
            item: Item {
                id: Arc::from(id),
                body,
            },
        },
    );
}

/// Text streams into an open item.
fn delta(app: &mut App, id: &str, kind: keel_protocol::ItemKind, text: impl Into<String>) {
    item(
        app,
        ItemEvent::Updated {
            item_id: Arc::from(id),
            kind,
            delta: text.into(),
        },
    );
}

fn key(app: &mut App, code: KeyCode, modifiers: KeyModifiers) {
    app.update(UiEvent::Term(Event::Key(KeyEvent::new(code, modifiers))));
}

fn type_text(app: &mut App, text: &str) {
    for ch in text.chars() {
        key(app, KeyCode::Char(ch), KeyModifiers::NONE);
    }
}

/// The bytes a terminal receives for the finished lines and the panel.
fn bytes(app: &mut App) -> (Vec<u8>, u16) {
    let width = app.width;
    let mut lines: Vec<Line<'static>> = app.take_pending();
    let (panel, _) = keel_tui::render::panel(app, width);
    lines.extend(panel);
    let height = lines.len().max(1) as u16;
    let mut bytes = Vec::new();
    {
        let backend = CrosstermBackend::new(&mut bytes);
        let mut terminal = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, width, height)),
            },
        )
        .unwrap();
        terminal
            .draw(|frame| frame.render_widget(Paragraph::new(lines), frame.area()))
            .unwrap();
    }
    (bytes, height)
}

/// What a terminal shows: the finished lines, then the panel.
fn screen(app: &mut App) -> String {
    let width = app.width;
    let (bytes, height) = bytes(app);
    let mut parser = vt100::Parser::new(height, width, 0);
    parser.process(&bytes);
    let text = parser.screen().contents();
    // The spinner's frame and elapsed time depend on the clock.
    text.lines()
        .map(|l| {
            if l.contains("esc to interrupt") || l.contains("· esc to") {
                "<spinner>"
            } else {
                l.trim_end()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool(
    name: &str,
    arguments: serde_json::Value,
    result: &str,
    details: Option<serde_json::Value>,
    status: ToolCallStatus,
) -> ItemEvent {
    ItemEvent::Completed {
        item: Item {
            id: Arc::from(format!("item-{name}")),
            body: ItemBody::ToolCall {
                call_id: format!("call-{name}").as_str().into(),
                tool_name: name.into(),
                arguments,
                result: Some(result.into()),
                status,
                details,
            },
        },
    }
}

fn a_turn(app: &mut App) {
    app.push(keel_tui::cells::Cell::User("fix the failing test".into()));
    started(app, "r", keel_protocol::ItemKind::Reasoning);
    delta(
        app,
        "r",
        keel_protocol::ItemKind::Reasoning,
        "The test expects 2.\nLook at add().",
    );
    started(app, "a", keel_protocol::ItemKind::AgentMessage);
    let answer = "I'll fix `add`:\n\n| file | change |\n|---|---|\n| src/lib.rs | return a + b |\n\n```rust\nfn add(a: u8, b: u8) -> u8 { a + b } // fixed\n```\n";
    for piece in answer.as_bytes().chunks(7) {
        delta(
            app,
            "a",
            keel_protocol::ItemKind::AgentMessage,
            String::from_utf8_lossy(piece).into_owned(),
        );
    }
    item(
        app,
        ItemEvent::Completed {
            item: Item {
                id: Arc::from("a"),
                body: ItemBody::AgentMessage {
                    text: answer.into(),
                },
            },
        },
    );
    item(
        app,
        ItemEvent::Completed {
            item: Item {
                id: Arc::from("r"),
                body: ItemBody::Reasoning {
                    text: "The test expects 2.\nLook at add().".into(),
                },
            },
        },
    );
    item(
        app,
        tool(
            "edit",
            json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
            "Edited src/lib.rs",
            Some(
                json!({"diff": "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n // math\n-fn add(a: u8, b: u8) -> u8 { a - b }\n+fn add(a: u8, b: u8) -> u8 { a + b }\n \n"}),
            ),
            ToolCallStatus::Completed,
        ),
    );
    item(
        app,
        tool(
            "bash",
            json!({"command": "cargo test"}),
            "running 1 test\ntest add ... ok\n\ntest result: ok. 1 passed\nline 5\nline 6\nline 7\nline 8",
            Some(json!({"exit_code": 0})),
            ToolCallStatus::Completed,
        ),
    );
    item(
        app,
        tool(
            "read",
            json!({"path": "missing.rs"}),
            "no such file: missing.rs",
            None,
            ToolCallStatus::Failed,
        ),
    );
    event(
        app,
        SessionEventBody::Retry {
            turn_id: TurnId::from("t-1"),
            attempt: 2,
            max_retries: 5,
            delay_ms: 4000,
            failure: keel_protocol::Failure::new(
                keel_protocol::FailureCode::ModelOverloaded,
                "the provider is overloaded",
            ),
        },
    );
    event(
        app,
        SessionEventBody::Extension {
            turn_id: None,
            extension: "host.context".into(),
            kind: "archived".into(),
            details: json!({"outputs": 2, "before": {"tokens": 98000}, "after": {"tokens": 41000}}),
            notice: keel_runtime::notice::for_event(
                "host.context",
                "archived",
                &json!({"outputs": 2, "before": {"tokens": 98000}, "after": {"tokens": 41000}}),
            ),
        },
    );
    event(
        app,
        SessionEventBody::Usage {
            turn_id: TurnId::from("t-1"),
            usage: Usage {
                input: 30_000,
                output: 2_000,
                ..Usage::default()
            },
            context_window: 200_000,
            input_limit: 165_952,
            compact_at: 165_952,
        },
    );
}

#[test]
fn every_cell_kind_wide() {
    let mut app = app(100);
    a_turn(&mut app);
    insta::assert_snapshot!(screen(&mut app));
}

#[test]
fn every_cell_kind_narrow() {
    let mut app = app(40);
    a_turn(&mut app);
    insta::assert_snapshot!(screen(&mut app));
}

#[test]
fn the_slash_popup_filters() {
    let mut app = app(80);
    type_text(&mut app, "/co");
    insta::assert_snapshot!(screen(&mut app));
}

#[test]
fn extension_commands_in_the_popup_and_a_text_answer() {
    let mut app = app(80);
    let command = |name: &str, description: &str, hint: Option<&str>, source: &str| {
        keel_protocol::CommandInfo {
            name: name.into(),
            description: description.into(),
            argument_hint: hint.map(Into::into),
            source: source.into(),
        }
    };
    app.update(UiEvent::Reply(
        Tag::Commands,
        Ok(Reply::ListCommands(vec![
            command(
                "mcp",
                "MCP servers and their state; `/mcp reload` restarts them",
                Some("[reload]"),
                "mcp",
            ),
            command("release-notes", "Draft release notes", None, "skill"),
            command("review", "Review a file", Some("<file> [focus]"), "command"),
            command(
                "github:issue",
                "Summarise an issue",
                Some("<number>"),
                "mcp",
            ),
        ])),
    ));
    type_text(&mut app, "/re");
    let popup = screen(&mut app);
    app.composer.clear();
    app.popup = None;
    app.update(UiEvent::Reply(
        Tag::Command {
            name: "mcp".into(),
            typed: "/mcp".into(),
            expect: keel_tui::slash::Expect::Answer,
        },
        Ok(Reply::RunCommand(keel_runtime::CommandOutcome::Text(
            "files: ready, 12 tools, 1 prompt\ngithub: failed: connection refused (/mcp reload tries again)".into(),
        ))),
    ));
    let answer = screen(&mut app);
    insta::assert_snapshot!(format!("{popup}\n=====\n{answer}"));
}

#[test]
fn the_permission_prompt_and_its_always_confirmation() {
    let mut app = app(80);
    app.live.begin(Some("clean up".into()));
    ask(
        &mut app,
        "rm -rf build/".to_owned(),
        vec!["it deletes files in the workspace".into()],
        vec!["this exact command".into(), "any `rm` command".into()],
        vec![
            "{\"tool\":\"bash\",\"command\":\"rm -rf build/\"}".into(),
            "{\"tool\":\"bash\",\"command_prefix\":\"rm\"}".into(),
        ],
    );
    let ask = screen(&mut app);
    key(&mut app, KeyCode::Char('s'), KeyModifiers::NONE);
    let scopes = screen(&mut app);
    key(&mut app, KeyCode::Char('1'), KeyModifiers::NONE);
    let confirm = screen(&mut app);
    insta::assert_snapshot!(format!("{ask}\n=====\n{scopes}\n=====\n{confirm}"));
}

#[test]
fn an_always_with_no_rule_says_it_lasts_the_session_and_is_not_saved() {
    let mut app = app(80);
    app.live.begin(Some("fetch".into()));
    ask(
        &mut app,
        "connect to example.org:80".to_owned(),
        vec!["a command wants to reach example.org, which is not in sandbox.network.allow".into()],
        vec!["connections to example.org for this session".into()],
        vec![String::new()],
    );
    key(&mut app, KeyCode::Char('s'), KeyModifiers::NONE);
    let mut confirm = screen(&mut app);
    if !confirm.contains("enter:") {
        key(&mut app, KeyCode::Char('1'), KeyModifiers::NONE);
        confirm = screen(&mut app);
    }
    assert!(
        confirm.contains("Allowed for the rest of this session (not saved):")
            && confirm.contains("connections to example.org for this session"),
        "{confirm}"
    );
    assert!(!confirm.contains("permissions.yaml"), "{confirm}");
}

#[test]
fn the_footer_while_a_turn_runs_with_queued_messages() {
    let mut app = app(100);
    app.live.begin(Some("go".into()));
    event(
        &mut app,
        SessionEventBody::QueueChanged {
            queue: vec![keel_protocol::QueueEntry {
                id: "i-1".into(),
                kind: keel_protocol::InputKind::FollowUp,
                text: "then write the docs".into(),
                created_ms: 0,
                source: keel_protocol::TurnSource::Api,
            }],
        },
    );
    app.info.mode = keel_protocol::PermissionMode::Plan;
    insta::assert_snapshot!(screen(&mut app));
}

#[test]
fn a_narrow_footer_wraps_and_keeps_the_cost() {
    let mut app = app(40);
    event(
        &mut app,
        SessionEventBody::Usage {
            turn_id: "t-1".into(),
            usage: keel_protocol::Usage {
                input: 120_000,
                output: 3_000,
                cost: keel_protocol::Cost {
                    total: 1.25,
                    ..keel_protocol::Cost::default()
                },
                ..keel_protocol::Usage::default()
            },
            context_window: 200_000,
            input_limit: 165_952,
            compact_at: 165_952,
        },
    );
    let shown = screen(&mut app);
    assert!(shown.contains("$1.25"), "{shown}");
    assert!(shown.lines().all(|l| l.chars().count() <= 40), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn a_running_command_shows_its_last_lines() {
    let mut app = app(60);
    app.live.begin(Some("go".into()));
    item(
        &mut app,
        ItemEvent::Started {
            item: keel_protocol::Item {
                id: "item_0".into(),
                body: keel_protocol::ItemBody::ToolCall {
                    call_id: "c-1".into(),
                    tool_name: "bash".into(),
                    arguments: json!({"command": "cargo test"}),
                    result: None,
                    status: ToolCallStatus::InProgress,
                    details: None,
                },
            },
        },
    );
    let output: String = (1..=9).map(|i| format!("line {i}\n")).collect();
    delta(
        &mut app,
        "item_0",
        keel_protocol::ItemKind::ToolCall,
        output,
    );
    // A command's colours and escapes are dropped, never acted on.
    delta(
        &mut app,
        "item_0",
        keel_protocol::ItemKind::ToolCall,
        "\u{1b}[2J\u{1b}]0;title\u{7}\u{1b}[32mcleared?\u{1b}[0m\n",
    );
    // The header's running time depends on the clock.
    let shown: String = screen(&mut app)
        .lines()
        .map(|l| l.split("  (").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!shown.contains("line 4"), "only the last lines: {shown}");
    assert!(
        shown.contains("line 9") && shown.contains("  cleared?"),
        "{shown}"
    );
    assert!(!shown.contains('␛') && !shown.contains("title"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn a_hundred_thousand_token_answer_commits_as_it_streams() {
    // Each delta renders only the open block: the live area stays small however long the
    // answer grows, so streaming cost stays linear.
    let mut app = app(100);
    started(&mut app, "a", keel_protocol::ItemKind::AgentMessage);
    let mut largest_live = 0;
    for i in 0..20_000 {
        let delta = if i % 10 == 9 {
            "word.\n\n".to_owned()
        } else {
            format!("w{i} ")
        };
        item(
            &mut app,
            ItemEvent::Updated {
                item_id: Arc::from("a"),
                kind: keel_protocol::ItemKind::AgentMessage,
                delta,
            },
        );
        largest_live = largest_live.max(app.live.lines(100, false).len());
        let _ = app.take_pending();
    }
    assert!(
        largest_live <= 3,
        "the open block stayed small: {largest_live} rows"
    );
}

#[test]
fn hostile_text_cannot_drive_the_terminal() {
    // Model text and tool output may carry escape sequences: a clipboard write (OSC 52), a
    // title change, a screen clear, a cursor jump to paint over the prompt. None of them may
    // reach the terminal; only keel's own drawing does.
    let mut app = app(80);
    let hostile =
        "\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[1;1Hfake prompt\u{9b}31m";
    started(&mut app, "a", keel_protocol::ItemKind::AgentMessage);
    delta(
        &mut app,
        "a",
        keel_protocol::ItemKind::AgentMessage,
        format!("look {hostile}\n\nmore"),
    );
    let (live, _) = bytes(&mut app);
    item(
        &mut app,
        ItemEvent::Completed {
            item: Item {
                id: Arc::from("a"),
                body: ItemBody::AgentMessage {
                    text: format!("look {hostile}\n\nmore"),
                },
            },
        },
    );
    item(
        &mut app,
        tool(
            "bash",
            json!({"command": format!("echo {hostile}")}),
            &format!("out {hostile}"),
            None,
            ToolCallStatus::Completed,
        ),
    );
    ask(
        &mut app,
        format!("rm {hostile}"),
        vec![hostile.into()],
        vec![hostile.into()],
        vec![hostile.into()],
    );
    let (done, _) = bytes(&mut app);
    for out in [live, done] {
        let text = String::from_utf8_lossy(&out);
        // ratatui writes no OSC and never clears here; the planted escape characters are
        // dropped, so what is left shows as harmless text.
        for planted in ["\u{1b}]", "\u{1b}[2J", "\u{9b}", "\u{7}"] {
            assert!(!text.contains(planted), "{planted:?} reached the terminal");
        }
        assert!(text.contains("fake"), "the text itself is still shown");
    }
}

#[test]
fn long_reasoning_and_an_endless_line_stay_cheap_to_draw() {
    let mut app = app(100);
    started(&mut app, "r", keel_protocol::ItemKind::Reasoning);
    delta(
        &mut app,
        "r",
        keel_protocol::ItemKind::Reasoning,
        "a thought\n".repeat(50_000),
    );
    assert!(app.live.lines(100, false).len() <= 5);
    let mut stream = keel_tui::markdown::MarkdownStream::new();
    stream.push(&"word ".repeat(400_000));
    let rows = stream.tail(100).len();
    assert!(
        rows < 400,
        "an endless line draws only its end: {rows} rows"
    );
}

#[test]
fn thinking_is_set_with_a_command_and_shown_when_it_changes() {
    let mut app = app(100);
    type_text(&mut app, "/thinking high");
    let effects = app.update(UiEvent::Term(Event::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    ))));
    let asked = effects.iter().any(|effect| {
        matches!(
            effect,
            keel_tui::app::Effect::Call(_, keel_protocol::Op::UpdateSession(keel_protocol::ops::UpdateSession { thinking: Some(level), .. })) if *level == keel_protocol::ThinkingChoice::Level(keel_protocol::ThinkingLevel::High)
        )
    });
    assert!(asked, "no update for the thinking level");
    event(
        &mut app,
        SessionEventBody::SessionUpdated {
            title: "a test".into(),
            model: "anthropic/claude-sonnet-4-5".into(),
            mode: Some(keel_protocol::PermissionMode::Auto),
            thinking: Some(keel_protocol::ThinkingLevel::High),
        },
    );
    assert!(screen(&mut app).contains("thinking: high"));
}

#[test]
fn a_plan_for_review_and_the_choice_after_its_turn() {
    let mut app = app(80);
    app.info.mode = keel_protocol::PermissionMode::Plan;
    app.live.begin(Some("plan a cache".into()));
    event(
        &mut app,
        SessionEventBody::PlanReady {
            turn_id: TurnId::from("t-1"),
            plan: keel_protocol::PlanInfo {
                path: "/home/u/.keel/plans/s-test000001.md".into(),
                frozen_path: "/home/u/.keel/plans/s-test000001.1.md".into(),
                text: "# Cache\n\n## Summary\nCache the parsed config.\n\n## Steps\n1. Add `cache.rs`.\n2. Test it.\n".into(),
            },
        },
    );
    let running = screen(&mut app);
    assert!(app.popup.is_none(), "no choice while the turn runs");
    event(
        &mut app,
        SessionEventBody::TurnEnded {
            turn_id: TurnId::from("t-1"),
            outcome: keel_protocol::TurnOutcome::Completed,
            usage: Usage::default(),
            failure: None,
        },
    );
    let review = screen(&mut app);
    insta::assert_snapshot!(format!("{running}\n=====\n{review}"));
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    let effects = app.update(UiEvent::Term(Event::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    ))));
    let approved = effects.iter().any(|effect| {
        matches!(
            effect,
            keel_tui::app::Effect::Call(_, keel_protocol::Op::RunCommand(keel_protocol::ops::RunCommand { name, arguments, .. }))
                if name == "approve-plan" && arguments == "ask"
        )
    });
    assert!(approved, "{effects:?}");
    assert!(app.busy(), "the approval starts a turn");
}

/// A `goal` event, from the goal's details.
fn goal(app: &mut App, details: serde_json::Value) {
    let status: keel_protocol::GoalStatus =
        serde_json::from_value(details["status"].clone()).unwrap();
    event(
        app,
        SessionEventBody::Goal {
            turn_id: Some(TurnId::from("t-1")),
            goal: keel_protocol::GoalInfo {
                objective: details["objective"].as_str().unwrap_or_default().to_owned(),
                status,
                reason: details["reason"].as_str().map(str::to_owned),
                banner: details["banner"].as_str().unwrap_or_default().to_owned(),
                record: details,
            },
        },
    );
}

#[test]
fn the_goal_banner_above_the_composer_and_its_status_changes() {
    let mut app = app(80);
    goal(
        &mut app,
        json!({"status": "active", "objective": "make the tests pass",
               "banner": "goal active: make the tests pass · 12.3k/50.0k tokens · turn 3/10"}),
    );
    let active = screen(&mut app);
    goal(
        &mut app,
        json!({"status": "paused", "objective": "make the tests pass",
               "reason": "the model gave the same reply 3 turns in a row",
               "banner": "goal paused: make the tests pass · 20.1k/50.0k tokens · turn 5/10"}),
    );
    let paused = screen(&mut app);
    goal(
        &mut app,
        json!({"status": "cleared", "objective": "make the tests pass", "banner": null}),
    );
    let cleared = screen(&mut app);
    insta::assert_snapshot!(format!("{active}\n=====\n{paused}\n=====\n{cleared}"));
}

/// A tool call item begins, waiting to be admitted.
fn proposed(app: &mut App, id: &str, name: &str, arguments: serde_json::Value) {
    item(
        app,
        ItemEvent::Started {
            item: Item {
                id: Arc::from(id),
                body: ItemBody::ToolCall {
                    call_id: format!("call-{id}").as_str().into(),
                    tool_name: name.into(),
                    arguments,
                    result: None,
                    status: ToolCallStatus::Pending,
                    details: None,
                },
            },
        },
    );
}

#[test]
fn text_then_calls_in_call_order_whatever_order_they_end_in() {
    let mut app = app(80);
    started(&mut app, "a", keel_protocol::ItemKind::AgentMessage);
    delta(
        &mut app,
        "a",
        keel_protocol::ItemKind::AgentMessage,
        "Let me look at both files.\nThen I decide",
    );
    proposed(&mut app, "c1", "read", json!({"path": "slow.rs"}));
    proposed(&mut app, "c2", "read", json!({"path": "fast.rs"}));
    for id in ["c1", "c2"] {
        item(
            &mut app,
            ItemEvent::Status {
                item_id: Arc::from(id),
                status: ToolCallStatus::InProgress,
            },
        );
    }
    // The second call ends first, then the first, then the text is final.
    for (id, path) in [("c2", "fast.rs"), ("c1", "slow.rs")] {
        item(
            &mut app,
            ItemEvent::Completed {
                item: Item {
                    id: Arc::from(id),
                    body: ItemBody::ToolCall {
                        call_id: format!("call-{id}").as_str().into(),
                        tool_name: "read".into(),
                        arguments: json!({"path": path}),
                        result: Some(format!("contents of {path}")),
                        status: ToolCallStatus::Completed,
                        details: None,
                    },
                },
            },
        );
        // Nothing of a call goes to the transcript before the text above it.
        let finished = app.take_pending();
        let text: String = finished.iter().map(|l| l.to_string() + "\n").collect();
        assert!(!text.contains("Read"), "{text}");
        app.push_lines(finished);
    }
    item(
        &mut app,
        ItemEvent::Completed {
            item: Item {
                id: Arc::from("a"),
                body: ItemBody::AgentMessage {
                    text: "Let me look at both files.\nThen I decide.".into(),
                },
            },
        },
    );
    let screen = screen(&mut app);
    let at = |needle: &str| {
        screen
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing:\n{screen}"))
    };
    assert!(at("Then I decide.") < at("Read slow.rs"), "{screen}");
    assert!(at("Read slow.rs") < at("Read fast.rs"), "{screen}");
    // Ctrl+O's transcript holds the same order.
    let order: Vec<String> = app
        .transcript
        .iter()
        .map(|cell| format!("{cell:?}"))
        .collect();
    let find = |needle: &str| order.iter().position(|c| c.contains(needle)).unwrap();
    assert!(find("Then I decide") < find("slow.rs"));
    assert!(find("slow.rs") < find("fast.rs"));
}

#[test]
fn a_waiting_call_shows_it_waits() {
    let mut app = app(80);
    proposed(&mut app, "c1", "bash", json!({"command": "make"}));
    let screen = screen(&mut app);
    assert!(screen.contains("Bash make  (waiting)"), "{screen}");
}

/// Issue 34: in a small window the footer names the window and where compaction starts, and
/// `/context` lists the window, the compaction start and the input limit in use.
#[test]
fn a_small_window_shows_its_budget_in_the_footer_and_in_context() {
    let mut app = app(100);
    event(
        &mut app,
        SessionEventBody::Usage {
            turn_id: "t-1".into(),
            usage: keel_protocol::Usage {
                input: 1_700,
                output: 100,
                ..keel_protocol::Usage::default()
            },
            context_window: 8_192,
            input_limit: 6_016,
            compact_at: 6_016,
        },
    );
    let shown = screen(&mut app);
    assert!(
        shown.contains("ctx 22% of 8.2k, compacts at 6.0k"),
        "{shown}"
    );
    app.update(UiEvent::Reply(
        Tag::Context,
        Ok(Reply::ContextReport(keel_protocol::ContextReport {
            window: 8_192,
            limit: Some(6_016),
            compact_at: Some(6_016),
            compactions: 2,
            summary_tokens: 4_242,
            parts: vec![
                keel_protocol::ContextPart {
                    label: "system prompt".into(),
                    tokens: 305,
                },
                keel_protocol::ContextPart {
                    label: "tools".into(),
                    tokens: 1_700,
                },
            ],
            measured: true,
        })),
    ));
    let shown = screen(&mut app);
    assert!(
        shown.contains("window        8.2k tokens; compaction starts at 6.0k; input limit 6.0k"),
        "{shown}"
    );
    assert!(
        shown.contains("compacted     2 times; summaries ≈4.2k tokens in all"),
        "{shown}"
    );
}
