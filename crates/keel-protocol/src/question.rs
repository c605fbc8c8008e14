//! Questions for the user that come from outside the model: an MCP server's request for
//! input (a form to fill, or a page to open). The model never answers one; a front end
//! asks the user and answers with [`crate::ops::AnswerQuestion`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ToolCallId;

/// Most fields a form may have; a server asking for more is declined.
pub const FORM_FIELDS_MAX: usize = 32;

/// Longest text a field's answer may hold, in bytes, whatever the form allows.
pub const FORM_TEXT_MAX: usize = 16 * 1024;

/// A question for the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Answer with this id.
    pub id: String,
    /// Who asks: the MCP server's name.
    pub server: String,
    /// The tool call it arrived during, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<ToolCallId>,
    /// What the server says it wants, as it wrote it (untrusted text).
    pub message: String,
    /// What is asked.
    pub ask: Ask,
}

/// What a question asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ask {
    /// Fill in a form.
    Form(Form),
    /// Agree to open a page in the browser (a sign-in, a payment): nothing typed passes
    /// through keel.
    Url {
        /// The page.
        url: String,
        /// Its host, to show beside the question.
        host: String,
    },
}

/// A form: named fields of simple types.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Form {
    /// The fields, in the server's order.
    pub fields: Vec<Field>,
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    /// The key its value is sent under.
    pub name: String,
    /// Its label, when the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A longer explanation, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// It must be answered.
    #[serde(default)]
    pub required: bool,
    /// Its type and bounds.
    pub kind: FieldKind,
    /// The value offered first, when the server gave one that fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

impl Field {
    /// Its label: the title, else the name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

/// A field's type and bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FieldKind {
    /// Free text.
    Text {
        /// Fewest characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_length: Option<u32>,
        /// Most characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_length: Option<u32>,
        /// `email`, `uri`, `date` or `date-time`, when the server named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
    },
    /// A number.
    Number {
        /// Whole numbers only.
        integer: bool,
        /// Least value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<f64>,
        /// Greatest value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<f64>,
    },
    /// Yes or no.
    Boolean,
    /// One of a list.
    Choice {
        /// The choices.
        options: Vec<Choice>,
    },
    /// Some of a list.
    Choices {
        /// The choices.
        options: Vec<Choice>,
        /// Fewest to pick.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_items: Option<u64>,
        /// Most to pick.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_items: Option<u64>,
    },
}

/// One choice of a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// What is sent.
    pub value: String,
    /// What is shown.
    pub label: String,
}

/// The user's answer to a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum QuestionAnswer {
    /// Send this (a form's values; empty for a page the user agreed to open).
    Accept {
        /// The values, by field name.
        #[serde(default)]
        content: Map<String, Value>,
        /// A page the front end opened itself (an editor that shows pages): keel does not
        /// open it again.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        opened: bool,
    },
    /// Say no.
    Decline,
    /// Dismiss without an answer.
    Cancel,
}

impl QuestionAnswer {
    /// The word the answer is shown and reported with.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Accept { .. } => "accepted",
            Self::Decline => "declined",
            Self::Cancel => "cancelled",
        }
    }
}

impl Form {
    /// Checks `content` against the form: every value of a known field and the right type
    /// within its bounds, every required field present. The error names the field.
    pub fn check(&self, content: &Map<String, Value>) -> Result<(), String> {
        for name in content.keys() {
            if !self.fields.iter().any(|f| &f.name == name) {
                return Err(format!("the form has no field `{name}`"));
            }
        }
        for field in &self.fields {
            match content.get(&field.name) {
                Some(value) => field
                    .kind
                    .check(value)
                    .map_err(|why| format!("`{}`: {why}", field.label()))?,
                None if field.required => {
                    return Err(format!("`{}` is required", field.label()));
                }
                None => {}
            }
        }
        Ok(())
    }
}

impl FieldKind {
    /// Whether `value` is of this kind and within its bounds; else why not.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match self {
            Self::Text {
                min_length,
                max_length,
                ..
            } => {
                let Some(text) = value.as_str() else {
                    return Err("expected text".into());
                };
                if text.len() > FORM_TEXT_MAX {
                    return Err(format!("longer than {FORM_TEXT_MAX} bytes"));
                }
                let chars = text.chars().count();
                if let Some(min) = min_length.filter(|min| chars < *min as usize) {
                    return Err(format!("at least {min} characters"));
                }
                if let Some(max) = max_length.filter(|max| chars > *max as usize) {
                    return Err(format!("at most {max} characters"));
                }
                Ok(())
            }
            Self::Number {
                integer,
                minimum,
                maximum,
            } => {
                let Some(number) = value.as_f64() else {
                    return Err("expected a number".into());
                };
                if *integer && !(value.is_i64() || value.is_u64()) {
                    return Err("expected a whole number".into());
                }
                if let Some(min) = minimum.filter(|min| number < *min) {
                    return Err(format!("at least {min}"));
                }
                if let Some(max) = maximum.filter(|max| number > *max) {
                    return Err(format!("at most {max}"));
                }
                Ok(())
            }
            Self::Boolean => value
                .is_boolean()
                .then_some(())
                .ok_or_else(|| "expected yes or no".into()),
            Self::Choice { options } => {
                let listed = value
                    .as_str()
                    .is_some_and(|v| options.iter().any(|o| o.value == v));
                listed
                    .then_some(())
                    .ok_or_else(|| "not one of the choices".into())
            }
            Self::Choices {
                options,
                min_items,
                max_items,
            } => {
                let Some(picked) = value.as_array() else {
                    return Err("expected a list of choices".into());
                };
                let listed = picked.iter().all(|v| {
                    v.as_str()
                        .is_some_and(|v| options.iter().any(|o| o.value == v))
                });
                if !listed {
                    return Err("not one of the choices".into());
                }
                let count = picked.len() as u64;
                if let Some(min) = min_items.filter(|min| count < *min) {
                    return Err(format!("pick at least {min}"));
                }
                if let Some(max) = max_items.filter(|max| count > *max) {
                    return Err(format!("pick at most {max}"));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Form {
        Form {
            fields: vec![
                Field {
                    name: "name".into(),
                    title: Some("Your name".into()),
                    description: None,
                    required: true,
                    kind: FieldKind::Text {
                        min_length: Some(2),
                        max_length: Some(5),
                        format: None,
                    },
                    default: None,
                },
                Field {
                    name: "age".into(),
                    title: None,
                    description: None,
                    required: false,
                    kind: FieldKind::Number {
                        integer: true,
                        minimum: Some(0.0),
                        maximum: None,
                    },
                    default: None,
                },
                Field {
                    name: "tags".into(),
                    title: None,
                    description: None,
                    required: false,
                    kind: FieldKind::Choices {
                        options: vec![Choice {
                            value: "a".into(),
                            label: "A".into(),
                        }],
                        min_items: None,
                        max_items: Some(1),
                    },
                    default: None,
                },
            ],
        }
    }

    fn content(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn an_answer_is_checked_against_its_form_and_the_error_names_the_field() {
        assert_eq!(form().check(&content(json!({"name": "Ada"}))), Ok(()));
        for (bad, says) in [
            (json!({}), "`Your name` is required"),
            (json!({"name": "A"}), "`Your name`: at least 2"),
            (
                json!({"name": "Ada", "age": 1.5}),
                "`age`: expected a whole",
            ),
            (json!({"name": "Ada", "age": -1}), "`age`: at least 0"),
            (json!({"name": "Ada", "tags": ["b"]}), "`tags`: not one"),
            (json!({"name": "Ada", "tags": ["a", "a"]}), "pick at most 1"),
            (json!({"name": "Ada", "admin": true}), "no field `admin`"),
        ] {
            let why = form().check(&content(bad.clone())).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
    }

    #[test]
    fn questions_and_answers_keep_their_shape_on_the_wire() {
        let question = Question {
            id: "q-1".into(),
            server: "github".into(),
            tool_call_id: None,
            message: "Sign in".into(),
            ask: Ask::Url {
                url: "https://github.com/login".into(),
                host: "github.com".into(),
            },
        };
        let wire = serde_json::to_value(&question).unwrap();
        assert_eq!(wire["ask"]["kind"], "url");
        assert_eq!(serde_json::from_value::<Question>(wire).unwrap(), question);
        let answer: QuestionAnswer =
            serde_json::from_value(json!({"action": "accept", "content": {"x": 1}})).unwrap();
        assert_eq!(answer.word(), "accepted");
        assert_eq!(
            serde_json::from_value::<QuestionAnswer>(json!({"action": "decline"})).unwrap(),
            QuestionAnswer::Decline
        );
    }
}
