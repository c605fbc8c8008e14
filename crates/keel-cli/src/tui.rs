//! `keel [PROMPT]`, `keel --continue`, `keel --session ID` and `keel resume`: the
//! interactive TUI on the in-process runtime. This module only builds the runtime from the
//! flags and hands its contract to `keel-tui`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use keel_protocol::SessionTarget;
use keel_runtime::settings::SettingsInput;
use keel_runtime::{ConversationContract, ModelChoice, RuntimeOptions};
use keel_store::{Durability, Execution, OpenOptions};

use crate::errors::runtime_error;
use crate::exec::{self, parse_base_url};
use crate::question;

/// The interactive mode's flags (they sit on `keel` itself).
#[derive(Debug, Default, clap::Args)]
pub struct TuiArgs {
    /// A first message to send when the session opens (several words are one message; a
    /// single word that is no command needs `keel -- WORD`).
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,
    /// Resume the latest session of the working folder.
    #[arg(long = "continue", conflicts_with_all = ["session", "resume"])]
    pub continue_latest: bool,
    /// Resume this session (its id or a unique prefix of at least 4 characters).
    #[arg(long, value_name = "ID", conflicts_with = "resume")]
    pub session: Option<String>,
    /// Resume a session: this one (id or prefix), or pick one of the folder's without an ID
    /// (the same as `keel resume`).
    #[arg(short = 'r', long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
    /// Use the whole screen (the alternate screen) instead of writing above the shell's
    /// scrollback.
    #[arg(long)]
    pub fullscreen: bool,
    /// Work in this folder instead of the current one.
    #[arg(short = 'C', long, visible_alias = "cd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The model, permission, sandbox and configuration.
    #[command(flatten)]
    pub flags: Flags,
}

/// The flags every interactive front end shares (the TUI, `keel acp`): the model, the
/// permission mode, the sandbox and the configuration.
#[derive(Debug, Default, clap::Args)]
pub struct Flags {
    /// The model as provider/model (default: `model` in config, else the provider whose
    /// key is in the environment).
    #[arg(short = 'm', long, value_name = "PROVIDER/MODEL", value_parser = exec::parse_model_arg)]
    pub model: Option<String>,
    /// Send requests to this base URL instead of the provider's.
    #[arg(long, value_name = "URL", value_parser = parse_base_url)]
    pub base_url: Option<String>,
    /// Permission mode: ask, auto, full or plan (default: config, else auto).
    #[arg(long, value_name = "MODE", value_parser = str::parse::<keel_protocol::PermissionMode>)]
    pub permission: Option<keel_protocol::PermissionMode>,
    /// How much the model reasons: off, minimal, low, medium or high, among the levels the
    /// model offers (default: the model's own).
    #[arg(long, value_name = "LEVEL", value_parser = str::parse::<keel_protocol::ThinkingLevel>)]
    pub thinking: Option<keel_protocol::ThinkingLevel>,
    /// Where bash may write: read-only, workspace-write or danger-full-access.
    #[arg(long, value_name = "MODE", value_parser = str::parse::<keel_protocol::SandboxMode>)]
    pub sandbox: Option<keel_protocol::SandboxMode>,
    /// Read this configuration file after $KEEL_HOME/config.yaml and .keel/config.yaml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override one configuration key, for example `-c permission=plan`.
    #[arg(short = 'c', value_name = "KEY=VALUE", value_parser = exec::parse_override_arg)]
    pub set: Vec<String>,
    /// Trust the project's own keel files for this run as they are now.
    #[arg(long)]
    pub trust_project: bool,
    /// Start the MCP servers of the project's .mcp.json and run its hooks for this run
    /// without asking or recording trust.
    #[arg(long)]
    pub trust_project_mcp: bool,
    /// Answer from this JSON file of scripted responses instead of a model (tests, demos).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub mock_script: Option<PathBuf>,
    /// Let keel work in `/`, the home folder or a folder above it (the TUI asks first;
    /// `keel acp` refuses such a folder without this).
    #[arg(long)]
    pub allow_home_workspace: bool,
    /// Full access and no sandbox (`--permission full --sandbox danger-full-access`): every
    /// call runs unasked and commands can change anything you can. Only where nothing
    /// matters.
    #[arg(long, conflicts_with_all = ["permission", "sandbox"])]
    pub yolo: bool,
    /// Run these tools without asking, as Claude Code writes them (`Read`,
    /// `Bash(git log:*)`, `Edit(src/**)`, `mcp__SERVER__TOOL`), separated by commas or spaces.
    #[arg(long = "allowed-tools", visible_alias = "allowedTools", value_name = "RULES",
          num_args = 1.., action = clap::ArgAction::Append)]
    pub allowed_tools: Vec<String>,
    /// Never run these tools (same rules; a deny beats any allow).
    #[arg(long = "disallowed-tools", visible_alias = "disallowedTools", value_name = "RULES",
          num_args = 1.., action = clap::ArgAction::Append)]
    pub disallowed_tools: Vec<String>,
    /// Also count DIR as part of the workspace (repeatable).
    #[arg(long = "add-dir", value_name = "DIR", action = clap::ArgAction::Append)]
    pub add_dirs: Vec<PathBuf>,
}

impl Flags {
    /// Runtime options for `cwd` from the flags, with a person to answer permission
    /// questions; the flags' files are checked first.
    pub fn options(&self, cwd: PathBuf) -> anyhow::Result<RuntimeOptions> {
        if let Some(path) = &self.config {
            exec::check_config_file_arg(path)?;
        }
        let model = match &self.mock_script {
            Some(script) => crate::assembly::mock_model(script)?,
            None => ModelChoice::Configured {
                model: self.model.clone(),
                base_url: self.base_url.clone(),
            },
        };
        Ok(RuntimeOptions {
            settings: SettingsInput {
                cwd,
                config_file: self.config.clone(),
                overrides: self.set.clone(),
                trust_project: self.trust_project,
                keel_home: None,
                rules: crate::assembly::tool_rules(&self.allowed_tools, &self.disallowed_tools)?,
                extra_roots: self
                    .add_dirs
                    .iter()
                    .map(|dir| exec::added_folder_arg(dir))
                    .collect::<anyhow::Result<_>>()?,
            },
            model,
            permission: if self.yolo {
                Some(keel_protocol::PermissionMode::Full)
            } else {
                self.permission
            },
            sandbox: if self.yolo {
                Some(keel_protocol::SandboxMode::DangerFullAccess)
            } else {
                self.sandbox
            },
            system_prompt: None,
            max_steps: None,
            // Questions go to the user (the TUI's prompt, the editor).
            interactive: true,
            extensions: Vec::new(),
            host_extensions: Vec::new(),
            compactor: None,
            editor: None,
            thinking: self.thinking,
            trust_project_mcp: self.trust_project_mcp,
            allow_home_workspace: self.allow_home_workspace,
        })
    }
}

/// What `--yolo` says before anything runs.
pub const YOLO_WARNING: &str = "keel: warning: --yolo: full access and no sandbox. Every call \
    runs without a question and commands can change anything you can, outside this folder \
    too.";

/// Asks, before the TUI takes the terminal, whether to trust the project's files that
/// would run code (`.mcp.json`, hooks); a yes is recorded for the files as they are now.
fn ask_project_trust(options: &RuntimeOptions) -> anyhow::Result<()> {
    let Ok(settings) = keel_runtime::settings::Settings::load(&options.settings) else {
        // The runtime reports the configuration's problem itself.
        return Ok(());
    };
    let host = keel_runtime::extension::HostInfo {
        cwd: settings.cwd.clone(),
        project: settings.project.clone(),
        keel_home: settings.keel_home.clone(),
        trust_project: options.settings.trust_project,
        trust_project_mcp: false,
        ..Default::default()
    };
    let files = keel_extensions::extend::untrusted(&settings.loaded.config, &host);
    if files.is_empty() {
        return Ok(());
    }
    let root = &settings.project.root;
    let mut err = std::io::stderr();
    question::say(
        &mut err,
        &format!(
            "The project {} wants keel to run programs on your machine, outside the sandbox:",
            root.display()
        ),
    )?;
    crate::trust::write_runs(&mut err, root, &files)?;
    if question::yes(&mut err, "Trust these files as they are now?")? {
        let mut store =
            keel_runtime::settings::trust::TrustStore::open(settings.keel_home.as_deref())?;
        let paths: Vec<PathBuf> = files.into_iter().map(|f| f.file).collect();
        store.trust(&paths)?;
    } else {
        question::say(
            &mut err,
            "Not trusted: keel starts without them (`keel trust` trusts them later).",
        )?;
    }
    Ok(())
}

/// Asks, before the TUI takes the terminal, whether keel may work in `cwd` when it is `/`,
/// the home folder or a folder above it: `None` when it is none of those, else the answer.
fn ask_home_workspace(cwd: &std::path::Path) -> anyhow::Result<Option<bool>> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let Some(what) = keel_runtime::settings::project::home_workspace(cwd, home.as_deref()) else {
        return Ok(None);
    };
    let mut err = std::io::stderr();
    question::say(
        &mut err,
        &format!(
            "keel is about to work in {what}. The model could then change any file there \
             (your shell's start-up files and git's configuration stay protected short of \
             --permission full)."
        ),
    )?;
    Ok(Some(question::yes(&mut err, "Work here anyway?")?))
}

/// Runs the TUI; `pick_session` opens the session picker first (`keel resume`).
pub fn run(mut args: TuiArgs, mut pick_session: bool) -> anyhow::Result<ExitCode> {
    match args.resume.take() {
        Some(id) if id.is_empty() => pick_session = true,
        Some(id) => args.session = Some(id),
        None => {}
    }
    let prompt = (!args.prompt.is_empty()).then(|| args.prompt.join(" "));
    if args.flags.yolo {
        eprintln!("{YOLO_WARNING}");
    }
    // Refuse before anything starts: the runtime would be built for nobody.
    use std::io::IsTerminal as _;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "keel's interactive mode needs a terminal on standard input and output; for scripts and pipes use `keel exec \"PROMPT\"`"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("keel-rt")
        .enable_all()
        .build()?;
    let cwd = exec::working_folder_arg(args.cwd.as_deref())?;
    let mut options = args.flags.options(cwd.clone())?;
    if !options.allow_home_workspace {
        match ask_home_workspace(&cwd)? {
            None => {}
            Some(true) => options.allow_home_workspace = true,
            Some(false) => {
                question::say(
                    &mut std::io::stderr(),
                    "Not started. Run keel in a project's folder, or pass --allow-home-workspace \
                     to work here.",
                )?;
                return Ok(ExitCode::from(1));
            }
        }
    }
    if !options.trust_project_mcp {
        ask_project_trust(&options)?;
    }
    // Extensions start their work (MCP servers) on the runtime as they initialise.
    let _entered = runtime.enter();
    let prepare = |options: RuntimeOptions| {
        tracing::info_span!(target: crate::logging::STARTUP, "settings and assembly")
            .in_scope(|| crate::assembly::prepare(options))
    };
    let prepared = match prepare(options.clone()) {
        // A first run: set a provider up here, then start.
        Err(keel_runtime::RuntimeError::Config(keel_runtime::settings::ConfigError::NoKey {
            ..
        })) => {
            if !runtime.block_on(crate::login::first_run())? {
                return Ok(ExitCode::from(1));
            }
            prepare(options)
        }
        other => other,
    }
    .map_err(runtime_error)?;
    let durable = prepared.settings().loaded.config.durable.unwrap_or(false);
    let info = keel_tui::Info {
        thinking: args.flags.thinking,
        notifications: prepared.settings().loaded.config.tui.notifications,
        cwd,
        model: prepared.model_name().to_owned(),
        mode: prepared.mode(),
        sandbox: prepared.sandbox(),
        models: prepared.settings().loaded.model_names(),
        keel_home: prepared.settings().keel_home.clone(),
        warnings: prepared.warnings.clone(),
    };
    let store = OpenOptions {
        durability: Durability::synced(durable),
        // The writer thread: a commit never blocks the thread that draws.
        execution: Execution::WriterThread,
    };
    let started = tracing::info_span!(target: crate::logging::STARTUP, "runtime start")
        .in_scope(|| runtime.block_on(keel_runtime::start(prepared, store)))
        .map_err(runtime_error)?;
    let target = match (&args.session, args.continue_latest) {
        (Some(id), _) => SessionTarget::Id { id: id.clone() },
        (None, true) => SessionTarget::Latest,
        (None, false) => SessionTarget::New {
            title: prompt.as_deref().map(keel_runtime::sessions::title_of),
        },
    };
    // --continue in a folder without sessions: say so before taking over the terminal.
    if matches!(target, SessionTarget::Latest) {
        let cwd = info.cwd.to_string_lossy().into_owned();
        let sessions =
            runtime.block_on(started.store().list_conversations(Some(cwd.clone()), 1))?;
        if sessions.is_empty() {
            anyhow::bail!("no session to continue in {cwd}: run `keel` without --continue first");
        }
    }
    let contract: Arc<dyn ConversationContract> = Arc::new(started.clone());
    let launch = keel_tui::Launch {
        contract,
        handle: runtime.handle().clone(),
        info,
        target,
        prompt,
        fullscreen: args.fullscreen,
        pick_session,
    };
    let ended = keel_tui::run(launch);
    // The session ends with the TUI (a user's SessionEnd hooks run); one nobody wrote in
    // is deleted, so quitting at once leaves nothing.
    let mut kept = None;
    if let Ok(keel_tui::Ended {
        session_id: Some(id),
    }) = &ended
    {
        let session_id = keel_protocol::SessionId::from(id.as_str());
        use keel_runtime::ContractExt as _;
        let _ = runtime.block_on(started.request(keel_protocol::ops::CloseSession {
            session_id: session_id.clone(),
        }));
        if runtime
            .block_on(started.store().session(&session_id))
            .is_ok()
        {
            kept = Some(id.clone());
        }
    }
    if let Err(failure) = runtime.block_on(started.sync()) {
        eprintln!("keel: warning: cannot flush the session log to disk: {failure}");
    }
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    ended?;
    if let Some(id) = kept {
        println!("keel --session {id}   resumes this session");
    }
    Ok(ExitCode::SUCCESS)
}
