//! What every tool knows about where it runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bash's default timeout (issue 4).
pub const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(120);
/// Bash's largest timeout (issue 4).
pub const MAX_BASH_TIMEOUT: Duration = Duration::from_secs(600);

/// How bash subprocess environments are cleaned of credentials (DESIGN §16, layer B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvMode {
    /// Keep credentials (only when chosen; the provider key still goes).
    Off,
    /// Remove a list of known credential variables (the default).
    #[default]
    Scrub,
    /// Remove every variable whose name or value looks like a secret.
    Strict,
}

/// Where bash may write (the protocol's one type).
pub use keel_protocol::SandboxMode;

/// The environment tools run in; shared, immutable for a turn.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// Absolute working folder; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Workspace roots (absolute). Writes outside them need permission.
    pub roots: Vec<PathBuf>,
    /// Where the output of background commands is written (commands may read it there).
    pub output_dir: PathBuf,
    /// The session's artifacts folder, where an output larger than the budget is stored
    /// whole (`read` may read it even inside `$KEEL_HOME`); `None`: `output_dir`.
    pub artifacts: Option<PathBuf>,
    /// The tool-output budget.
    pub output: crate::output::OutputLimits,
    /// The user's home folder, for `~` and for the danger list.
    pub home: Option<PathBuf>,
    /// Credential cleaning for bash; `None` decides from the environment (DESIGN §16).
    pub env_mode: Option<EnvMode>,
    /// Bash sandbox.
    pub sandbox: SandboxMode,
    /// Block network access from bash (only with a sandbox mode other than full access).
    pub sandbox_blocks_network: bool,
    /// The hosts sandboxed commands may reach through keel's proxy (`sandbox.network`).
    pub network: crate::netproxy::NetworkRules,
    /// Who is asked about a host `network` does not allow (`ask` mode with a person
    /// there); `None`: such a host is refused and the model told.
    pub network_asker: Option<crate::netproxy::Asker>,
    /// web_fetch may reach loopback and private addresses.
    pub fetch_allow_private: bool,
    /// The environment commands start from; `None` inherits this process's.
    pub base_env: Option<Vec<(String, String)>>,
    /// keel's own folder (`$KEEL_HOME`): sessions and keys; never readable by commands.
    pub keel_home: Option<PathBuf>,
    /// Credential locations added by configuration to [`crate::protect::DEFAULT_CREDENTIALS`].
    pub extra_credentials: Vec<PathBuf>,
    /// Keep control files ([`crate::protect`]) out of the model's reach: true in every
    /// permission mode short of `full`.
    pub protect_control: bool,
    /// Variables never passed to a command in any cleaning mode (the key of the provider in
    /// use).
    pub secret_env_names: Vec<String>,
    /// An editor that holds the files (ACP clients offering `fs/*`): `read`, `write` and
    /// `edit` go through it after their checks.
    pub editor: Option<crate::files::editor::Editor>,
    /// A terminal that shows commands live (ACP clients offering `terminal/*`); the command
    /// still runs here, sandboxed.
    pub terminal: Option<crate::bash::live::Terminal>,
    /// In plan mode, the session's plan file (`$KEEL_HOME/plans/<session>.md`, inside
    /// [`Self::keel_home`]): the one file `write` and `edit` may change then, although it
    /// lies in keel's home. `None` in every other mode.
    pub plan_file: Option<PathBuf>,
    /// Files and folders that commands the user trusted run (a hook's script, a project
    /// MCP server's program): control files while that trust stands
    /// ([`crate::protect::trusted`]).
    pub trusted_code: Vec<crate::protect::TrustedPath>,
    /// How many background commands started in this environment still run.
    pub background: BackgroundCount,
}

/// A count of running background commands, shared by the tool and whoever reports on the
/// session (they do not keep it busy, but end with it).
#[derive(Debug, Clone, Default)]
pub struct BackgroundCount(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl BackgroundCount {
    /// How many run now.
    pub fn running(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Counts one from now until the returned guard is dropped.
    pub fn hold(&self) -> BackgroundHeld {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        BackgroundHeld(self.0.clone())
    }
}

/// One running background command, counted while held.
#[derive(Debug)]
pub struct BackgroundHeld(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for BackgroundHeld {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl ToolEnv {
    /// An environment rooted at `cwd`, with defaults for everything else.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            roots: vec![cwd.clone()],
            output_dir: default_output_dir(),
            artifacts: None,
            output: crate::output::OutputLimits::default(),
            home: std::env::var_os("HOME").map(PathBuf::from),
            cwd,
            env_mode: None,
            sandbox: SandboxMode::WorkspaceWrite,
            sandbox_blocks_network: false,
            network: crate::netproxy::NetworkRules::default(),
            network_asker: None,
            fetch_allow_private: false,
            base_env: None,
            keel_home: crate::permission::keel_home(
                std::env::var_os("HOME").map(PathBuf::from).as_deref(),
            ),
            extra_credentials: Vec::new(),
            protect_control: true,
            secret_env_names: Vec::new(),
            editor: None,
            terminal: None,
            plan_file: None,
            trusted_code: Vec::new(),
            background: BackgroundCount::default(),
        }
    }

    /// Every credential location: the defaults under the home folder, keel's home and the
    /// configured extras.
    pub fn credentials(&self) -> Vec<PathBuf> {
        crate::protect::credential_locations(
            self.home.as_deref(),
            self.keel_home.as_deref(),
            &self.extra_credentials,
        )
    }

    /// `path` made absolute (against `cwd`, `~` expanded) and lexically normalised.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let expanded = match (path.strip_prefix("~/"), &self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if path == "~" => self.home.clone().unwrap_or_else(|| PathBuf::from(path)),
            _ => PathBuf::from(path),
        };
        let absolute = if expanded.is_absolute() {
            expanded
        } else {
            self.cwd.join(expanded)
        };
        normalize(&absolute)
    }

    /// Where outputs larger than the budget are stored.
    pub fn artifact_dir(&self) -> &Path {
        self.artifacts.as_deref().unwrap_or(&self.output_dir)
    }

    /// The session's artifacts folder as resolved paths look when it is what keel made:
    /// the folder holding the session folders resolved (keel's home may be a link of the
    /// user's), and below it `sessions/<id>/artifacts` exactly. A link anywhere below puts
    /// resolved paths elsewhere, so nothing it leads to is taken for an artifact.
    pub fn artifacts_root(&self) -> Option<PathBuf> {
        let dir = self.artifacts.as_deref()?;
        let anchor = dir.ancestors().nth(3)?;
        let below = dir.strip_prefix(anchor).ok()?;
        Some(crate::permission::real_path(anchor).join(below))
    }

    /// The plan file as resolved paths show it when it is what keel made: keel's home
    /// resolved (it may be a link of the user's), and below it the plan file's own words.
    /// A link anywhere below puts resolved paths elsewhere, so nothing it leads to is taken
    /// for the plan file. `None` outside plan mode, or when the plan file is not in keel's
    /// home.
    pub fn plan_target(&self) -> Option<PathBuf> {
        let file = self.plan_file.as_deref()?;
        let home = self.keel_home.as_deref()?;
        let below = normalize(file)
            .strip_prefix(normalize(home))
            .ok()?
            .to_path_buf();
        if below.as_os_str().is_empty() {
            return None;
        }
        Some(crate::permission::real_path(home).join(below))
    }

    /// Whether `path` (absolute, normalised) lies inside a workspace root.
    pub fn in_workspace(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }
}

pub use keel_sandbox::sys::own_uid;

/// A per-user folder for saved command output, so users on one machine never share one:
/// `keel-outputs-UID` in the temp folder when it is this user's private folder (or can be
/// made one). Another user can make that name first (the temp folder is everyone's), or
/// make it a link; then keel makes a private folder of its own under a name nobody can
/// guess, once per process, and checks it as it checks the usual one.
fn default_output_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let uid = own_uid();
        let base = temp_base();
        let usual = base.join(format!("keel-outputs-{uid}"));
        let refused = match crate::output::private_folder(&usual) {
            Ok(_) => return usual,
            Err(error) => error,
        };
        use std::os::unix::fs::PermissionsExt as _;
        let made = tempfile::Builder::new()
            .prefix(&format!("keel-outputs-{uid}-"))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&base)
            .map(tempfile::TempDir::keep);
        match made {
            Ok(own) if crate::output::private_folder(&own).is_ok() => {
                tracing::warn!(
                    refused = %refused,
                    using = %own.display(),
                    "keel's usual output folder is not its own"
                );
                own
            }
            // Saving then fails with the reason, naming the usual folder.
            _ => usual,
        }
    })
    .clone()
}

/// Where keel makes its temp folders (saved outputs, the session's private `TMPDIR`): the
/// system's temp folder, unless it lies where the sandbox hides everything (the session
/// folders under `/run/user`), where commands could not reach them; then `/tmp`.
pub fn temp_base() -> PathBuf {
    let temp = std::env::temp_dir();
    if temp.starts_with("/run/user") || temp.starts_with("/var/run/user") {
        PathBuf::from("/tmp")
    } else {
        temp
    }
}

pub use keel_shell::normalize;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_against_cwd_and_home() {
        let mut env = ToolEnv::new("/work/project");
        env.home = Some(PathBuf::from("/home/u"));
        assert_eq!(
            env.resolve("src/../lib.rs"),
            PathBuf::from("/work/project/lib.rs")
        );
        assert_eq!(
            env.resolve("~/.ssh/id_rsa"),
            PathBuf::from("/home/u/.ssh/id_rsa")
        );
        assert_eq!(env.resolve("/etc/./passwd"), PathBuf::from("/etc/passwd"));
        assert!(env.in_workspace(&env.resolve("a/b")));
        assert!(!env.in_workspace(&env.resolve("../other")));
    }
}
