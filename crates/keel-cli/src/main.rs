//! The `keel` binary.
//!
//! Only this crate writes to the terminal. Today it offers `keel exec`, the scripting
//! entry point, driving the turn runner end to end; model providers arrive with the
//! model-protocol work, until then `exec` answers from a scripted model (`--mock-script`).

mod config;
mod exec;

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
    /// Run one turn non-interactively and print the answer (or events as JSON lines).
    Exec(exec::ExecArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("keel: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Exec(args) => exec::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => match error.downcast_ref::<config::ConfigError>() {
            // Configuration problems have their own exit code so scripts can tell them
            // from a bad invocation.
            Some(config_error) => {
                eprintln!(
                    "keel: configuration error ({}): {error:#}",
                    config_error.code()
                );
                ExitCode::from(3)
            }
            None => {
                eprintln!("keel: {error:#}");
                ExitCode::from(2)
            }
        },
    }
}
