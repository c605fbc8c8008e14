//! An MCP server's question in place of the composer: a form with its fields, defaults and
//! the server named as the one asking; filled and submitted with keys; a page to open with
//! its host; at a wide and a narrow width.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use keel_protocol::{Ask, Choice, Field, FieldKind, Form, Op, Question, SessionEventBody, TurnId};
use keel_tui::app::{Effect, UiEvent};
use serde_json::json;

use super::{app, event, screen, type_text};

fn field(name: &str, title: &str, required: bool, kind: FieldKind) -> Field {
    Field {
        name: name.into(),
        title: Some(title.into()),
        description: None,
        required,
        kind,
        default: None,
    }
}

fn form() -> Question {
    let mut points = field(
        "points",
        "Story points",
        false,
        FieldKind::Number {
            integer: true,
            minimum: Some(1.0),
            maximum: Some(13.0),
        },
    );
    points.default = Some(json!(3));
    let mut team = field(
        "team",
        "Team",
        false,
        FieldKind::Choice {
            options: vec![
                Choice {
                    value: "core".into(),
                    label: "Core".into(),
                },
                Choice {
                    value: "web".into(),
                    label: "Web".into(),
                },
            ],
        },
    );
    team.default = Some(json!("core"));
    let mut title = field(
        "title",
        "Title",
        true,
        FieldKind::Text {
            min_length: None,
            max_length: Some(80),
            format: None,
        },
    );
    title.description = Some("One line for the tracker".into());
    Question {
        id: "q-1".into(),
        server: "tracker".into(),
        tool_call_id: Some("call-1".into()),
        message: "Details for the new ticket".into(),
        ask: Ask::Form(Form {
            fields: vec![
                title,
                points,
                field("urgent", "Urgent", false, FieldKind::Boolean),
                team,
            ],
        }),
    }
}

fn asked(width: u16, question: Question) -> keel_tui::app::App {
    let mut app = app(width);
    app.live.begin(Some("file a ticket".into()));
    event(
        &mut app,
        SessionEventBody::QuestionAsked {
            turn_id: TurnId::from("t-1"),
            question,
        },
    );
    app
}

fn press(app: &mut keel_tui::app::App, code: KeyCode) -> Vec<Effect> {
    app.update(UiEvent::Term(Event::Key(KeyEvent::new(
        code,
        KeyModifiers::NONE,
    ))))
}

#[test]
fn a_servers_form_shows_its_fields_with_their_defaults() {
    let mut shown = Vec::new();
    for width in [100, 40] {
        let mut app = asked(width, form());
        shown.push(screen(&mut app));
    }
    insta::assert_snapshot!(shown.join("\n=====\n"));
}

#[test]
fn a_form_is_filled_and_sent_and_closes_when_the_question_ends() {
    let mut app = asked(100, form());
    // Submitting at once names the field that needs a value, and stays.
    assert!(press(&mut app, KeyCode::BackTab).is_empty());
    assert!(press(&mut app, KeyCode::Enter).is_empty());
    assert!(screen(&mut app).contains("`Title` is required"));
    type_text(&mut app, "Login fails on Safari");
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Right);
    press(&mut app, KeyCode::Enter);
    let effects = press(&mut app, KeyCode::Enter);
    let sent: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Call(_, Op::AnswerQuestion(answer)) => Some(answer.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{effects:?}");
    assert_eq!(sent[0].question_id, "q-1");
    assert_eq!(
        serde_json::to_value(&sent[0].answer).unwrap(),
        json!({"action": "accept", "content": {
            "title": "Login fails on Safari", "points": 3, "urgent": true, "team": "web"
        }})
    );
    let shown = screen(&mut app);
    assert!(shown.contains("waiting for the server"), "{shown}");
    assert!(shown.contains("you accepted tracker's form"), "{shown}");
    event(
        &mut app,
        SessionEventBody::QuestionResolved {
            turn_id: TurnId::from("t-1"),
            question_id: "q-1".into(),
            outcome: "accepted".into(),
        },
    );
    let shown = screen(&mut app);
    assert!(!shown.contains("Story points"), "{shown}");
}

#[test]
fn a_page_to_open_names_its_host_and_a_second_question_waits_its_turn() {
    let mut page = form();
    page.id = "q-2".into();
    page.message = "Connect your account".into();
    page.ask = Ask::Url {
        url: "https://auth.example.com/connect?state=x".into(),
        host: "auth.example.com".into(),
    };
    let mut app = asked(60, page);
    event(
        &mut app,
        SessionEventBody::QuestionAsked {
            turn_id: TurnId::from("t-1"),
            question: form(),
        },
    );
    insta::assert_snapshot!(screen(&mut app));
    let effects = press(&mut app, KeyCode::Char('n'));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Call(_, Op::AnswerQuestion(a)) if a.question_id == "q-2"))
    );
    event(
        &mut app,
        SessionEventBody::QuestionResolved {
            turn_id: TurnId::from("t-1"),
            question_id: "q-2".into(),
            outcome: "declined".into(),
        },
    );
    assert!(
        screen(&mut app).contains("Story points"),
        "the form waited behind the page"
    );
}
