//! An MCP server's question, asked through the editor: as `elicitation/create` where the
//! editor shows forms (or pages), else as `session/request_permission` where the question
//! fits options (a page to open, a form with nothing to fill or one yes/no or one choice).
//! A form that fits neither is declined, and the editor is told why.

use std::collections::BTreeMap;

use agent_client_protocol::v1::schema::{
    ContentBlock, CreateElicitationRequest, CreateElicitationResponse, ElicitationAction,
    ElicitationCapabilities, ElicitationFormMode, ElicitationId, ElicitationSchema,
    ElicitationSessionScope, ElicitationUrlMode, PermissionOption, PermissionOptionKind,
    RequestPermissionOutcome, TextContent, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
};
use keel_protocol::{Ask, FieldKind, Form, Question, QuestionAnswer};
use serde_json::{Map, Value, json};

const DECLINE: &str = "decline";
const ACCEPT: &str = "accept";
const PICK: &str = "pick:";

/// How the editor is asked.
#[derive(Debug)]
pub enum Asked {
    /// As its own elicitation.
    Elicitation(CreateElicitationRequest),
    /// As a permission question with options.
    Options(ToolCallUpdate, Vec<PermissionOption>),
}

/// How to ask `question` of an editor with `capabilities`; `None` when it cannot be asked.
pub fn asked(
    session: &str,
    question: &Question,
    capabilities: Option<&ElicitationCapabilities>,
) -> Option<Asked> {
    let mut scope = ElicitationSessionScope::new(session.to_owned());
    if let Some(call) = &question.tool_call_id {
        scope = scope.tool_call_id(call.to_string().as_str());
    }
    let message = format!(
        "MCP server `{}` asks: {}",
        question.server, question.message
    );
    let form_ok = capabilities.is_some_and(ElicitationCapabilities::supports_form);
    let url_ok = capabilities.is_some_and(ElicitationCapabilities::supports_url);
    match &question.ask {
        Ask::Form(form) if form_ok => {
            let schema = match serde_json::from_value::<ElicitationSchema>(schema_of(form)) {
                Ok(schema) => schema,
                Err(error) => {
                    tracing::warn!(%error, "a server's form does not fit ACP's form schema");
                    return None;
                }
            };
            Some(Asked::Elicitation(CreateElicitationRequest::new(
                ElicitationFormMode::new(scope, schema),
                message,
            )))
        }
        Ask::Url { url, .. } if url_ok => Some(Asked::Elicitation(CreateElicitationRequest::new(
            ElicitationUrlMode::new(scope, ElicitationId::new(question.id.clone()), url.clone()),
            message,
        ))),
        Ask::Url { url, host } => Some(Asked::Options(
            card(question, &format!("{message}\n\nOpen {host}?\n{url}")),
            vec![
                PermissionOption::new(
                    ACCEPT,
                    format!("Open {host}"),
                    PermissionOptionKind::AllowOnce,
                ),
                PermissionOption::new(DECLINE, "Decline", PermissionOptionKind::RejectOnce),
            ],
        )),
        Ask::Form(form) => {
            let options = options(form)?;
            Some(Asked::Options(card(question, &message), options))
        }
    }
}

/// The answer for the editor's elicitation response; values that do not fit the form are
/// refused by the runtime.
pub fn answer_of(response: &CreateElicitationResponse, asked_page: bool) -> QuestionAnswer {
    match &response.action {
        ElicitationAction::Accept(accept) => {
            let content = accept
                .content
                .iter()
                .flatten()
                .map(|(name, value)| {
                    let value = serde_json::to_value(value).unwrap_or(Value::Null);
                    (name.clone(), value)
                })
                .collect();
            // An editor that shows pages opened this one itself.
            QuestionAnswer::Accept {
                content,
                opened: asked_page,
            }
        }
        ElicitationAction::Decline => QuestionAnswer::Decline,
        _ => QuestionAnswer::Cancel,
    }
}

/// The answer for the option the editor picked (an option not offered is a decline).
pub fn answer_of_option(question: &Question, outcome: &RequestPermissionOutcome) -> QuestionAnswer {
    let RequestPermissionOutcome::Selected(selected) = outcome else {
        return QuestionAnswer::Cancel;
    };
    let id = selected.option_id.0.as_ref();
    let offered = match &question.ask {
        Ask::Url { .. } => vec![ACCEPT.to_owned(), DECLINE.to_owned()],
        Ask::Form(form) => options(form)
            .unwrap_or_default()
            .into_iter()
            .map(|o| o.option_id.0.to_string())
            .collect(),
    };
    if !offered.iter().any(|o| o == id) || id == DECLINE {
        return QuestionAnswer::Decline;
    }
    let mut content = Map::new();
    if let (Ask::Form(form), Some(pick)) = (&question.ask, id.strip_prefix(PICK))
        && let Some(field) = form.fields.first()
    {
        let value = match field.kind {
            FieldKind::Boolean => Value::Bool(pick == "yes"),
            _ => Value::String(pick.to_owned()),
        };
        content.insert(field.name.clone(), value);
    }
    QuestionAnswer::Accept {
        content,
        opened: false,
    }
}

/// A form as options, where it fits them: nothing to fill (accept or decline), or one
/// field that is a yes/no or one choice of a short list.
fn options(form: &Form) -> Option<Vec<PermissionOption>> {
    let decline = PermissionOption::new(DECLINE, "Decline", PermissionOptionKind::RejectOnce);
    let mut options = match form.fields.as_slice() {
        [] => vec![PermissionOption::new(
            ACCEPT,
            "Accept",
            PermissionOptionKind::AllowOnce,
        )],
        [field] => match &field.kind {
            FieldKind::Boolean => vec![
                PermissionOption::new(
                    format!("{PICK}yes"),
                    format!("{}: yes", field.label()),
                    PermissionOptionKind::AllowOnce,
                ),
                PermissionOption::new(
                    format!("{PICK}no"),
                    format!("{}: no", field.label()),
                    PermissionOptionKind::AllowOnce,
                ),
            ],
            FieldKind::Choice { options } if options.len() <= 8 => options
                .iter()
                .map(|o| {
                    PermissionOption::new(
                        format!("{PICK}{}", o.value),
                        o.label.clone(),
                        PermissionOptionKind::AllowOnce,
                    )
                })
                .collect(),
            _ => return None,
        },
        _ => return None,
    };
    options.push(decline);
    Some(options)
}

/// The card a permission question shows: the server's words, as its own.
fn card(question: &Question, text: &str) -> ToolCallUpdate {
    let id = question
        .tool_call_id
        .as_ref()
        .map_or_else(|| question.id.clone(), ToString::to_string);
    ToolCallUpdate::new(
        id,
        ToolCallUpdateFields::new()
            .title(format!("MCP server `{}` asks", question.server))
            .content(vec![ToolCallContent::from(ContentBlock::Text(
                TextContent::new(text.to_owned()),
            ))]),
    )
}

/// The form as the MCP schema an editor renders.
fn schema_of(form: &Form) -> Value {
    let mut properties = BTreeMap::new();
    let mut required = Vec::new();
    for field in &form.fields {
        let mut property = match &field.kind {
            FieldKind::Text {
                min_length,
                max_length,
                format,
            } => {
                json!({"type": "string", "minLength": min_length, "maxLength": max_length, "format": format})
            }
            FieldKind::Number {
                integer,
                minimum,
                maximum,
            } => {
                // An integer's bounds are integers on the wire.
                let bound = |b: &Option<f64>| match b {
                    Some(b) if *integer => json!(b.round() as i64),
                    Some(b) => json!(b),
                    None => Value::Null,
                };
                json!({"type": if *integer { "integer" } else { "number" },
                    "minimum": bound(minimum), "maximum": bound(maximum)})
            }
            FieldKind::Boolean => json!({"type": "boolean"}),
            FieldKind::Choice { options } => json!({"type": "string", "oneOf": options
                .iter()
                .map(|o| json!({"const": o.value, "title": o.label}))
                .collect::<Vec<_>>()}),
            FieldKind::Choices {
                options,
                min_items,
                max_items,
            } => json!({"type": "array", "minItems": min_items, "maxItems": max_items,
                "items": {"anyOf": options
                    .iter()
                    .map(|o| json!({"const": o.value, "title": o.label}))
                    .collect::<Vec<_>>()}}),
        };
        if let Value::Object(map) = &mut property {
            map.retain(|_, v| !v.is_null());
            if let Some(title) = &field.title {
                map.insert("title".into(), json!(title));
            }
            if let Some(description) = &field.description {
                map.insert("description".into(), json!(description));
            }
            if let Some(default) = &field.default {
                map.insert("default".into(), default.clone());
            }
        }
        properties.insert(field.name.clone(), property);
        if field.required {
            required.push(field.name.clone());
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agent_client_protocol::v1::schema::{
        ElicitationAcceptAction, ElicitationContentValue, ElicitationFormCapabilities,
        SelectedPermissionOutcome,
    };
    use keel_protocol::{Choice, Field};

    fn wire(value: &str) -> ElicitationContentValue {
        ElicitationContentValue::from(value.to_owned())
    }

    fn question(fields: Vec<Field>) -> Question {
        Question {
            id: "q-1".into(),
            server: "tracker".into(),
            tool_call_id: Some("c-1".into()),
            message: "Which team?".into(),
            ask: Ask::Form(Form { fields }),
        }
    }

    fn choice() -> Field {
        Field {
            name: "team".into(),
            title: Some("Team".into()),
            description: None,
            required: true,
            kind: FieldKind::Choice {
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
            default: Some(json!("web")),
        }
    }

    #[test]
    fn an_editor_with_forms_gets_the_form_and_its_answer_comes_back() {
        let caps = ElicitationCapabilities::new().form(ElicitationFormCapabilities::new());
        let Some(Asked::Elicitation(request)) =
            asked("s-1", &question(vec![choice()]), Some(&caps))
        else {
            panic!("asked as an elicitation")
        };
        let wire_form = serde_json::to_value(&request).unwrap();
        assert_eq!(wire_form["mode"], "form");
        assert_eq!(wire_form["sessionId"], "s-1");
        assert_eq!(wire_form["toolCallId"], "c-1");
        assert_eq!(wire_form["requestedSchema"]["required"], json!(["team"]));
        assert_eq!(
            wire_form["requestedSchema"]["properties"]["team"]["default"],
            "web"
        );
        let response = CreateElicitationResponse::new(ElicitationAction::Accept(
            ElicitationAcceptAction::new()
                .content(BTreeMap::from([("team".to_owned(), wire("core"))])),
        ));
        assert_eq!(
            answer_of(&response, false),
            QuestionAnswer::Accept {
                content: json!({"team": "core"}).as_object().cloned().unwrap(),
                opened: false
            }
        );
    }

    #[test]
    fn an_editor_without_forms_gets_options_where_the_form_fits_them() {
        let question = question(vec![choice()]);
        let Some(Asked::Options(_, options)) = asked("s-1", &question, None) else {
            panic!("asked with options")
        };
        let names: Vec<&str> = options.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["Core", "Web", "Decline"]);
        let pick = |id: &str| {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id.to_owned()))
        };
        assert_eq!(
            answer_of_option(&question, &pick("pick:web")),
            QuestionAnswer::Accept {
                content: json!({"team": "web"}).as_object().cloned().unwrap(),
                opened: false
            }
        );
        // An option never offered is no answer to take.
        assert_eq!(
            answer_of_option(&question, &pick("pick:admin")),
            QuestionAnswer::Decline
        );
        let text = Field {
            name: "title".into(),
            title: None,
            description: None,
            required: true,
            kind: FieldKind::Text {
                min_length: None,
                max_length: None,
                format: None,
            },
            default: None,
        };
        assert!(asked("s-1", &super::tests::question(vec![text]), None).is_none());
    }

    #[test]
    fn a_page_names_its_host_in_the_option() {
        let mut question = question(Vec::new());
        question.ask = Ask::Url {
            url: "https://pay.example.com/x".into(),
            host: "pay.example.com".into(),
        };
        let Some(Asked::Options(_, options)) = asked("s-1", &question, None) else {
            panic!("asked with options")
        };
        assert_eq!(options[0].name, "Open pay.example.com");
        let pick =
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("accept".to_owned()));
        assert_eq!(
            answer_of_option(&question, &pick),
            QuestionAnswer::Accept {
                content: Map::new(),
                opened: false
            }
        );
    }

    #[test]
    fn an_editor_that_shows_pages_opens_them_itself() {
        use agent_client_protocol::v1::schema::ElicitationUrlCapabilities;
        let mut question = question(Vec::new());
        question.ask = Ask::Url {
            url: "https://pay.example.com/x".into(),
            host: "pay.example.com".into(),
        };
        let caps = ElicitationCapabilities::new().url(ElicitationUrlCapabilities::new());
        let Some(Asked::Elicitation(request)) = asked("s-1", &question, Some(&caps)) else {
            panic!("asked as an elicitation")
        };
        let wire_page = serde_json::to_value(&request).unwrap();
        assert_eq!(wire_page["mode"], "url");
        assert_eq!(wire_page["url"], "https://pay.example.com/x");
        assert_eq!(wire_page["elicitationId"], "q-1");
        let accepted = CreateElicitationResponse::new(ElicitationAction::Accept(
            ElicitationAcceptAction::new(),
        ));
        assert_eq!(
            answer_of(&accepted, true),
            QuestionAnswer::Accept {
                content: Map::new(),
                opened: true
            }
        );
    }
}
