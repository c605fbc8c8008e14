//! `keel acp`: the Agent Client Protocol server for editors. This module only turns the
//! flags into the options every folder's runtime starts from and hands them to `keel-acp`;
//! stdout belongs to the protocol, so nothing here prints to it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use keel_store::{Durability, Execution, OpenOptions};

use crate::exec;

/// `keel acp`'s flags: the defaults of every session an editor opens.
#[derive(Debug, Default, clap::Args)]
pub struct AcpArgs {
    /// The model, permission mode, sandbox and configuration of new sessions.
    #[command(flatten)]
    pub flags: crate::tui::Flags,
}

/// Serves ACP on stdin and stdout until stdin closes.
pub fn run(args: AcpArgs) -> anyhow::Result<ExitCode> {
    let launch_cwd = exec::working_folder_arg(None)?;
    let base = args.flags.options(launch_cwd.clone())?;
    // The configuration is checked once here too, so a broken file fails at start-up with its
    // exit code rather than at every session.
    let settings = keel_runtime::settings::Settings::load(&base.settings)
        .map_err(|e| crate::errors::runtime_error(e.into()))?;
    let durable = settings.loaded.config.durable.unwrap_or(false);
    settings
        .loaded
        .config
        .acp
        .check()
        .map_err(|e| anyhow::Error::new(keel_runtime::settings::ConfigError::from(e)))?;
    let options = keel_acp::ServeOptions {
        base,
        prepare: Arc::new(crate::assembly::prepare),
        store: OpenOptions {
            durability: Durability::synced(durable),
            // A commit never holds up the connection's tasks.
            execution: Execution::WriterThread,
        },
        launch_cwd,
        run_dir: settings.keel_home.as_ref().map(|home| home.join("run")),
        limits: settings.loaded.config.acp,
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
