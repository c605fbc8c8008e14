//! `keel acp`: the Agent Client Protocol server for editors. This module only turns the
//! flags into the options every folder's runtime starts from and hands them to `keel-acp`;
//! stdout belongs to the protocol, so nothing here prints to it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use keel_runtime::settings::SettingsInput;
use keel_runtime::{ModelChoice, Prepared, RuntimeOptions};
use keel_store::{Durability, Execution, OpenOptions};

use crate::exec::{self, parse_base_url};

/// `keel acp`'s flags: the defaults of every session an editor opens.
#[derive(Debug, Default, clap::Args)]
pub struct AcpArgs {
    /// The model as provider/model (default: `model` in config).
    #[arg(long, value_name = "PROVIDER/MODEL", value_parser = exec::parse_model_arg)]
    pub model: Option<String>,
    /// Send requests to this base URL instead of the provider's.
    #[arg(long, value_name = "URL", value_parser = parse_base_url)]
    pub base_url: Option<String>,
    /// Permission mode sessions start in: ask, auto, full or plan (default: config, else
    /// auto).
    #[arg(long, value_name = "MODE", value_parser = exec::parse_permission_arg)]
    pub permission: Option<keel_tools::permission::Mode>,
    /// Where bash may write: read-only, workspace-write or danger-full-access.
    #[arg(long, value_name = "MODE", value_parser = str::parse::<keel_tools::SandboxMode>)]
    pub sandbox: Option<keel_tools::SandboxMode>,
    /// Read this configuration file after $KEEL_HOME/config.yaml and .keel/config.yaml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override one configuration key, for example `-c permission=plan`.
    #[arg(short = 'c', value_name = "KEY=VALUE", value_parser = exec::parse_override_arg)]
    pub set: Vec<String>,
    /// Trust each session folder's own keel files as they are now.
    #[arg(long)]
    pub trust_project: bool,
    /// Answer from this JSON file of scripted responses instead of a model (tests, demos).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub mock_script: Option<PathBuf>,
}

/// Serves ACP on stdin and stdout until stdin closes.
pub fn run(args: AcpArgs) -> anyhow::Result<ExitCode> {
    let launch_cwd = exec::working_folder_arg(None)?;
    if let Some(path) = &args.config {
        exec::check_config_file_arg(path)?;
    }
    let model = match &args.mock_script {
        Some(script) => exec::mock_model(script)?,
        None => ModelChoice::Configured {
            model: args.model.clone(),
            base_url: args.base_url.clone(),
        },
    };
    let base = RuntimeOptions {
        settings: SettingsInput {
            cwd: launch_cwd.clone(),
            config_file: args.config.clone(),
            overrides: args.set.clone(),
            trust_project: args.trust_project,
            keel_home: None,
        },
        model,
        permission: args.permission,
        sandbox: args.sandbox,
        system_prompt: None,
        max_steps: None,
        // The editor answers permission questions.
        interactive: true,
        extensions: Vec::new(),
        host_extensions: Vec::new(),
        compactor: None,
        editor: None,
    };
    // The configuration is checked once here too, so a broken file fails at start-up with its
    // exit code rather than at every session.
    let settings = keel_runtime::settings::Settings::load(&base.settings)
        .map_err(|e| crate::errors::runtime_error(e.into()))?;
    let durable = settings.loaded.config.durable.unwrap_or(false);
    let options = keel_acp::ServeOptions {
        base,
        prepare: Arc::new(|options| Prepared::new(keel_extensions::with_harness(options))),
        store: OpenOptions {
            durability: Durability::synced(durable),
            // A commit never holds up the connection's tasks.
            execution: Execution::WriterThread,
        },
        launch_cwd,
        run_dir: settings.keel_home.as_ref().map(|home| home.join("run")),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("keel-acp")
        .enable_all()
        .build()?;
    let served = runtime.block_on(keel_acp::serve(options));
    // Tools may leave work behind after an abort; stdin's reader may still be blocked.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// `keel acp-relay SOCKET TOKEN`, run by the editor in one of its terminals: prints what keel
/// sends about one command and exits with the command's exit code. It only copies bytes; the
/// command itself runs in keel.
#[derive(Debug, clap::Args)]
pub struct RelayArgs {
    /// keel's socket for relays.
    pub socket: PathBuf,
    /// The one-time token of the command.
    pub token: String,
}

/// Copies one command's output from keel to standard output.
pub fn relay(args: &RelayArgs) -> anyhow::Result<ExitCode> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::os::unix::net::UnixStream::connect(&args.socket)?;
    stream.write_all(format!("{}\n", args.token).as_bytes())?;
    let mut out = std::io::stdout().lock();
    let mut kind = [0u8; 1];
    loop {
        if stream.read_exact(&mut kind).is_err() {
            // keel went away without an exit code.
            return Ok(ExitCode::from(1));
        }
        let mut word = [0u8; 4];
        stream.read_exact(&mut word)?;
        match kind[0] {
            b'o' => {
                let mut left = u64::from(u32::from_be_bytes(word));
                let mut chunk = [0u8; 8192];
                while left > 0 {
                    let want = usize::try_from(left.min(8192)).unwrap_or(8192);
                    stream.read_exact(&mut chunk[..want])?;
                    out.write_all(&chunk[..want])?;
                    left -= want as u64;
                }
                out.flush()?;
            }
            b'x' => {
                let code = i32::from_be_bytes(word);
                out.flush()?;
                return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
            }
            _ => anyhow::bail!("keel sent a frame the relay does not know"),
        }
    }
}
