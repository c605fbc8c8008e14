//! A server's tool as a tool keel's loop runs: named `mcp__<server>__<tool>`, judged by the
//! permission gate like any other tool, and calling the server it was leased from.

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolOutput};
use keel_protocol::ToolDefinition;
use serde_json::{Value, json};

use crate::manager::Server;

/// The longest tool name keel offers (what the strictest provider takes).
const MAX_NAME: usize = 64;
/// The longest description sent to a model.
const MAX_DESCRIPTION: usize = 4_000;

/// The name keel offers a server's tool under: `mcp__<server>__<tool>`, with characters
/// providers refuse replaced by `_`, and a long name shortened with a hash of the whole
/// so two long names stay apart.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let name = format!("mcp__{}__{}", clean(server), clean(tool));
    if name.len() <= MAX_NAME {
        return name;
    }
    let hash = fnv(&format!("{server}\u{0}{tool}"));
    format!("{}_{hash:08x}", &name[..MAX_NAME - 9])
}

fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A tool of the MCP schema (`name`, `description`, `inputSchema`) as keel's definition,
/// or why it cannot be offered.
pub fn definition(server: &str, tool: &Value) -> Result<(String, ToolDefinition), String> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("a tool without a name")?;
    let mut description = tool
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| tool.get("title").and_then(Value::as_str))
        .unwrap_or("")
        .to_owned();
    if description.len() > MAX_DESCRIPTION {
        let mut cut = MAX_DESCRIPTION;
        while !description.is_char_boundary(cut) {
            cut -= 1;
        }
        description.truncate(cut);
        description.push('…');
    }
    let mut parameters = tool
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object"}));
    if !parameters.is_object() {
        return Err(format!(
            "tool `{name}` has an input schema that is not an object"
        ));
    }
    if parameters.get("type").is_none() {
        parameters["type"] = json!("object");
    }
    if parameters.get("type") != Some(&json!("object")) {
        return Err(format!(
            "tool `{name}` does not take an object of arguments"
        ));
    }
    if let Err(error) = jsonschema::validator_for(&parameters) {
        return Err(format!(
            "tool `{name}` has an input schema that does not compile: {error}"
        ));
    }
    Ok((
        name.to_owned(),
        ToolDefinition {
            name: exposed_name(server, name),
            description: format!("[MCP server {server}] {description}"),
            parameters,
        },
    ))
}

/// One server tool, as leased by a turn.
pub struct McpTool {
    server: Arc<Server>,
    tool: String,
    definition: ToolDefinition,
    read_only: bool,
}

impl McpTool {
    /// `tool` (its MCP name) of `server`, offered as `definition`.
    pub fn new(
        server: Arc<Server>,
        tool: String,
        definition: ToolDefinition,
        read_only: bool,
    ) -> Self {
        Self {
            server,
            tool,
            definition,
            read_only,
        }
    }
}

#[async_trait]
impl AgentTool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> keel_agent::ExecutionMode {
        // The server says whether the tool only reads; anything else runs alone.
        if self.read_only {
            keel_agent::ExecutionMode::Parallel
        } else {
            keel_agent::ExecutionMode::Sequential
        }
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let call = self.server.call(&self.tool, arguments);
        let result = tokio::select! {
            () = context.cancel.cancelled() => {
                return Err(ToolError::new("the call was aborted"));
            }
            result = call => result,
        };
        match result {
            Ok(value) => Ok(crate::content::output(
                &self.server.spec().name,
                &self.tool,
                &value,
            )),
            Err(error) => Err(ToolError::new(error.to_string())),
        }
    }
}

/// Whether a tool's annotations say it only reads.
pub fn read_only(tool: &Value) -> bool {
    tool.pointer("/annotations/readOnlyHint")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn names_are_what_providers_take() {
        assert_eq!(exposed_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(exposed_name("a.b", "x y/z"), "mcp__a_b__x_y_z");
        let long = exposed_name("server", &"t".repeat(100));
        let other = exposed_name("server", &format!("{}u", "t".repeat(99)));
        assert_eq!(long.len(), 64);
        assert_ne!(long, other);
    }

    #[test]
    fn definitions_are_checked() {
        let (name, def) = definition(
            "s",
            &json!({"name": "echo", "description": "Echoes", "inputSchema": {"properties": {"m": {"type": "string"}}}}),
        )
        .unwrap();
        assert_eq!(name, "echo");
        assert_eq!(def.name, "mcp__s__echo");
        assert_eq!(def.parameters["type"], "object");
        assert!(def.description.contains("Echoes"));
        assert!(definition("s", &json!({"description": "x"})).is_err());
        assert!(
            definition(
                "s",
                &json!({"name": "a", "inputSchema": {"type": "string"}})
            )
            .is_err()
        );
        assert!(
            definition(
                "s",
                &json!({"name": "a", "inputSchema": {"type": "object", "minProperties": "x"}})
            )
            .is_err()
        );
        let long = definition("s", &json!({"name": "a", "description": "é".repeat(5000)}))
            .unwrap()
            .1;
        assert!(long.description.len() < 4_100);
    }
}
