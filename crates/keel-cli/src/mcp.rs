//! `keel mcp`: list, show, add and remove MCP servers.
//!
//! Listing reads the same configuration and project `.mcp.json` the runtime does and shows
//! where each server comes from, but starts nothing and touches no network. Adding and
//! removing edit only `$KEEL_HOME/config.yaml`, the user's own file: a project's files are
//! the project's to change. A new server is validated by the runtime's own `spec_of`, so
//! `add` refuses exactly what a session would.

mod edit;
mod import;
mod live;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use keel_mcp::config::{Defaults, Origin, ServerSpec, Transport};
use keel_runtime::settings::Project;
use keel_runtime::settings::extend::McpServerConfig;
use keel_runtime::settings::{FILE_NAME, Settings, SettingsInput};
use keel_tools::permission::shell::quote_word;
use serde_json::json;
use yaml_serde::{Mapping, Value};

/// What secret-bearing values (variables, headers) are shown as.
const MASK: &str = "***";

/// Arguments of `keel mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, clap::Subcommand)]
enum McpCommand {
    /// Every configured MCP server and where it comes from (starts none).
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// One server in detail (the values of its variables and headers are masked).
    Get {
        /// The server's name.
        name: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
        /// Start it and list its tools, timing the start (its health).
        #[arg(long)]
        check: bool,
        /// With `--check`: log in (opening your browser) when the server asks.
        #[arg(long, requires = "check")]
        login: bool,
    },
    /// Add a server to $KEEL_HOME/config.yaml: `--url URL` (HTTP) or `-- COMMAND ARGS...`
    /// (stdio); Claude Code's `--transport http NAME URL` and `--transport stdio NAME --
    /// COMMAND ARGS...` work too.
    Add(Box<AddArgs>),
    /// Bring your MCP servers over from Claude Code (~/.claude.json) and Codex
    /// (~/.codex/config.toml): shown first, added to $KEEL_HOME/config.yaml when you say yes.
    Import(import::ImportArgs),
    /// Log in to an HTTP server that asks for OAuth: opens your browser ($BROWSER, else
    /// the system's) at its authorization server and keeps the tokens in
    /// $KEEL_HOME/credentials.json.
    Login {
        /// The server's name.
        name: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Delete a server's stored OAuth tokens.
    Logout {
        /// The server's name.
        name: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Start a server and call one of its tools, printing the result (to try a server
    /// outside a session).
    Call {
        /// The server's name.
        name: String,
        /// The tool.
        tool: String,
        /// Its arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Log in (opening your browser) when the server asks.
        #[arg(long)]
        login: bool,
    },
    /// Remove a server from $KEEL_HOME/config.yaml.
    Remove {
        /// The server's name.
        name: String,
        /// Print `{"removed": NAME}`.
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `keel mcp add`.
#[derive(Debug, clap::Args)]
struct AddArgs {
    /// The server's name: letters, digits, `_` and `-`.
    name: String,
    /// A variable set for a stdio server, as KEY=VALUE (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// A header sent to an HTTP server, as NAME=VALUE or "NAME: VALUE" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME=VALUE", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// How keel reaches the server, as Claude Code's `mcp add` says it: `http` takes the
    /// URL after the name, `stdio` the command.
    #[arg(short = 't', long, value_enum, value_name = "TRANSPORT")]
    transport: Option<TransportArg>,
    /// The variable holding a bearer token for an HTTP server.
    #[arg(long, value_name = "VAR")]
    bearer_token_env_var: Option<String>,
    /// Seconds the server may take to start.
    #[arg(long, value_name = "SECONDS")]
    startup_timeout_sec: Option<f64>,
    /// Seconds one tool call may take.
    #[arg(long, value_name = "SECONDS")]
    tool_timeout_sec: Option<f64>,
    /// The server's streamable HTTP endpoint.
    #[arg(long)]
    url: Option<String>,
    /// Where to add it: `user` ($KEEL_HOME/config.yaml, the default) or `project` (the
    /// project's .mcp.json, shared through the repository; keel runs it only once you
    /// trust the project, and writing it does not trust it).
    #[arg(short = 's', long, value_enum, default_value = "user")]
    scope: ScopeArg,
    /// Print `{"added": NAME}`.
    #[arg(long)]
    json: bool,
    /// The program to start (stdio) and its arguments, after `--` when any starts with `-`;
    /// with `--transport http`, the server's URL.
    #[arg(value_name = "COMMAND")]
    command: Vec<String>,
}

/// `--scope`: which file `add` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ScopeArg {
    /// $KEEL_HOME/config.yaml.
    User,
    /// The project's .mcp.json.
    Project,
}

/// `--transport`: Claude Code's names for the two kinds keel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TransportArg {
    /// A program keel starts, speaking on its standard input and output.
    Stdio,
    /// A streamable HTTP endpoint.
    Http,
}

impl AddArgs {
    /// The arguments in keel's own form: with `--transport http`, the URL moves from the
    /// words after the name to `--url`.
    fn normalised(&self) -> anyhow::Result<(Vec<String>, Option<String>)> {
        match self.transport {
            Some(TransportArg::Http) => match (self.command.as_slice(), &self.url) {
                ([url], None) => Ok((Vec::new(), Some(url.clone()))),
                ([], Some(url)) => Ok((Vec::new(), Some(url.clone()))),
                ([], None) => bail!("`--transport http` needs the server's URL after its name"),
                _ => bail!(
                    "`--transport http` takes one URL after the name, and no command: \
                     `keel mcp add --transport http NAME URL`"
                ),
            },
            Some(TransportArg::Stdio) if self.url.is_some() => {
                bail!("`--transport stdio` starts a command; `--url` is for `--transport http`")
            }
            _ => Ok((self.command.clone(), self.url.clone())),
        }
    }
}

fn parse_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("expected KEY=VALUE, not `{text}`")),
    }
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    // A header's name cannot hold `:` or `=`, so the first of them ends it.
    match text.find([':', '=']) {
        Some(at) if !text[..at].trim().is_empty() => Ok((
            text[..at].trim().to_owned(),
            text[at + 1..].trim_start().to_owned(),
        )),
        _ => Err(format!(
            "expected NAME=VALUE or \"NAME: VALUE\", not `{text}`"
        )),
    }
}

/// Runs `keel mcp`.
pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    match args.command {
        McpCommand::List { json } => list(&cwd, json),
        McpCommand::Get {
            name,
            json,
            check,
            login,
        } => {
            let health = if check {
                Some(health(&cwd, &name, login).await)
            } else {
                None
            };
            get(&cwd, &name, json, health)
        }
        McpCommand::Login { name, json } => {
            live::login(&live::Target::of(&cwd, &name)?, json).await
        }
        McpCommand::Logout { name, json } => live::logout(&live::Target::of(&cwd, &name)?, json),
        McpCommand::Call {
            name,
            tool,
            arguments,
            login,
        } => {
            let arguments: serde_json::Value = serde_json::from_str(&arguments)
                .map_err(|e| anyhow!("the arguments are not JSON: {e}"))?;
            if !arguments.is_object() {
                bail!("the arguments must be a JSON object, like '{{\"path\": \"a.txt\"}}'");
            }
            let target = live::Target::of(&cwd, &name)?;
            let result = live::call(&target, &tool, arguments, login).await?;
            println!("{result}");
            if result["isError"] == serde_json::Value::Bool(true) {
                bail!("the tool `{tool}` of `{name}` reported an error");
            }
            Ok(())
        }
        McpCommand::Add(args) => add(&cwd, &args),
        McpCommand::Remove { name, json } => remove(&cwd, &name, json),
        McpCommand::Import(args) => import::run(&args, &home_file()?),
    }
}

/// Where a server is defined.
enum Source {
    /// A configuration file of the user's (or a trusted project's `.keel/config.yaml`).
    Config(PathBuf),
    /// A project's `.mcp.json`, which runs only once trusted.
    Project {
        /// The file.
        file: PathBuf,
        /// Whether the user trusts it.
        trusted: bool,
    },
}

/// One server as shown.
struct Server {
    name: String,
    source: Source,
    enabled: bool,
    definition: McpServerConfig,
    /// The timeouts in force, when the definition is valid.
    timeouts: Option<(Duration, Duration)>,
    /// Why a session would not start it, when the definition is not valid.
    problem: Option<String>,
    /// How it authenticates, for an HTTP server (the login's state).
    auth: Option<String>,
}

/// How the HTTP server `name` of `definition` authenticates, for people.
fn auth_text(keel_home: Option<&Path>, name: &str, definition: &McpServerConfig) -> Option<String> {
    let url = definition.url.as_ref()?;
    if let Some(var) = &definition.bearer_token_env_var {
        return Some(format!("bearer token from ${var}"));
    }
    Some(match keel_home {
        Some(home) => keel_mcp::auth::state(home, name, url).describe(),
        None => keel_mcp::auth::AuthState::None.describe(),
    })
}

/// The health of a server, started now: what `get --check` shows.
struct Health {
    /// What it is doing (`ready`, `failed: …`).
    status: String,
    /// Its tools' names.
    tools: Vec<String>,
    /// How long the start took.
    started_in: Duration,
}

async fn health(cwd: &Path, name: &str, login: bool) -> Result<Health, String> {
    let target = live::Target::of(cwd, name).map_err(|e| e.to_string())?;
    let mut logins = 0;
    let running = live::start(&target, login, &mut logins)
        .await
        .map_err(|e| e.to_string())?;
    let tools = running
        .server
        .offer()
        .map(|offer| {
            offer
                .tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Health {
        status: running.server.status().describe(),
        tools,
        started_in: running.started_in,
    })
}

/// Every server the configuration and the project's `.mcp.json` define, configured ones
/// first, and warnings about files that could not be read.
fn servers(cwd: &Path) -> anyhow::Result<(Vec<Server>, Vec<String>)> {
    let settings = Settings::load(&SettingsInput {
        cwd: cwd.to_path_buf(),
        keel_home: None,
        ..Default::default()
    })?;
    let config = &settings.loaded.config;
    let home_file = settings.keel_home.as_ref().map(|h| h.join(FILE_NAME));
    let in_home = match &home_file {
        Some(file) => edit::servers_in(file)?,
        None => BTreeMap::new(),
    };
    let mut warnings = Vec::new();
    let defaults = Defaults::of(config).unwrap_or_else(|e| {
        warnings.push(e.to_string());
        Defaults::default()
    });
    let mut out = Vec::new();
    for (name, definition) in &config.mcp_servers {
        // A server not in the user's file came from the trusted project's configuration.
        let file = match (&home_file, in_home.contains_key(name)) {
            (Some(home), true) => Some(home.clone()),
            _ => keel_runtime::settings::config::project_file(&settings.project)
                .ok()
                .flatten(),
        };
        let spec = keel_mcp::config::spec_of(name, definition, defaults, Origin::Config);
        out.push(Server {
            auth: auth_text(settings.keel_home.as_deref(), name, definition),
            name: name.clone(),
            source: Source::Config(file.unwrap_or_default()),
            enabled: definition.enabled != Some(false),
            definition: definition.clone(),
            timeouts: spec
                .as_ref()
                .ok()
                .map(|s| (s.startup_timeout, s.call_timeout)),
            problem: spec.err().map(|e| e.to_string()),
        });
    }
    let project_file = keel_mcp::config::project_file(&settings.project).unwrap_or_else(|why| {
        warnings.push(why.to_string());
        None
    });
    if let Some(file) = project_file {
        let host = keel_runtime::extension::HostInfo {
            cwd: cwd.to_path_buf(),
            project: settings.project.clone(),
            keel_home: settings.keel_home.clone(),
            trust_project: false,
            trust_project_mcp: false,
            ..Default::default()
        };
        let trusted = keel_mcp::untrusted_project(config, &host).is_none();
        let specs = std::fs::read_to_string(&file)
            .map_err(|source| keel_mcp::ProjectFileError::Read {
                path: file.clone(),
                source,
            })
            .and_then(|text| {
                keel_mcp::config::from_project(&file, &text, defaults, &|v| std::env::var(v).ok())
            });
        match specs {
            Ok(specs) => out.extend(specs.into_iter().map(|spec| Server {
                auth: auth_text(
                    settings.keel_home.as_deref(),
                    &spec.name,
                    &definition_of(&spec),
                ),
                name: spec.name.clone(),
                source: Source::Project {
                    file: file.clone(),
                    trusted,
                },
                enabled: true,
                definition: definition_of(&spec),
                timeouts: Some((spec.startup_timeout, spec.call_timeout)),
                problem: None,
            })),
            Err(error) => warnings.push(error.to_string()),
        }
    }
    Ok((out, warnings))
}

/// A project server's spec in the shape of a configured one, to show both alike.
fn definition_of(spec: &ServerSpec) -> McpServerConfig {
    match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => McpServerConfig {
            command: Some(command.clone()),
            args: args.clone(),
            env: env.clone(),
            cwd: cwd.as_ref().map(|c| c.display().to_string()),
            ..McpServerConfig::default()
        },
        Transport::Http {
            url,
            headers,
            bearer_env,
            oauth,
        } => McpServerConfig {
            url: Some(url.clone()),
            headers: headers.clone(),
            bearer_token_env_var: bearer_env.clone(),
            oauth: oauth.clone(),
            ..McpServerConfig::default()
        },
    }
}

fn list(cwd: &Path, json: bool) -> anyhow::Result<()> {
    let (servers, warnings) = servers(cwd)?;
    for warning in &warnings {
        eprintln!("keel: warning: {warning}");
    }
    if json {
        let all: Vec<serde_json::Value> = servers.iter().map(summary).collect();
        println!("{}", serde_json::Value::Array(all));
        return Ok(());
    }
    if servers.is_empty() {
        println!(
            "No MCP servers configured. Add one with `keel mcp add NAME -- COMMAND [ARGS...]` \
             (stdio) or `keel mcp add NAME --url URL` (HTTP)."
        );
        return Ok(());
    }
    let mut rows = vec![[
        "NAME".to_owned(),
        "TRANSPORT".to_owned(),
        "SOURCE".to_owned(),
        "ENABLED".to_owned(),
        "AUTH".to_owned(),
    ]];
    for server in &servers {
        if let Some(problem) = &server.problem {
            eprintln!("keel: warning: {problem}");
        }
        rows.push([
            server.name.clone(),
            transport_text(&server.definition),
            source_text(&server.source),
            yes_no(server.enabled).to_owned(),
            server.auth.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    print!("{}", table(&rows));
    let untrusted = servers.iter().find_map(|s| match &s.source {
        Source::Project {
            file,
            trusted: false,
        } => Some(file),
        _ => None,
    });
    if let Some(file) = untrusted {
        println!(
            "keel does not start the servers of {} until you trust it: run `keel trust`.",
            file.display()
        );
    }
    Ok(())
}

/// Rows as columns padded to their widest cell (the last one unpadded).
fn table(rows: &[[String; 5]]) -> String {
    let mut widths = [0; 5];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn transport_text(definition: &McpServerConfig) -> String {
    match (&definition.url, &definition.command) {
        (Some(url), _) => format!("http: {url}"),
        (None, Some(command)) => {
            let mut words = vec![quote_word(command)];
            words.extend(definition.args.iter().map(|a| quote_word(a)));
            format!("stdio: {}", words.join(" "))
        }
        (None, None) => "(none)".to_owned(),
    }
}

fn source_text(source: &Source) -> String {
    match source {
        Source::Config(file) => file.display().to_string(),
        Source::Project { file, trusted } => format!(
            "{} ({})",
            file.display(),
            if *trusted { "trusted" } else { "not trusted" }
        ),
    }
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// What `list --json` shows of a server.
fn summary(server: &Server) -> serde_json::Value {
    let d = &server.definition;
    let (source, file, trusted) = match &server.source {
        Source::Config(file) => ("config", file, true),
        Source::Project { file, trusted } => ("project", file, *trusted),
    };
    let mut value = json!({
        "name": server.name,
        "transport": if d.url.is_some() { "http" } else { "stdio" },
        "command": d.command,
        "args": d.args,
        "url": d.url,
        "source": source,
        "file": file,
        "trusted": trusted,
        "enabled": server.enabled,
        "auth": server.auth,
    });
    if let (Some(problem), Some(object)) = (&server.problem, value.as_object_mut()) {
        object.insert("problem".into(), json!(problem));
    }
    value
}

/// Names with every value masked.
fn masked(map: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    map.keys().map(|k| (k.as_str(), MASK)).collect()
}

fn get(
    cwd: &Path,
    name: &str,
    json: bool,
    health: Option<Result<Health, String>>,
) -> anyhow::Result<()> {
    let (servers, _) = servers(cwd)?;
    // The configured one first: it is the one a session runs.
    let Some(server) = servers.iter().find(|s| s.name == name) else {
        bail!("no MCP server named `{name}` (see `keel mcp list`)");
    };
    let d = &server.definition;
    let timeouts = server
        .timeouts
        .map(|(s, c)| (s.as_secs_f64(), c.as_secs_f64()));
    if json {
        let mut value = summary(server);
        if let Some(object) = value.as_object_mut() {
            object.insert("env".into(), json!(masked(&d.env)));
            object.insert("cwd".into(), json!(d.cwd));
            object.insert("headers".into(), json!(masked(&d.headers)));
            object.insert("bearer_token_env_var".into(), json!(d.bearer_token_env_var));
            object.insert("startup_timeout_sec".into(), json!(timeouts.map(|t| t.0)));
            object.insert("tool_timeout_sec".into(), json!(timeouts.map(|t| t.1)));
            if let Some(health) = &health {
                object.insert(
                    "health".into(),
                    match health {
                        Ok(h) => json!({
                            "status": h.status,
                            "tools": h.tools,
                            "started_ms": h.started_in.as_millis(),
                        }),
                        Err(problem) => json!({"status": problem}),
                    },
                );
            }
        }
        println!("{value}");
        return Ok(());
    }
    let mut lines: Vec<(&str, String)> = vec![
        ("name", server.name.clone()),
        ("source", source_text(&server.source)),
        ("enabled", yes_no(server.enabled).to_owned()),
    ];
    let pairs = |map: &BTreeMap<String, String>| {
        map.keys()
            .map(|k| format!("{k}={MASK}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(url) = &d.url {
        lines.push(("transport", "http".to_owned()));
        lines.push(("url", url.clone()));
        if !d.headers.is_empty() {
            lines.push(("headers", pairs(&d.headers)));
        }
        if let Some(var) = &d.bearer_token_env_var {
            lines.push(("bearer token from", format!("${var}")));
        } else if let Some(auth) = &server.auth {
            lines.push(("auth", auth.clone()));
        }
    } else {
        lines.push(("transport", "stdio".to_owned()));
        lines.push(("command", d.command.clone().unwrap_or_default()));
        if !d.args.is_empty() {
            let args: Vec<String> = d.args.iter().map(|a| quote_word(a)).collect();
            lines.push(("args", args.join(" ")));
        }
        if let Some(dir) = &d.cwd {
            lines.push(("cwd", dir.clone()));
        }
        if !d.env.is_empty() {
            lines.push(("env", pairs(&d.env)));
        }
    }
    if let Some((startup, call)) = timeouts {
        lines.push(("startup timeout", format!("{startup}s")));
        lines.push(("tool timeout", format!("{call}s")));
    }
    if let Some(problem) = &server.problem {
        lines.push(("problem", problem.clone()));
    }
    match &health {
        Some(Ok(h)) => {
            lines.push((
                "health",
                format!("{} (started in {} ms)", h.status, h.started_in.as_millis()),
            ));
            lines.push((
                "tools",
                format!("{}: {}", h.tools.len(), h.tools.join(", ")),
            ));
        }
        Some(Err(problem)) => lines.push(("health", problem.clone())),
        None => {}
    }
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (key, value) in lines {
        println!("{:<width$} {value}", format!("{key}:"), width = width);
    }
    Ok(())
}

/// `$KEEL_HOME/config.yaml`, the file `add` and `remove` edit.
fn home_file() -> anyhow::Result<PathBuf> {
    keel_runtime::settings::keel_home()
        .map(|home| home.join(FILE_NAME))
        .ok_or_else(|| anyhow!("cannot find keel's folder: set KEEL_HOME or HOME"))
}

/// The new server's entry, holding only what was given.
fn entry_of(args: &AddArgs) -> anyhow::Result<Mapping> {
    let (command, url) = args.normalised()?;
    let mut entry = Mapping::new();
    let mut put = |key: &str, value: Value| {
        entry.insert(Value::String(key.to_owned()), value);
    };
    let strings = |pairs: &[(String, String)]| {
        Value::Mapping(
            pairs
                .iter()
                .map(|(k, v)| (Value::String(k.clone()), Value::String(v.clone())))
                .collect(),
        )
    };
    if let Some((command, rest)) = command.split_first() {
        put("command", Value::String(command.clone()));
        if !rest.is_empty() {
            put("args", yaml_serde::to_value(rest)?);
        }
    }
    if !args.env.is_empty() {
        put("env", strings(&args.env));
    }
    if let Some(url) = url {
        put("url", Value::String(url));
    }
    if !args.headers.is_empty() {
        put("headers", strings(&args.headers));
    }
    if let Some(var) = &args.bearer_token_env_var {
        put("bearer_token_env_var", Value::String(var.clone()));
    }
    if let Some(seconds) = args.startup_timeout_sec {
        put("startup_timeout_sec", yaml_serde::to_value(seconds)?);
    }
    if let Some(seconds) = args.tool_timeout_sec {
        put("tool_timeout_sec", yaml_serde::to_value(seconds)?);
    }
    Ok(entry)
}

fn add(cwd: &Path, args: &AddArgs) -> anyhow::Result<()> {
    if args.scope == ScopeArg::Project {
        return add_to_project(cwd, args);
    }
    let entry = entry_of(args)?;
    let definition: McpServerConfig = yaml_serde::from_value(Value::Mapping(entry.clone()))?;
    keel_mcp::config::spec_of(&args.name, &definition, Defaults::default(), Origin::Config)
        .map_err(|e| anyhow!(e))?;
    let file = home_file()?;
    // Two `add`s at once would each write the file as they read it: the second one waits.
    let _lock = edit::lock(&file)?;
    if edit::servers_in(&file)?.contains_key(&args.name) {
        bail!(
            "an MCP server named `{}` is already in {}: run `keel mcp remove {}` first",
            args.name,
            file.display(),
            args.name
        );
    }
    edit::apply(
        &file,
        &edit::Change::Add {
            name: &args.name,
            entry: &entry,
        },
    )?;
    if project_names(cwd).iter().any(|n| n == &args.name) {
        eprintln!(
            "keel: note: the project's .mcp.json also has a server `{}`; yours is the one keel runs.",
            args.name
        );
    }
    if args.json {
        println!("{}", json!({ "added": args.name }));
    } else {
        println!("Added MCP server `{}` to {}.", args.name, file.display());
    }
    Ok(())
}

/// `add --scope project`: the server goes into the project's `.mcp.json` in Claude Code's
/// shape. The file is only written: keel starts its servers once the user trusts the
/// project, as for any `.mcp.json` it finds.
fn add_to_project(cwd: &Path, args: &AddArgs) -> anyhow::Result<()> {
    let (command, url) = args.normalised()?;
    if args.bearer_token_env_var.is_some()
        || args.startup_timeout_sec.is_some()
        || args.tool_timeout_sec.is_some()
    {
        bail!(
            "a project's .mcp.json has no place for --bearer-token-env-var or timeouts: use --header 'Authorization=Bearer ${{VAR}}' (expanded from your environment), or add the server to your own configuration (--scope user)"
        );
    }
    let strings = |pairs: &[(String, String)]| -> serde_json::Map<String, serde_json::Value> {
        pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect()
    };
    let mut entry = serde_json::Map::new();
    if let Some(url) = url {
        entry.insert("type".into(), json!("http"));
        entry.insert("url".into(), json!(url));
        if !args.headers.is_empty() {
            entry.insert(
                "headers".into(),
                serde_json::Value::Object(strings(&args.headers)),
            );
        }
    } else if let Some((program, rest)) = command.split_first() {
        entry.insert("command".into(), json!(program));
        entry.insert("args".into(), json!(rest));
        if !args.env.is_empty() {
            entry.insert("env".into(), serde_json::Value::Object(strings(&args.env)));
        }
    }
    let root = project_of(cwd).root;
    let file = root.join(keel_mcp::config::PROJECT_FILE);
    // The definition is checked as a session would read it, before anything is written.
    let single = json!({"mcpServers": {&args.name: &entry}}).to_string();
    keel_mcp::config::from_project(&file, &single, Defaults::default(), &|_| None)
        .map_err(|e| anyhow!(e))?;
    // The lock lives in keel's folder, not the repository (where it would be left behind,
    // or planted as a link).
    let _lock = edit::lock(&home_file()?.with_file_name("project-mcp-json"))?;
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(anyhow!("{}: {e}", file.display())),
    };
    let updated = edit::add_to_project_file(text.as_deref(), &args.name, &entry)
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    edit::replace_file(&file, updated.as_bytes())?;
    if args.json {
        println!("{}", json!({ "added": args.name, "file": file }));
    } else {
        println!(
            "Added MCP server `{}` to {}. keel starts a project's servers once you trust it (`keel trust`); adding one does not.",
            args.name,
            file.display()
        );
    }
    Ok(())
}

/// The project of `cwd`, with the user's trust records.
fn project_of(cwd: &Path) -> Project {
    Project::of(cwd, keel_runtime::settings::keel_home().as_deref())
}

/// The names of the project `.mcp.json`'s servers (none when it does not read).
fn project_names(cwd: &Path) -> Vec<String> {
    let Ok(Some(file)) = keel_mcp::config::project_file(&project_of(cwd)) else {
        return Vec::new();
    };
    std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| {
            keel_mcp::config::from_project(&file, &text, Defaults::default(), &|_| None).ok()
        })
        .map(|specs| specs.into_iter().map(|s| s.name).collect())
        .unwrap_or_default()
}

fn remove(cwd: &Path, name: &str, json: bool) -> anyhow::Result<()> {
    let file = home_file()?;
    let _lock = edit::lock(&file)?;
    if !edit::servers_in(&file)?.contains_key(name) {
        if project_names(cwd).iter().any(|n| n == name) {
            let project = keel_mcp::config::project_file(&project_of(cwd))
                .ok()
                .flatten()
                .unwrap_or_default();
            bail!(
                "MCP server `{name}` comes from the project's {}, which `keel mcp remove` does not edit: \
                 remove it there (keel runs it only if you trust the file)",
                project.display()
            );
        }
        if let Some(project) = keel_runtime::settings::config::project_file(&project_of(cwd))
            .ok()
            .flatten()
            .filter(|p| edit::servers_in(p).is_ok_and(|s| s.contains_key(name)))
        {
            bail!(
                "MCP server `{name}` is defined in the project's {}, which `keel mcp remove` does not edit: \
                 remove it there",
                project.display()
            );
        }
        bail!(
            "no MCP server named `{name}` in {} (see `keel mcp list`)",
            file.display()
        );
    }
    edit::apply(&file, &edit::Change::Remove { name })?;
    if json {
        println!("{}", json!({ "removed": name }));
    } else {
        println!("Removed MCP server `{name}` from {}.", file.display());
    }
    Ok(())
}
