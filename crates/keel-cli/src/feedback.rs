//! `keel feedback`: a local bundle about a session that a user can hand a maintainer: the
//! session and its child sessions as counts and states, files as sizes and line counts
//! under opaque ids, and a manifest of what could not be read. No message text, argument,
//! output, file content or file name goes in. `--preview` shows what the bundle holds.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

use crate::errors::runtime_error;

/// Arguments of `keel feedback`.
#[derive(Debug, clap::Args)]
pub struct FeedbackArgs {
    /// Session id or unique prefix; default the newest session of this folder.
    session: Option<String>,
    /// Where to write the bundle (JSON, created 0600).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        required_unless_present = "preview"
    )]
    output: Option<PathBuf>,
    /// Show what the bundle holds instead of (or before) writing it.
    #[arg(long)]
    preview: bool,
}

/// Runs `keel feedback`.
pub async fn run(args: FeedbackArgs) -> anyhow::Result<()> {
    let store = keel_runtime::storage::open(keel_store::OpenOptions {
        durability: keel_store::Durability::Normal,
        execution: keel_store::Execution::InPlace,
    })
    .await
    .map_err(runtime_error)?;
    let id = match &args.session {
        Some(typed) => store.resolve_session(typed).await?,
        None => {
            let cwd = std::env::current_dir().context("cannot read the working folder")?;
            let cwd = cwd.canonicalize().unwrap_or(cwd);
            store
                .list_sessions(Some(cwd.display().to_string()), 1)
                .await?
                .first()
                .map(|s| s.id.clone())
                .with_context(|| {
                    format!(
                        "no session in {}: name one (keel sessions list)",
                        cwd.display()
                    )
                })?
        }
    };
    let sessions = keel_runtime::storage::sessions_dir(store.path());
    let bundle = keel_extensions::feedback::collect(&store, &id, &sessions)
        .await
        .map_err(|e| crate::errors::RunFailed(format!("{e} ({})", e.code())))?;
    // The bundle keeps counts and ids only; what leaves still goes through redaction, so a
    // secret can never ride out in a name or a code.
    let secrets = keel_tools::redact::process_secrets();
    if args.preview {
        let preview = keel_extensions::feedback::preview(&bundle);
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(
                keel_tools::redact::redact(&preview, &secrets)
                    .text
                    .as_bytes(),
            )
            .and_then(|()| stdout.flush())
            .context("cannot write to standard output")?;
    }
    if let Some(path) = &args.output {
        keel_extensions::feedback::write(&bundle, path)
            .with_context(|| format!("cannot write the bundle to {}", path.display()))?;
        eprintln!(
            "keel: wrote the feedback bundle to {} ({} sessions)",
            path.display(),
            bundle.sessions.len()
        );
    }
    Ok(())
}
