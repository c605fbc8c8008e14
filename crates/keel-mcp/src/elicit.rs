//! A server's `elicitation/create`: a request for input meant for the user, never the
//! model. Where no one can be asked, `mcp.elicitation` decides: `decline` (the default),
//! or `accept-defaults`, which answers a form with its defaults (SEP-1034) and logs each
//! one. Defaults fill in data, never consent: a form that would have keel confirm,
//! approve or agree to something by default is declined.

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
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|all| all.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, field) in &properties {
        if field["type"] == "boolean"
            && field["default"] == Value::Bool(true)
            && consent(name, field)
        {
            return Answer::Decline(format!(
                "the form would have keel say yes to `{name}` by default; a default never gives \
                 consent"
            ));
        }
        match field.get("default") {
            Some(value) if fits(field, value) => {
                content.insert(name.clone(), value.clone());
            }
            Some(_) => {
                return Answer::Decline(format!(
                    "the default of `{name}` does not fit its own schema"
                ));
            }
            None if required.contains(&name.as_str()) => {
                return Answer::Decline(format!("`{name}` is required and has no default"));
            }
            None => {}
        }
    }
    Answer::Accept(content)
}

/// Whether the yes/no field `name` asks for consent.
fn consent(name: &str, field: &Value) -> bool {
    let text = format!(
        "{name} {} {}",
        field["title"].as_str().unwrap_or_default(),
        field["description"].as_str().unwrap_or_default()
    )
    .to_ascii_lowercase();
    CONSENT.iter().any(|word| text.contains(word))
}

/// Whether `value` is of the field's type and among its choices.
fn fits(field: &Value, value: &Value) -> bool {
    let typed = match field["type"].as_str() {
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        _ => true,
    };
    let listed = match field["enum"].as_array() {
        Some(choices) => choices.contains(value),
        None => true,
    };
    typed && listed
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
