//! Which MCP servers to run: `mcp_servers:` in keel's configuration, a project's
//! `.mcp.json` in Claude Code's `mcpServers` shape (only once the user trusts it), and the
//! servers an editor hands over for one session.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_runtime::settings::Config;
use keel_runtime::settings::extend::McpServerConfig;
use serde::Deserialize;

/// Seconds a server may take to start, unless configured.
pub const DEFAULT_STARTUP: Duration = Duration::from_secs(30);
/// Seconds a tool call may take, unless configured.
pub const DEFAULT_CALL: Duration = Duration::from_secs(120);
/// The project file Claude Code reads its servers from.
pub const PROJECT_FILE: &str = ".mcp.json";

/// How keel reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set on top of the cleaned environment.
        env: BTreeMap<String, String>,
        /// Its working folder; `None`: keel's.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
        /// The variable holding a bearer token.
        bearer_env: Option<String>,
    },
}

/// Where a server's definition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The user's configuration.
    Config,
    /// A project's `.mcp.json`.
    Project(PathBuf),
    /// An editor, for one session (its id).
    Client(String),
}

impl Origin {
    /// A short word for people.
    pub fn label(&self) -> String {
        match self {
            Self::Config => "config".to_owned(),
            Self::Project(path) => format!("project ({})", path.display()),
            Self::Client(_) => "the editor".to_owned(),
        }
    }
}

/// One server to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    /// Its name, unique among the servers of a runtime.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// How long starting may take.
    pub startup_timeout: Duration,
    /// How long one call may take.
    pub call_timeout: Duration,
    /// Where it was defined.
    pub origin: Origin,
}

impl ServerSpec {
    /// Its key among a runtime's servers: the name, and for an editor's server also the
    /// session it belongs to (two sessions may attach servers of the same name).
    pub fn key(&self) -> String {
        match &self.origin {
            Origin::Client(session) => format!("{}@{session}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// Timeouts every server gets unless it sets its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// Start-up.
    pub startup: Duration,
    /// One call.
    pub call: Duration,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            startup: DEFAULT_STARTUP,
            call: DEFAULT_CALL,
        }
    }
}

impl Defaults {
    /// The defaults of `mcp:` in `config`.
    pub fn of(config: &Config) -> Result<Self, String> {
        Ok(Self {
            startup: seconds(
                config.mcp.startup_timeout_sec,
                DEFAULT_STARTUP,
                "mcp.startup_timeout_sec",
            )?,
            call: seconds(
                config.mcp.tool_timeout_sec,
                DEFAULT_CALL,
                "mcp.tool_timeout_sec",
            )?,
        })
    }
}

fn seconds(value: Option<f64>, default: Duration, key: &str) -> Result<Duration, String> {
    match value {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(format!(
            "{key} must be a number of seconds between 0 and 86400, not {s}"
        )),
    }
}

/// Whether `name` may name a server: letters, digits, `_` and `-`, at most 48 characters,
/// and no `__` (which separates the parts of a tool's name).
pub fn check_name(name: &str) -> Result<(), String> {
    let fine = !name.is_empty()
        && name.len() <= 48
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__");
    if fine {
        Ok(())
    } else {
        Err(format!(
            "`{name}` cannot name an MCP server: use letters, digits, `_` and `-` (at most 48, no `__`)"
        ))
    }
}

/// The servers of `mcp_servers:` that are enabled, or the first problem, naming the key.
pub fn from_config(config: &Config) -> Result<Vec<ServerSpec>, String> {
    let defaults = Defaults::of(config)?;
    let mut specs = Vec::new();
    for (name, server) in &config.mcp_servers {
        if server.enabled == Some(false) {
            continue;
        }
        specs.push(spec_of(name, server, defaults, Origin::Config)?);
    }
    Ok(specs)
}

/// One configured server as a spec.
pub fn spec_of(
    name: &str,
    server: &McpServerConfig,
    defaults: Defaults,
    origin: Origin,
) -> Result<ServerSpec, String> {
    let key = format!("mcp_servers.{name}");
    check_name(name).map_err(|e| format!("{key}: {e}"))?;
    let transport = match (&server.command, &server.url) {
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(format!("{key}.command is empty"));
            }
            if !server.headers.is_empty() || server.bearer_token_env_var.is_some() {
                return Err(format!(
                    "{key}: headers and bearer_token_env_var are for a `url` server"
                ));
            }
            Transport::Stdio {
                command: command.clone(),
                args: server.args.clone(),
                env: server.env.clone(),
                cwd: server.cwd.as_ref().map(PathBuf::from),
            }
        }
        (None, Some(url)) => {
            check_url(url).map_err(|e| format!("{key}.url: {e}"))?;
            if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() {
                return Err(format!(
                    "{key}: args, env and cwd are for a `command` server"
                ));
            }
            Transport::Http {
                url: url.clone(),
                headers: server.headers.clone(),
                bearer_env: server.bearer_token_env_var.clone(),
            }
        }
        (Some(_), Some(_)) => {
            return Err(format!("{key}: give either `command` or `url`, not both"));
        }
        (None, None) => return Err(format!("{key}: give a `command` (stdio) or a `url` (HTTP)")),
    };
    Ok(ServerSpec {
        name: name.to_owned(),
        transport,
        startup_timeout: seconds(
            server.startup_timeout_sec,
            defaults.startup,
            &format!("{key}.startup_timeout_sec"),
        )?,
        call_timeout: seconds(
            server.tool_timeout_sec,
            defaults.call,
            &format!("{key}.tool_timeout_sec"),
        )?,
        origin,
    })
}

fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL ({e})"))?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        other => Err(format!(
            "`{url}`: only http and https are supported, not {other}"
        )),
    }
}

/// The project's `.mcp.json`, at its root only (a `.mcp.json` in a folder above it, a
/// shared `/tmp` say, is not the project's); `Err` says why one that is there is ignored
/// (another user's: [`keel_runtime::settings::project`]).
pub fn project_file(project: &keel_runtime::settings::Project) -> Result<Option<PathBuf>, String> {
    let file = project.root.join(PROJECT_FILE);
    if !file.is_file() {
        return Ok(None);
    }
    project.admit(&file).map(|()| Some(file))
}

#[derive(Deserialize)]
struct ProjectFile {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: BTreeMap<String, ProjectServer>,
}

/// A server of `.mcp.json`, in Claude Code's shape (unknown keys are tolerated, as Claude
/// Code does).
#[derive(Deserialize)]
struct ProjectServer {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The servers of a project's `.mcp.json` (`file`, holding `text`), with `${VAR}` and
/// `${VAR:-default}` expanded from `vars` as Claude Code does.
pub fn from_project(
    file: &Path,
    text: &str,
    defaults: Defaults,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerSpec>, String> {
    let parsed: ProjectFile = serde_json::from_str(text)
        .map_err(|e| format!("{}: not an MCP server list ({e})", file.display()))?;
    let mut specs = Vec::new();
    for (name, server) in parsed.mcp_servers {
        let expand = |s: &str| expand(s, vars);
        let kind = server.kind.as_deref().unwrap_or(if server.url.is_some() {
            "http"
        } else {
            "stdio"
        });
        let config = match kind {
            "stdio" => McpServerConfig {
                command: server.command.as_deref().map(expand),
                args: server.args.iter().map(|a| expand(a)).collect(),
                env: server
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), expand(v)))
                    .collect(),
                ..McpServerConfig::default()
            },
            // keel speaks streamable HTTP; an `sse` server of the older transport is tried
            // at the same URL, which servers that offer both answer.
            "http" | "sse" => McpServerConfig {
                url: server.url.as_deref().map(expand),
                headers: server
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), expand(v)))
                    .collect(),
                ..McpServerConfig::default()
            },
            other => {
                return Err(format!(
                    "{}: server `{name}` has type `{other}` (expected stdio, http or sse)",
                    file.display()
                ));
            }
        };
        let spec = spec_of(
            &name,
            &config,
            defaults,
            Origin::Project(file.to_path_buf()),
        )
        .map_err(|e| format!("{}: {e}", file.display()))?;
        specs.push(spec);
    }
    Ok(specs)
}

/// `${VAR}` and `${VAR:-default}` replaced; an unset variable without a default becomes
/// empty.
pub fn expand(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match vars(name).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => out.push_str(default.unwrap_or("")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn no_vars(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn claude_code_project_files_are_read() {
        let text = r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server", "${ROOT:-/tmp}"], "env": {"K": "${HOME_X}"}},
            "remote": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"X-Key": "${KEY}"}},
            "extra": {"command": "x", "someOtherKey": true}
        }}"#;
        let vars = |name: &str| (name == "KEY").then(|| "secret".to_owned());
        let specs =
            from_project(Path::new("/p/.mcp.json"), text, Defaults::default(), &vars).unwrap();
        assert_eq!(specs.len(), 3);
        let files = specs.iter().find(|s| s.name == "files").unwrap();
        assert_eq!(
            files.transport,
            Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "server".into(), "/tmp".into()],
                env: [("K".to_owned(), String::new())].into(),
                cwd: None,
            }
        );
        let remote = specs.iter().find(|s| s.name == "remote").unwrap();
        assert!(
            matches!(&remote.transport, Transport::Http { headers, .. } if headers["X-Key"] == "secret")
        );
        assert_eq!(
            remote.origin,
            Origin::Project(PathBuf::from("/p/.mcp.json"))
        );
    }

    #[test]
    fn bad_definitions_name_their_key() {
        let bad = McpServerConfig::default();
        let error = spec_of("s", &bad, Defaults::default(), Origin::Config).unwrap_err();
        assert!(error.contains("mcp_servers.s"), "{error}");
        let both = McpServerConfig {
            command: Some("a".into()),
            url: Some("http://x".into()),
            ..McpServerConfig::default()
        };
        assert!(spec_of("s", &both, Defaults::default(), Origin::Config).is_err());
        let file_url = McpServerConfig {
            url: Some("file:///etc/passwd".into()),
            ..McpServerConfig::default()
        };
        assert!(spec_of("s", &file_url, Defaults::default(), Origin::Config).is_err());
        let slow = McpServerConfig {
            command: Some("a".into()),
            tool_timeout_sec: Some(-1.0),
            ..McpServerConfig::default()
        };
        let error = spec_of("s", &slow, Defaults::default(), Origin::Config).unwrap_err();
        assert!(error.contains("tool_timeout_sec"), "{error}");
        for name in ["", "a__b", "a b", "ä", &"x".repeat(49)] {
            assert!(check_name(name).is_err(), "{name}");
        }
        assert!(
            from_project(
                Path::new("/p/.mcp.json"),
                "{",
                Defaults::default(),
                &no_vars
            )
            .is_err()
        );
    }

    #[test]
    fn variables_expand_like_claude_code() {
        let vars = |name: &str| (name == "A").then(|| "1".to_owned());
        assert_eq!(expand("x${A}y${B:-2}z${C}", &vars), "x1y2z");
        assert_eq!(expand("open ${A", &vars), "open ${A");
    }
}
