//! Configuration of the ways users extend keel: MCP servers, deferred tool disclosure,
//! skills and user hooks. The runtime only carries these values; the extensions that act
//! on them (`keel-mcp`, `keel-extensions`) read them during their `init`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::config::LimitError;

/// One MCP server under `mcp_servers.NAME`: a command (stdio) or a `url` (streamable
/// HTTP).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program to start (stdio).
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for it (on top of the cleaned environment).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working folder (default: the session's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The server's endpoint (streamable HTTP).
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent with every HTTP request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The variable holding a bearer token for HTTP.
    #[serde(default)]
    pub bearer_token_env_var: Option<String>,
    /// Seconds to wait for the server to start (default 30).
    #[serde(default)]
    pub startup_timeout_sec: Option<f64>,
    /// Seconds a tool call may take (default 120).
    #[serde(default)]
    pub tool_timeout_sec: Option<f64>,
    /// `false` keeps the server configured but stopped.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// How keel logs in to an HTTP server that asks for OAuth (all optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<McpOAuthConfig>,
}

/// `mcp_servers.NAME.oauth:`.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthConfig {
    /// A client id registered with the authorization server beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The variable holding that client's secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// A PEM private key (PKCS#8, P-256 or RSA) signing `private_key_jwt` assertions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<String>,
    /// `authorization_code` (a person logs in through a browser, the default) or
    /// `client_credentials` (machine to machine, no browser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<OAuthGrant>,
    /// The scopes to ask for, instead of the ones the server names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The URL of a Client ID Metadata Document describing keel, used as the client id
    /// where the authorization server supports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The loopback port the login's redirect comes back to (default: any free port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_port: Option<u16>,
    /// The authorization server's issuer: a login (and so a configured secret) goes nowhere
    /// else, whatever the server names. Without it, the first login's issuer is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

/// `mcp_servers.NAME.oauth.grant`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// Authorization code with PKCE, through the user's browser.
    AuthorizationCode,
    /// Client credentials: a secret or a signed assertion, no browser.
    ClientCredentials,
}

/// `mcp.elicitation`: what keel answers a server's `elicitation/create`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ElicitationPolicy {
    /// Ask the user (where no one can answer, as in `keel exec`, decline).
    #[default]
    Ask,
    /// Decline every request.
    Decline,
    /// Accept every form with its defaults (an explicit opt-in for unattended runs; each
    /// accepted form is logged). A form with a required field that has no default is
    /// declined.
    AcceptDefaults,
}

/// `mcp:`: defaults for every server and the disclosure policy.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Seconds to wait for a server to start (default 30).
    #[serde(default)]
    pub startup_timeout_sec: Option<f64>,
    /// Seconds a tool call may take (default 120).
    #[serde(default)]
    pub tool_timeout_sec: Option<f64>,
    /// Start the servers of a project's `.mcp.json` and run its hooks without asking; read
    /// from `$KEEL_HOME/config.yaml` only (a project's configuration cannot trust itself).
    #[serde(default)]
    pub trust_project: Option<bool>,
    /// Deferred tool disclosure (DESIGN §11).
    #[serde(default)]
    pub disclosure: DisclosureConfig,
    /// What a server's request for input gets: asked of the user where a front end asks
    /// (`ask`, the default; declined in `keel exec`), always declined, or answered with its
    /// defaults without asking (`accept-defaults`, an explicit opt-in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationPolicy>,
}

/// `mcp.disclosure:`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisclosureConfig {
    /// Whether MCP tools may move behind `tool_search` at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The share of the context window MCP tool descriptions may take before they move.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Models (`provider/model`, `*` wildcards) whose tools may be deferred.
    #[serde(default = "every_model")]
    pub models: Vec<String>,
    /// Tools (`mcp__server__tool`, `*` wildcards) always offered directly.
    #[serde(default)]
    pub always_expose: Vec<String>,
    /// How many tools a search returns.
    #[serde(default = "default_top")]
    pub top: usize,
}

impl Default for DisclosureConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: default_threshold(),
            models: every_model(),
            always_expose: Vec::new(),
            top: default_top(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_threshold() -> f64 {
    0.15
}

fn every_model() -> Vec<String> {
    vec!["*".to_owned()]
}

fn default_top() -> usize {
    8
}

/// `skills:`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// Whether skills are listed and loadable.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Most characters the list of skills takes in the system prompt.
    #[serde(default = "default_listing_budget")]
    pub listing_budget: usize,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listing_budget: default_listing_budget(),
        }
    }
}

fn default_listing_budget() -> usize {
    6_000
}

/// `tasks:` (SPEC §14).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// Most tasks running at once in one runtime; more wait `queued` (1 to 16).
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: u32,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            max_concurrent: default_max_concurrent(),
        }
    }
}

/// The default: four tasks at once.
fn default_max_concurrent() -> u32 {
    4
}

/// The most `tasks.max_concurrent` may be: each task is a turn with its own model stream.
pub const MAX_CONCURRENT_TASKS: u32 = 16;

impl TasksConfig {
    /// Checks the limits; the reason names the key.
    pub fn check(&self) -> Result<(), LimitError> {
        if self.max_concurrent == 0 || self.max_concurrent > MAX_CONCURRENT_TASKS {
            return Err(LimitError::new(
                "tasks.max_concurrent",
                format!(
                    "must be 1 to {MAX_CONCURRENT_TASKS}, not {}",
                    self.max_concurrent
                ),
            ));
        }
        Ok(())
    }
}

/// `goals:` (DESIGN §14a): what a goal may spend when neither the user nor the goal says.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct GoalsConfig {
    /// Most turns toward one goal.
    #[serde(default = "default_goal_turns")]
    pub max_turns: u32,
    /// Most tokens one goal may spend over its turns.
    #[serde(default = "default_goal_tokens")]
    pub max_tokens: u64,
}

impl Default for GoalsConfig {
    fn default() -> Self {
        Self {
            max_turns: default_goal_turns(),
            max_tokens: default_goal_tokens(),
        }
    }
}

/// Twenty turns: a goal that needs more is one the user should look at.
fn default_goal_turns() -> u32 {
    20
}

/// Half a million tokens: a long working session, not an unattended bill.
fn default_goal_tokens() -> u64 {
    500_000
}

impl GoalsConfig {
    /// Checks the limits; the reason names the key.
    pub fn check(&self) -> Result<(), LimitError> {
        if self.max_turns == 0 {
            return Err(LimitError::new("goals.max_turns", "must be above 0"));
        }
        if self.max_tokens == 0 {
            return Err(LimitError::new("goals.max_tokens", "must be above 0"));
        }
        Ok(())
    }
}

/// `tui:`: the interactive front end's choices.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct TuiConfig {
    /// How the terminal is told that a turn ended or waits for an answer while it is not
    /// in focus.
    #[serde(default)]
    pub notifications: Notifications,
}

/// `tui.notifications`: how a terminal out of focus hears that keel needs the user.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Notifications {
    /// A desktop notification (OSC 9) where the terminal is known to show one, else the
    /// bell.
    #[default]
    Auto,
    /// The bell.
    Bell,
    /// A desktop notification (OSC 9), whatever the terminal.
    Osc9,
    /// Nothing.
    Off,
}

/// `acp:`: bounds on what an editor may send.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct AcpConfig {
    /// Longest message line read (MiB); a longer one is answered with a parse error and
    /// skipped without being held.
    #[serde(default = "default_line_mib")]
    pub max_line_mib: u32,
    /// Most bytes of attachments (images and embedded files, decoded) one prompt carries
    /// (MiB).
    #[serde(default = "default_attachments_mib")]
    pub max_attachments_mib: u32,
}

impl Default for AcpConfig {
    fn default() -> Self {
        Self {
            max_line_mib: default_line_mib(),
            max_attachments_mib: default_attachments_mib(),
        }
    }
}

fn default_line_mib() -> u32 {
    8
}

fn default_attachments_mib() -> u32 {
    50
}

/// The most either ACP bound may be: past it one message is a memory problem of its own.
pub const MAX_ACP_MIB: u32 = 1024;

impl AcpConfig {
    /// Checks the limits; the reason names the key.
    pub fn check(&self) -> Result<(), LimitError> {
        for (key, value) in [
            ("acp.max_line_mib", self.max_line_mib),
            ("acp.max_attachments_mib", self.max_attachments_mib),
        ] {
            if value == 0 || value > MAX_ACP_MIB {
                return Err(LimitError::new(
                    key,
                    format!("must be 1 to {MAX_ACP_MIB}, not {value}"),
                ));
            }
        }
        Ok(())
    }

    /// The longest line in bytes.
    pub fn line_bytes(&self) -> usize {
        usize::try_from(self.max_line_mib)
            .unwrap_or(usize::MAX)
            .saturating_mul(1024 * 1024)
    }

    /// The most attachment bytes of one prompt.
    pub fn attachment_bytes(&self) -> usize {
        usize::try_from(self.max_attachments_mib)
            .unwrap_or(usize::MAX)
            .saturating_mul(1024 * 1024)
    }
}
