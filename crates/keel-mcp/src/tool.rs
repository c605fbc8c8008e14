//! A server's tool as a tool keel's loop runs: named `mcp__<server>__<tool>`, judged by the
//! permission gate like any other tool, and calling the server it was leased from.

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
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

/// Why a server's tool is not offered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnusableTool {
    /// It has no name.
    #[error("a tool without a name")]
    Nameless,
    /// Its input schema is not a JSON object.
    #[error("tool `{0}` has an input schema that is not an object")]
    SchemaNotObject(String),
    /// It takes something other than an object of arguments.
    #[error("tool `{0}` does not take an object of arguments")]
    ArgumentsNotObject(String),
    /// Its input schema does not compile.
    #[error("tool `{name}` has an input schema that does not compile: {reason}")]
    SchemaInvalid {
        /// The tool.
        name: String,
        /// The validator's reason.
        reason: String,
    },
}

/// A tool of the MCP schema (`name`, `description`, `inputSchema`) as keel's definition,
/// or why it cannot be offered.
pub fn definition(server: &str, tool: &Value) -> Result<(String, ToolDefinition), UnusableTool> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(UnusableTool::Nameless)?;
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
        return Err(UnusableTool::SchemaNotObject(name.to_owned()));
    }
    if parameters.get("type").is_none() {
        parameters["type"] = json!("object");
    }
    if parameters.get("type") != Some(&json!("object")) {
        return Err(UnusableTool::ArgumentsNotObject(name.to_owned()));
    }
    if let Err(error) = jsonschema::validator_for(&parameters) {
        return Err(UnusableTool::SchemaInvalid {
            name: name.to_owned(),
            reason: error.to_string(),
        });
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

/// Where an offered tool comes from: its server's name and its MCP name.
pub type Origin = (String, String);

/// One name that different tools would be offered under: none of them is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    /// The name keel would offer.
    pub name: String,
    /// The tools behind it, in the order they came.
    pub origins: Vec<Origin>,
}

impl Clash {
    /// The event's details: the name, its servers and their tools' MCP names.
    pub fn details(&self) -> Value {
        json!({
            "name": self.name,
            "servers": self.origins.iter().map(|(server, _)| server).collect::<Vec<_>>(),
            "tools": self.origins.iter().map(|(_, tool)| tool).collect::<Vec<_>>(),
        })
    }
}

/// Which of `tools` may be mounted beside `mounted` (names already offered, with their
/// origins; updated). A name two different tools map to (`a` + `_deploy` and `a_` +
/// `deploy`) is mounted for neither, since whichever came first would silently take the
/// other's calls; one already mounted in a running turn stays, and the newcomer is left out.
/// The same server's same tool twice (an editor's server and the configuration's of one
/// name) is one tool.
pub fn mount<T>(
    tools: Vec<T>,
    key: impl Fn(&T) -> (String, Origin),
    mounted: &mut std::collections::BTreeMap<String, Origin>,
) -> (Vec<T>, Vec<Clash>) {
    let mut origins: std::collections::BTreeMap<String, Vec<Origin>> = Default::default();
    for tool in &tools {
        let (name, origin) = key(tool);
        let seen = origins.entry(name).or_default();
        if !seen.contains(&origin) {
            seen.push(origin);
        }
    }
    let mut clashes = Vec::new();
    for (name, new) in origins {
        let mut all: Vec<Origin> = mounted.get(&name).cloned().into_iter().collect();
        for origin in new {
            if !all.contains(&origin) {
                all.push(origin);
            }
        }
        if all.len() > 1 {
            clashes.push(Clash { name, origins: all });
        }
    }
    let mut kept = Vec::new();
    for tool in tools {
        let (name, origin) = key(&tool);
        if clashes.iter().any(|c| c.name == name) || mounted.contains_key(&name) {
            continue;
        }
        mounted.insert(name, origin);
        kept.push(tool);
    }
    (kept, clashes)
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

impl McpTool {
    /// Its server's name and its MCP name.
    pub fn origin(&self) -> Origin {
        (self.server.spec().name.clone(), self.tool.clone())
    }
}

#[async_trait]
impl AgentTool for McpTool {
    fn nature(&self) -> ToolNature {
        // What a server's tool does cannot be read: its annotations are the server's word,
        // and the server may be steered, so none widens what runs without asking.
        ToolNature::Opaque
    }

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
        let origin = context.turn.as_ref().map(|turn| crate::CallOrigin {
            session: turn.session_id.clone(),
            tool_call: context.tool_call_id.clone(),
        });
        let call =
            self.server
                .call_reporting(&self.tool, arguments, context.updates.clone(), origin);
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
    fn a_name_two_tools_map_to_is_mounted_for_neither() {
        let tool = |server: &str, name: &str| (server.to_owned(), name.to_owned());
        let key = |t: &Origin| (exposed_name(&t.0, &t.1), t.clone());
        let mut mounted = std::collections::BTreeMap::new();
        let (kept, clashes) = mount(
            vec![
                tool("a", "_deploy"),
                tool("a", "status"),
                tool("a", "sta_tus"),
                tool("a_", "deploy"),
                // The same server's tool twice (an editor's server and the configuration's).
                tool("a", "status"),
            ],
            key,
            &mut mounted,
        );
        assert_eq!(kept, [tool("a", "status"), tool("a", "sta_tus")]);
        assert_eq!(clashes.len(), 1);
        assert_eq!(clashes[0].name, "mcp__a___deploy");
        assert_eq!(clashes[0].details()["servers"], json!(["a", "a_"]));
        // A late server's clashing tool is left out; the one a running turn has stays.
        let (late, clashes) = mount(vec![tool("a", "sta.tus")], key, &mut mounted);
        assert!(late.is_empty());
        assert_eq!(
            clashes[0].origins,
            [tool("a", "sta_tus"), tool("a", "sta.tus")]
        );
        assert_eq!(mounted.len(), 2);
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
        assert_eq!(
            definition("s", &json!({"description": "x"})),
            Err(UnusableTool::Nameless)
        );
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
