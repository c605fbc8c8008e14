//! `keel mcp import`: the user's MCP servers of Claude Code (`~/.claude.json`) and Codex
//! (`~/.codex/config.toml`) copied into `$KEEL_HOME/config.yaml`, after they are shown and
//! the user says yes. Nothing is added silently: a server runs in every session once it is
//! the user's.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use keel_mcp::config::{Defaults, Origin};
use keel_runtime::settings::extend::McpServerConfig;
use serde_json::Value as Json;
use yaml_serde::{Mapping, Value};

/// One server found in another tool's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Its name there.
    pub name: String,
    /// Which file it is in.
    pub from: PathBuf,
    /// What keel would add, or why it cannot.
    pub definition: Result<McpServerConfig, String>,
}

/// Arguments of `keel mcp import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Only from this tool: `claude` (~/.claude.json) or `codex` (~/.codex/config.toml).
    #[arg(long, value_parser = ["claude", "codex"])]
    from: Option<String>,
    /// Add them without asking (after showing them).
    #[arg(long)]
    yes: bool,
}

/// Runs `keel mcp import`.
pub fn run(args: &ImportArgs, home_file: &Path) -> anyhow::Result<()> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .context("HOME is not set: cannot find Claude Code's or Codex's files")?;
    let mut found = Vec::new();
    if args.from.as_deref() != Some("codex") {
        found.extend(from_claude(&home.join(".claude.json"))?);
    }
    if args.from.as_deref() != Some("claude") {
        let codex = std::env::var_os("CODEX_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".codex"));
        found.extend(from_codex(&codex.join("config.toml"))?);
    }
    let existing = super::edit::servers_in(home_file)?;
    let mut adding: BTreeMap<String, (Mapping, PathBuf)> = BTreeMap::new();
    if found.is_empty() {
        println!("No MCP servers found in ~/.claude.json or ~/.codex/config.toml.");
        return Ok(());
    }
    println!("MCP servers found:");
    for server in found {
        let where_ = server.from.display();
        let verdict = match &server.definition {
            Err(why) => format!("skipped: {why}"),
            Ok(_) if existing.contains_key(&server.name) => {
                format!(
                    "skipped: {} already has a server of that name",
                    home_file.display()
                )
            }
            Ok(_) if adding.contains_key(&server.name) => {
                "skipped: an earlier file has a server of that name".to_owned()
            }
            Ok(definition) => {
                let shown = describe(definition);
                adding.insert(
                    server.name.clone(),
                    (entry(definition)?, server.from.clone()),
                );
                shown
            }
        };
        println!("  {}  ({where_})  {verdict}", server.name);
    }
    if adding.is_empty() {
        println!("Nothing to add.");
        return Ok(());
    }
    if !args.yes && !confirm(adding.len(), home_file)? {
        println!("Nothing was added.");
        return Ok(());
    }
    // Written under the file's lock; a server someone added meanwhile is left as it is.
    let _lock = super::edit::lock(home_file)?;
    let now = super::edit::servers_in(home_file)?;
    adding.retain(|name, _| {
        let fresh = !now.contains_key(name);
        if !fresh {
            eprintln!("keel: `{name}` was added meanwhile; it is left as it is.");
        }
        fresh
    });
    for (name, (entry, _)) in &adding {
        super::edit::apply(home_file, &super::edit::Change::Add { name, entry })?;
    }
    println!(
        "Added {} to {}: they start with your next session (`keel mcp list` shows them).",
        adding.keys().cloned().collect::<Vec<_>>().join(", "),
        home_file.display()
    );
    Ok(())
}

/// Asks on the terminal; without one, says how to add them.
fn confirm(count: usize, file: &Path) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        println!("Run `keel mcp import --yes` to add them (no terminal to ask on).");
        return Ok(false);
    }
    Ok(crate::question::yes(
        &mut std::io::stderr(),
        &format!(
            "Add these {count} server(s) to {}? They will run in every session.",
            file.display()
        ),
    )?)
}

/// The server in words: its command or URL, with secrets' values left out (variables and
/// headers by name only, a URL's query cut, anything that looks like a key redacted).
fn describe(definition: &McpServerConfig) -> String {
    let mut text = match (&definition.command, &definition.url) {
        (Some(command), _) => {
            let mut words = vec![command.clone()];
            words.extend(definition.args.iter().cloned());
            words.join(" ")
        }
        (None, Some(url)) => match url.split_once('?') {
            Some((base, _)) => format!("{base}?…"),
            None => url.clone(),
        },
        (None, None) => String::new(),
    };
    text = keel_tools::redact::redact(&text, &[]).text;
    let names: Vec<&str> = definition
        .env
        .keys()
        .chain(definition.headers.keys())
        .map(String::as_str)
        .collect();
    if !names.is_empty() {
        text.push_str(&format!(" (with {})", names.join(", ")));
    }
    text
}

/// The YAML entry of `definition`, with only the fields it sets.
fn entry(definition: &McpServerConfig) -> anyhow::Result<Mapping> {
    let Value::Mapping(full) = yaml_serde::to_value(definition)? else {
        bail!("a server definition is not a mapping");
    };
    Ok(full
        .into_iter()
        .filter(|(_, value)| match value {
            Value::Null => false,
            Value::Sequence(items) => !items.is_empty(),
            Value::Mapping(map) => !map.is_empty(),
            _ => true,
        })
        .collect())
}

/// Checks `definition` as a session would, so only servers keel can run are offered.
fn checked(name: &str, definition: McpServerConfig) -> Result<McpServerConfig, String> {
    keel_mcp::config::spec_of(name, &definition, Defaults::default(), Origin::Config)
        .map(|_| definition)
        .map_err(|e| e.to_string())
}

/// The user-scope servers of Claude Code's `~/.claude.json` (`mcpServers`); a project's own
/// entries there are the project's, not the user's.
pub fn from_claude(file: &Path) -> anyhow::Result<Vec<Found>> {
    let Some(text) = crate::assembly::read_if_present(file)? else {
        return Ok(Vec::new());
    };
    let json: Json =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    let Some(servers) = json.get("mcpServers").and_then(Json::as_object) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .map(|(name, server)| Found {
            name: name.clone(),
            from: file.to_path_buf(),
            definition: claude_server(server).and_then(|d| checked(name, d)),
        })
        .collect())
}

fn claude_server(server: &Json) -> Result<McpServerConfig, String> {
    let text = |key: &str| server.get(key).and_then(Json::as_str).map(str::to_owned);
    let map = |key: &str| -> BTreeMap<String, String> {
        server
            .get(key)
            .and_then(Json::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    match text("type").as_deref() {
        // keel reaches an HTTP+SSE server at its URL (streamable HTTP first, then the
        // event stream).
        Some("stdio" | "http" | "sse") | None => {}
        Some(other) => return Err(format!("unknown type `{other}`")),
    }
    Ok(McpServerConfig {
        command: text("command"),
        args: server
            .get("args")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        env: map("env"),
        url: text("url"),
        headers: map("headers"),
        ..McpServerConfig::default()
    })
}

/// The servers of Codex's `config.toml` (`[mcp_servers.NAME]`).
pub fn from_codex(file: &Path) -> anyhow::Result<Vec<Found>> {
    let Some(text) = crate::assembly::read_if_present(file)? else {
        return Ok(Vec::new());
    };
    let value: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not TOML", file.display()))?;
    let Some(servers) = value.get("mcp_servers").and_then(toml::Value::as_table) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .map(|(name, server)| Found {
            name: name.clone(),
            from: file.to_path_buf(),
            definition: codex_server(server).and_then(|d| checked(name, d)),
        })
        .collect())
}

fn codex_server(server: &toml::Value) -> Result<McpServerConfig, String> {
    // What keel's configuration cannot say would be dropped silently: a tool limit the user
    // set, or where the server's credentials come from. Such a server is left for `keel mcp
    // add`, with the reason.
    for key in [
        "enabled_tools",
        "disabled_tools",
        "env_vars",
        "env_http_headers",
    ] {
        if server.get(key).is_some() {
            return Err(format!(
                "it uses Codex's `{key}`, which keel's configuration cannot express; add it with \
                 `keel mcp add`"
            ));
        }
    }
    let text = |key: &str| {
        server
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    };
    let seconds = |key: &str| {
        server
            .get(key)
            .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
    };
    let map = |key: &str| -> BTreeMap<String, String> {
        server
            .get(key)
            .and_then(toml::Value::as_table)
            .map(|t| {
                t.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(McpServerConfig {
        command: text("command"),
        args: server
            .get("args")
            .and_then(toml::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        env: map("env"),
        cwd: text("cwd"),
        url: text("url"),
        headers: map("http_headers"),
        bearer_token_env_var: text("bearer_token_env_var"),
        startup_timeout_sec: seconds("startup_timeout_sec"),
        tool_timeout_sec: seconds("tool_timeout_sec"),
        enabled: server.get("enabled").and_then(toml::Value::as_bool),
        oauth: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_and_codex_servers_read_as_keel_servers() {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("claude.json");
        std::fs::write(
            &claude,
            r#"{"mcpServers": {
                "fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-fs"], "env": {"TOKEN": "t"}},
                "web": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
                "old": {"type": "sse", "url": "https://old.example.com/sse"}
            }, "projects": {"/p": {"mcpServers": {"local": {"command": "x"}}}}}"#,
        )
        .unwrap();
        let found = from_claude(&claude).unwrap();
        let mut names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["fs", "old", "web"],
            "a project's own servers stay out"
        );
        let by_name = |name: &str| found.iter().find(|f| f.name == name).unwrap();
        let fs = by_name("fs").definition.as_ref().unwrap();
        assert_eq!(fs.command.as_deref(), Some("npx"));
        assert_eq!(fs.args, ["-y", "server-fs"]);
        assert_eq!(fs.env["TOKEN"], "t");
        let old = by_name("old").definition.as_ref().unwrap();
        assert_eq!(old.url.as_deref(), Some("https://old.example.com/sse"));
        let web = by_name("web").definition.as_ref().unwrap();
        assert_eq!(web.headers["Authorization"], "Bearer x");
        let codex = dir.path().join("config.toml");
        std::fs::write(
            &codex,
            "model = \"o3\"\n[mcp_servers.limited]\ncommand = \"x\"\ndisabled_tools = [\"rm\"]\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"--stdio\"]\nstartup_timeout_sec = 20\n[mcp_servers.docs.env]\nKEY = \"v\"\n[mcp_servers.remote]\nurl = \"https://r.example.com/mcp\"\nbearer_token_env_var = \"R_TOKEN\"\n[mcp_servers.broken]\nargs = []\n",
        )
        .unwrap();
        let found = from_codex(&codex).unwrap();
        let docs = found.iter().find(|f| f.name == "docs").unwrap();
        let docs = docs.definition.as_ref().unwrap();
        assert_eq!(docs.startup_timeout_sec, Some(20.0));
        assert_eq!(docs.env["KEY"], "v");
        let remote = found.iter().find(|f| f.name == "remote").unwrap();
        assert_eq!(
            remote
                .definition
                .as_ref()
                .unwrap()
                .bearer_token_env_var
                .as_deref(),
            Some("R_TOKEN")
        );
        assert!(
            found
                .iter()
                .find(|f| f.name == "broken")
                .unwrap()
                .definition
                .is_err()
        );
        let entry = entry(docs).unwrap();
        let keys: Vec<&str> = entry.keys().filter_map(Value::as_str).collect();
        assert_eq!(keys, ["command", "args", "env", "startup_timeout_sec"]);
        assert!(
            from_codex(&dir.path().join("none.toml"))
                .unwrap()
                .is_empty()
        );
    }
}
