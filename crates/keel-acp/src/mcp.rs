//! The MCP servers an editor gives a session (`mcpServers`), as the `mcp_servers` value the
//! runtime's MCP extension takes through `Op::Attach`: a map from name to the shape of
//! `mcp_servers:` in keel's configuration.
//!
//! Only what ACP's list cannot say in a map is checked here (a name given twice, a command
//! that is not UTF-8, a transport keel does not speak); names, commands and URLs are checked
//! by the extension, so the editor's servers obey the same rules as configured ones. SSE is
//! sent as streamable HTTP, the transport that replaced it.

use std::collections::BTreeMap;

use agent_client_protocol::v1::schema::{EnvVariable, HttpHeader, McpServer};
use serde_json::{Map, Value, json};

/// Why an editor's server cannot be attached (a JSON-RPC invalid-params error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mcpServers: {0}")]
pub struct ServerError(pub String);

fn pairs<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> BTreeMap<&'a str, &'a str> {
    // A name given twice keeps its last value, as a shell's environment does.
    items.collect()
}

fn env(variables: &[EnvVariable]) -> BTreeMap<&str, &str> {
    pairs(
        variables
            .iter()
            .map(|v| (v.name.as_str(), v.value.as_str())),
    )
}

fn headers(headers: &[HttpHeader]) -> BTreeMap<&str, &str> {
    pairs(headers.iter().map(|h| (h.name.as_str(), h.value.as_str())))
}

fn http(name: &str, url: &str, list: &[HttpHeader]) -> (String, Value) {
    (
        name.to_owned(),
        json!({"url": url, "headers": headers(list)}),
    )
}

/// `servers` as the value of an `ops::Attach` whose kind is `mcp_servers`.
pub fn attach_value(servers: &[McpServer]) -> Result<Value, ServerError> {
    let mut map = Map::new();
    for server in servers {
        let (name, config) = match server {
            McpServer::Stdio(stdio) => {
                let Some(command) = stdio.command.to_str() else {
                    return Err(ServerError(format!(
                        "server `{}`: its command {} is not UTF-8",
                        stdio.name,
                        stdio.command.display()
                    )));
                };
                (
                    stdio.name.clone(),
                    json!({"command": command, "args": stdio.args, "env": env(&stdio.env)}),
                )
            }
            McpServer::Http(server) => http(&server.name, &server.url, &server.headers),
            McpServer::Sse(server) => http(&server.name, &server.url, &server.headers),
            _ => {
                return Err(ServerError(
                    "a server's transport is not one keel speaks (stdio, http and sse are)".into(),
                ));
            }
        };
        if map.contains_key(&name) {
            return Err(ServerError(format!("server `{name}` is named twice")));
        }
        map.insert(name, config);
    }
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agent_client_protocol::v1::schema::{McpServerHttp, McpServerSse, McpServerStdio};
    use pretty_assertions::assert_eq;

    #[test]
    fn every_transport_becomes_a_configured_server() {
        let servers = [
            McpServer::Stdio(
                McpServerStdio::new("files", "/usr/bin/files-mcp")
                    .args(vec!["--root".into(), "/w".into()])
                    .env(vec![
                        EnvVariable::new("TOKEN", "old"),
                        EnvVariable::new("TOKEN", "new"),
                        EnvVariable::new("MODE", "ro"),
                    ]),
            ),
            McpServer::Http(
                McpServerHttp::new("web", "https://mcp.example.com/mcp")
                    .headers(vec![HttpHeader::new("X-Key", "k")]),
            ),
            McpServer::Sse(McpServerSse::new("old", "http://127.0.0.1:9000/sse")),
        ];
        assert_eq!(
            attach_value(&servers).unwrap(),
            json!({
                "files": {
                    "command": "/usr/bin/files-mcp",
                    "args": ["--root", "/w"],
                    "env": {"MODE": "ro", "TOKEN": "new"}
                },
                "web": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}},
                "old": {"url": "http://127.0.0.1:9000/sse", "headers": {}}
            })
        );
        assert_eq!(attach_value(&[]).unwrap(), json!({}));
    }

    #[test]
    fn a_name_given_twice_is_refused() {
        let servers = [
            McpServer::Stdio(McpServerStdio::new("dup", "/bin/a")),
            McpServer::Http(McpServerHttp::new("dup", "https://example.com/mcp")),
        ];
        assert_eq!(
            attach_value(&servers).unwrap_err().to_string(),
            "mcpServers: server `dup` is named twice"
        );
    }
}
