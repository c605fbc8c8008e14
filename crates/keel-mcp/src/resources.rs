//! `list_mcp_resources` and `read_mcp_resource`: the servers' resources as two read-only
//! tools, offered while a leased server has resources.

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::ToolDefinition;
use keel_tools::args;
use serde_json::{Value, json};

use crate::manager::Server;

/// The listing tool's name.
pub const LIST: &str = "list_mcp_resources";
/// The reading tool's name.
pub const READ: &str = "read_mcp_resource";

/// Most resources listed per server.
const MAX_LISTED: usize = 200;

/// The servers with resources a session may read, as they are when a tool runs.
pub type Servers = Arc<dyn Fn() -> Vec<Arc<Server>> + Send + Sync>;

/// The arguments of `list_mcp_resources`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Only this server's resources.
    #[serde(default, deserialize_with = "args::present")]
    server: Option<String>,
}

/// The arguments of `read_mcp_resource`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The MCP server.
    server: String,
    uri: String,
}

/// The two resource tools.
pub fn tools(servers: Servers) -> Vec<keel_agent::ToolRef> {
    vec![
        Arc::new(ListResources {
            servers: servers.clone(),
            definition: ToolDefinition {
                name: LIST.to_owned(),
                description: "Lists the resources MCP servers offer (files, records, documents), with their URIs. Read one with read_mcp_resource.".to_owned(),
                parameters: args::schema::<ListArgs>(),
            },
        }),
        Arc::new(ReadResource {
            servers,
            definition: ToolDefinition {
                name: READ.to_owned(),
                description: "Reads one resource of an MCP server by its URI.".to_owned(),
                parameters: args::schema::<ReadArgs>(),
            },
        }),
    ]
}

struct ListResources {
    servers: Servers,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for ListResources {
    fn nature(&self) -> ToolNature {
        // It lists what the servers announced; reading one is the server's to judge.
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> keel_agent::ExecutionMode {
        keel_agent::ExecutionMode::Parallel
    }

    async fn execute(&self, arguments: Value, _: ToolCallContext) -> Result<ToolOutput, ToolError> {
        let ListArgs { server: only } = args::arguments(arguments)?;
        let only = only.as_deref();
        let mut text = String::new();
        for server in (self.servers)() {
            let name = &server.spec().name;
            if only.is_some_and(|o| o != name) {
                continue;
            }
            match server.resources().await {
                Ok(list) => {
                    text.push_str(&format!("# {name}: {} resource(s)\n", list.len()));
                    for item in list.iter().take(MAX_LISTED) {
                        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                        text.push_str(&format!("- {} ({})", field("uri"), field("name")));
                        if !field("mimeType").is_empty() {
                            text.push_str(&format!(" [{}]", field("mimeType")));
                        }
                        if !field("description").is_empty() {
                            text.push_str(&format!(": {}", field("description")));
                        }
                        text.push('\n');
                    }
                    if list.len() > MAX_LISTED {
                        text.push_str(&format!("… and {} more\n", list.len() - MAX_LISTED));
                    }
                }
                Err(error) => text.push_str(&format!("# {name}: {error}\n")),
            }
        }
        if text.is_empty() {
            return Err(ToolError::new(format!(
                "no MCP server named `{}` offers resources",
                only.unwrap_or_default()
            )));
        }
        Ok(ToolOutput::text(text))
    }
}

struct ReadResource {
    servers: Servers,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for ReadResource {
    fn nature(&self) -> ToolNature {
        // It sends a URI of the model's choosing to a server: judged like the server's tools.
        ToolNature::Opaque
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> keel_agent::ExecutionMode {
        keel_agent::ExecutionMode::Parallel
    }

    async fn execute(&self, arguments: Value, _: ToolCallContext) -> Result<ToolOutput, ToolError> {
        let ReadArgs { server: name, uri } = args::arguments(arguments)?;
        let (name, uri) = (name.as_str(), uri.as_str());
        let server = (self.servers)()
            .into_iter()
            .find(|s| s.spec().name == name)
            .ok_or_else(|| {
                ToolError::new(format!("no MCP server named `{name}` offers resources"))
            })?;
        let result = server
            .read(uri)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let contents: Vec<Value> = result
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if contents.is_empty() {
            return Ok(ToolOutput::text(format!("{uri} is empty")));
        }
        Ok(ToolOutput {
            content: contents.iter().map(crate::content::resource).collect(),
            details: Some(json!({"mcp_server": name, "uri": uri})),
            ..ToolOutput::default()
        })
    }
}
