//! `keel trust`: records the user's trust in a project's keel files as they are now (the
//! rules live in `keel_runtime::settings::trust`).

use std::path::PathBuf;

use keel_runtime::settings::trust::{PROJECT_DIR, PROJECT_FILES, TrustStore, digest, project};

/// Arguments of `keel trust`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The project folder (default: the current folder; its nearest `.keel` counts).
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Only show the project's keel files and whether each is trusted.
    #[arg(long, conflicts_with = "revoke")]
    status: bool,
    /// Forget the trust given to this project's files.
    #[arg(long)]
    revoke: bool,
}

/// Runs `keel trust`.
pub fn run(args: &TrustArgs) -> anyhow::Result<()> {
    let start = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let start = start
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("{}: {e}", start.display()))?;
    let Some(found) = project(&start) else {
        println!(
            "No .keel folder in {} or above it: nothing to trust.",
            start.display()
        );
        return Ok(());
    };
    let mut store = TrustStore::open(keel_runtime::settings::keel_home().as_deref())?;
    if args.revoke {
        let root = found.root.canonicalize().unwrap_or(found.root.clone());
        let removed = store.revoke(&root)?;
        println!("Forgot {removed} trusted file(s) under {}.", root.display());
        return Ok(());
    }
    for file in &found.linked {
        println!(
            "not trusted\t{}\t(a link: keel never trusts linked project files; copy the file instead)",
            file.display()
        );
    }
    if found.files.is_empty() {
        println!(
            "{} holds no keel settings keel can trust ({}).",
            found.root.join(PROJECT_DIR).display(),
            PROJECT_FILES.join(", ")
        );
        return Ok(());
    }
    if args.status {
        for file in &found.files {
            let state = if store.is_trusted(file) {
                "trusted"
            } else {
                "not trusted"
            };
            println!("{state}\t{}", file.display());
        }
        return Ok(());
    }
    store.trust(&found.files)?;
    for file in &found.files {
        println!("trusted\t{}\t{}", digest(file)?, file.display());
    }
    println!("Any change to these files needs `keel trust` again.");
    Ok(())
}
