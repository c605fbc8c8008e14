//! `keel trust`: records the user's trust in a project as it is now: its folder (so files
//! of other users there count), its keel files, `.mcp.json` and hook settings, each by its
//! content (the rules live in `keel_runtime::settings::trust` and `::project`).

use std::path::PathBuf;

use keel_runtime::settings::trust::{PROJECT_DIR, PROJECT_FILES, TrustStore, digest, keel_files};
use keel_runtime::settings::{Project, Settings, SettingsInput};

/// Arguments of `keel trust`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The project folder (default: the current folder; its project is its git root, else
    /// the folder itself).
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Only show the project's files and whether each is trusted.
    #[arg(long, conflicts_with = "revoke")]
    status: bool,
    /// Forget the trust given to this project's folder and files.
    #[arg(long)]
    revoke: bool,
}

/// The project's files that trust covers, as they are now, with what the ones that run
/// programs would run.
struct Found {
    project: Project,
    /// Every file to trust, keel files first.
    files: Vec<PathBuf>,
    /// Keel files that are links: never trusted.
    linked: Vec<PathBuf>,
    /// What `.mcp.json` and the hook files run, for the user to read before trusting.
    runs: Vec<keel_extensions::extend::Untrusted>,
}

fn find(start: &std::path::Path, keel_home: Option<&std::path::Path>) -> Found {
    let project = Project::of(start, keel_home);
    let mut files = Vec::new();
    let mut linked = Vec::new();
    if let Some(found) = keel_files(&project) {
        files.extend(found.files.iter().cloned());
        linked = found.linked;
    }
    let names = std::iter::once(".mcp.json").chain(
        keel_extensions::extend::hooks::PROJECT_FILES
            .iter()
            .copied(),
    );
    for name in names {
        if let Ok(Some(file)) = project.file(name) {
            files.push(file);
        }
    }
    let runs = match Settings::load(&SettingsInput {
        cwd: start.to_path_buf(),
        ..SettingsInput::default()
    }) {
        Ok(settings) => {
            let host = keel_runtime::extension::HostInfo {
                cwd: start.to_path_buf(),
                project: project.clone(),
                keel_home: settings.keel_home.clone(),
                ..Default::default()
            };
            // As if nothing were trusted yet: what each file would run.
            let mut runs = keel_extensions::extend::untrusted(&settings.loaded.config, &host);
            runs.retain(|r| !r.protects.is_empty() || !r.any_code.is_empty());
            runs
        }
        Err(_) => Vec::new(),
    };
    Found {
        project,
        files,
        linked,
        runs,
    }
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
    let keel_home = keel_runtime::settings::keel_home();
    let mut store = TrustStore::open(keel_home.as_deref())?;
    if args.revoke {
        let root = Project::of(&start, keel_home.as_deref()).root;
        let root = root.canonicalize().unwrap_or(root);
        let removed = store.revoke(&root)?;
        println!(
            "Forgot the folder {} and {removed} trusted file(s) in it.",
            root.display()
        );
        return Ok(());
    }
    if args.status {
        let found = find(&start, keel_home.as_deref());
        let root = &found.project.root;
        let folder = if found.project.folder_trusted {
            "trusted"
        } else {
            "not trusted"
        };
        println!("{folder}\t{}\t(the project folder)", root.display());
        for file in &found.files {
            let state = if store.is_trusted(file) {
                "trusted"
            } else {
                "not trusted"
            };
            println!("{state}\t{}", file.display());
        }
        for file in &found.linked {
            println!("not trusted\t{}\t(a link)", file.display());
        }
        return Ok(());
    }
    // The folder first: once it is trusted, files of other users in it count too.
    let root = Project::of(&start, keel_home.as_deref()).root;
    store.trust_folder(&root)?;
    let found = find(&start, keel_home.as_deref());
    println!(
        "trusted\t{}\t(the project folder: its files count whoever owns them)",
        found.project.root.display()
    );
    for file in &found.linked {
        println!(
            "not trusted\t{}\t(a link: keel never trusts linked project files; copy the file instead)",
            file.display()
        );
    }
    if found.files.is_empty() {
        println!(
            "No keel settings ({}/{}), .mcp.json or hook settings in {}: only the folder is trusted.",
            PROJECT_DIR,
            PROJECT_FILES.join(", "),
            found.project.root.display()
        );
        return Ok(());
    }
    store.trust(&found.files)?;
    for file in &found.files {
        println!("trusted\t{}\t{}", digest(file)?, file.display());
    }
    for runs in &found.runs {
        if !runs.protects.is_empty() {
            let shown: Vec<String> = runs
                .protects
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            println!(
                "  {} runs {}: the model may not change them while the file is trusted",
                runs.file.display(),
                shown.join(", ")
            );
        }
        for why in &runs.any_code {
            println!(
                "  {}: {why}, so it runs any code in this project, which nothing protects",
                runs.file.display()
            );
        }
    }
    println!("Any change to these files needs `keel trust` again.");
    Ok(())
}
