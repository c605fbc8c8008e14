//! Structured output: a turn whose final answer must be JSON valid against a schema the
//! caller gave. The schema goes into the turn's system prompt; the answer is checked once
//! the turn completed, and a mismatch fails the turn with `structured_output_invalid`.

use keel_protocol::Failure;

use crate::error::RuntimeError;

/// Failure code of a final answer that is not JSON valid against the output schema.
pub const STRUCTURED_OUTPUT_INVALID: keel_protocol::FailureCode =
    keel_protocol::FailureCode::StructuredOutputInvalid;

/// A compiled output schema and its text.
pub struct OutputSchema {
    validator: jsonschema::Validator,
    text: String,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("text", &self.text)
            .finish_non_exhaustive()
    }
}

impl OutputSchema {
    /// Compiles `text` (a JSON Schema document); `name` says where it came from in errors.
    pub fn compile(text: &str, name: &str) -> Result<Self, RuntimeError> {
        let schema: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| RuntimeError::Usage(format!("{name} is not JSON: {e}")))?;
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| RuntimeError::Usage(format!("{name} is not a valid JSON Schema: {e}")))?;
        Ok(Self {
            validator,
            text: text.trim().to_owned(),
        })
    }

    /// What the system prompt gains so the model knows the shape to answer in.
    pub fn instruction(&self) -> String {
        format!(
            "\n\nYour final answer must be a single JSON value, with no other text, valid \
against this JSON Schema:\n{}\n",
            self.text
        )
    }

    /// The parsed answer, or why it does not match.
    pub fn check(&self, text: &str) -> Result<serde_json::Value, Failure> {
        let body = strip_fence(text.trim());
        let value: serde_json::Value = serde_json::from_str(body).map_err(|e| {
            Failure::new(
                STRUCTURED_OUTPUT_INVALID,
                format!("the final answer is not JSON: {e}"),
            )
        })?;
        let problems: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(value)
        } else {
            Err(Failure::new(
                STRUCTURED_OUTPUT_INVALID,
                format!(
                    "the final answer does not match the output schema: {}",
                    problems.join("; ")
                ),
            ))
        }
    }
}

/// Models often wrap JSON in a Markdown fence even when told not to; accept one.
fn strip_fence(text: &str) -> &str {
    let Some(inner) = text.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = inner.strip_suffix("```") else {
        return text;
    };
    // Drop the info string (`json`) on the opening line.
    match inner.split_once('\n') {
        Some((_, body)) => body.trim(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn structured_output_accepts_fenced_json_and_names_what_is_wrong() {
        let schema = OutputSchema::compile(
            r#"{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}"#,
            "the schema",
        )
        .unwrap();
        assert_eq!(
            schema.check("```json\n{\"n\": 3}\n```"),
            Ok(serde_json::json!({"n": 3}))
        );
        let wrong = schema.check(r#"{"n": "three"}"#).unwrap_err();
        assert_eq!(wrong.code, STRUCTURED_OUTPUT_INVALID);
        assert!(wrong.message.contains("/n"), "{}", wrong.message);
        let not_json = schema.check("three").unwrap_err();
        assert!(
            not_json.message.contains("not JSON"),
            "{}",
            not_json.message
        );
    }

    #[test]
    fn a_schema_that_is_not_a_schema_is_refused_by_name() {
        let error = OutputSchema::compile("{\"type\": 5}", "--output-schema s.json").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("--output-schema s.json is not a valid JSON Schema"),
            "{error}"
        );
    }
}
