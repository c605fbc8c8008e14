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
    // The project's files that run code (MCP servers, hooks) are trusted the same way.
    let root = keel_extensions::extend::project_root(&start);
    let mut extra: Vec<PathBuf> = keel_mcp::config::project_file(&start).into_iter().collect();
    extra.extend(
        keel_extensions::extend::hooks::PROJECT_FILES
            .iter()
            .map(|name| root.join(name))
            .filter(|file| file.is_file()),
    );
    let found = project(&start);
    if found.is_none() && extra.is_empty() {
        println!(
            "No .keel folder, .mcp.json or hook settings in {} or above it: nothing to trust.",
            start.display()
        );
        return Ok(());
    }
    let mut store = TrustStore::open(keel_runtime::settings::keel_home().as_deref())?;
    if args.revoke {
        let root = found.as_ref().map_or(root.clone(), |f| {
            f.root.canonicalize().unwrap_or(f.root.clone())
        });
        let removed = store.revoke(&root)?;
        println!("Forgot {removed} trusted file(s) under {}.", root.display());
        return Ok(());
    }
    let mut files = extra;
    if let Some(found) = &found {
        for file in &found.linked {
            println!(
                "not trusted\t{}\t(a link: keel never trusts linked project files; copy the file instead)",
                file.display()
            );
        }
        files.splice(0..0, found.files.iter().cloned());
        if found.files.is_empty() && files.is_empty() {
            println!(
                "{} holds no keel settings keel can trust ({}).",
                found.root.join(PROJECT_DIR).display(),
                PROJECT_FILES.join(", ")
            );
            return Ok(());
        }
    }
    if args.status {
        for file in &files {
            let state = if store.is_trusted(file) {
                "trusted"
            } else {
                "not trusted"
            };
            println!("{state}\t{}", file.display());
        }
        return Ok(());
    }
    store.trust(&files)?;
    for file in &files {
        println!("trusted\t{}\t{}", digest(file)?, file.display());
    }
    println!("Any change to these files needs `keel trust` again.");
    Ok(())
}
