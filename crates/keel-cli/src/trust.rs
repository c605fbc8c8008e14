//! `keel trust`: records the user's trust in a project as it is now: its folder (so files
//! of other users there count), its keel files, `.mcp.json` and hook settings, each by its
//! content (the rules live in `keel_runtime::settings::trust` and `::project`).

use std::path::{Path, PathBuf};

use keel_runtime::settings::trust::{PROJECT_DIR, PROJECT_FILES, TrustStore, digest, keel_files};
use keel_runtime::settings::{Project, Settings, SettingsInput};

use crate::question;

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

/// The project's files that trust covers, as they are now.
struct Found {
    /// Every file to trust, keel files first.
    files: Vec<PathBuf>,
    /// Project files that are links (or lie in a linked `.keel`): never trusted.
    linked: Vec<PathBuf>,
}

fn find(project: &Project) -> Found {
    let mut files = Vec::new();
    let mut linked = Vec::new();
    if let Some(found) = keel_files(project) {
        files.extend(found.files.iter().cloned());
        linked = found.linked;
    }
    let names = std::iter::once(keel_mcp::config::PROJECT_FILE).chain(
        keel_extensions::extend::hooks::PROJECT_FILES
            .iter()
            .copied(),
    );
    for name in names {
        if let Ok(Some(file)) = project.file(name) {
            // A link is never trusted, whatever it leads to: say so rather than record it.
            if keel_runtime::settings::trust::trust_key(&file).is_some() {
                files.push(file);
            } else {
                linked.push(file);
            }
        }
    }
    Found { files, linked }
}

/// What `.mcp.json` and the hook files would run, for the user to read as they trust them.
fn runs(start: &Path, project: &Project) -> Vec<keel_extensions::extend::Untrusted> {
    let Ok(settings) = Settings::load(&SettingsInput {
        cwd: start.to_path_buf(),
        ..SettingsInput::default()
    }) else {
        return Vec::new();
    };
    let host = keel_runtime::extension::HostInfo {
        cwd: start.to_path_buf(),
        project: project.clone(),
        keel_home: settings.keel_home.clone(),
        ..Default::default()
    };
    let mut runs = keel_extensions::extend::untrusted(&settings.loaded.config, &host);
    runs.retain(|r| !r.protects.is_empty() || !r.any_code.is_empty());
    runs
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
    let project = Project::of(&start, keel_home.as_deref());
    let root = project.root.clone();
    if args.revoke {
        let root = root.canonicalize().unwrap_or(root);
        let removed = store.revoke(&root)?;
        println!(
            "Forgot the folder {} and {removed} trusted file(s) in it.",
            root.display()
        );
        return Ok(());
    }
    if args.status {
        let found = find(&project);
        let folder = if project.folder_trusted {
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
    store.trust_folder(&root)?;
    let project = Project {
        folder_trusted: true,
        ..project
    };
    let found = find(&project);
    // What the files would run, read before their content is trusted, as the TUI's
    // question shows it.
    let runs = runs(&start, &project);
    println!(
        "trusted\t{}\t(the project folder: its files count whoever owns them)",
        root.display()
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
            root.display()
        );
        return Ok(());
    }
    store.trust(&found.files)?;
    for file in &found.files {
        println!("trusted\t{}\t{}", digest(file)?, file.display());
    }
    if !runs.is_empty() {
        println!("What they run:");
        write_runs(&mut std::io::stdout(), &root, &runs)?;
    }
    println!("Any change to these files needs `keel trust` again.");
    Ok(())
}

/// Writes what each of `files` runs, as the trust question and `keel trust` show it, paths
/// relative to the project's `root`: its commands that run any code of the project, and
/// the files the model may not change while the file is trusted.
pub fn write_runs(
    out: &mut impl std::io::Write,
    root: &Path,
    files: &[keel_extensions::extend::Untrusted],
) -> std::io::Result<()> {
    let relative = |p: &Path| {
        let shown = p.strip_prefix(root).unwrap_or(p).display().to_string();
        if p.is_dir() {
            format!("{shown}/")
        } else {
            shown
        }
    };
    for file in files {
        let what = format!("{}: {}", relative(&file.file), file.what);
        question::say_indented(out, "  ", "    ", &what)?;
        for why in &file.any_code {
            question::say_indented(
                out,
                "    ! ",
                "      ",
                &format!("{why}: it runs any code in this project, as the model last left it."),
            )?;
        }
        if !file.protects.is_empty() {
            let shown: Vec<String> = file.protects.iter().map(|p| relative(p)).collect();
            question::say_indented(
                out,
                "    ",
                "    ",
                &format!(
                    "It runs {}; the model cannot change them while you trust the file.",
                    shown.join(", ")
                ),
            )?;
        }
    }
    Ok(())
}
