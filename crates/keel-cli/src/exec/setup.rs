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
use crate::config::{self, ConfigError, ConfigFile};
use crate::trust;

/// The model and how to reach it: a scripted model, or a provider from the registry; and
/// the variable holding the provider's key, which no command may see.
pub(super) fn model_and_stream(
    args: &ExecArgs,
    loaded: &config::Loaded,
) -> anyhow::Result<(ModelSpec, Arc<dyn StreamFn>, Option<String>)> {
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
        return Ok((ModelSpec::scripted(), Arc::new(provider), None));
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
        resolved.api_key_env.clone(),
    ))
}

/// The built-in tools over `cwd`, behind the permission gate (headless: what would ask is
/// denied, with the reason).
pub(super) fn tools_and_gate(
    args: &ExecArgs,
    loaded: &config::Loaded,
    cwd: &std::path::Path,
    key_env: Option<String>,
) -> anyhow::Result<(Vec<keel_agent::ToolRef>, TurnHooks, SandboxMode)> {
    let mode = match (args.permission, loaded.config.permission) {
        (Some(mode), _) => mode,
        (None, Some(configured)) => configured.mode(),
        (None, None) => Mode::Auto,
    };
    let mut env = ToolEnv::new(cwd.to_path_buf());
    env.sandbox = match (args.sandbox, loaded.config.sandbox) {
        (Some(chosen), _) | (None, Some(chosen)) => chosen,
        (None, None) if mode == Mode::Plan => SandboxMode::ReadOnly,
        (None, None) => SandboxMode::WorkspaceWrite,
    };
    // Checked here, before anything runs: an unknown value must stop the run, not fall
    // back to a weaker mode at the first command.
    env.env_mode = Some(
        keel_tools::bash::envclean::mode_from_process().map_err(|e| ConfigError::Model {
            source_name: keel_tools::bash::envclean::MODE_VARIABLE.into(),
            reason: e.to_string(),
        })?,
    );
    keel_tools::bash::sandbox::namespaces_setting().map_err(|e| ConfigError::Model {
        source_name: keel_tools::bash::sandbox::NAMESPACES_VARIABLE.into(),
        reason: e.to_string(),
    })?;
    env.protect_control = mode != Mode::Full;
    env.keel_home = config::keel_home();
    env.secret_env_names = key_env.into_iter().collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    env.extra_credentials = loaded
        .config
        .credential_paths
        .iter()
        .map(|p| match (p.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => cwd.join(p),
        })
        .collect();
    // Sessions kept outside $KEEL_HOME are hidden too (with their log files), where the
    // store opens them: a relative path is keel's own folder's, not `--cwd`'s, and an empty
    // value means $KEEL_HOME.
    if std::env::var_os("KEEL_SESSIONS_DB").is_some_and(|v| !v.is_empty())
        && let Ok(db) = crate::store::db_path()
    {
        let db = std::path::absolute(&db).unwrap_or(db);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = db.clone().into_os_string();
            name.push(suffix);
            env.extra_credentials.push(PathBuf::from(name));
        }
    }
    let sandbox = env.sandbox;
    let env = Arc::new(env);
    let rules = permission_rules(args, cwd, home.as_deref())?;
    let gate = Arc::new(PermissionGate::new(&env, mode, rules));
    let tools = keel_tools::builtin_tools(env)
        .map_err(|e| anyhow::anyhow!("cannot set up the tools: {e}"))?;
    let hooks = TurnHooks {
        before_tool_call: vec![Arc::new(PermissionHook::headless(gate))],
        ..TurnHooks::default()
    };
    Ok((tools, hooks, sandbox))
}

/// The permission rules: `$KEEL_HOME/permissions.yaml`, then the project's
/// `.keel/permissions.yaml`, whose allow rules count only when the user trusts it.
fn permission_rules(
    args: &ExecArgs,
    cwd: &std::path::Path,
    home: Option<&std::path::Path>,
) -> anyhow::Result<RuleSet> {
    let rules_error = |e: keel_tools::permission::RuleError| ConfigError::Model {
        source_name: "permissions".into(),
        reason: e.to_string(),
    };
    let mut rules =
        RuleSet::load(config::keel_home().as_deref(), None, home).map_err(rules_error)?;
    let Some(project) = trust::project(cwd) else {
        return Ok(rules);
    };
    let file = project
        .root
        .join(trust::PROJECT_DIR)
        .join(keel_tools::permission::rules::RULES_FILE);
    let project_rules = RuleSet::load_file(&file, home).map_err(rules_error)?;
    if project_rules.is_empty() || project_trusted(args, &file)? {
        rules.extend(project_rules);
        return Ok(rules);
    }
    let mut ignored = 0;
    for rule in project_rules.rules() {
        if rule.effect == keel_tools::permission::Effect::Allow {
            ignored += 1;
        } else {
            rules.push(rule.clone());
        }
    }
    if ignored > 0 {
        eprintln!(
            "keel: warning: {} is not trusted, so its {ignored} allow rule(s) are ignored (its deny and ask rules apply). \
             Run `keel trust` in the project to trust it as it is now.",
            file.display()
        );
    }
    Ok(rules)
}

/// Whether a project file counts in full: `--trust-project`, or a trust record of its
/// current content.
fn project_trusted(args: &ExecArgs, file: &std::path::Path) -> anyhow::Result<bool> {
    if args.trust_project {
        // Even for this run: a linked file is not the project's own.
        return Ok(trust::trust_key(file).is_some());
    }
    let store = trust::TrustStore::open(config::keel_home().as_deref()).map_err(|e| {
        ConfigError::Model {
            source_name: "trust".into(),
            reason: e.to_string(),
        }
    })?;
    Ok(store.is_trusted(file))
}

/// The configuration: `$KEEL_HOME/config.yaml`, the project's `.keel/config.yaml` (in full
/// only when trusted), then `--config`, then `-c` overrides.
pub(super) fn load_config(
    args: &ExecArgs,
    cwd: &std::path::Path,
) -> anyhow::Result<config::Loaded> {
    let mut files: Vec<ConfigFile> = Vec::new();
    if let Some(home) = config::keel_home()
        .map(|h| h.join(config::FILE_NAME))
        .filter(|p| p.is_file())
    {
        files.push(ConfigFile::trusted(home));
    }
    if let Some(project) = config::project_file(cwd).filter(|p| !files.iter().any(|f| f.path == *p))
    {
        let trusted = project_trusted(args, &project)?;
        files.push(ConfigFile {
            path: project,
            trusted,
        });
    }
    if let Some(explicit) = &args.config {
        files.push(ConfigFile::trusted(explicit.clone()));
    }
    let loaded = config::load(&files, &args.set)?;
    for warning in &loaded.ignored {
        eprintln!("keel: warning: {warning}");
    }
    Ok(loaded)
}
