//! How the runtime's errors become the binary's: each keeps the type `main` reads to pick
//! the exit code (a configuration error exits 3, a store failure 4, a bad invocation 2).

use keel_runtime::RuntimeError;
use keel_runtime::settings::ConfigError;

/// An error that is keel's fault rather than the invocation's (exit 70).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InternalError(pub String);

/// A run that could not do its work although the invocation was right (exit 4).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RunFailed(pub String);

/// The runtime's error as the binary reports it.
pub fn runtime_error(error: RuntimeError) -> anyhow::Error {
    match error {
        // A configuration error about a command-line flag (`--model nope/x`) is a bad flag
        // value: it exits 2 like every other, not 3 like a bad configuration file.
        RuntimeError::Config(ConfigError::Model {
            source_name,
            reason,
        }) if source_name.starts_with("--") => {
            anyhow::anyhow!("{source_name}: {reason}")
        }
        RuntimeError::Config(error) => anyhow::Error::new(error),
        RuntimeError::Store(error) => anyhow::Error::new(error),
        RuntimeError::StoreAt { path, source } => anyhow::Error::new(source).context(format!(
            "cannot open the session database {}",
            path.display()
        )),
        RuntimeError::Usage(message) => anyhow::anyhow!(message),
        // A folder the user did not say may be the workspace: a bad invocation (exit 2).
        home @ RuntimeError::HomeWorkspace(_) => anyhow::anyhow!(home.to_string()),
        missing @ RuntimeError::MissingKey { .. } => anyhow::anyhow!(missing.to_string()),
        RuntimeError::Resume(message) => anyhow::Error::new(RunFailed(message)),
        RuntimeError::Internal(message) => anyhow::Error::new(InternalError(message)),
        RuntimeError::Extension(error) => {
            anyhow::Error::new(InternalError(format!("extensions: {error}")))
        }
        other => anyhow::Error::new(RunFailed(format!("{other} ({})", other.code()))),
    }
}
