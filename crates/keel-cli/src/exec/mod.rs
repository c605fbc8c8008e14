//! `keel exec`: one turn, no interaction, output for scripts.
//!
//! The run is bounded from outside the turn (timeout, signals, a closed stdout) through
//! one cancellation token, and from inside by the runner's step limit; whichever ends it
//! decides the status and the exit code (see `report`). A session with an active goal
//! keeps the run going through the goal's continuation turns (see `goal`).

mod follow;
mod goal;
mod input;
mod output;
mod plan;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tracing::Instrument as _;

use keel_protocol::ops;
use keel_protocol::{PermissionMode, RunId, SessionTarget, TurnOutcome, TurnSource};
use keel_runtime::settings::SettingsInput;
use keel_runtime::storage::{Durability, Execution, OpenOptions};
use keel_runtime::{
    CommandOutcome, ContractExt as _, ConversationContract as _, ModelChoice, RuntimeError,
    RuntimeOptions, SessionStart,
};

use crate::errors::{InternalError, runtime_error};
use crate::logging::STARTUP;
pub use input::{
    added_folder as added_folder_arg, check_config_file as check_config_file_arg, parse_base_url,
    parse_model as parse_model_arg, parse_override as parse_override_arg,
    working_folder as working_folder_arg,
};
use output::{ExecSink, Format, Interrupt, RunIds, Stop};
pub use report::{EXIT_CONFIG, EXIT_FAILED, EXIT_INTERNAL, EXIT_USAGE};
use report::{ExecResult, ExecStatus};

/// Arguments of `keel exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The prompt; `-` or none reads it from standard input.
    prompt: Option<String>,
    /// Set this goal for the session and work on it over as many turns as it takes, until
    /// it is complete, blocked, paused or out of budget (see `/goal`).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["prompt", "output_schema"])]
    goal: Option<String>,
    /// The goal's token budget, for example 50000, 50K or 1.5M (default: `goals.max_tokens`
    /// in config, else 500K).
    // clap lets a missing required `--goal` pass when it conflicts with an argument given,
    // so the budget refuses the prompt itself.
    #[arg(long, value_name = "N", requires = "goal", conflicts_with = "prompt",
          value_parser = input::parse_goal_budget)]
    goal_budget: Option<u64>,
    /// The most turns the goal may take (default: `goals.max_turns` in config, else 20).
    #[arg(long, value_name = "N", requires = "goal", conflicts_with = "prompt",
          value_parser = clap::value_parser!(u32).range(1..))]
    goal_turns: Option<u32>,
    /// Answer from this JSON file of scripted responses instead of a model.
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    mock_script: Option<PathBuf>,
    /// Sync every history commit to disk before acknowledging it, so a power cut loses
    /// nothing either (slower; default: `durable` in config, else off).
    #[arg(long)]
    durable: bool,
    /// The model as provider/model, for example anthropic/claude-sonnet-4-5 or
    /// minimax/MiniMax-M2.7 (default: `model` in config, else the provider whose key is in
    /// the environment).
    #[arg(short = 'm', long, value_name = "PROVIDER/MODEL", value_parser = input::parse_model)]
    model: Option<String>,
    /// Send requests to this base URL instead of the provider's.
    #[arg(long, value_name = "URL", value_parser = input::parse_base_url)]
    base_url: Option<String>,
    /// Read this configuration file after $KEEL_HOME/config.yaml and .keel/config.yaml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Permission mode for tool calls: ask, auto, full or plan. Nobody can answer a
    /// question in `exec`, so whatever would ask is denied. Default: config, else auto.
    #[arg(long, value_name = "MODE", value_parser = str::parse::<PermissionMode>)]
    permission: Option<PermissionMode>,
    /// How much the model reasons: off, minimal, low, medium or high, among the levels the
    /// model offers (default: the model's own).
    #[arg(long, value_name = "LEVEL", value_parser = str::parse::<keel_protocol::ThinkingLevel>)]
    thinking: Option<keel_protocol::ThinkingLevel>,
    /// Where bash may write: read-only, workspace-write or danger-full-access (no
    /// sandbox). Default: config, else read-only under `--permission plan`, else
    /// workspace-write.
    #[arg(long, value_name = "MODE", value_parser = str::parse::<keel_protocol::SandboxMode>)]
    sandbox: Option<keel_protocol::SandboxMode>,
    /// Work in this folder instead of the current one.
    #[arg(short = 'C', long, visible_alias = "cd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Override one configuration key, for example `-c permission=plan`.
    #[arg(short = 'c', value_name = "KEY=VALUE", value_parser = input::parse_override)]
    set: Vec<String>,
    /// What to print: the answer (text), one result object (json), or events as JSON
    /// lines (stream-json).
    #[arg(long, value_enum, default_value = "text")]
    output_format: Format,
    /// Same as `--output-format stream-json`.
    #[arg(long, conflicts_with = "output_format")]
    json: bool,
    /// Full access and no sandbox (`--permission full --sandbox danger-full-access`): every
    /// call runs and commands can change anything you can. Only where nothing matters.
    #[arg(long, conflicts_with_all = ["permission", "sandbox"])]
    yolo: bool,
    /// Also write the last assistant message to FILE (atomically).
    #[arg(short = 'o', long = "output-last-message", value_name = "FILE")]
    output_file: Option<PathBuf>,
    /// Stop after N model calls if the model still calls tools (exit 7).
    #[arg(long, visible_alias = "max-turns", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: Option<u32>,
    /// Run these tools without asking, as Claude Code writes them: `Read`, `Bash(git log:*)`
    /// (commands starting with those words), `Bash(npm test)` (exactly), `Edit(src/**)`,
    /// `mcp__SERVER__TOOL`; separated by commas or spaces, repeatable.
    #[arg(long = "allowed-tools", visible_alias = "allowedTools", value_name = "RULES",
          num_args = 1.., action = clap::ArgAction::Append)]
    allowed_tools: Vec<String>,
    /// Never run these tools (same rules as --allowed-tools; a deny beats any allow).
    #[arg(long = "disallowed-tools", visible_alias = "disallowedTools", value_name = "RULES",
          num_args = 1.., action = clap::ArgAction::Append)]
    disallowed_tools: Vec<String>,
    /// Also count DIR as part of the workspace: its files are inside, and sandboxed commands
    /// may write there (repeatable).
    #[arg(long = "add-dir", value_name = "DIR", action = clap::ArgAction::Append)]
    add_dirs: Vec<PathBuf>,
    /// Abort the turn after this long, for example 90s, 5m, 1h30m (exit 6).
    #[arg(long, value_name = "DURATION", value_parser = report::parse_duration)]
    timeout: Option<Duration>,
    /// The final answer must be JSON valid against this JSON Schema.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// Replace keel's system prompt (and the project instructions in it).
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
    /// Resume this session (its id or a unique prefix of at least 4 characters).
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    session: Option<String>,
    /// Resume the latest session of the working folder.
    #[arg(long = "continue")]
    continue_latest: bool,
    /// Send this image (PNG, JPEG, GIF or WebP) with the prompt; repeat for more. The model
    /// must take images.
    #[arg(long = "image", value_name = "FILE", conflicts_with = "goal")]
    images: Vec<PathBuf>,
    /// A prompt starting with `!` runs as a command in the session's shell (under the
    /// sandbox and the permission rules) instead of going to the model; `!!` runs it without
    /// keeping it in the session. Off by default: piped input may come from anyone.
    #[arg(long)]
    allow_shell_escape: bool,
    /// Trust the project's own keel files (.keel/config.yaml, .keel/permissions.yaml) for
    /// this run as they are now, without recording it (see `keel trust`).
    #[arg(long)]
    trust_project: bool,
    /// Start the MCP servers of the project's .mcp.json and run the hooks of its
    /// settings.json for this run, without a trust record (see `keel trust`).
    #[arg(long)]
    trust_project_mcp: bool,
    /// Let keel work in `/`, the home folder or a folder above it, which it otherwise
    /// refuses (the model could change every file there, start-up files included).
    #[arg(long)]
    allow_home_workspace: bool,
}

/// Runs `keel exec` and returns its exit code (see `report` for the table).
pub async fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    if args.yolo {
        eprintln!("{}", crate::tui::YOLO_WARNING);
    }
    let format = if args.json {
        Format::StreamJson
    } else {
        args.output_format
    };
    // Nobody can read the answer: do not spend a model call on it.
    // Nothing keel writes could be read, so the turn must not start.
    if keel_sandbox::sys::stdout_is_closed() {
        eprintln!("keel: standard output is closed; the turn was not started");
        return Ok(report::exit(report::EXIT_STDOUT_CLOSED));
    }
    let cwd = input::working_folder(args.cwd.as_deref())?;
    if let Some(path) = &args.output_file {
        input::check_output_file(path)?;
    }
    if let Some(path) = &args.config {
        input::check_config_file(path)?;
    }
    let options = RuntimeOptions {
        settings: SettingsInput {
            cwd: cwd.clone(),
            config_file: args.config.clone(),
            overrides: args.set.clone(),
            trust_project: args.trust_project,
            keel_home: None,
            rules: crate::assembly::tool_rules(&args.allowed_tools, &args.disallowed_tools)?,
            extra_roots: args
                .add_dirs
                .iter()
                .map(|dir| input::added_folder(dir))
                .collect::<anyhow::Result<_>>()?,
        },
        model: model_choice(&args)?,
        permission: if args.yolo {
            Some(PermissionMode::Full)
        } else {
            args.permission
        },
        sandbox: if args.yolo {
            Some(keel_protocol::SandboxMode::DangerFullAccess)
        } else {
            args.sandbox
        },
        system_prompt: args.system_prompt.clone(),
        thinking: args.thinking,
        max_steps: args.max_steps,
        // Nobody can answer a question here: what would ask is denied, with the reason.
        interactive: false,
        extensions: Vec::new(),
        host_extensions: Vec::new(),
        compactor: None,
        editor: None,
        trust_project_mcp: args.trust_project_mcp,
        allow_home_workspace: args.allow_home_workspace,
    };
    let prepared = tracing::info_span!(target: STARTUP, "settings and assembly")
        .in_scope(|| crate::assembly::prepare(options))
        .map_err(runtime_error)?;
    for warning in &prepared.warnings {
        eprintln!("keel: warning: {warning}");
    }
    let schema = load_schema(&args)?;
    let images = args
        .images
        .iter()
        .map(|path| input::read_image(path))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let prompt = match &args.goal {
        Some(goal) => input::check_goal(goal)?,
        None => input::read_prompt(args.prompt.as_deref()).await?,
    };

    let stop = Arc::new(Stop::default());
    let _signals = Owned(tokio::spawn(watch_signals(stop.clone())));
    let _reader = Owned(tokio::spawn(watch_stdout(stop.clone())));
    let _timer = args.timeout.map(|limit| {
        let stop = stop.clone();
        Owned(tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            stop.trigger(Interrupt::Timeout);
        }))
    });

    let model_name = prepared.model_name().to_owned();
    let sandbox = prepared.sandbox();
    let planning = prepared.mode() == PermissionMode::Plan;
    let keel_home = prepared.settings().keel_home.clone();
    let durable = args.durable || prepared.settings().loaded.config.durable.unwrap_or(false);
    let store = OpenOptions {
        durability: Durability::synced(durable),
        // One turn on a current-thread runtime with nothing else to do while a commit
        // runs: no thread hop per commit.
        execution: Execution::InPlace,
    };
    let runtime = keel_runtime::start(prepared, store)
        .instrument(tracing::info_span!(target: STARTUP, "runtime start"))
        .await
        .map_err(runtime_error)?;
    let target = match (&args.session, args.continue_latest) {
        (Some(typed), _) => SessionTarget::Id { id: typed.clone() },
        (None, true) => SessionTarget::Latest,
        (None, false) => SessionTarget::New {
            title: Some(keel_runtime::sessions::title_of(&prompt)),
        },
    };
    let opened = match runtime
        .request(ops::OpenSession { target })
        .instrument(tracing::info_span!(target: STARTUP, "session open"))
        .await
    {
        Ok(opened) => opened,
        Err(RuntimeError::NoSessionIn(cwd)) => anyhow::bail!(
            "no session to continue in {cwd}: run `keel exec` without --continue first"
        ),
        Err(error) => return Err(runtime_error(error)),
    };
    let session_id = opened.record.id.clone();
    let run_id = RunId::generate();
    let sink = Arc::new(ExecSink::new(
        format,
        RunIds {
            run_id: run_id.clone(),
            session_id: session_id.to_string(),
        },
        stop.clone(),
        &model_name,
        &cwd,
        opened.start == SessionStart::New,
        args.timeout,
    ));
    let _subscription = runtime
        .subscribe(&session_id, sink.clone())
        .await
        .map_err(runtime_error)?;
    // What the run waits for after its turn: the turns that follow it, and its tasks.
    let watch = Arc::new(follow::Watch::default());
    let _watching = runtime
        .subscribe(&session_id, watch.clone())
        .await
        .map_err(runtime_error)?;
    // `--goal` is `/goal`; `/name args` runs an extension's command (a skill, a custom
    // command, an MCP prompt, `/mcp`) when one of that name exists; anything else is the
    // model's prompt.
    let shell = (args.allow_shell_escape && args.goal.is_none())
        .then(|| ops::RunShell::typed(prompt.trim_start()))
        .flatten();
    let shell_run = shell.is_some();
    let command = match (&args.goal, &shell) {
        (_, Some(_)) => None,
        (Some(_), None) => Some(goal_command(&prompt, args.goal_budget, args.goal_turns)),
        (None, None) => extension_command(&prompt),
    };
    let command = match command {
        Some((name, arguments)) => Some(
            runtime
                .request(ops::RunCommand {
                    session_id: session_id.clone(),
                    name,
                    arguments,
                })
                .await,
        ),
        None => None,
    };
    let submitted = match (command, shell) {
        (Some(reply), _) => reply,
        (None, Some((command, remember))) => runtime
            .request(ops::RunShell {
                session_id: session_id.clone(),
                command,
                remember,
            })
            .await
            .map(CommandOutcome::Turn),
        (None, None) => runtime
            .request(ops::Submit {
                session_id: session_id.clone(),
                text: prompt,
                images,
                source: TurnSource::Api,
                output_schema: schema,
                time_budget_ms: args
                    .timeout
                    .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            })
            .await
            .map(CommandOutcome::Turn),
    };
    let handle = match submitted {
        Ok(CommandOutcome::Turn(handle)) => handle,
        Ok(CommandOutcome::Text(text)) => {
            match format {
                Format::Text => println!("{text}"),
                _ => println!(
                    "{}",
                    serde_json::json!({"type": "command.result", "session_id": session_id, "text": text})
                ),
            }
            return Ok(ExitCode::SUCCESS);
        }
        Err(error) => return Err(runtime_error(error)),
    };
    // Whatever stops the run (signal, timeout, closed stdout) aborts the turn through the
    // contract, like any other front end.
    let _aborter = {
        let runtime = runtime.clone();
        let stop = stop.clone();
        let session_id = session_id.clone();
        Owned(tokio::spawn(async move {
            stop.cancel.cancelled().await;
            let _ = runtime.request(ops::Abort { session_id }).await;
        }))
    };
    let first = handle.wait().await.map_err(runtime_error)?;
    // A `!` command that failed fails the run, in every output format.
    let command_failure = first
        .messages
        .iter()
        .find_map(|m| m.as_tool_result())
        .filter(|result| shell_run && result.is_error)
        .map(|result| {
            let text = result.text();
            let last = text.lines().last().unwrap_or_default().trim();
            keel_protocol::Failure::new(
                keel_protocol::FailureCode::CommandFailed,
                format!("the command failed: {last}"),
            )
        });
    // The run goes on while its tasks run and their notices start turns; the last turn is
    // the one reported.
    let followed = follow::follow(&runtime, &session_id, &watch, &stop, first.into()).await;
    if followed.background_commands > 0 {
        let n = followed.background_commands;
        let commands = if n == 1 { "command" } else { "commands" };
        eprintln!("keel: stopping {n} background {commands} still running: they end with the run");
    }
    let turn = followed.last;
    let interrupt = stop.reason();
    let (mut status, mut error) = report::status_of(
        &turn.outcome,
        turn.output_failure.as_ref(),
        turn.lost.as_deref(),
        interrupt,
        args.timeout,
    );
    if let Some(failure) = command_failure
        && status == ExecStatus::Succeeded
    {
        status = ExecStatus::Failed;
        error = Some(failure);
    }
    if followed.halted && status == ExecStatus::Succeeded {
        // The turn completed, but tasks (or a turn their notices started) were cut short.
        let aborted = TurnOutcome::Aborted {
            reason: Some("stopped while tasks ran".into()),
        };
        (status, error) = report::judge(&aborted, interrupt, args.timeout);
    }
    // A goal decides how a run whose last turn succeeded ends.
    if let (ExecStatus::Succeeded, Some(goal)) = (status, &followed.goal) {
        (status, error) = goal::judge(goal);
    }
    let duration_ms = u64::try_from(turn.duration.as_millis()).unwrap_or(u64::MAX);
    // In plan mode the plan is the answer, unless the run left plan mode (`/approve-plan`).
    let plan = (planning && sink.mode().is_none_or(|mode| mode == PermissionMode::Plan))
        .then(|| plan::answer(turn.frozen_plan.clone(), keel_home.as_deref(), &session_id))
        .flatten();
    // The session ends with the run (a user's SessionEnd hooks run now).
    let _ = runtime
        .request(ops::CloseSession {
            session_id: session_id.clone(),
        })
        .await;
    // Commits are in the write-ahead log, safe from a crash of this process; one fsync of
    // the log makes them safe from a power cut too before we report the run as done.
    if let Err(failure) = runtime.sync().await {
        eprintln!("keel: warning: cannot flush the session log to disk: {failure}");
    }
    let result = ExecResult {
        kind: "exec.result",
        schema_version: report::SCHEMA_VERSION,
        run_id,
        status,
        final_text: plan.unwrap_or(turn.final_text),
        structured_output: turn.structured_output,
        session_id: session_id.to_string(),
        turn_id: turn.turn_id,
        // The whole run's tokens: a run of several turns (tasks' notices, a goal) pays for all.
        usage: followed.usage,
        duration_ms,
        error,
        goal: followed.goal.as_ref().map(|goal| goal.record.clone()),
    };
    let mut unwritten = None;
    if let Some(path) = &args.output_file
        && turn.has_answer
        && let Err(error) = report::write_atomically(path, &result.final_text)
    {
        unwritten = Some(InternalError(format!(
            "cannot write -o {}: {error}",
            path.display()
        )));
    }

    sink.finish(&result);
    // The model was told on its first command; the user hears it here, once, if this run's
    // commands ran in a weaker sandbox than keel's full one.
    if let Some(note) = crate::assembly::sandbox_note(sandbox) {
        eprintln!("keel: warning: {note}");
    }
    if sink.stdout_closed() || stop.reason() == Some(Interrupt::StdoutClosed) {
        return Ok(report::exit(report::EXIT_STDOUT_CLOSED));
    }
    if let Some(error) = unwritten {
        return Err(error.into());
    }
    Ok(report::exit(status.exit_code()))
}

/// The model: a scripted one (`--mock-script`), or a provider from the registry.
fn model_choice(args: &ExecArgs) -> anyhow::Result<ModelChoice> {
    let Some(script) = &args.mock_script else {
        return Ok(ModelChoice::Configured {
            model: args.model.clone(),
            base_url: args.base_url.clone(),
        });
    };
    crate::assembly::mock_model(script)
}

/// The `--output-schema` file's text, checked to be a JSON Schema before anything runs.
fn load_schema(args: &ExecArgs) -> anyhow::Result<Option<String>> {
    let Some(path) = &args.output_schema else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --output-schema {}", path.display()))?;
    let name = format!("--output-schema {}", path.display());
    keel_runtime::structured::OutputSchema::compile(&text, &name).map_err(runtime_error)?;
    Ok(Some(text))
}

/// SIGINT and SIGTERM abort the turn; a second one ends the process at once.
///
/// The handlers are installed when this is called, not when the returned task first runs:
/// on the current-thread runtime that can be after the first output line (the store no
/// longer pauses the main task), and a signal before it would kill keel outright.
fn watch_signals(stop: Arc<Stop>) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let streams = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut interrupt), Ok(mut terminate)) = streams else {
            eprintln!("keel: warning: cannot watch for SIGINT/SIGTERM");
            return;
        };
        wait_for_signals(&stop, &mut interrupt, &mut terminate).await;
    }
}

/// The first SIGINT or SIGTERM stops the turn; the second exits at once.
async fn wait_for_signals(
    stop: &Stop,
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) {
    for round in 0..2 {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        if round == 0 {
            stop.trigger(Interrupt::Signal);
        }
    }
    std::process::exit(i32::from(report::EXIT_CANCELLED));
}

/// Notices a closed stdout while the turn is quiet (the pipe's write end reports an error
/// once the reader is gone), so a run nobody reads stops now rather than at its next
/// write. Stdout that cannot be polled (a regular file) is never closed under us.
async fn watch_stdout(stop: Arc<Stop>) {
    keel_sandbox::sys::stdout_closed().await;
    stop.trigger(Interrupt::StdoutClosed);
}

/// A spawned task that ends with its owner.
struct Owned(tokio::task::JoinHandle<()>);

impl Drop for Owned {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `--goal TEXT [--goal-budget N] [--goal-turns N]` as `/goal`: the options first, so the
/// text is always the objective (even a word such as `clear`).
fn goal_command(objective: &str, budget: Option<u64>, turns: Option<u32>) -> (String, String) {
    let budget = budget.map(|n| format!("budget={n} ")).unwrap_or_default();
    let turns = turns.map(|n| format!("turns={n} ")).unwrap_or_default();
    (
        "goal".to_owned(),
        format!("{budget}{turns}verify=evaluator {objective}"),
    )
}

/// `/name args` as a command to try: every extension gets to claim it (one still starting,
/// such as an MCP server, waits for itself), and a name none claims is the model's prompt.
fn extension_command(prompt: &str) -> Option<(String, String)> {
    let rest = prompt.trim_start().strip_prefix('/')?;
    let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    (!name.is_empty() && !name.contains('/'))
        .then(|| (name.to_owned(), arguments.trim().to_owned()))
}
