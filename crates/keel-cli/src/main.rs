//! The `keel` binary.
//!
//! Only this crate writes to the terminal. It offers `keel exec`, the scripting entry point,
//! `keel sessions` over the stored sessions, `keel acp` for editors, `keel feedback`,
//! `keel debug`, `keel trust` and `keel mcp`. `exec` is a client of the in-process runtime
//! (`keel-runtime`): it submits typed operations and renders the session's events; argument
//! parsing, signals, output formats and exit codes are all it owns.
#![forbid(unsafe_code)]

mod acp;
mod assembly;
mod config;
mod debug;
mod doctor;
mod errors;
mod exec;
mod feedback;
mod logging;
mod login;
mod mcp;
mod question;
mod sessions;
mod trust;
mod tui;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

/// keel, a coding agent for the terminal.
#[derive(Debug, Parser)]
#[command(name = "keel", version, about)]
struct Cli {
    /// Write diagnostic logs (spans and events, filtered by KEEL_LOG, else keel's own at
    /// debug) to this file, appended, instead of standard error.
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command: the interactive TUI.
    #[command(flatten)]
    tui: tui::TuiArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one turn non-interactively and print the answer, a result object or JSON events.
    Exec(Box<exec::ExecArgs>),
    /// List, show, fork, rewind, export or delete stored sessions.
    Sessions(sessions::SessionsArgs),
    /// Write a bundle about a session for a maintainer: counts and states only, no text and
    /// no file names.
    Feedback(feedback::FeedbackArgs),
    /// Check what keel needs (configuration, model and key with a test call, sandbox,
    /// MCP, trust, terminal) and say what to fix first.
    Doctor(doctor::DoctorArgs),
    /// Keep a provider's key in keel's credential store ($KEEL_HOME/credentials.json,
    /// readable by you alone), asked for without echo and checked with a test call.
    Login(login::LoginArgs),
    /// Remove a stored provider key (every one without a provider).
    Logout(login::LogoutArgs),
    /// Look inside what keel did (replay the runaway guard over a stored session).
    Debug(debug::DebugArgs),
    /// Trust this project's keel files (.keel/config.yaml, .keel/permissions.yaml) as they
    /// are now; until then they may only make keel stricter.
    Trust(trust::TrustArgs),
    /// List, show, add or remove MCP servers.
    Mcp(mcp::McpArgs),
    /// Show the configuration in effect and where each value came from, edit your
    /// config.yaml, or print its JSON Schema.
    Config(config::ConfigArgs),
    /// Pick a stored session of this folder and continue it in the TUI.
    Resume(Box<tui::TuiArgs>),
    /// Serve the Agent Client Protocol on stdin and stdout, for editors (Zed, JetBrains,
    /// Neovim, VS Code clients).
    Acp(Box<acp::AcpArgs>),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell (for
    /// example `keel completion bash > ~/.local/share/bash-completion/completions/keel`).
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print keel's manual page (roff), for example `keel man | man -l -`.
    Man,
    /// Used by `keel acp`: shows one command's output in an editor's terminal.
    #[command(hide = true)]
    AcpRelay(acp::RelayArgs),
}

fn main() -> ExitCode {
    // First: when keel started this process as its sandbox's spawner, it serves there.
    keel_sandbox::spawner_entry();
    // Before anything else: no command keel starts may read keel's environment (API keys)
    // or memory through /proc.
    keel_sandbox::make_undumpable();
    // clap exits 2 on a bad invocation (and 0 for --help and --version).
    let args = print_is_exec(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            if let Some(text) = dash_prompt(&error, &args) {
                eprintln!("{text}");
                return ExitCode::from(exec::EXIT_USAGE);
            }
            error.exit()
        }
    };
    if let Some(word) = unknown_command(&cli, &args) {
        eprintln!("{word}");
        return ExitCode::from(exec::EXIT_USAGE);
    }
    // Only when asked for (KEEL_LOG or --log-file): otherwise no subscriber, and keel's
    // output is exactly what it is without logging.
    if let Err(error) = logging::init(cli.log_file.as_deref()) {
        eprintln!("keel: {error}");
        return ExitCode::from(exec::EXIT_USAGE);
    }
    // The TUI brings its own multi-threaded runtime: drawing must never wait for a turn.
    let command = match cli.command {
        Some(Command::Completion { shell }) => {
            clap_complete::generate(shell, &mut Cli::command(), "keel", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Some(Command::Man) => {
            return match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("keel: cannot write the manual page: {error}");
                    ExitCode::from(exec::EXIT_FAILED)
                }
            };
        }
        None => return finish(tui::run(cli.tui, false)),
        Some(Command::Resume(args)) => return finish(tui::run(*args, true)),
        // ACP brings its own multi-threaded runtime: a turn never holds up the connection.
        Some(Command::Acp(args)) => return finish(acp::run(*args)),
        Some(Command::AcpRelay(args)) => return finish(acp::relay(&args)),
        Some(command) => command,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
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
        match command {
            Command::Exec(args) => exec::run(*args).await,
            Command::Sessions(args) => sessions::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Trust(args) => trust::run(&args).map(|()| ExitCode::SUCCESS),
            Command::Mcp(args) => mcp::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Config(args) => config::run(args),
            Command::Feedback(args) => feedback::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Debug(args) => debug::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Doctor(args) => doctor::run(args).await,
            Command::Login(args) => login::login(args).await,
            Command::Logout(args) => login::logout(&args),
            Command::Resume(_)
            | Command::Acp(_)
            | Command::AcpRelay(_)
            | Command::Completion { .. }
            | Command::Man => Ok(ExitCode::SUCCESS),
        }
    });
    // Tools may leave work behind after an abort; do not wait for it.
    runtime.shutdown_background();
    finish(result)
}

/// `keel -p …` / `keel --print …` (Claude Code's headless mode) is `keel exec …`.
fn print_is_exec(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let print = args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .position(|a| a == "-p" || a == "--print");
    let subcommand = args
        .iter()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'));
    let is_command = subcommand.is_some_and(|word| {
        Cli::command()
            .get_subcommands()
            .any(|c| c.get_name() == word.to_string_lossy())
    });
    if let Some(at) = print
        && !is_command
    {
        args.remove(at + 1);
        args.insert(1, "exec".into());
    }
    args
}

/// A prompt that starts with `-` (`keel exec "-5 is odd"`) reads as an option; clap's tip
/// would put `--` before its first word only. The message for it, naming the whole argument.
fn dash_prompt(error: &clap::Error, args: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(word)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let whole = args
        .iter()
        .map(|a| a.to_string_lossy())
        .find(|a| a.starts_with(word.as_str()) && a.chars().any(char::is_whitespace))?;
    let before: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| *a != whole)
        .collect();
    let quoted = format!("'{}'", whole.replace('\'', "'\\''"));
    Some(format!(
        "keel: `{whole}` starts with `-`, so it reads as an option. To send it as the prompt, \
         put `--` before it: keel {} -- {quoted}",
        before.join(" ")
    ))
}

/// One bare word that is no command (`keel doctr`) is a mistyped command, not a prompt:
/// the message saying so, with the nearest command. `keel -- WORD` sends the word.
fn unknown_command(cli: &Cli, args: &[std::ffi::OsString]) -> Option<String> {
    if cli.command.is_some() || args.iter().any(|a| a == "--") {
        return None;
    }
    let [word] = cli.tui.prompt.as_slice() else {
        return None;
    };
    if word.is_empty()
        || word.chars().any(char::is_whitespace)
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_owned())
        .collect();
    let nearest = keel_protocol::spelling::nearest(word, names.iter().map(String::as_str));
    let hint = match nearest {
        Some(name) => format!(" Did you mean `keel {name}`?"),
        None => format!(" The commands are: {}.", names.join(", ")),
    };
    Some(format!(
        "keel: `{word}` is not a command.{hint} To send it to the model as a prompt: keel -- {word}"
    ))
}

/// Prints a failure and maps it onto the exit code table.
fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(error) => {
            if let Some(keel_runtime::settings::ConfigError::Internal(_)) = error.downcast_ref() {
                eprintln!("keel: internal error: {error:#}");
                ExitCode::from(exec::EXIT_INTERNAL)
            } else if let Some(keel_runtime::settings::ConfigError::NoKey { .. }) =
                error.downcast_ref()
            {
                // A first run: one sentence with the fixes, no code to decode.
                eprintln!("keel: {error:#}");
                ExitCode::from(exec::EXIT_CONFIG)
            } else if let Some(config_error) =
                error.downcast_ref::<keel_runtime::settings::ConfigError>()
            {
                // Configuration problems have their own exit code so scripts can tell
                // them from a bad invocation.
                eprintln!(
                    "keel: configuration error ({}): {error:#}",
                    config_error.code()
                );
                ExitCode::from(exec::EXIT_CONFIG)
            } else if let Some(trust_error) =
                error.downcast_ref::<keel_runtime::settings::trust::TrustError>()
            {
                eprintln!("keel: trust error ({}): {error:#}", trust_error.code());
                ExitCode::from(exec::EXIT_CONFIG)
            } else if let Some(store_error) = error.downcast_ref::<keel_store::StoreError>() {
                // A wrong id is a bad invocation; anything else the store reports is a
                // runtime failure, named by its stable code (`session_busy`,
                // `database_corrupt`, …).
                if keel_runtime::storage::is_usage_error(store_error) {
                    eprintln!("keel: {error:#}");
                    ExitCode::from(exec::EXIT_USAGE)
                } else {
                    eprintln!(
                        "keel: session store error ({}): {error:#}",
                        store_error.code()
                    );
                    ExitCode::from(exec::EXIT_FAILED)
                }
            } else if error.downcast_ref::<errors::InternalError>().is_some() {
                eprintln!("keel: internal error: {error:#}");
                ExitCode::from(exec::EXIT_INTERNAL)
            } else if error.downcast_ref::<errors::RunFailed>().is_some() {
                eprintln!("keel: {error:#}");
                ExitCode::from(exec::EXIT_FAILED)
            } else {
                eprintln!("keel: {error:#}");
                ExitCode::from(exec::EXIT_USAGE)
            }
        }
    }
}
