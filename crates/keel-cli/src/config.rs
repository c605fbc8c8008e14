//! `keel config`: the configuration in effect and where each value came from (`show`), the
//! user's file opened in an editor and checked before it is kept (`edit`), and the file's
//! JSON Schema (`schema`).

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use keel_runtime::settings::provenance::{Explained, explain};
use keel_runtime::settings::{ConfigFile, FILE_NAME, Settings, SettingsInput};

/// The schema's name beside the user's config file, which `edit` refreshes.
const SCHEMA_FILE: &str = "config.schema.json";

/// Arguments of `keel config`.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ConfigCommand {
    /// Every setting in effect here, and the file and line, `-c` override or default it
    /// came from.
    Show {
        /// This folder's project instead of the current one.
        #[arg(short = 'C', long, visible_alias = "cd", value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Also read this configuration file (as `keel exec --config` does).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override a key for this command only (`-c key.path=value`, repeatable).
        #[arg(short = 'c', value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Print a JSON object: key → {value, source}.
        #[arg(long)]
        json: bool,
    },
    /// Open your config.yaml ($KEEL_HOME/config.yaml) in $VISUAL or $EDITOR; it is kept only
    /// when it is valid.
    Edit,
    /// Print the JSON Schema of config.yaml, for editors.
    Schema,
}

/// Runs `keel config`.
pub fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ConfigCommand::Show {
            cwd,
            config,
            overrides,
            json,
        } => show(cwd.as_deref(), config, overrides, json),
        ConfigCommand::Edit => edit(),
        ConfigCommand::Schema => {
            let schema = keel_runtime::settings::schema::config_schema();
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn show(
    cwd: Option<&Path>,
    config_file: Option<PathBuf>,
    overrides: Vec<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let cwd = crate::exec::working_folder_arg(cwd)?;
    let settings = Settings::load(&SettingsInput {
        cwd,
        config_file,
        overrides,
        ..SettingsInput::default()
    })?;
    let explained = explain(&settings.loaded);
    let mut out = String::new();
    if json {
        let map: serde_json::Map<String, serde_json::Value> = explained
            .iter()
            .map(|e| {
                (
                    e.key.clone(),
                    serde_json::json!({"value": e.value, "source": e.source}),
                )
            })
            .collect();
        out = serde_json::to_string_pretty(&map)?;
        out.push('\n');
    } else {
        out.push_str(&header(&settings));
        out.push_str(&table(&explained));
        if settings.loaded.config.model.is_none() {
            out.push_str(&model_line(&settings));
        }
        for warning in &settings.warnings {
            out.push_str(&format!("note: {warning}\n"));
        }
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Which files were read, in the order they apply.
fn header(settings: &Settings) -> String {
    let files: Vec<String> = settings
        .loaded
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    if files.is_empty() {
        let home = settings.keel_home.as_ref().map_or_else(
            || "$KEEL_HOME".into(),
            |h| h.join(FILE_NAME).display().to_string(),
        );
        format!(
            "No configuration file is read (yours would be {home}); every value is keel's default.\n\n"
        )
    } else {
        format!(
            "Read, later ones winning key by key: {}\n\n",
            files.join(", ")
        )
    }
}

/// One row per key: KEY, VALUE, FROM, columns as wide as their longest entry (values past
/// 48 columns are not padded against).
fn table(explained: &[Explained]) -> String {
    let rows: Vec<(String, String, &str)> = explained
        .iter()
        .map(|e| (e.key.clone(), shown(&e.value), e.source.as_str()))
        .collect();
    let key_width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(3);
    let value_width = rows
        .iter()
        .map(|r| r.1.chars().count())
        .filter(|w| *w <= 48)
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = format!("{:<key_width$}  {:<value_width$}  FROM\n", "KEY", "VALUE");
    for (key, value, source) in rows {
        out.push_str(&format!(
            "{key:<key_width$}  {value:<value_width$}  {source}\n"
        ));
    }
    out
}

/// A value as a person reads it: text unquoted, nothing as "(unset)", the rest as JSON.
fn shown(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "(unset)".into(),
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// With no `model` set: which model keel would use, and why.
fn model_line(settings: &Settings) -> String {
    match settings.loaded.resolve_model(None) {
        Ok(resolved) => format!(
            "\nNo model is set, so keel uses {}/{}{}.\n",
            resolved.entry.provider,
            resolved.entry.id,
            resolved
                .api_key_env
                .map(|var| format!(" ({var} is set, or its key is stored)"))
                .unwrap_or_default()
        ),
        Err(error) => format!("\nNo model is set and none can be chosen: {error}\n"),
    }
}

/// `keel config edit`: a copy is edited; it replaces the file only when it reads as valid
/// configuration, else the error is shown and the copy may be edited again.
fn edit() -> anyhow::Result<ExitCode> {
    let home =
        keel_runtime::settings::keel_home().context("no home folder: set KEEL_HOME or HOME")?;
    std::fs::create_dir_all(&home).with_context(|| format!("cannot create {}", home.display()))?;
    let schema = serde_json::to_string_pretty(&keel_runtime::settings::schema::config_schema())?;
    keel_tools::files::write_atomic(&home.join(SCHEMA_FILE), format!("{schema}\n").as_bytes())
        .with_context(|| format!("cannot write {}", home.join(SCHEMA_FILE).display()))?;
    let file = home.join(FILE_NAME);
    let original = crate::assembly::read_if_present(&file)?;
    let draft = home.join(format!(".{FILE_NAME}.edit.yaml"));
    let start = original.clone().unwrap_or_else(|| {
        format!(
            "# yaml-language-server: $schema={SCHEMA_FILE}\n# keel's configuration: \
             `keel config show` lists every key and its value in effect.\n"
        )
    });
    // An edit an earlier run could not keep is where this one starts.
    match std::fs::read_to_string(&draft) {
        Ok(earlier) => {
            eprintln!(
                "Going on with the edit kept in {} (it was not valid then).",
                draft.display()
            );
            write_private(&draft, &earlier)?;
        }
        Err(_) => write_private(&draft, &start)?,
    }
    loop {
        run_editor(&draft)?;
        let edited = std::fs::read_to_string(&draft)
            .with_context(|| format!("cannot read {}", draft.display()))?;
        if original.as_deref() == Some(edited.as_str()) {
            let _ = std::fs::remove_file(&draft);
            eprintln!("No change to {}.", file.display());
            return Ok(ExitCode::SUCCESS);
        }
        let checked =
            keel_runtime::settings::config::load(&[ConfigFile::trusted(draft.clone())], &[])
                .and_then(|loaded| loaded.check());
        match checked {
            Ok(()) => {
                keel_tools::files::write_atomic(&file, edited.as_bytes())
                    .with_context(|| format!("cannot write {}", file.display()))?;
                let _ = std::fs::remove_file(&draft);
                eprintln!("Saved {}.", file.display());
                return Ok(ExitCode::SUCCESS);
            }
            Err(error) => {
                let error = error
                    .to_string()
                    .replace(&draft.display().to_string(), &file.display().to_string());
                eprintln!("keel: {error}");
                if !again()? {
                    eprintln!(
                        "{} is unchanged; your edit is kept in {}.",
                        file.display(),
                        draft.display()
                    );
                    return Ok(ExitCode::from(crate::exec::EXIT_CONFIG));
                }
            }
        }
    }
}

/// Writes `text` to a new file only the user can read.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The user's editor on `path`: `$VISUAL`, else `$EDITOR`, else `vi`, run by the shell so an
/// editor given with its flags (`code --wait`) works.
fn run_editor(path: &Path) -> anyhow::Result<()> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".into());
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("keel-config-edit")
        .arg(path)
        .status()
        .with_context(|| format!("cannot start the editor `{editor}`"))?;
    if !status.success() {
        bail!("the editor `{editor}` failed ({status}); nothing was saved");
    }
    Ok(())
}

/// Asks whether to edit again; no terminal means no.
fn again() -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("Edit again? [Y/n] ");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(!answer.trim().eq_ignore_ascii_case("n"))
}
