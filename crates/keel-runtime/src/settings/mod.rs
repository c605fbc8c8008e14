//! Settings: configuration files, `-c` overrides, trust in a project's own files, permission
//! rules and project instructions. Loaded once per runtime; nothing here runs a turn.

pub mod config;
pub mod extend;
pub mod harness;
pub mod instructions;
mod local;
pub mod project;
pub mod provenance;
pub mod sandbox;
pub mod schema;
pub mod trust;

use std::path::{Path, PathBuf};

use keel_tools::permission::{Effect, RuleSet};

pub use config::{
    Config, ConfigError, ConfigFile, ExtensionsConfig, FILE_NAME, Layer, LimitError, Loaded,
    keel_home,
};
pub use harness::{ContextConfig, OutputBudgetConfig, RunawayGuardConfig, model_matches};
pub use project::{Project, RefusedFile};

/// What settings are loaded from.
#[derive(Debug, Clone, Default)]
pub struct SettingsInput {
    /// The working folder (absolute).
    pub cwd: PathBuf,
    /// A configuration file read after `$KEEL_HOME/config.yaml` and the project's.
    pub config_file: Option<PathBuf>,
    /// `key.path=value` overrides, applied last.
    pub overrides: Vec<String>,
    /// Trust the project's keel files for this run as they are now, without recording it.
    pub trust_project: bool,
    /// keel's own folder; `None`: `$KEEL_HOME`, else `~/.keel`.
    pub keel_home: Option<PathBuf>,
    /// Rules given on the command line (`--allowedTools`, `--disallowedTools`), added after
    /// the files' (deny still beats allow, wherever a rule came from).
    pub rules: Vec<keel_tools::permission::Rule>,
    /// More workspace folders (`--add-dir`, absolute): files there count as inside the
    /// workspace and sandboxed commands may write there.
    pub extra_roots: Vec<PathBuf>,
}

/// Loaded settings of one runtime.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The working folder.
    pub cwd: PathBuf,
    /// `$KEEL_HOME`, else `~/.keel`.
    pub keel_home: Option<PathBuf>,
    /// The project the working folder belongs to: whose files count.
    pub project: Project,
    /// The merged configuration.
    pub loaded: Loaded,
    /// Permission rules: the user's, then the project's (allow rules only when trusted).
    pub rules: RuleSet,
    /// Things the user should hear about (ignored untrusted settings), one line each.
    pub warnings: Vec<String>,
    /// Workspace folders besides the working folder ([`SettingsInput::extra_roots`]).
    pub extra_roots: Vec<PathBuf>,
}

impl Settings {
    /// Loads everything from `input`: `$KEEL_HOME/config.yaml`, the project's
    /// `.keel/config.yaml` (in full only when trusted), the explicit file, the overrides,
    /// then the permission rules.
    pub fn load(input: &SettingsInput) -> Result<Self, ConfigError> {
        let keel_home = input.keel_home.clone().or_else(keel_home);
        let (project, mut notes) = Project::find(&input.cwd, keel_home.as_deref());
        let mut files: Vec<ConfigFile> = Vec::new();
        if let Some(home) = keel_home
            .as_ref()
            .map(|h| h.join(FILE_NAME))
            .filter(|p| p.is_file())
        {
            files.push(ConfigFile::trusted(home));
        }
        match config::project_file(&project) {
            Ok(Some(file)) if !files.iter().any(|f| f.path == file) => {
                let trusted = project_trusted(input.trust_project, keel_home.as_deref(), &file)?;
                files.push(ConfigFile {
                    path: file,
                    trusted,
                });
            }
            Ok(_) => {}
            Err(why) => notes.push(why.to_string()),
        }
        if let Some(explicit) = &input.config_file {
            files.push(ConfigFile::trusted(explicit.clone()));
        }
        let mut loaded = config::load(&files, &input.overrides)?;
        loaded.keel_home.clone_from(&keel_home);
        let mut warnings = notes;
        warnings.extend(loaded.ignored.iter().cloned());
        let mut rules = permission_rules(input, &project, keel_home.as_deref(), &mut warnings)?;
        for rule in &input.rules {
            rules.push(rule.clone());
        }
        warnings.extend(instructions::foreign(&input.cwd, &project));
        Ok(Self {
            cwd: input.cwd.clone(),
            keel_home,
            project,
            loaded,
            rules,
            warnings,
            extra_roots: input.extra_roots.clone(),
        })
    }

    /// keel's system prompt with the project's instructions.
    pub fn system_prompt(&self) -> String {
        instructions::system_prompt(
            &self.cwd,
            &self.extra_roots,
            self.keel_home.as_deref(),
            &self.project,
        )
    }
}

/// The permission rules: `$KEEL_HOME/permissions.yaml`, then the project's
/// `.keel/permissions.yaml`, whose allow rules count only when the user trusts it.
fn permission_rules(
    input: &SettingsInput,
    project: &Project,
    keel_home: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<RuleSet, ConfigError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let rules_error = |e: keel_tools::permission::RuleError| ConfigError::Model {
        source_name: "permissions".into(),
        reason: e.to_string(),
    };
    let mut rules = RuleSet::load(keel_home, None, home.as_deref()).map_err(rules_error)?;
    let Some(found) = trust::keel_files(project) else {
        return Ok(rules);
    };
    let file = found
        .root
        .join(trust::PROJECT_DIR)
        .join(keel_tools::permission::rules::RULES_FILE);
    // Another user's file is ignored; a link is never trusted, but its deny and ask rules
    // still tighten.
    if let Some((_, why)) = found.refused.iter().find(|(path, _)| *path == file) {
        warnings.push(why.to_string());
        return Ok(rules);
    }
    let project_rules = RuleSet::load_file(&file, home.as_deref()).map_err(rules_error)?;
    if project_rules.is_empty() || project_trusted(input.trust_project, keel_home, &file)? {
        rules.extend(project_rules);
        return Ok(rules);
    }
    let mut ignored = 0;
    for rule in project_rules.rules() {
        if rule.effect == Effect::Allow {
            ignored += 1;
        } else {
            rules.push(rule.clone());
        }
    }
    if ignored > 0 {
        warnings.push(format!(
            "{} is not trusted, so its {ignored} allow rule(s) are ignored (its deny and ask rules apply). \
             Run `keel trust` in the project to trust it as it is now.",
            file.display()
        ));
    }
    Ok(rules)
}

/// Whether a project file counts in full: trusted for this run, or a trust record of its
/// current content.
fn project_trusted(
    trust_project: bool,
    keel_home: Option<&Path>,
    file: &Path,
) -> Result<bool, ConfigError> {
    if trust_project {
        // Even for this run: a linked file is not the project's own.
        return Ok(trust::trust_key(file).is_some());
    }
    let store = trust::TrustStore::open(keel_home).map_err(|e| ConfigError::Model {
        source_name: "trust".into(),
        reason: e.to_string(),
    })?;
    Ok(store.is_trusted(file))
}
