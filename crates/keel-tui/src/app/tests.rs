//! The app's handling of extensions' slash commands: listing, running, and their replies.
#![allow(clippy::unwrap_used)]

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

use keel_protocol::ops;
use keel_protocol::{CommandInfo, Op, SessionId};
use keel_runtime::Reply;
use pretty_assertions::assert_eq;

use super::{App, Effect, Info, Tag, UiEvent};
use crate::cells::{Cell, Tone};
use crate::slash::Expect;

pub(super) const SESSION: &str = "s-test000001";

pub(super) fn app() -> App {
    let info = Info {
        cwd: "/work/project".into(),
        model: "anthropic/claude-sonnet-4-5".into(),
        mode: keel_protocol::PermissionMode::Auto,
        sandbox: keel_protocol::SandboxMode::WorkspaceWrite,
        models: Vec::new(),
        keel_home: None,
        warnings: Vec::new(),
        thinking: None,
        notifications: Default::default(),
    };
    let mut app = App::new(info, 80);
    app.session = Some(keel_runtime::SessionRecord {
        id: SessionId::from(SESSION),
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

fn offered() -> Vec<CommandInfo> {
    let info = |name: &str, description: &str, hint: Option<&str>, source: &str| CommandInfo {
        name: name.into(),
        description: description.into(),
        argument_hint: hint.map(Into::into),
        source: source.into(),
    };
    vec![
        info("help", "a skill that loses to the built-in", None, "skill"),
        info(
            "mcp",
            "MCP servers and their state; `/mcp reload` restarts them",
            Some("[reload]"),
            "mcp",
        ),
        info("review", "Review a file", Some("<file> [focus]"), "command"),
    ]
}

/// An app whose catalog holds [`offered`].
fn listed() -> App {
    let mut app = app();
    app.update(UiEvent::Reply(
        Tag::Commands,
        Ok(Reply::ListCommands(offered())),
    ));
    app
}

fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.update(UiEvent::Term(Event::Key(KeyEvent::new(
        code,
        KeyModifiers::NONE,
    ))))
}

/// Types `line` and presses Enter; the effects of the Enter.
fn enter(app: &mut App, line: &str) -> Vec<Effect> {
    for ch in line.chars() {
        key(app, KeyCode::Char(ch));
    }
    // Enter on the open popup would pick its row, not send the line.
    app.popup = None;
    key(app, KeyCode::Enter)
}

fn run(name: &str, typed: &str, arguments: &str, expect: Expect) -> Effect {
    Effect::Call(
        Tag::Command {
            name: name.into(),
            typed: typed.into(),
            expect,
        },
        Op::RunCommand(ops::RunCommand {
            session_id: SESSION.into(),
            name: name.into(),
            arguments: arguments.into(),
        }),
    )
}

/// A cell as the text it shows, wide enough not to wrap.
fn text(cell: &Cell) -> String {
    cell.lines(120, false)
        .iter()
        .map(|line| {
            line.spans
                .iter()
                .map(|span| span.content.as_ref())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn last(app: &App) -> String {
    text(app.transcript.last().unwrap())
}

#[test]
fn commands_are_listed_when_the_popup_opens_and_join_the_catalog() {
    let mut app = app();
    let effects = key(&mut app, KeyCode::Char('/'));
    assert_eq!(
        effects,
        vec![Effect::Call(
            Tag::Commands,
            Op::ListCommands(ops::ListCommands {})
        )]
    );
    assert!(
        key(&mut app, KeyCode::Char('r')).is_empty(),
        "listed once per opening"
    );
    app.update(UiEvent::Reply(
        Tag::Commands,
        Ok(Reply::ListCommands(offered())),
    ));
    let names: Vec<&str> = app
        .catalog
        .filter("rev")
        .iter()
        .map(|c| c.name.as_ref())
        .collect();
    assert_eq!(names[0], "review");
    assert_eq!(
        app.catalog.find("help").unwrap().origin,
        crate::slash::Origin::Builtin,
        "the built-in keeps its name"
    );
}

#[test]
fn a_prompt_command_runs_through_the_runtime_and_shows_as_the_users_message() {
    let mut app = listed();
    let effects = enter(&mut app, "/review src/lib.rs errors");
    assert_eq!(
        effects,
        vec![run(
            "review",
            "/review src/lib.rs errors",
            "src/lib.rs errors",
            Expect::Turn
        )]
    );
    assert_eq!(last(&app), "› /review src/lib.rs errors\n");
    assert!(app.busy(), "it runs as a submitted prompt does");
    assert_eq!(app.history, ["/review src/lib.rs errors"]);
}

#[test]
fn a_text_reply_shows_as_information() {
    let mut app = listed();
    let effects = enter(&mut app, "/mcp");
    assert_eq!(effects, vec![run("mcp", "/mcp", "", Expect::Answer)]);
    assert!(app.transcript.is_empty(), "nothing shows before the answer");
    assert!(!app.busy());
    let Effect::Call(tag, _) = effects.into_iter().next().unwrap() else {
        unreachable!()
    };
    app.update(UiEvent::Reply(
        tag,
        Ok(Reply::RunCommand(keel_runtime::CommandOutcome::Text(
            "files: ready, 12 tools\ngithub: failed: connection refused\n".into(),
        ))),
    ));
    assert_eq!(
        last(&app),
        "/mcp\n  files: ready, 12 tools\n  github: failed: connection refused\n"
    );
}

#[test]
fn an_answering_command_runs_while_a_turn_does_and_leaves_it_running() {
    let mut app = listed();
    app.live.begin(Some("go".into()));
    let effects = enter(&mut app, "/mcp reload");
    assert_eq!(
        effects,
        vec![run("mcp", "/mcp reload", "reload", Expect::Answer)]
    );
    app.update(UiEvent::Reply(
        Tag::Command {
            name: "mcp".into(),
            typed: "/mcp reload".into(),
            expect: Expect::Answer,
        },
        Ok(Reply::RunCommand(keel_runtime::CommandOutcome::Text(
            "files: ready".into(),
        ))),
    ));
    assert!(app.busy(), "the running turn is untouched");
}

#[test]
fn a_prompt_command_is_refused_while_a_turn_runs() {
    let mut app = listed();
    app.live.begin(Some("go".into()));
    let effects = enter(&mut app, "/review a.rs");
    assert_eq!(effects, Vec::new());
    assert_eq!(
        app.transcript.last(),
        Some(&Cell::Notice(
            Tone::Warn,
            "Stop the running turn before using /review".into()
        ))
    );
}

#[test]
fn an_unknown_command_reply_shows_and_gives_the_line_back() {
    let mut app = listed();
    let effects = enter(&mut app, "/review a.rs");
    let Effect::Call(tag, _) = effects.into_iter().next().unwrap() else {
        unreachable!()
    };
    let effects = app.update(UiEvent::Reply(
        tag,
        Err(keel_runtime::RuntimeError::UnknownCommand("review".into())),
    ));
    assert_eq!(
        effects,
        vec![Effect::Call(
            Tag::Commands,
            Op::ListCommands(ops::ListCommands {})
        )]
    );
    assert_eq!(
        app.transcript.last(),
        Some(&Cell::Notice(
            Tone::Error,
            "unknown command `/review`".into()
        ))
    );
    assert!(!app.busy(), "no turn started");
    assert_eq!(app.composer.text(), "/review a.rs");

    // An error that does not name the command is given its name.
    app.composer.clear();
    app.update(UiEvent::Reply(
        Tag::Command {
            name: "mcp".into(),
            typed: "/mcp".into(),
            expect: Expect::Answer,
        },
        Err(keel_runtime::RuntimeError::NotBound),
    ));
    assert_eq!(
        app.transcript.last(),
        Some(&Cell::Notice(
            Tone::Error,
            "/mcp: the conversation contract is not bound to a runtime".into()
        ))
    );
}

#[test]
fn a_prompt_command_that_answers_ends_the_wait() {
    let mut app = listed();
    enter(&mut app, "/review a.rs");
    app.update(UiEvent::Reply(
        Tag::Command {
            name: "review".into(),
            typed: "/review a.rs".into(),
            expect: Expect::Turn,
        },
        Ok(Reply::RunCommand(keel_runtime::CommandOutcome::Text(
            String::new(),
        ))),
    ));
    assert!(!app.busy());
    assert_eq!(
        app.transcript.last(),
        Some(&Cell::Notice(Tone::Info, "/review a.rs: done".into()))
    );
}

#[test]
fn help_lists_extension_commands_with_their_source() {
    let mut app = listed();
    let mut effects = Vec::new();
    app.command("help", &mut effects);
    let help = last(&app);
    let extension: Vec<&str> = help
        .lines()
        .skip_while(|line| *line != "Extension commands")
        .take_while(|line| *line != "Keys")
        .map(str::trim_end)
        .collect();
    assert_eq!(
        extension,
        [
            "Extension commands",
            "  /mcp [reload]                MCP servers and their state; `/mcp reload` restarts them · mcp",
            "  /review <file> [focus]       Review a file · command",
        ]
    );
}

#[test]
fn picking_a_command_that_needs_arguments_completes_it() {
    let mut app = listed();
    for ch in "/revi".chars() {
        key(&mut app, KeyCode::Char(ch));
    }
    let effects = key(&mut app, KeyCode::Enter);
    assert_eq!(effects, Vec::new());
    assert_eq!(app.composer.text(), "/review ");
}

#[test]
fn a_bang_line_runs_in_the_shell_and_a_double_bang_is_not_kept() {
    let mut app = app();
    let shell = |typed: &str, command: &str, remember: bool| {
        Effect::Call(
            Tag::Shell(typed.into()),
            Op::RunShell(ops::RunShell {
                session_id: SESSION.into(),
                command: command.into(),
                remember,
            }),
        )
    };
    assert_eq!(
        enter(&mut app, "!git status"),
        vec![shell("!git status", "git status", true)]
    );
    app.live.finish();
    assert_eq!(
        enter(&mut app, "!! ls -a"),
        vec![shell("!! ls -a", "ls -a", false)]
    );
    app.live.finish();
    // A Markdown image, a row of `!!!` or a long paste is a message for the model.
    for text in ["![diagram](x.png) explain", "!!! the build is red"] {
        let effects = enter(&mut app, text);
        assert!(
            matches!(effects.first(), Some(Effect::Call(_, Op::Submit(_)))),
            "{text}: {effects:?}"
        );
        app.live.finish();
    }
    app.update(UiEvent::Term(Event::Paste(format!(
        "!{}",
        "x ".repeat(600)
    ))));
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(effects.first(), Some(Effect::Call(_, Op::Submit(_)))),
        "{effects:?}"
    );
    app.live.finish();
    // Nothing after the `!`: nothing runs, the line stays to be finished.
    assert!(enter(&mut app, "!").is_empty());
    assert_eq!(app.composer.text(), "!");
    app.composer.clear();
    // While a turn runs, a command waits for the user, not in a queue.
    app.live.begin(None);
    assert!(enter(&mut app, "!make").is_empty());
    assert_eq!(app.composer.text(), "!make");
    assert!(matches!(
        app.transcript.last(),
        Some(Cell::Notice(Tone::Info, text)) if text.contains("between turns")
    ));
}

#[test]
fn a_terminal_out_of_focus_hears_when_the_turn_ends() {
    let mut app = app();
    let ended = || {
        UiEvent::Session(keel_protocol::SessionEvent {
            session_id: SESSION.into(),
            seq: 1,
            body: keel_protocol::SessionEventBody::TurnEnded {
                turn_id: "t-1".into(),
                outcome: keel_protocol::TurnOutcome::Completed,
                usage: keel_protocol::Usage::default(),
                failure: None,
            },
        })
    };
    let notified = |effects: &[Effect]| effects.iter().any(|e| matches!(e, Effect::Notify(_)));
    app.live.begin(None);
    assert!(!notified(&app.update(ended())), "in focus: nothing");
    app.update(UiEvent::Term(Event::FocusLost));
    app.live.begin(None);
    assert!(notified(&app.update(ended())));
    app.info.notifications = keel_runtime::settings::extend::Notifications::Off;
    app.live.begin(None);
    assert!(!notified(&app.update(ended())), "switched off");
    app.update(UiEvent::Term(Event::FocusGained));
    assert!(app.focused);
}

#[test]
fn a_pasted_image_path_goes_with_the_next_message() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("shot one.png");
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.resize(64, 1);
    std::fs::write(&png, &bytes).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "text").unwrap();
    let mut app = app();
    app.info.cwd = dir.path().to_path_buf();
    // As a terminal pastes a dropped file: quoted, or with escaped spaces.
    app.update(UiEvent::Term(Event::Paste(format!("'{}'", png.display()))));
    assert_eq!(app.composer.text(), "[image 1: shot one.png] ");
    // Another file is text.
    app.update(UiEvent::Term(Event::Paste("notes.txt".into())));
    assert_eq!(app.composer.text(), "[image 1: shot one.png] notes.txt");
    let effects = enter(&mut app, " what is this?");
    let Some(Effect::Call(_, Op::Submit(submit))) = effects.first() else {
        panic!("a submit: {effects:?}")
    };
    assert_eq!(submit.images.len(), 1);
    assert_eq!(submit.images[0].mime_type, "image/png");
}

#[test]
fn at_completes_mcp_resources_listed_for_the_session_beside_files() {
    let mut app = app();
    let effects = key(&mut app, KeyCode::Char('@'));
    let asked = effects
        .iter()
        .any(|e| matches!(e, Effect::Call(Tag::Mentions, Op::ListMentions(_))));
    assert!(asked, "opening `@` lists the mentions: {effects:?}");
    app.update(UiEvent::Reply(
        Tag::Mentions,
        Ok(Reply::ListMentions(vec![
            keel_protocol::MentionInfo {
                text: "docs:file:///guide.md".into(),
                detail: "guide · text/markdown".into(),
            },
            keel_protocol::MentionInfo {
                text: "tracker:issue://42".into(),
                detail: "Login fails".into(),
            },
        ])),
    ));
    for ch in "guide".chars() {
        key(&mut app, KeyCode::Char(ch));
    }
    let Some(crate::app::Popup::Files { matches, .. }) = &app.popup else {
        panic!("the `@` popup: {:?}", app.popup)
    };
    assert_eq!(
        matches.first().map(|m| m.0.as_str()),
        Some("docs:file:///guide.md")
    );
    let (panel, _) = crate::render::panel(&app, 100);
    let shown: String = panel.iter().map(|l| format!("{l}\n")).collect();
    assert!(shown.contains("guide · text/markdown"), "{shown}");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.composer.text(), "@docs:file:///guide.md ");
    // Typing more does not list them again; a new `@` word does.
    let effects = key(&mut app, KeyCode::Char('@'));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Call(Tag::Mentions, _)))
    );
}
