//! Assembly: the model and how to reach it, the modes a run starts in, and what the
//! environment must offer; each session's services are in [`crate::services`].

use std::sync::Arc;

use keel_llm::{HttpProvider, ModelSpec, StreamFn, http_client_for};
use keel_tools::SandboxMode;
use keel_tools::permission::Mode;

use crate::error::RuntimeError;
use crate::settings::{ConfigError, Settings};

/// Where the model comes from.
#[derive(Clone)]
pub enum ModelChoice {
    /// This model and stream function for every session (a scripted model, a test double).
    Fixed {
        /// The model.
        spec: ModelSpec,
        /// How to reach it.
        stream: Arc<dyn StreamFn>,
    },
    /// A provider/model from the registry: the one named here, else the configured one.
    Configured {
        /// `provider/model` given by the caller (`--model`).
        model: Option<String>,
        /// Send requests to this base URL instead of the provider's.
        base_url: Option<String>,
    },
    /// No model: the runtime keeps sessions (lists, forks, rewinds, deletes and exports
    /// them, telling every extension), opens none and runs no turn. It needs no API key,
    /// and extensions start nothing for it (no MCP server).
    None,
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fixed { spec, .. } => write!(f, "Fixed({}/{})", spec.provider, spec.id),
            Self::Configured { model, base_url } => f
                .debug_struct("Configured")
                .field("model", model)
                .field("base_url", base_url)
                .finish(),
            Self::None => f.write_str("None"),
        }
    }
}

/// A model ready for requests.
#[derive(Clone)]
pub struct ResolvedModel {
    /// `provider/model`.
    pub name: String,
    /// The model.
    pub spec: ModelSpec,
    /// How to reach it.
    pub stream: Arc<dyn StreamFn>,
    /// The variable holding the provider's key, which no command may see.
    pub key_env: Option<String>,
    /// The provider entry requests are encoded for; `None` for a fixed model.
    pub entry: Option<Arc<keel_llm::ModelEntry>>,
}

/// Resolves the model: the fixed one, or `requested` (a session's own choice), else the
/// caller's `--model`, else the configuration's. Warnings go to `warnings`.
pub fn resolve_model(
    settings: &Settings,
    choice: &ModelChoice,
    requested: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<ResolvedModel, RuntimeError> {
    let (cli_model, base_url) = match choice {
        ModelChoice::Fixed { spec, stream } => {
            return Ok(ResolvedModel {
                name: format!("{}/{}", spec.provider, spec.id),
                spec: spec.clone(),
                stream: stream.clone(),
                key_env: None,
                entry: None,
            });
        }
        ModelChoice::Configured { model, base_url } => (requested.or(model.as_deref()), base_url),
        ModelChoice::None => return Err(RuntimeError::NoModel),
    };
    let resolved = settings.loaded.resolve_model(cli_model)?;
    let chosen_for_you = cli_model.is_none() && settings.loaded.config.model.is_none();
    if let Some(warning) = &resolved.warning {
        // The model the environment chose is said once per model, not at every start.
        let said =
            chosen_for_you && !first_time(settings.keel_home.as_deref(), "chosen-model", warning);
        if !said {
            warnings.push(warning.clone());
        }
    }
    let provider = resolved.entry.provider.clone();
    let mut entry = resolved.entry;
    match base_url {
        Some(url) => entry.base_url.clone_from(url),
        None => {
            if let Some(url) = settings.loaded.environment_base_url(&provider) {
                entry.base_url = url;
            }
        }
    }
    // The environment's key first, else the one `keel login` stored.
    let mut key_source = None;
    let key = match &resolved.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(key) if !key.trim().is_empty() => {
                key_source = Some(format!(
                    "the key in {var}: set a valid one there, or unset it and run `keel login {provider}`"
                ));
                Some(key)
            }
            _ => match crate::credentials::provider_key(settings.keel_home.as_deref(), &provider) {
                Some(key) => {
                    key_source = Some(format!(
                        "the key `keel login` stored: run `keel login {provider}` again, or set {var}"
                    ));
                    Some(key)
                }
                None => {
                    return Err(RuntimeError::MissingKey {
                        provider,
                        variable: var.clone(),
                    });
                }
            },
        },
        None => None,
    };
    let spec = entry.spec();
    let client = http_client_for(&entry.base_url).map_err(|e| {
        RuntimeError::Usage(format!("cannot set up the HTTP client for {provider}: {e}"))
    })?;
    Ok(ResolvedModel {
        name: format!("{}/{}", spec.provider, spec.id),
        spec,
        entry: Some(Arc::new(entry.clone())),
        stream: key_refused(
            Arc::new(HttpProvider::new(client, entry, key)),
            &provider,
            key_source,
        ),
        key_env: resolved.api_key_env.clone(),
    })
}

/// `stream` whose refused-key failures say which key was refused and how to fix it, in one
/// sentence, instead of the provider's words alone.
fn key_refused(
    stream: Arc<dyn StreamFn>,
    provider: &str,
    source: Option<String>,
) -> Arc<dyn StreamFn> {
    match source {
        Some(source) => Arc::new(KeyHint {
            inner: stream,
            hint: Arc::from(format!("{provider} refused {source}")),
        }),
        None => stream,
    }
}

/// See [`key_refused`].
struct KeyHint {
    inner: Arc<dyn StreamFn>,
    hint: Arc<str>,
}

impl StreamFn for KeyHint {
    fn stream(
        &self,
        request: keel_llm::LlmRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> keel_llm::EventStream {
        use futures::StreamExt as _;
        let hint = self.hint.clone();
        Box::pin(
            self.inner
                .stream(request, cancel)
                .map(move |event| match event {
                    keel_protocol::StreamEvent::Error {
                        stop_reason,
                        mut error,
                        usage,
                    } if error.code == keel_protocol::ErrorCode::Auth => {
                        error.message = format!("{hint} ({})", error.message);
                        keel_protocol::StreamEvent::Error {
                            stop_reason,
                            error,
                            usage,
                        }
                    }
                    other => other,
                }),
        )
    }
}

/// Whether `text` is new under `name` in `$KEEL_HOME` (then it is recorded): what keel says
/// once, not at every start. Without a home, everything is new.
fn first_time(keel_home: Option<&std::path::Path>, name: &str, text: &str) -> bool {
    let Some(home) = keel_home else {
        return true;
    };
    let path = home.join(format!(".said-{name}"));
    if std::fs::read_to_string(&path).is_ok_and(|said| said == text) {
        return false;
    }
    if std::fs::create_dir_all(home).is_ok() {
        let _ = std::fs::write(&path, text);
    }
    true
}

/// The permission mode: the caller's, else the configuration's, else `auto`.
pub fn permission_mode(settings: &Settings, requested: Option<Mode>) -> Mode {
    match (requested, settings.loaded.config.permission) {
        (Some(mode), _) => mode,
        (None, Some(configured)) => configured,
        (None, None) => Mode::Auto,
    }
}

/// The sandbox: the caller's, else the configuration's, else read-only under `plan` and
/// workspace-write otherwise.
pub fn sandbox_mode(
    settings: &Settings,
    requested: Option<SandboxMode>,
    mode: Mode,
) -> SandboxMode {
    match (requested, settings.loaded.config.sandbox.mode) {
        (Some(chosen), _) | (None, Some(chosen)) => chosen,
        (None, None) if mode == Mode::Plan => SandboxMode::ReadOnly,
        (None, None) => SandboxMode::WorkspaceWrite,
    }
}

/// Checks what must stop a run before anything runs: an unknown value must not fall back
/// to a weaker mode at the first command.
pub fn check_environment() -> Result<keel_tools::EnvMode, RuntimeError> {
    let env_mode = keel_tools::bash::envclean::mode_from_process().map_err(|e| {
        RuntimeError::Config(ConfigError::Model {
            source_name: keel_tools::bash::envclean::MODE_VARIABLE.into(),
            reason: e.to_string(),
        })
    })?;
    keel_sandbox::namespaces_setting().map_err(|e| {
        RuntimeError::Config(ConfigError::Model {
            source_name: keel_sandbox::NAMESPACES_VARIABLE.into(),
            reason: e.to_string(),
        })
    })?;
    Ok(env_mode)
}
