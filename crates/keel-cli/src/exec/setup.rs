//! Setting up a run of `keel exec`: configuration, the model and its transport, and the
//! built-in tools behind the headless permission gate.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use keel_agent::runner::TurnHooks;
use keel_llm::scripted::{ResponseSpec, ScriptedProvider, ScriptedResponse};
use keel_llm::{HttpProvider, ModelSpec, StreamFn, http_client_for};
use keel_tools::permission::{Mode, PermissionGate, PermissionHook, RuleSet};
use keel_tools::{SandboxMode, ToolEnv};

use super::ExecArgs;
use crate::config::{self, ConfigError};

/// The model and how to reach it: a scripted model, or a provider from the registry.
pub(super) fn model_and_stream(
    args: &ExecArgs,
    loaded: &config::Loaded,
) -> anyhow::Result<(ModelSpec, Arc<dyn StreamFn>)> {
    if let Some(script) = &args.mock_script {
        let text = std::fs::read_to_string(script)
            .with_context(|| format!("cannot read the mock script {}", script.display()))?;
        let specs: Vec<ResponseSpec> = serde_json::from_str(&text).with_context(|| {
            format!(
                "the mock script {} is not a JSON list of responses",
                script.display()
            )
        })?;
        let provider =
            ScriptedProvider::with_responses(specs.into_iter().map(ScriptedResponse::from));
        return Ok((ModelSpec::scripted(), Arc::new(provider)));
    }
    let resolved = loaded.resolve_model(args.model.as_deref())?;
    if let Some(warning) = &resolved.warning {
        eprintln!("keel: warning: {warning}");
    }
    let provider = resolved.entry.provider.clone();
    let mut entry = resolved.entry;
    if let Some(url) = &args.base_url {
        entry.base_url.clone_from(url);
    }
    let key = match &resolved.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(key) if !key.trim().is_empty() => Some(key),
            _ => bail!("provider `{provider}` needs an API key: set {var}"),
        },
        None => None,
    };
    let spec = entry.spec();
    Ok((
        spec,
        Arc::new(HttpProvider::new(
            http_client_for(&entry.base_url)?,
            entry,
            key,
        )),
    ))
}

/// The built-in tools over `cwd`, behind the permission gate (headless: what would ask is
/// denied, with the reason).
pub(super) fn tools_and_gate(
    args: &ExecArgs,
    loaded: &config::Loaded,
    cwd: &std::path::Path,
) -> anyhow::Result<(Vec<keel_agent::ToolRef>, TurnHooks)> {
    let mode_name = match (&args.permission, loaded.config.permission) {
        (Some(name), _) => name.clone(),
        (None, Some(mode)) => mode.name().to_owned(),
        (None, None) => "auto".to_owned(),
    };
    let mode: Mode = mode_name.parse().map_err(|_| ConfigError::Model {
        source_name: "--permission".into(),
        reason: format!("unknown permission mode `{mode_name}` (use ask, auto, full or plan)"),
    })?;
    let mut env = ToolEnv::new(cwd.to_path_buf());
    env.sandbox = match (args.sandbox, loaded.config.sandbox) {
        (Some(chosen), _) | (None, Some(chosen)) => chosen,
        (None, None) if mode == Mode::Plan => SandboxMode::ReadOnly,
        (None, None) => SandboxMode::WorkspaceWrite,
    };
    let env = Arc::new(env);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let rules =
        RuleSet::load(config::keel_home().as_deref(), Some(cwd), home.as_deref()).map_err(|e| {
            ConfigError::Model {
                source_name: "permissions".into(),
                reason: e.to_string(),
            }
        })?;
    let gate = Arc::new(PermissionGate::new(&env, mode, rules));
    let tools = keel_tools::builtin_tools(env)
        .map_err(|e| anyhow::anyhow!("cannot set up the tools: {e}"))?;
    let hooks = TurnHooks {
        before_tool_call: vec![Arc::new(PermissionHook::headless(gate))],
        ..TurnHooks::default()
    };
    Ok((tools, hooks))
}

/// The configuration: `$KEEL_HOME/config.yaml`, the project's `.keel/config.yaml`, then
/// `--config`, then `-c` overrides.
pub(super) fn load_config(
    args: &ExecArgs,
    cwd: &std::path::Path,
) -> Result<config::Loaded, ConfigError> {
    let mut files = Vec::new();
    if let Some(home) = config::keel_home()
        .map(|h| h.join(config::FILE_NAME))
        .filter(|p| p.is_file())
    {
        files.push(home);
    }
    if let Some(project) = config::project_file(cwd).filter(|p| !files.contains(p)) {
        files.push(project);
    }
    if let Some(explicit) = &args.config {
        files.push(explicit.clone());
    }
    config::load(&files, &args.set)
}
