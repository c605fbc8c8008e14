//! Configuration: `$KEEL_HOME/config.yaml`, a project's `.keel/config.yaml`, an explicit
//! `--config FILE`, then `-c key.path=value` overrides, later ones winning key by key.
//!
//! Each file is checked on its own first, so an unknown key or a wrong type is reported
//! with the file, the line and the key; the files are then merged as YAML values and
//! checked once more with the overrides applied.
//!
//! A project file the user has not trusted ([`crate::settings::trust`]) is read last and may only
//! tighten: a stricter `permission` or `sandbox`, more `credential_paths`, `durable: true`.
//! Anything else in it is ignored and reported in [`Loaded::ignored`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use keel_llm::registry::{ProviderOverride, Registry, RegistryConfig, Resolved};
use keel_protocol::PermissionMode;
use serde::Deserialize;
use yaml_serde::{Mapping, Value};

/// The configuration file name in `$KEEL_HOME` and in a project's `.keel` folder.
pub const FILE_NAME: &str = "config.yaml";

/// What keel can be configured with.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Default model as `provider/model`.
    #[serde(default)]
    pub model: Option<String>,
    /// Permission mode: ask, auto, full or plan.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::permission_mode")]
    pub permission: Option<PermissionMode>,
    /// Providers and models to add or override.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderOverride>,
    /// Sync every history commit to disk before acknowledging it.
    #[serde(default)]
    pub durable: Option<bool>,
    /// Where `bash` may write (read-only, workspace-write or danger-full-access), and which
    /// hosts its commands may reach (`sandbox: {mode, network: {allow, deny}}`).
    #[serde(default)]
    pub sandbox: super::sandbox::SandboxSetting,
    /// More credential locations commands may not read (added to the built-in list,
    /// which cannot be shortened); `~/` is the home folder.
    #[serde(default)]
    pub credential_paths: Vec<String>,
    /// Extensions to switch on or off by id (an unknown id is an error).
    #[serde(default)]
    pub extensions: ExtensionsConfig,
    /// Models (`provider/model`, a model id, `*` wildcards) that get only critical
    /// reminders (DESIGN §4).
    #[serde(default)]
    pub disable_system_reminder_models: Vec<String>,
    /// The runaway guard (DESIGN §7).
    #[serde(default)]
    pub runaway_guard: super::harness::RunawayGuardConfig,
    /// Source references for fetched pages (DESIGN §9).
    #[serde(default)]
    pub source_references: bool,
    /// The tool-output budget.
    #[serde(default)]
    pub output_budget: super::harness::OutputBudgetConfig,
    /// Context management: budget margins, archiving, compaction (DESIGN §12).
    #[serde(default)]
    pub context: super::harness::ContextConfig,
    /// MCP servers by name.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, super::extend::McpServerConfig>,
    /// MCP defaults and deferred tool disclosure.
    #[serde(default)]
    pub mcp: super::extend::McpConfig,
    /// Skills.
    #[serde(default)]
    pub skills: super::extend::SkillsConfig,
    /// User hooks in Claude Code's shape (`PreToolUse: [{matcher, hooks: [...]}]`).
    #[serde(default)]
    pub hooks: Option<serde_json::Value>,
    /// Background tasks: how many run at once.
    #[serde(default)]
    pub tasks: super::extend::TasksConfig,
    /// Goals: the default limits of a goal (DESIGN §14a).
    #[serde(default)]
    pub goals: super::extend::GoalsConfig,
    /// `keel acp`: bounds on what an editor may send.
    #[serde(default)]
    pub acp: super::extend::AcpConfig,
    /// The interactive front end (`tui: {notifications: auto|bell|osc9|off}`).
    #[serde(default)]
    pub tui: super::extend::TuiConfig,
}

/// `extensions: {enabled: [...], disabled: [...]}`.
#[derive(
    Debug, Clone, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ExtensionsConfig {
    /// Ids to switch on.
    #[serde(default)]
    pub enabled: Vec<String>,
    /// Ids to switch off (wins over `enabled`).
    #[serde(default)]
    pub disabled: Vec<String>,
}

/// How strict a sandbox mode is.
fn sandbox_strictness(mode: keel_tools::SandboxMode) -> u8 {
    match mode {
        keel_tools::SandboxMode::DangerFullAccess => 0,
        keel_tools::SandboxMode::WorkspaceWrite => 1,
        keel_tools::SandboxMode::ReadOnly => 2,
    }
}

/// Extensions an untrusted project file may switch off: each only offers the model a tool,
/// so switching it off can only take a capability away.
pub const PROJECT_MAY_DISABLE: &[&str] = &["todo", "web-fetch"];

/// A configuration file to read, and whether the user trusts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// The file.
    pub path: PathBuf,
    /// Trusted files count in full; an untrusted (project) file may only tighten.
    pub trusted: bool,
}

impl ConfigFile {
    /// A file that counts in full (the user's own, or one named on the command line).
    pub fn trusted(path: PathBuf) -> Self {
        Self {
            path,
            trusted: true,
        }
    }
}

/// A configuration problem; the message names the file, line and key when known.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file is not valid configuration.
    #[error("{path}{line}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `:LINE` when known.
        line: String,
        /// What is wrong (names the key).
        reason: String,
    },
    /// A `-c` override is malformed or makes the configuration invalid.
    #[error("-c {spec}: {reason}")]
    Override {
        /// The override as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// The model names an unknown provider or is not `provider/model`.
    #[error("{source_name}: {reason}")]
    Model {
        /// Where the model was set.
        source_name: String,
        /// What is wrong.
        reason: String,
    },
    /// No model is named and no provider key (nor a local model server) is there to choose
    /// one: a first run.
    #[error(
        "no model is configured and no provider key is set: export one of {variables}, or run \
         `keel login`, or run a local model (Ollama or LM Studio; or --model ollama/NAME), or \
         pass --model provider/model, or set `model:` in ~/.keel/config.yaml"
    )]
    NoKey {
        /// The variables that would choose a provider, in order.
        variables: String,
    },
    /// A configured limit is out of its range.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// What keel builds in (its provider presets) is damaged: keel's fault, not the
    /// configuration's.
    #[error("{0}")]
    Internal(String),
}

/// A configured limit out of its range, named by its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {rule}")]
pub struct LimitError {
    /// The key (`tasks.max_concurrent`, `output_budget`).
    pub key: &'static str,
    /// What the value must be, and what it is.
    pub rule: String,
}

impl LimitError {
    /// `key` broke `rule`.
    pub fn new(key: &'static str, rule: impl Into<String>) -> Self {
        Self {
            key,
            rule: rule.into(),
        }
    }
}

impl ConfigError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Read { .. } => "config_read",
            Self::Invalid { .. } => "config_invalid",
            Self::Override { .. } => "config_override",
            Self::Model { .. } => "config_model",
            Self::NoKey { .. } => "no_provider_key",
            Self::Limit(_) => "config_limit",
            Self::Internal(_) => "internal_error",
        }
    }
}

/// `reason` with the nearest valid name appended when it is serde's "unknown field" or
/// "unknown variant" message, whose list of expected names is long and easy to misread.
fn with_suggestion(reason: &str) -> String {
    let Some(at) = reason
        .find("unknown field `")
        .or_else(|| reason.find("unknown variant `"))
    else {
        return reason.to_owned();
    };
    let mut quoted = reason[at..].split('`').skip(1).step_by(2);
    let Some(word) = quoted.next() else {
        return reason.to_owned();
    };
    match keel_protocol::spelling::nearest(word, quoted) {
        Some(name) => format!("{reason}; did you mean `{name}`?"),
        None => reason.to_owned(),
    }
}

/// The merged configuration and where its model came from.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Files read, in order.
    pub files: Vec<PathBuf>,
    /// Where `model` was last set (`FILE:LINE`, `-c model=…`), for error messages.
    pub model_source: Option<String>,
    /// Settings of untrusted project files that were ignored, one warning per file.
    pub ignored: Vec<String>,
    /// `$KEEL_HOME`, where keys `keel login` stored are (set by [`super::Settings::load`]).
    pub keel_home: Option<PathBuf>,
    /// What each file and override set, in the order applied (for `keel config show`).
    pub layers: Vec<Layer>,
}

/// What one file or one `-c` override set.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The file's path, or `-c key=value`.
    pub source: String,
    /// The file's text, to find the line a key is on.
    pub text: Option<String>,
    /// The values it set (the sandbox always as a map).
    pub value: serde_json::Value,
    /// Whether its values count in full (an untrusted project file may only tighten).
    pub trusted: bool,
}

impl Layer {
    fn new(source: String, text: Option<String>, value: &Value, trusted: bool) -> Self {
        Self {
            source,
            text,
            value: serde_json::to_value(value).unwrap_or_default(),
            trusted,
        }
    }
}

/// `$KEEL_HOME`, else `~/.keel` (the one rule keel-tools' permission rules use too).
pub fn keel_home() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    keel_tools::permission::keel_home(home.as_deref())
}

/// The project's `.keel/config.yaml`, at its root only; `Err` says why one that is there is
/// ignored (another user's: [`super::project`]).
pub fn project_file(
    project: &super::project::Project,
) -> Result<Option<PathBuf>, super::project::RefusedFile> {
    let path = project.root.join(".keel").join(FILE_NAME);
    if !path.is_file() {
        return Ok(None);
    }
    project.admit(&path).map(|()| Some(path))
}

/// Loads and merges `files` (missing optional ones skipped by the caller), then applies
/// `overrides` (`key.path=value`, the value read as YAML), then what untrusted files may
/// tighten.
pub fn load(files: &[ConfigFile], overrides: &[String]) -> Result<Loaded, ConfigError> {
    let mut merged = Value::Mapping(Mapping::new());
    let mut loaded = Loaded::default();
    let mut untrusted: Vec<(PathBuf, Config, Vec<String>)> = Vec::new();
    for file in files {
        let path = &file.path;
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let invalid = |error: yaml_serde::Error| ConfigError::Invalid {
            path: path.clone(),
            line: error
                .location()
                .map(|l| format!(":{}", l.line()))
                .unwrap_or_default(),
            reason: with_suggestion(&strip_location(&error.to_string())),
        };
        if text.trim().is_empty() {
            loaded.files.push(path.clone());
            continue;
        }
        let checked: Config = yaml_serde::from_str(&text).map_err(invalid)?;
        let mut value: Value = yaml_serde::from_str(&text).map_err(invalid)?;
        loaded.files.push(path.clone());
        sandbox_as_map(&mut value);
        loaded.layers.push(Layer::new(
            path.display().to_string(),
            Some(text.clone()),
            &value,
            file.trusted,
        ));
        if !file.trusted {
            let keys = match &value {
                Value::Mapping(map) => map
                    .keys()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            untrusted.push((path.clone(), checked, keys));
            continue;
        }
        if checked.model.is_some() {
            let line = text
                .lines()
                .position(|l| l.starts_with("model:"))
                .map(|n| format!(":{}", n + 1))
                .unwrap_or_default();
            loaded.model_source = Some(format!("{}{line}", path.display()));
        }
        merge(&mut merged, value);
    }
    for spec in overrides {
        let (key, raw) = spec.split_once('=').ok_or_else(|| ConfigError::Override {
            spec: spec.clone(),
            reason: "expected key.path=value".into(),
        })?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(ConfigError::Override {
                spec: spec.clone(),
                reason: "the key is empty".into(),
            });
        }
        let value: Value = yaml_serde::from_str(raw).map_err(|e| ConfigError::Override {
            spec: spec.clone(),
            reason: strip_location(&e.to_string()),
        })?;
        // `-c sandbox=MODE` sets the mode and keeps the network.
        let key = if key == "sandbox" && value.is_string() {
            "sandbox.mode"
        } else {
            key
        };
        let mut set = Value::Mapping(Mapping::new());
        set_path(&mut set, key, value.clone());
        sandbox_as_map(&mut set);
        loaded
            .layers
            .push(Layer::new(format!("-c {spec}"), None, &set, true));
        set_path(&mut merged, key, value);
        if key == "model" {
            loaded.model_source = Some(format!("-c {spec}"));
        }
        yaml_serde::from_value::<Config>(merged.clone()).map_err(|e| ConfigError::Override {
            spec: spec.clone(),
            reason: with_suggestion(&strip_location(&e.to_string())),
        })?;
    }
    loaded.config = yaml_serde::from_value(merged).map_err(|e| ConfigError::Override {
        spec: "(merged)".into(),
        reason: e.to_string(),
    })?;
    for (path, project, keys) in untrusted {
        let ignored = tighten(&mut loaded.config, project, &keys);
        if !ignored.is_empty() {
            loaded.ignored.push(format!(
                "{} is not trusted, so only settings that make keel stricter apply; ignored: {}. \
                 Run `keel trust` in the project to trust it as it is now.",
                path.display(),
                ignored.join(", ")
            ));
        }
    }
    Ok(loaded)
}

/// Applies what an untrusted file may change (only towards stricter); returns the keys it
/// set that were ignored.
fn tighten(config: &mut Config, project: Config, keys: &[String]) -> Vec<String> {
    let mut ignored: Vec<String> = Vec::new();
    let mut skip = |key: &str| {
        if keys.iter().any(|k| k == key) {
            ignored.push(key.to_owned());
        }
    };
    let effective = config.permission.unwrap_or(PermissionMode::Auto);
    match project.permission {
        Some(mode) if mode.strictness() > effective.strictness() => config.permission = Some(mode),
        Some(mode) if mode.strictness() < effective.strictness() => skip("permission"),
        _ => {}
    }
    let default_sandbox = if config.permission == Some(PermissionMode::Plan) {
        keel_tools::SandboxMode::ReadOnly
    } else {
        keel_tools::SandboxMode::WorkspaceWrite
    };
    let effective = config.sandbox.mode.unwrap_or(default_sandbox);
    match project.sandbox.mode {
        Some(mode) if sandbox_strictness(mode) > sandbox_strictness(effective) => {
            config.sandbox.mode = Some(mode);
        }
        Some(mode) if sandbox_strictness(mode) < sandbox_strictness(effective) => skip("sandbox"),
        _ => {}
    }
    // A project may deny hosts, never allow more: a cloned repository must not open the
    // network its commands reach.
    config
        .sandbox
        .network
        .deny
        .extend(project.sandbox.network.deny);
    if !project.sandbox.network.allow.is_empty() || !project.sandbox.network.defaults {
        ignored.push("sandbox.network.allow".to_owned());
    }
    if project.durable == Some(true) {
        config.durable = Some(true);
    }
    config.credential_paths.extend(project.credential_paths);
    // Switching off an extension that only offers a tool removes a capability; switching
    // off anything else (the runaway guard, the reminders) or on is the user's to choose.
    let (allowed, refused): (Vec<String>, Vec<String>) = project
        .extensions
        .disabled
        .into_iter()
        .partition(|id| PROJECT_MAY_DISABLE.contains(&id.as_str()));
    config.extensions.disabled.extend(allowed);
    if !refused.is_empty() {
        ignored.push(format!("extensions.disabled ({})", refused.join(", ")));
    }
    if !project.extensions.enabled.is_empty() {
        ignored.push("extensions.enabled".to_owned());
    }
    for key in keys {
        if !matches!(
            key.as_str(),
            "permission" | "sandbox" | "durable" | "credential_paths" | "extensions"
        ) {
            ignored.push(key.clone());
        }
    }
    ignored
}

impl Loaded {
    /// Checks what reading alone cannot: every limit in its range and the providers'
    /// definitions, so a configuration that loads is one a run accepts.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.config.output_budget.limits()?;
        self.config.tasks.check()?;
        self.config.goals.check()?;
        self.config.acp.check()?;
        self.registry()?;
        Ok(())
    }

    /// The model ids the registry lists for `provider` (empty for an unknown provider).
    pub fn provider_models(&self, provider: &str) -> Vec<String> {
        let Ok(registry) = self.registry() else {
            return Vec::new();
        };
        registry
            .providers()
            .find(|(name, _)| *name == provider)
            .map(|(_, p)| p.models.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Every model the registry knows whose provider has its key in the environment (or
    /// needs none), the configured providers included, as provider/model, sorted (empty
    /// when the providers do not load).
    pub fn model_names(&self) -> Vec<String> {
        let Ok(registry) = self.registry() else {
            return Vec::new();
        };
        // A model whose provider has no key here cannot answer: it is not offered.
        let keyed = |name: &str, p: &keel_llm::registry::Provider| {
            p.api_key_env.as_deref().is_none_or(|variable| {
                is_set(variable)
                    || crate::credentials::provider_key(self.keel_home.as_deref(), name).is_some()
            })
        };
        let mut names: Vec<String> = registry
            .providers()
            .filter(|(name, p)| keyed(name, p))
            .flat_map(|(provider, p)| p.models.keys().map(move |m| format!("{provider}/{m}")))
            .collect();
        names.sort();
        names
    }

    /// The thinking levels `model` (provider/model) offers, `off` first when it
    /// reasons at all; empty for a model the registry does not know or that does not reason.
    pub fn thinking_levels(&self, model: &str) -> Vec<keel_protocol::ThinkingLevel> {
        let Ok(resolved) = self.resolve_model(Some(model)) else {
            return Vec::new();
        };
        let levels = &resolved.entry.capabilities.thinking_levels;
        if levels.is_empty() {
            return Vec::new();
        }
        std::iter::once(keel_protocol::ThinkingLevel::Off)
            .chain(
                levels
                    .iter()
                    .copied()
                    .filter(|l| *l != keel_protocol::ThinkingLevel::Off),
            )
            .collect()
    }

    /// The registry with the configured providers applied.
    pub fn registry(&self) -> Result<Registry, ConfigError> {
        let mut registry = Registry::builtin().map_err(|e| ConfigError::Internal(e.to_string()))?;
        registry
            .apply(RegistryConfig {
                providers: self.config.providers.clone(),
            })
            .map_err(|e| ConfigError::Model {
                source_name: "providers".into(),
                reason: e.to_string(),
            })?;
        Ok(registry)
    }

    /// Resolves `provider/model` (from the command line, else the configuration).
    pub fn resolve_model(&self, cli_model: Option<&str>) -> Result<Resolved, ConfigError> {
        let (spec, source) = match cli_model {
            Some(model) => (model.to_owned(), "--model".to_owned()),
            None => match &self.config.model {
                Some(model) => (
                    model.clone(),
                    self.model_source.clone().unwrap_or_else(|| "config".into()),
                ),
                None => return self.model_from_environment(),
            },
        };
        let Some((provider, model)) = spec
            .split_once('/')
            .filter(|(p, m)| !p.is_empty() && !m.is_empty())
        else {
            return Err(ConfigError::Model {
                source_name: source,
                reason: format!(
                    "model `{spec}` must be written provider/model, for example anthropic/claude-sonnet-4-5"
                ),
            });
        };
        let mut resolved =
            self.registry()?
                .resolve(provider, model)
                .map_err(|e| ConfigError::Model {
                    source_name: source,
                    reason: e.to_string(),
                })?;
        super::local::apply_window(&mut resolved);
        Ok(resolved)
    }
}

/// The providers a key in the environment chooses when nothing names a model, in this
/// order when several keys are set, each with the model it starts with.
pub const ENVIRONMENT_PROVIDERS: &[(&str, &str)] = &[
    ("anthropic", "claude-sonnet-4-5"),
    ("openai", "gpt-5"),
    ("google", "gemini-2.5-pro"),
    ("openrouter", "anthropic/claude-sonnet-4.5"),
    ("minimax", "MiniMax-M2.7"),
    ("deepseek", "deepseek-chat"),
    ("mistral", "devstral-medium-latest"),
];

/// Whether the variable `name` holds a value.
fn is_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

impl Loaded {
    /// With no model named anywhere: the first provider of [`ENVIRONMENT_PROVIDERS`] whose
    /// key is in the environment, with its starting model, and a warning saying so and how
    /// to choose another.
    fn model_from_environment(&self) -> Result<Resolved, ConfigError> {
        let registry = self.registry()?;
        let found = ENVIRONMENT_PROVIDERS.iter().find_map(|(provider, model)| {
            let resolved = registry.resolve(provider, model).ok()?;
            let variable = resolved.api_key_env.clone()?;
            is_set(&variable).then_some((resolved, variable, provider, model))
        });
        // Else a key `keel login` stored.
        let found = found.or_else(|| {
            ENVIRONMENT_PROVIDERS.iter().find_map(|(provider, model)| {
                crate::credentials::provider_key(self.keel_home.as_deref(), provider)?;
                let resolved = registry.resolve(provider, model).ok()?;
                Some((
                    resolved,
                    "its key from `keel login`".to_owned(),
                    provider,
                    model,
                ))
            })
        });
        // The user's own file, named as it is here (`$KEEL_HOME` may be elsewhere).
        let file = self.keel_home.as_ref().map_or_else(
            || "~/.keel/config.yaml".to_owned(),
            |home| home.join(FILE_NAME).display().to_string(),
        );
        let Some((mut resolved, variable, provider, model)) = found else {
            // No key anywhere: a model server on this machine will do.
            if let Some((mut resolved, what)) = super::local::find(&registry) {
                resolved.warning = Some(format!(
                    "no model is configured and no provider key is set: using {what} \
                     (choose another with --model provider/model or `model:` in {file})"
                ));
                return Ok(resolved);
            }
            let variables: Vec<String> = ENVIRONMENT_PROVIDERS
                .iter()
                .filter_map(|(provider, model)| registry.resolve(provider, model).ok()?.api_key_env)
                .collect();
            return Err(ConfigError::NoKey {
                variables: variables.join(", "),
            });
        };
        resolved.warning = Some(format!(
            "no model is configured: using {provider}/{model} because {variable} is set \
             (choose another with --model provider/model or `model:` in {file})"
        ));
        Ok(resolved)
    }

    /// The base URL the environment gives `provider` (`ANTHROPIC_BASE_URL`,
    /// `OPENAI_BASE_URL`, as the providers' own SDKs read them), unless the configuration
    /// sets the provider's `base_url` itself.
    pub fn environment_base_url(&self, provider: &str) -> Option<String> {
        let variable = match provider {
            "anthropic" => "ANTHROPIC_BASE_URL",
            "openai" => "OPENAI_BASE_URL",
            _ => return None,
        };
        let configured = self
            .config
            .providers
            .get(provider)
            .is_some_and(|o| o.base_url.is_some());
        if configured {
            return None;
        }
        std::env::var(variable)
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }
}

/// yaml_serde puts the location at the end of its message; the file prefix carries it.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// `sandbox: MODE` read as `sandbox: {mode: MODE}`, so that a later file or override that
/// sets only `sandbox.network` keeps the mode, and one that sets only the mode keeps the
/// network.
fn sandbox_as_map(root: &mut Value) {
    let Value::Mapping(map) = root else {
        return;
    };
    if let Some(sandbox) = map.get_mut("sandbox")
        && let Value::String(mode) = sandbox
    {
        let mut inner = Mapping::new();
        inner.insert(Value::String("mode".into()), Value::String(mode.clone()));
        *sandbox = Value::Mapping(inner);
    }
}

fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Mapping(base), Value::Mapping(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

fn set_path(root: &mut Value, key: &str, value: Value) {
    let mut parts = key.split('.').peekable();
    let mut node = root;
    while let Some(part) = parts.next() {
        if !matches!(node, Value::Mapping(_)) {
            *node = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(map) = node else { return };
        let name = Value::String(part.to_owned());
        if parts.peek().is_none() {
            map.insert(name, value);
            return;
        }
        node = map
            .entry(name)
            .or_insert_with(|| Value::Mapping(Mapping::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::Api;
    use std::path::Path;

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_misspelt_key_or_value_names_the_nearest_valid_one() {
        let dir = tempfile::tempdir().unwrap();
        for (text, line, hint) in [
            (
                "durable: true\nmodle: a/b\n",
                ":2:",
                "did you mean `model`?",
            ),
            (
                "sandbox:\n  mdoe: read-only\n",
                ":2:",
                "did you mean `mode`?",
            ),
            ("permission: akk\n", ":1:", "did you mean `ask`?"),
        ] {
            let path = file(dir.path(), "config.yaml", text);
            let error = load(&[ConfigFile::trusted(path)], &[])
                .unwrap_err()
                .to_string();
            assert!(error.contains(line) && error.ends_with(hint), "{error}");
        }
        let path = file(dir.path(), "config.yaml", "colourful: true\n");
        let error = load(&[ConfigFile::trusted(path)], &[])
            .unwrap_err()
            .to_string();
        assert!(!error.contains("did you mean"), "{error}");
        let error = load(&[], &["permision=ask".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("did you mean `permission`?"), "{error}");
    }

    #[test]
    fn a_sandbox_mode_and_network_set_in_different_places_both_hold() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home.yaml");
        std::fs::write(&home, "sandbox: read-only\n").unwrap();
        let extra = dir.path().join("extra.yaml");
        std::fs::write(&extra, "sandbox:\n  network:\n    allow: [example.com]\n").unwrap();
        let loaded = load(
            &[
                ConfigFile::trusted(home.clone()),
                ConfigFile::trusted(extra),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            loaded.config.sandbox.mode,
            Some(keel_tools::SandboxMode::ReadOnly)
        );
        assert!(loaded.config.sandbox.network.rules().allows("example.com"));
        let loaded = load(
            &[ConfigFile::trusted(home)],
            &[
                "sandbox.network.deny=[crates.io]".to_owned(),
                "sandbox=workspace-write".to_owned(),
            ],
        )
        .unwrap();
        assert_eq!(
            loaded.config.sandbox.mode,
            Some(keel_tools::SandboxMode::WorkspaceWrite)
        );
        assert!(!loaded.config.sandbox.network.rules().allows("crates.io"));
    }

    #[test]
    fn the_issue_shape_loads_and_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let home = file(
            dir.path(),
            "home.yaml",
            "model: mock/mock-model\npermission: auto\nproviders:\n  mock:\n    api: openai-completions\n    base_url: http://127.0.0.1:8080/v1\n    api_key_env: MOCK_API_KEY\n    models:\n      mock-model: {context_window: 128000, max_output: 16384}\n",
        );
        let loaded = load(&[ConfigFile::trusted(home)], &[]).unwrap();
        assert_eq!(loaded.config.permission, Some(PermissionMode::Auto));
        let resolved = loaded.resolve_model(None).unwrap();
        assert_eq!(resolved.entry.api, Api::OpenAiCompletions);
        assert_eq!(resolved.entry.context_window, 128_000);
        assert_eq!(resolved.api_key_env.as_deref(), Some("MOCK_API_KEY"));
    }

    #[test]
    fn later_files_and_overrides_win_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let home = file(
            dir.path(),
            "a.yaml",
            "model: anthropic/claude-sonnet-4-5\npermission: ask\n",
        );
        let project = file(dir.path(), "b.yaml", "permission: plan\n");
        let loaded = load(
            &[
                ConfigFile::trusted(home.clone()),
                ConfigFile::trusted(project),
            ],
            &["model=openai/gpt-5".into()],
        )
        .unwrap();
        assert_eq!(loaded.config.permission, Some(PermissionMode::Plan));
        assert_eq!(loaded.config.model.as_deref(), Some("openai/gpt-5"));
        assert_eq!(
            loaded.model_source.as_deref(),
            Some("-c model=openai/gpt-5")
        );
        let nested = load(
            &[ConfigFile::trusted(home)],
            &["providers.anthropic.base_url=http://127.0.0.1:9".into()],
        )
        .unwrap();
        assert_eq!(
            nested.resolve_model(None).unwrap().entry.base_url,
            "http://127.0.0.1:9"
        );
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let unknown = file(dir.path(), "unknown.yaml", "model: a/b\nmodle: x\n");
        let err = load(&[ConfigFile::trusted(unknown)], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown.yaml:2") && err.contains("modle"),
            "{err}"
        );
        let wrong_type = file(
            dir.path(),
            "type.yaml",
            "providers:\n  mock:\n    api: openai-completions\n    base_url: http://x\n    models:\n      m: {context_window: lots, max_output: 1}\n",
        );
        let err = load(&[ConfigFile::trusted(wrong_type)], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("type.yaml:6") && err.contains("context_window"),
            "{err}"
        );
        let bad_mode = file(dir.path(), "mode.yaml", "permission: yolo\n");
        let err = load(&[ConfigFile::trusted(bad_mode)], &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("mode.yaml:1") && err.contains("yolo"), "{err}");
        let provider = file(dir.path(), "provider.yaml", "\nmodel: nope/x\n");
        let err = load(&[ConfigFile::trusted(provider)], &[])
            .unwrap()
            .resolve_model(None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("provider.yaml:2") && err.contains("unknown provider `nope`"),
            "{err}"
        );
        let err = load(&[], &["permission".into()]).unwrap_err().to_string();
        assert!(err.contains("key.path=value"), "{err}");
        let err = load(&[], &["permission=sometimes".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("-c permission=sometimes") && err.contains("sometimes"),
            "{err}"
        );
        let err = load(&[], &["model=just-a-name".into()])
            .unwrap()
            .resolve_model(None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("provider/model"), "{err}");
    }

    /// Regression: a cloned repository's config could switch off the runaway guard and every
    /// reminder through `extensions.disabled`; only tool extensions may go that way.
    #[test]
    fn an_untrusted_project_may_switch_off_tools_only() {
        let dir = tempfile::tempdir().unwrap();
        let project = file(
            dir.path(),
            "project.yaml",
            "extensions:\n  disabled: [web-fetch, runaway-guard, reminders, host.permission, no-such]\n",
        );
        let loaded = load(
            &[ConfigFile {
                path: project,
                trusted: false,
            }],
            &[],
        )
        .unwrap();
        assert_eq!(loaded.config.extensions.disabled, ["web-fetch"]);
        let warning = loaded.ignored.join("\n");
        assert!(
            warning.contains(
                "extensions.disabled (runaway-guard, reminders, host.permission, no-such)"
            ),
            "{warning}"
        );
    }

    #[test]
    fn an_untrusted_project_cannot_loosen_the_bounds() {
        // A cloned repository could otherwise let a goal run for ever, a session fill the
        // disk with outputs, or an editor send lines of any size.
        let dir = tempfile::tempdir().unwrap();
        let project = file(
            dir.path(),
            "project.yaml",
            concat!(
                "goals: {max_turns: 100000, max_tokens: 1000000000}\n",
                "output_budget: {artifacts_quota_mib: 1000000}\n",
                "acp: {max_line_mib: 1024, max_attachments_mib: 1024}\n",
            ),
        );
        let untrusted = ConfigFile {
            path: project.clone(),
            trusted: false,
        };
        let loaded = load(&[untrusted], &[]).unwrap();
        assert_eq!(
            loaded.config.goals,
            super::super::extend::GoalsConfig::default()
        );
        assert_eq!(
            loaded.config.acp,
            super::super::extend::AcpConfig::default()
        );
        assert_eq!(
            loaded.config.output_budget,
            super::super::OutputBudgetConfig::default()
        );
        let ignored = loaded.ignored.join("\n");
        for key in ["goals", "output_budget", "acp"] {
            assert!(ignored.contains(key), "{key}: {ignored}");
        }
        let trusted = load(&[ConfigFile::trusted(project)], &[]).unwrap();
        assert_eq!(trusted.config.goals.max_turns, 100_000);
    }

    #[test]
    fn an_untrusted_project_cannot_change_context_management() {
        // A project could otherwise drop the user's own messages from compactions or
        // switch archiving off to flood the window.
        let dir = tempfile::tempdir().unwrap();
        let project = file(
            dir.path(),
            "project.yaml",
            "context:\n  auto_compact: false\n  user_message_tokens: 0\n  protected_rounds: 0\n",
        );
        let loaded = load(
            &[ConfigFile {
                path: project.clone(),
                trusted: false,
            }],
            &[],
        )
        .unwrap();
        assert_eq!(
            loaded.config.context,
            super::super::ContextConfig::default()
        );
        assert!(
            loaded.ignored.join("\n").contains("context"),
            "{:?}",
            loaded.ignored
        );
        let trusted = load(&[ConfigFile::trusted(project)], &[]).unwrap();
        assert!(!trusted.config.context.auto_compact);
        assert_eq!(trusted.config.context.user_message_tokens, 0);
        // A typo is named.
        let typo = file(
            dir.path(),
            "typo.yaml",
            "context:\n  auto_compactt: false\n",
        );
        let error = load(&[ConfigFile::trusted(typo)], &[])
            .unwrap_err()
            .to_string();
        assert!(error.contains("auto_compactt"), "{error}");
    }

    #[test]
    fn an_untrusted_project_file_only_tightens() {
        let dir = tempfile::tempdir().unwrap();
        let user = file(dir.path(), "user.yaml", "permission: ask\nmodel: a/b\n");
        let project = file(
            dir.path(),
            "project.yaml",
            "permission: full\nsandbox: danger-full-access\nmodel: evil/x\nproviders:\n  anthropic:\n    base_url: http://evil.example\ncredential_paths: [/srv/secrets]\n",
        );
        let files = [
            ConfigFile::trusted(user.clone()),
            ConfigFile {
                path: project.clone(),
                trusted: false,
            },
        ];
        let loaded = load(&files, &[]).unwrap();
        assert_eq!(loaded.config.permission, Some(PermissionMode::Ask));
        assert_eq!(loaded.config.sandbox.mode, None);
        assert_eq!(loaded.config.model.as_deref(), Some("a/b"));
        assert!(loaded.config.providers.is_empty());
        assert_eq!(
            loaded.config.credential_paths,
            vec!["/srv/secrets".to_owned()]
        );
        let warning = loaded.ignored.join("\n");
        for key in ["permission", "sandbox", "model", "providers"] {
            assert!(warning.contains(key), "{warning}");
        }
        assert!(warning.contains("keel trust"), "{warning}");

        let strict = file(
            dir.path(),
            "strict.yaml",
            "permission: plan\nsandbox: read-only\n",
        );
        let loaded = load(
            &[
                ConfigFile::trusted(user),
                ConfigFile {
                    path: strict,
                    trusted: false,
                },
            ],
            &[],
        )
        .unwrap();
        assert_eq!(loaded.config.permission, Some(PermissionMode::Plan));
        // Plan already implies the read-only sandbox.
        assert_eq!(loaded.config.sandbox.mode, None);
        assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);

        // Trusted, the same file counts in full.
        let loaded = load(&[ConfigFile::trusted(project)], &[]).unwrap();
        assert_eq!(loaded.config.permission, Some(PermissionMode::Full));
    }
}
