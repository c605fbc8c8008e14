#![allow(clippy::unwrap_used)]

use super::*;
use keel_protocol::Choice;
use serde_json::json;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_text(prompt: &mut QuestionPrompt, text: &str) {
    for c in text.chars() {
        prompt.key(key(KeyCode::Char(c)));
    }
}

fn question() -> Question {
    let field = |name: &str, required: bool, kind: FieldKind, default: Option<Value>| Field {
        name: name.into(),
        title: None,
        description: None,
        required,
        kind,
        default,
    };
    Question {
        id: "q-1".into(),
        server: "tracker".into(),
        tool_call_id: None,
        message: "Details for the ticket".into(),
        ask: Ask::Form(Form {
            fields: vec![
                field(
                    "title",
                    true,
                    FieldKind::Text {
                        min_length: None,
                        max_length: None,
                        format: None,
                    },
                    None,
                ),
                field(
                    "points",
                    false,
                    FieldKind::Number {
                        integer: true,
                        minimum: Some(1.0),
                        maximum: None,
                    },
                    Some(json!(3)),
                ),
                field("urgent", false, FieldKind::Boolean, None),
                field(
                    "team",
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
                    Some(json!("web")),
                ),
            ],
        }),
    }
}

#[test]
fn a_form_is_filled_field_by_field_and_submitted_with_its_defaults() {
    let mut prompt = QuestionPrompt::new(question());
    type_text(&mut prompt, "Fix login");
    prompt.key(key(KeyCode::Enter));
    prompt.key(key(KeyCode::Enter));
    prompt.key(key(KeyCode::Char(' ')));
    prompt.key(key(KeyCode::Enter));
    prompt.key(key(KeyCode::Enter));
    let outcome = prompt.key(key(KeyCode::Enter));
    assert_eq!(
        outcome,
        Outcome::Answer(accept(
            json!({"title": "Fix login", "points": 3, "urgent": true, "team": "web"})
                .as_object()
                .cloned()
                .unwrap()
        ))
    );
}

#[test]
fn a_submit_that_does_not_fit_stays_and_names_the_field() {
    let mut prompt = QuestionPrompt::new(question());
    prompt.key(key(KeyCode::BackTab));
    assert_eq!(prompt.key(key(KeyCode::Enter)), Outcome::Stay);
    assert!(
        prompt
            .error
            .as_deref()
            .unwrap()
            .contains("`title` is required")
    );
    assert_eq!(prompt.focus, 0, "the focus goes to the field at fault");
    type_text(&mut prompt, "x");
    prompt.key(key(KeyCode::Tab));
    prompt.key(key(KeyCode::Backspace));
    type_text(&mut prompt, "0");
    prompt.focus = 4;
    assert_eq!(prompt.key(key(KeyCode::Enter)), Outcome::Stay);
    assert!(prompt.error.as_deref().unwrap().contains("at least 1"));
    let (lines, _) = prompt.lines(80, 100);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert!(text.contains("at least 1"), "{text}");
}

#[test]
fn esc_dismisses_and_decline_says_no() {
    let mut prompt = QuestionPrompt::new(question());
    assert_eq!(
        prompt.key(key(KeyCode::Esc)),
        Outcome::Answer(QuestionAnswer::Cancel)
    );
    prompt.key(key(KeyCode::BackTab));
    prompt.key(key(KeyCode::Right));
    assert_eq!(
        prompt.key(key(KeyCode::Enter)),
        Outcome::Answer(QuestionAnswer::Decline)
    );
}

#[test]
fn a_page_shows_its_host_and_opens_only_on_yes() {
    let mut question = question();
    question.ask = Ask::Url {
        url: "https://pay.example.com/checkout".into(),
        host: "pay.example.com".into(),
    };
    let mut prompt = QuestionPrompt::new(question);
    let (lines, _) = prompt.lines(80, 100);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert!(
        text.contains("Open pay.example.com in your browser?"),
        "{text}"
    );
    assert_eq!(prompt.key(key(KeyCode::Char('x'))), Outcome::Stay);
    assert_eq!(
        prompt.key(key(KeyCode::Char('n'))),
        Outcome::Answer(QuestionAnswer::Decline)
    );
    assert_eq!(
        prompt.key(key(KeyCode::Char('y'))),
        Outcome::Answer(accept(Map::new()))
    );
}

#[test]
fn a_form_taller_than_its_room_keeps_the_focused_field_in_view() {
    let mut long = question();
    if let Ask::Form(form) = &mut long.ask {
        let extra = form.fields[2].clone();
        for i in 0..12 {
            let mut field = extra.clone();
            field.name = format!("flag{i}");
            form.fields.push(field);
        }
    }
    let mut prompt = QuestionPrompt::new(long);
    for _ in 0..10 {
        prompt.key(key(KeyCode::Tab));
    }
    let (lines, _) = prompt.lines(80, 16);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert!(lines.len() <= 16, "{text}");
    assert!(text.contains("› flag6"), "the focused field shows: {text}");
    assert!(
        text.contains("more field(s)") && text.contains("[ Submit ]"),
        "{text}"
    );
    assert!(
        text.contains("MCP server tracker"),
        "the asker stays named: {text}"
    );
}
