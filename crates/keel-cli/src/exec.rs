//! `keel exec`: one turn, no interaction, output for scripts.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};

use keel_tools::ToolEnv;
use keel_tools::permission::{Mode, PermissionGate, PermissionHook, RuleSet};

use crate::config::{self, ConfigError};
use async_trait::async_trait;
use keel_agent::runner::{RunnerDefaults, TurnHooks, TurnHost, TurnInput, TurnRunner, TurnStart};
use keel_llm::scripted::{ResponseSpec, ScriptedProvider, ScriptedResponse};
use keel_llm::{HttpProvider, ModelSpec, StreamFn, StreamSettings, http_client};
use keel_protocol::{
    Message, ResponseChunk, RuntimeEvent, RuntimeEventBody, SessionId, ToolPhase, TurnId,
    TurnOutcome,
};
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;

/// Arguments of `keel exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The prompt; `-` reads it from standard input.
    prompt: String,
    /// Answer from this JSON file of scripted responses instead of a model.
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    mock_script: Option<PathBuf>,
    /// The model as provider/model, for example anthropic/claude-sonnet-4-5 or
    /// minimax/MiniMax-M2.7 (default: `model` in config).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,
    /// Send requests to this base URL instead of the provider's.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Read this configuration file after $KEEL_HOME/config.yaml and .keel/config.yaml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Permission mode for tool calls: ask, auto, full or plan. Nobody can answer a
    /// question in `exec`, so whatever would ask is denied. Default: config, else auto.
    #[arg(long, value_name = "MODE")]
    permission: Option<String>,
    /// Work in this folder instead of the current one.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Override one configuration key, for example `-c permission=plan`.
    #[arg(short = 'c', value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Print every runtime event as one JSON line instead of the answer text.
    #[arg(long)]
    json: bool,
    /// System prompt.
    #[arg(long, default_value = "You are keel, a coding agent.")]
    system_prompt: String,
}

/// Runs `keel exec`; the exit code is 0 completed, 1 failed, 130 aborted.
pub async fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let cwd = match &args.cwd {
        Some(dir) => dir
            .canonicalize()
            .with_context(|| format!("cannot use --cwd {}", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    let loaded = load_config(&args, &cwd)?;
    let (model, stream_fn) = model_and_stream(&args, &loaded)?;
    let (tools, hooks) = tools_and_gate(&args, &loaded, &cwd)?;
    let prompt = if args.prompt == "-" {
        let mut input = String::new();
        tokio::io::stdin()
            .read_to_string(&mut input)
            .await
            .context("cannot read the prompt from standard input")?;
        input
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }

    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let host = Arc::new(ExecHost { json: args.json });
    let input = TurnInput {
        session_id: SessionId::generate(),
        turn_id: TurnId::generate(),
        model,
        stream_fn,
        system_prompt: args.system_prompt,
        tools,
        history: Vec::new(),
        start: TurnStart::Prompt(vec![Message::user_text(prompt)]),
        hooks,
        host,
        cancel,
        request_options: Default::default(),
        api_keys: None,
    };
    let stream = StreamSettings::default().from_env()?;
    let runner = TurnRunner::new(RunnerDefaults {
        stream,
        ..RunnerDefaults::default()
    });
    let result = runner.run_turn(input).await;
    Ok(match result.outcome {
        TurnOutcome::Completed => ExitCode::SUCCESS,
        TurnOutcome::Failed { code, message } => {
            if !args.json {
                eprintln!("keel: the turn failed ({code}): {message}");
            }
            ExitCode::from(1)
        }
        TurnOutcome::Aborted { reason } => {
            if !args.json {
                eprintln!(
                    "keel: aborted{}",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                );
            }
            ExitCode::from(130)
        }
        _ => ExitCode::FAILURE,
    })
}

/// The model and how to reach it: a scripted model, or a provider from the registry.
fn model_and_stream(
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
        Arc::new(HttpProvider::new(http_client()?, entry, key)),
    ))
}

/// The built-in tools over `cwd`, behind the permission gate (headless: what would ask is
/// denied, with the reason).
fn tools_and_gate(
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
    let env = Arc::new(ToolEnv::new(cwd.to_path_buf()));
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
fn load_config(args: &ExecArgs, cwd: &std::path::Path) -> Result<config::Loaded, ConfigError> {
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

/// Prints a turn's events: answer text to stdout, tool activity to stderr, or every
/// event as a JSON line.
struct ExecHost {
    json: bool,
}

#[async_trait]
impl TurnHost for ExecHost {
    async fn on_runtime_event(&self, event: RuntimeEvent) {
        if self.json {
            if let Ok(line) = serde_json::to_string(&event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }
            return;
        }
        match event.body {
            RuntimeEventBody::ResponseChunk {
                chunk: ResponseChunk::Text { delta, .. },
                ..
            } => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(delta.as_bytes());
                let _ = out.flush();
            }
            RuntimeEventBody::ResponseChunk {
                chunk:
                    ResponseChunk::ToolExecution {
                        tool_name, phase, ..
                    },
                ..
            } => {
                let state = match phase {
                    ToolPhase::Started => "started",
                    ToolPhase::Succeeded => "done",
                    ToolPhase::Failed => "failed",
                    _ => "changed",
                };
                eprintln!("[tool {tool_name}: {state}]");
            }
            RuntimeEventBody::MessageCompleted { message, .. }
                if message.as_assistant().is_some_and(|a| !a.text().is_empty()) =>
            {
                println!();
            }
            _ => {}
        }
    }
}
