//! A server's `elicitation/create`: a request for input meant for the user, never the
//! model. Where no one can be asked, `mcp.elicitation` decides: `decline` (the default),
//! or `accept-defaults`, which answers a form with its defaults (SEP-1034) and logs each
//! one. Defaults fill in data, never consent: a form that would have keel confirm,
//! approve or agree to something by default is declined.

use keel_protocol::{Choice, Field, FieldKind, Form};
use keel_runtime::settings::extend::ElicitationPolicy;
use serde_json::{Map, Value};

/// Words that make a yes/no field a question of consent.
const CONSENT: [&str; 9] = [
    "confirm",
    "approve",
    "allow",
    "authorize",
    "authorise",
    "consent",
    "agree",
    "accept",
    "proceed",
];

/// What keel answers a form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Accept with this content.
    Accept(Map<String, Value>),
    /// Decline, for this reason (logged).
    Decline(String),
}

/// The answer to a form of `schema` under `policy`.
pub(crate) fn answer(policy: ElicitationPolicy, schema: &Value) -> Answer {
    if policy != ElicitationPolicy::AcceptDefaults {
        return Answer::Decline(
            "no one can answer here (mcp.elicitation is not accept-defaults)".into(),
        );
    }
    let form = match form_of(schema) {
        Ok(form) => form,
        Err(why) => return Answer::Decline(why),
    };
    let mut content = Map::new();
    for field in form.fields {
        let name = &field.name;
        if field.kind == FieldKind::Boolean
            && field.default == Some(Value::Bool(true))
            && consent(&field)
        {
            return Answer::Decline(format!(
                "the form would have keel say yes to `{name}` by default; a default never gives \
                 consent"
            ));
        }
        match field.default {
            Some(value) => {
                content.insert(field.name, value);
            }
            // `form_of` keeps only a default that fits its field.
            None if schema["properties"][name].get("default").is_some() => {
                return Answer::Decline(format!(
                    "the default of `{name}` does not fit its own schema"
                ));
            }
            None if field.required => {
                return Answer::Decline(format!("`{name}` is required and has no default"));
            }
            None => {}
        }
    }
    Answer::Accept(content)
}

/// A server's requested schema as a form a front end can show; refused (with the reason)
/// when it holds what the MCP specification does not allow in a form, or too much of it.
pub(crate) fn form_of(schema: &Value) -> Result<Form, String> {
    let empty = Map::new();
    let properties = match &schema["properties"] {
        Value::Object(properties) => properties,
        Value::Null => &empty,
        _ => return Err("its `properties` is not an object".into()),
    };
    if properties.len() > keel_protocol::FORM_FIELDS_MAX {
        return Err(format!(
            "it has {} fields; keel shows at most {}",
            properties.len(),
            keel_protocol::FORM_FIELDS_MAX
        ));
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|all| all.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = Vec::with_capacity(properties.len());
    for (name, property) in properties {
        let kind = kind_of(property).map_err(|why| format!("field `{name}`: {why}"))?;
        let default = property
            .get("default")
            .filter(|value| kind.check(value).is_ok())
            .cloned();
        let text = |key: &str| {
            property[key]
                .as_str()
                .map(|t| t.chars().take(500).collect::<String>())
        };
        fields.push(Field {
            name: name.clone(),
            title: text("title"),
            description: text("description"),
            required: required.contains(&name.as_str()),
            kind,
            default,
        });
    }
    Ok(Form { fields })
}

/// Most choices a list may offer.
const CHOICES_MAX: usize = 200;

/// A property's kind, from the primitive types a form may hold.
fn kind_of(property: &Value) -> Result<FieldKind, String> {
    let number = |key: &str| property[key].as_f64();
    let count = |key: &str| property[key].as_u64();
    match property["type"].as_str() {
        Some("string") => {
            if let Some(options) = choices(property)? {
                return Ok(FieldKind::Choice { options });
            }
            let length = |key: &str| count(key).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
            Ok(FieldKind::Text {
                min_length: length("minLength"),
                max_length: length("maxLength"),
                format: property["format"].as_str().map(str::to_owned),
            })
        }
        Some(kind @ ("number" | "integer")) => Ok(FieldKind::Number {
            integer: kind == "integer",
            minimum: number("minimum"),
            maximum: number("maximum"),
        }),
        Some("boolean") => Ok(FieldKind::Boolean),
        Some("array") => match choices(&property["items"])? {
            Some(options) => Ok(FieldKind::Choices {
                options,
                min_items: count("minItems"),
                max_items: count("maxItems"),
            }),
            None => Err("a list must be of listed choices".into()),
        },
        Some(other) => Err(format!("type `{other}` is not one a form may hold")),
        None => Err("it has no type".into()),
    }
}

/// The choices of an `enum` (with the legacy `enumNames`), a `oneOf` or an `anyOf` of
/// `const`s; `None` when the property lists none.
fn choices(property: &Value) -> Result<Option<Vec<Choice>>, String> {
    let listed = if let Some(values) = property["enum"].as_array() {
        let names = property["enumNames"].as_array();
        values
            .iter()
            .enumerate()
            .map(|(i, value)| {
                let value = value.as_str().ok_or("a choice is not text")?;
                let label = names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .unwrap_or(value);
                Ok(Choice {
                    value: value.to_owned(),
                    label: label.to_owned(),
                })
            })
            .collect::<Result<Vec<_>, &str>>()?
    } else if let Some(options) = property["oneOf"]
        .as_array()
        .or_else(|| property["anyOf"].as_array())
    {
        options
            .iter()
            .map(|option| {
                let value = option["const"].as_str().ok_or("a choice is not text")?;
                Ok(Choice {
                    value: value.to_owned(),
                    label: option["title"].as_str().unwrap_or(value).to_owned(),
                })
            })
            .collect::<Result<Vec<_>, &str>>()?
    } else {
        return Ok(None);
    };
    if listed.is_empty() || listed.len() > CHOICES_MAX {
        return Err(format!("a list must offer 1 to {CHOICES_MAX} choices"));
    }
    Ok(Some(listed))
}

/// Whether a yes/no field asks for consent.
fn consent(field: &Field) -> bool {
    let text = format!(
        "{} {} {}",
        field.name,
        field.title.as_deref().unwrap_or_default(),
        field.description.as_deref().unwrap_or_default()
    )
    .to_ascii_lowercase();
    CONSENT.iter().any(|word| text.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "note": {"type": "string"}
        }, "required": []})
    }

    #[test]
    fn defaults_fill_a_form_only_when_asked_to() {
        let Answer::Accept(content) = answer(ElicitationPolicy::AcceptDefaults, &form()) else {
            panic!("accepted")
        };
        assert_eq!(
            Value::Object(content),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
        );
        assert!(matches!(
            answer(ElicitationPolicy::Decline, &form()),
            Answer::Decline(_)
        ));
        assert!(matches!(
            answer(ElicitationPolicy::Ask, &form()),
            Answer::Decline(_)
        ));
    }

    #[test]
    fn a_requested_schema_becomes_a_form_with_its_bounds_and_only_fitting_defaults() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 1, "default": "Ada"},
            "age": {"type": "integer", "minimum": 0, "default": "old"},
            "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}, "maxItems": 1},
            "ok": {"type": "boolean"}
        }, "required": ["name"]});
        let form = form_of(&schema).unwrap();
        let field = |name: &str| form.fields.iter().find(|f| f.name == name).unwrap().clone();
        assert!(field("name").required);
        assert_eq!(field("name").default, Some(json!("Ada")));
        assert_eq!(
            field("age").default,
            None,
            "a default of the wrong type is dropped"
        );
        assert_eq!(
            field("color").kind,
            FieldKind::Choice {
                options: vec![
                    Choice {
                        value: "r".into(),
                        label: "Red".into()
                    },
                    Choice {
                        value: "g".into(),
                        label: "Green".into()
                    }
                ]
            }
        );
        assert!(matches!(field("size").kind, FieldKind::Choice { .. }));
        assert!(matches!(
            field("tags").kind,
            FieldKind::Choices {
                max_items: Some(1),
                ..
            }
        ));
        assert_eq!(field("ok").kind, FieldKind::Boolean);
        for bad in [
            json!({"properties": {"x": {"type": "object"}}}),
            json!({"properties": {"x": {"type": "array", "items": {"type": "string"}}}}),
            json!({"properties": {"x": {}}}),
            json!({"properties": "x"}),
        ] {
            assert!(form_of(&bad).is_err(), "{bad}");
        }
        let many: Map<String, Value> = (0..40)
            .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
            .collect();
        assert!(form_of(&json!({"properties": many})).is_err());
    }

    #[test]
    fn a_default_never_consents_nor_invents_a_required_value() {
        for field in [
            json!({"confirm_delete": {"type": "boolean", "default": true}}),
            json!({"x": {"type": "boolean", "title": "Approve the transfer", "default": true}}),
        ] {
            let schema = json!({"type": "object", "properties": field});
            let Answer::Decline(why) = answer(ElicitationPolicy::AcceptDefaults, &schema) else {
                panic!("declined: {schema}")
            };
            assert!(why.contains("consent"), "{why}");
        }
        let schema = json!({"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]});
        assert!(matches!(
            answer(ElicitationPolicy::AcceptDefaults, &schema),
            Answer::Decline(_)
        ));
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "enum": ["a"], "default": "b"}}});
        assert!(matches!(
            answer(ElicitationPolicy::AcceptDefaults, &schema),
            Answer::Decline(_)
        ));
    }
}
