//! The tools of a run: looked up by name, with their argument schemas compiled once per
//! process (a turn's tools are mostly the last turn's; compiling their schemas anew took
//! more than the rest of a turn's set-up).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use keel_protocol::ToolDefinition;
use serde_json::Value;

use crate::error::AgentError;
use crate::tool::ToolRef;

/// Tools that join a running turn at its next model call (a deferred tool the model found,
/// a server that started late). Append-only: a tool the turn already has is never
/// replaced. Cheap to clone; clones share the list.
#[derive(Clone, Default)]
pub struct ToolAdditions {
    inner: Arc<std::sync::Mutex<Vec<ToolRef>>>,
}

impl ToolAdditions {
    /// Adds tools for the next model call on.
    pub fn add(&self, tools: impl IntoIterator<Item = ToolRef>) {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(tools);
    }

    /// The tools added after the first `seen`, and how many there are now.
    pub(crate) fn since(&self, seen: usize) -> (usize, Vec<ToolRef>) {
        let added = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (added.len(), added.get(seen..).unwrap_or_default().to_vec())
    }
}

/// A tool with its compiled argument validator.
pub(crate) struct ToolEntry {
    pub(crate) tool: ToolRef,
    validator: Arc<jsonschema::Validator>,
}

/// Tools by name plus the definitions sent to the model.
#[derive(Clone, Default)]
pub(crate) struct ToolTable {
    by_name: Arc<HashMap<String, Arc<ToolEntry>>>,
    definitions: Arc<[ToolDefinition]>,
}

impl ToolTable {
    /// Builds the table; a duplicate name or a schema that does not compile is an error.
    pub(crate) fn new(tools: &[ToolRef]) -> Result<Self, AgentError> {
        let mut by_name = HashMap::with_capacity(tools.len());
        let mut definitions = Vec::with_capacity(tools.len());
        for tool in tools {
            let definition = tool.definition();
            let validator = compiled(&definition.parameters).map_err(|reason| {
                AgentError::InvalidToolSchema {
                    tool: definition.name.clone(),
                    reason,
                }
            })?;
            let entry = Arc::new(ToolEntry {
                tool: tool.clone(),
                validator,
            });
            if by_name.insert(definition.name.clone(), entry).is_some() {
                return Err(AgentError::DuplicateTool {
                    name: definition.name.clone(),
                });
            }
            definitions.push(definition.clone());
        }
        Ok(Self {
            by_name: Arc::new(by_name),
            definitions: definitions.into(),
        })
    }

    /// This table with `tools` added after its own; a name the table already has keeps its
    /// tool (what the model has read is never swapped), and a tool whose schema does not
    /// compile is left out with a warning.
    pub(crate) fn extended(&self, tools: &[ToolRef]) -> Self {
        let mut by_name = (*self.by_name).clone();
        let mut definitions = self.definitions.to_vec();
        for tool in tools {
            let definition = tool.definition();
            if by_name.contains_key(&definition.name) {
                continue;
            }
            let validator = match compiled(&definition.parameters) {
                Ok(validator) => validator,
                Err(error) => {
                    tracing::warn!(tool = %definition.name, %error, "an added tool's schema does not compile; left out");
                    continue;
                }
            };
            definitions.push(definition.clone());
            by_name.insert(
                definition.name.clone(),
                Arc::new(ToolEntry {
                    tool: tool.clone(),
                    validator,
                }),
            );
        }
        Self {
            by_name: Arc::new(by_name),
            definitions: definitions.into(),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.by_name.get(name)
    }

    pub(crate) fn definitions(&self) -> Arc<[ToolDefinition]> {
        self.definitions.clone()
    }

    /// Names of all tools, sorted, for "unknown tool" messages.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// Most compiled schemas kept; past it the cache starts over (tools come and go with MCP
/// servers, and a process must not keep every schema it ever saw).
const MAX_COMPILED: usize = 512;

/// Compiled schemas by their text, shared by every turn of the process.
static COMPILED: LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
    LazyLock::new(Mutex::default);

/// The compiled validator of `schema`, from the cache or compiled now; the error is the
/// compiler's.
fn compiled(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let key = schema.to_string();
    if let Some(found) = COMPILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(found.clone());
    }
    let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    let mut cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= MAX_COMPILED {
        cache.clear();
    }
    cache.insert(key, validator.clone());
    Ok(validator)
}

impl ToolEntry {
    /// Checks `arguments` against the schema; the error names every problem and echoes
    /// the arguments as received.
    pub(crate) fn validate(&self, name: &str, arguments: &Value) -> Result<(), String> {
        let problems: Vec<String> = match arguments {
            Value::Object(_) => self
                .validator
                .iter_errors(arguments)
                .map(|error| {
                    let path = error.instance_path().to_string();
                    let at = if path.is_empty() {
                        "(root)".to_owned()
                    } else {
                        path
                    };
                    format!("- {at}: {error}")
                })
                .collect(),
            Value::String(raw) => {
                let reason = serde_json::from_str::<Value>(raw).err().map_or_else(
                    || "a JSON string".to_owned(),
                    |e| format!("not valid JSON ({e})"),
                );
                vec![format!(
                    "- (root): the arguments must be a JSON object, but they are {reason}"
                )]
            }
            other => vec![format!(
                "- (root): the arguments must be a JSON object, not {}",
                json_kind(other)
            )],
        };
        if problems.is_empty() {
            return Ok(());
        }
        let received = match arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        Err(format!(
            "Invalid arguments for tool `{name}`:\n{}\nArguments received: {received}\nFix the arguments and call the tool again.",
            problems.join("\n")
        ))
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_schema_is_compiled_once_for_every_table_that_has_it() {
        let schema = json!({"type": "object", "properties": {"cached_once": {"type": "integer"}}});
        let first = compiled(&schema).unwrap();
        let again = compiled(&schema.clone()).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(again.is_valid(&json!({"cached_once": 3})));
        assert!(!again.is_valid(&json!({"cached_once": "three"})));
        // A schema that does not compile is an error every time, never a cached success.
        let broken = json!({"type": "no-such-type"});
        assert!(compiled(&broken).is_err());
        assert!(compiled(&broken).is_err());
    }
}
