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
/// Longest text one mentioned resource adds to a prompt, in bytes.
const MENTION_TEXT_MAX: usize = 64 * 1024;

/// How long listing one server's resources for completion may take.
const LIST_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The resources of `servers` as `@server:uri` mentions, for completion: every server at
/// once, each bounded in time and count (a slow one is left out).
pub(crate) async fn mentions(servers: Vec<Arc<Server>>) -> Vec<keel_protocol::MentionInfo> {
    let lists = servers.into_iter().map(|server| async move {
        let listed = tokio::time::timeout(LIST_LIMIT, server.resources()).await;
        let Ok(Ok(list)) = listed else {
            return Vec::new();
        };
        let name = server.spec().name.clone();
        list.iter()
            .take(MAX_LISTED)
            .filter_map(|item| {
                let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                let uri = field("uri");
                // A URI with spaces could not be typed back as one mention.
                if uri.is_empty() || uri.contains(char::is_whitespace) {
                    return None;
                }
                let mut detail = field("name").to_owned();
                for extra in [field("mimeType"), field("description")] {
                    if !extra.is_empty() {
                        detail.push_str(" · ");
                        detail.push_str(extra);
                    }
                }
                Some(keel_protocol::MentionInfo {
                    text: format!("{name}:{uri}"),
                    detail: detail.chars().take(200).collect(),
                })
            })
            .collect::<Vec<_>>()
    });
    futures::future::join_all(lists)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The text of mention `server:uri` among `servers`: `None` when no server of that name
/// offers resources; what it read (text, or a line saying what binary content was left
/// out), bounded.
pub(crate) async fn read_mention(
    servers: Vec<Arc<Server>>,
    mention: &str,
) -> Option<Result<String, String>> {
    let (name, uri) = mention.split_once(':')?;
    let server = servers.into_iter().find(|s| s.spec().name == name)?;
    let result = match server.read(uri).await {
        Ok(result) => result,
        Err(error) => return Some(Err(error.to_string())),
    };
    let mut text = String::new();
    for item in result
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(part) = crate::content::resource(item).as_text() {
            text.push_str(part);
            text.push('\n');
        }
    }
    if text.len() > MENTION_TEXT_MAX {
        let mut end = MENTION_TEXT_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[… cut at 64 KiB; read_mcp_resource reads it whole]");
    }
    Some(Ok(text))
}
