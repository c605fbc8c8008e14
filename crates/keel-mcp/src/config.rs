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
        /// How to log in when it asks for OAuth.
        oauth: Option<keel_runtime::settings::extend::McpOAuthConfig>,
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

/// What is wrong with a configured server, naming its key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The name cannot name a server.
    #[error(
        "{key}: `{name}` cannot name an MCP server: use letters, digits, `_` and `-` (at most \
         48, no `__`)"
    )]
    Name {
        /// The server's key.
        key: String,
        /// The name.
        name: String,
    },
    /// A time limit out of its range.
    #[error("{key} must be a number of seconds between 0 and 86400, not {value}")]
    Seconds {
        /// The key.
        key: String,
        /// The value given.
        value: f64,
    },
    /// An empty command.
    #[error("{key}.command is empty")]
    EmptyCommand {
        /// The server's key.
        key: String,
    },
    /// Settings of the other kind of server.
    #[error("{key}: {fields} are for a `{kind}` server")]
    Misplaced {
        /// The server's key.
        key: String,
        /// The settings.
        fields: &'static str,
        /// The kind they belong to (`url`, `command`).
        kind: &'static str,
    },
    /// The URL does not parse.
    #[error("{key}.url: `{url}` is not a URL ({reason})")]
    NotAUrl {
        /// The server's key.
        key: String,
        /// The URL.
        url: String,
        /// The parser's reason.
        reason: String,
    },
    /// A URL that is not http or https.
    #[error("{key}.url: `{url}`: only http and https are supported, not {scheme}")]
    Scheme {
        /// The server's key.
        key: String,
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// Both a command and a URL.
    #[error("{key}: give either `command` or `url`, not both")]
    Both {
        /// The server's key.
        key: String,
    },
    /// Neither a command nor a URL.
    #[error("{key}: give a `command` (stdio) or a `url` (HTTP)")]
    Neither {
        /// The server's key.
        key: String,
    },
}

impl Defaults {
    /// The defaults of `mcp:` in `config`.
    pub fn of(config: &Config) -> Result<Self, SpecError> {
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

fn seconds(value: Option<f64>, default: Duration, key: &str) -> Result<Duration, SpecError> {
    match value {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        Some(value) => Err(SpecError::Seconds {
            key: key.to_owned(),
            value,
        }),
    }
}

/// Whether `name` may name a server: letters, digits, `_` and `-`, at most 48 characters,
/// and no `__` (which separates the parts of a tool's name).
pub fn check_name(name: &str) -> Result<(), SpecError> {
    let fine = !name.is_empty()
        && name.len() <= 48
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__");
    if fine {
        Ok(())
    } else {
        Err(SpecError::Name {
            key: format!("mcp_servers.{name}"),
            name: name.to_owned(),
        })
    }
}

/// The servers of `mcp_servers:` that are enabled, or the first problem, naming the key.
pub fn from_config(config: &Config) -> Result<Vec<ServerSpec>, SpecError> {
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
) -> Result<ServerSpec, SpecError> {
    let key = format!("mcp_servers.{name}");
    check_name(name)?;
    let transport = match (&server.command, &server.url) {
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(SpecError::EmptyCommand { key });
            }
            if !server.headers.is_empty()
                || server.bearer_token_env_var.is_some()
                || server.oauth.is_some()
            {
                return Err(SpecError::Misplaced {
                    key,
                    fields: "headers, bearer_token_env_var and oauth",
                    kind: "url",
                });
            }
            Transport::Stdio {
                command: command.clone(),
                args: server.args.clone(),
                env: server.env.clone(),
                cwd: server.cwd.as_ref().map(PathBuf::from),
            }
        }
        (None, Some(url)) => {
            check_url(&key, url)?;
            if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() {
                return Err(SpecError::Misplaced {
                    key,
                    fields: "args, env and cwd",
                    kind: "command",
                });
            }
            Transport::Http {
                url: url.clone(),
                headers: server.headers.clone(),
                bearer_env: server.bearer_token_env_var.clone(),
                oauth: server.oauth.clone(),
            }
        }
        (Some(_), Some(_)) => {
            return Err(SpecError::Both { key });
        }
        (None, None) => return Err(SpecError::Neither { key }),
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

fn check_url(key: &str, url: &str) -> Result<(), SpecError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| SpecError::NotAUrl {
        key: key.to_owned(),
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    match parsed.scheme() {
        "http" | "https" => Ok(()),
        other => Err(SpecError::Scheme {
            key: key.to_owned(),
            url: url.to_owned(),
            scheme: other.to_owned(),
        }),
    }
}

/// The project's `.mcp.json`, at its root only (a `.mcp.json` in a folder above it, a
/// shared `/tmp` say, is not the project's); `Err` says why one that is there is ignored
/// (another user's: [`keel_runtime::settings::project`]).
pub fn project_file(
    project: &keel_runtime::settings::Project,
) -> Result<Option<PathBuf>, keel_runtime::settings::RefusedFile> {
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

/// Why a project's `.mcp.json` gives no servers.
#[derive(Debug, thiserror::Error)]
pub enum ProjectFileError {
    /// keel ignores the file (outside the project, another user's).
    #[error(transparent)]
    Refused(#[from] keel_runtime::settings::RefusedFile),
    /// It cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is not an MCP server list.
    #[error("{}: not an MCP server list ({source})", path.display())]
    NotAList {
        /// The file.
        path: PathBuf,
        /// The parser's reason.
        source: serde_json::Error,
    },
    /// A server has a type keel does not speak.
    #[error("{}: server `{name}` has type `{kind}` (expected stdio, http or sse)", path.display())]
    Kind {
        /// The file.
        path: PathBuf,
        /// The server.
        name: String,
        /// Its type.
        kind: String,
    },
    /// A server is not valid (or `mcp:` holds a bad default).
    #[error("{}: {source}", path.display())]
    Spec {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: SpecError,
    },
}

/// The servers of a project's `.mcp.json` (`file`, holding `text`), with `${VAR}` and
/// `${VAR:-default}` expanded from `vars` as Claude Code does.
pub fn from_project(
    file: &Path,
    text: &str,
    defaults: Defaults,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerSpec>, ProjectFileError> {
    let parsed: ProjectFile =
        serde_json::from_str(text).map_err(|source| ProjectFileError::NotAList {
            path: file.to_path_buf(),
            source,
        })?;
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
            // Streamable HTTP first; a server of the older HTTP+SSE transport is reached
            // by the fallback (`legacy`).
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
                return Err(ProjectFileError::Kind {
                    path: file.to_path_buf(),
                    name,
                    kind: other.to_owned(),
                });
            }
        };
        let spec = spec_of(
            &name,
            &config,
            defaults,
            Origin::Project(file.to_path_buf()),
        )
        .map_err(|source| ProjectFileError::Spec {
            path: file.to_path_buf(),
            source,
        })?;
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
        assert_eq!(
            error,
            SpecError::Neither {
                key: "mcp_servers.s".into()
            }
        );
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
        assert!(
            matches!(&error, SpecError::Seconds { key, .. } if key == "mcp_servers.s.tool_timeout_sec"),
            "{error}"
        );
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
