//! Each kind of approval shows what it approves: an edit and a write their diff, a command
//! its whole text, an MCP call its server, tool and arguments; at a wide and a narrow width.

use crossterm::event::{KeyCode, KeyModifiers};
use keel_protocol::{PermissionRequest, SessionEventBody, ToolPreview, TurnId};
use serde_json::json;

use super::{app, event, key, screen};

fn request(tool: &str, summary: &str, arguments: serde_json::Value) -> PermissionRequest {
    PermissionRequest {
        id: "p-1".into(),
        tool_call_id: "call-1".into(),
        tool: tool.into(),
        summary: summary.into(),
        reasons: vec!["it changes the workspace in ask mode".into()],
        safety: false,
        scopes: vec!["this call".into()],
        rules: vec![String::new()],
        arguments,
        preview: None,
    }
}

fn change(path: &str, created: bool, diff: &str) -> ToolPreview {
    ToolPreview::File {
        path: path.into(),
        created,
        diff: diff.into(),
        truncated: false,
        old_text: None,
        new_text: None,
    }
}

/// An app `width` columns wide whose running turn asks `request`.
fn asked(width: u16, request: PermissionRequest) -> keel_tui::app::App {
    let mut app = app(width);
    app.live.begin(Some("go".into()));
    event(
        &mut app,
        SessionEventBody::PermissionRequested {
            turn_id: TurnId::from("t-1"),
            request,
        },
    );
    app
}

/// The question for `request` at widths 100 and 40, one above the other.
fn both_widths(request: &PermissionRequest) -> String {
    let mut shown = Vec::new();
    for width in [100, 40] {
        let mut app = asked(width, request.clone());
        shown.push(screen(&mut app));
    }
    shown.join("\n=====\n")
}

const EDIT_DIFF: &str = "--- /work/project/calc.py\n+++ /work/project/calc.py\n@@ -1,4 +1,4 @@\n def add(a, b):\n-    return a + b\n+    return a - b\n \n def sub(a, b):\n";

#[test]
fn an_edit_shows_its_diff() {
    let mut ask = request(
        "edit",
        "edit calc.py",
        json!({"path": "calc.py", "edits": [{"old_string": "a + b", "new_string": "a - b"}]}),
    );
    ask.preview = Some(change("/work/project/calc.py", false, EDIT_DIFF));
    insta::assert_snapshot!(both_widths(&ask));
}

#[test]
fn a_write_of_a_new_file_shows_its_content() {
    let mut ask = request(
        "write",
        "write notes/todo.md",
        json!({"path": "notes/todo.md", "content": "# Todo\n- ship it\n"}),
    );
    ask.preview = Some(change(
        "/work/project/notes/todo.md",
        true,
        "--- /dev/null\n+++ /work/project/notes/todo.md\n@@ -0,0 +1,2 @@\n+# Todo\n+- ship it\n",
    ));
    insta::assert_snapshot!(both_widths(&ask));
}

#[test]
fn a_command_shows_its_whole_text() {
    let command = "curl -fsSL https://example.org/install.sh -o /tmp/install.sh && \\\n  sh /tmp/install.sh --prefix \"$HOME/.local\" --with-completions --yes";
    let ask = request(
        "bash",
        "curl -fsSL https://example.org/install.sh -o /tmp/install.sh && ⏎ …",
        json!({"command": command}),
    );
    insta::assert_snapshot!(both_widths(&ask));
}

#[test]
fn an_mcp_call_shows_its_server_tool_and_arguments() {
    let ask = request(
        "mcp__github__create_issue",
        "mcp__github__create_issue {\"repo\":\"keel/keel\",…",
        // Keys in sorted order: the JSON map keeps insertion order only in some builds.
        json!({"labels": ["ux", "tui"], "repo": "keel/keel", "title": "Approvals show nothing"}),
    );
    insta::assert_snapshot!(both_widths(&ask));
}

#[test]
fn a_preview_never_lets_the_file_drive_the_terminal() {
    let mut ask = request("edit", "edit evil.py", json!({"path": "evil.py"}));
    ask.preview = Some(change(
        "/work/project/evil.py",
        false,
        "--- a\n+++ a\n@@ -1,1 +1,1 @@\n-ok\n+\u{1b}[2J\u{1b}]0;pwned\u{7}if admin \u{202E} {\n",
    ));
    let shown = both_widths(&ask);
    assert!(shown.contains("␛[2J␛]0;pwned␇"), "{shown}");
    assert!(shown.contains("⟨U+202E⟩"), "{shown}");
    assert!(
        !shown.contains("pwned\n") || shown.contains("␛]0;pwned"),
        "{shown}"
    );
}

#[test]
fn a_long_preview_scrolls_and_expands() {
    let body: String = (1..=40).map(|n| format!("+line {n}\n")).collect();
    let mut ask = request("write", "write long.txt", json!({"path": "long.txt"}));
    ask.preview = Some(change(
        "/work/project/long.txt",
        true,
        &format!("--- /dev/null\n+++ /work/project/long.txt\n@@ -0,0 +1,40 @@\n{body}"),
    ));
    let mut app = asked(100, ask);
    let first = screen(&mut app);
    assert!(
        first.contains("line 16") && !first.contains("line 17"),
        "{first}"
    );
    assert!(first.contains("lines 1–16 of 40"), "{first}");
    key(&mut app, KeyCode::PageDown, KeyModifiers::NONE);
    let scrolled = screen(&mut app);
    assert!(scrolled.contains("lines 9–24 of 40"), "{scrolled}");
    assert!(
        !scrolled.contains("line 8\n") && scrolled.contains("line 24"),
        "{scrolled}"
    );
    key(&mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    let all = screen(&mut app);
    assert!(all.contains("line 1\n") && all.contains("line 40"), "{all}");
    // Scrolling and expanding answered nothing: the question is still there.
    assert!(all.contains("Yes, once"), "{all}");
}

#[test]
fn the_scopes_of_a_command_quote_it_visibly() {
    let mut ask = request(
        "bash",
        "run it",
        json!({"command": "echo \u{202E}txt.exe \u{1b}[8m"}),
    );
    ask.scopes = vec![
        "the command `echo \u{202E}txt.exe \u{1b}[8m`".into(),
        "any `echo` command".into(),
    ];
    ask.rules = vec![
        "bash: echo \u{202E}txt.exe \u{1b}[8m".into(),
        "bash: echo *".into(),
    ];
    let mut app = asked(100, ask);
    let question = screen(&mut app);
    key(&mut app, KeyCode::Char('s'), KeyModifiers::NONE);
    let scopes = screen(&mut app);
    key(&mut app, KeyCode::Char('1'), KeyModifiers::NONE);
    let confirm = screen(&mut app);
    for shown in [&question, &scopes, &confirm] {
        assert!(shown.contains("⟨U+202E⟩txt.exe ␛[8m"), "{shown}");
    }
}
