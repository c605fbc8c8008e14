//! The `keel` binary.
//!
//! Only this crate writes to the terminal. Today it offers `keel exec`, the scripting
//! entry point, driving the turn runner end to end against a configured provider or a
//! scripted model (`--mock-script`).

mod config;
mod exec;
mod instructions;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// keel, a coding agent for the terminal.
#[derive(Debug, Parser)]
#[command(name = "keel", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one turn non-interactively and print the answer, a result object or JSON events.
    Exec(exec::ExecArgs),
}

fn main() -> ExitCode {
    // clap exits 2 on a bad invocation (and 0 for --help and --version).
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("keel: cannot start the async runtime: {error}");
            return ExitCode::from(exec::EXIT_INTERNAL);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Exec(args) => exec::run(args).await,
        }
    });
    // Tools may leave work behind after an abort; do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(error) => {
            if let Some(config_error) = error.downcast_ref::<config::ConfigError>() {
                // Configuration problems have their own exit code so scripts can tell
                // them from a bad invocation.
                eprintln!(
                    "keel: configuration error ({}): {error:#}",
                    config_error.code()
                );
                ExitCode::from(exec::EXIT_CONFIG)
            } else if error.downcast_ref::<exec::InternalError>().is_some() {
                eprintln!("keel: internal error: {error:#}");
                ExitCode::from(exec::EXIT_INTERNAL)
            } else {
                eprintln!("keel: {error:#}");
                ExitCode::from(exec::EXIT_USAGE)
            }
        }
    }
}
