//! Each session's services: its tools environment, permission gate and built-in tools, the
//! editor a front end may lend it, and its plan file. The extension interface names these,
//! so this module depends on settings and the tool crates only, never on the runtime.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use keel_agent::ToolRef;
use keel_tools::permission::{Approver, Mode, PermissionGate, PermissionHook};
use keel_tools::{SandboxMode, ToolEnv};

use crate::settings::Settings;

/// The folder of the sessions' plan files, in `$KEEL_HOME`.
pub const PLANS_DIR: &str = "plans";

/// A session's plan file, `<keel_home>/plans/<session>.md`: in plan mode the one file the
/// model may write, and what `exit_plan_mode` freezes for the user's review.
pub fn plan_file(keel_home: &Path, session: &keel_protocol::SessionId) -> PathBuf {
    keel_home
        .join(PLANS_DIR)
        .join(format!("{}.md", session.as_str()))
}

/// The session's plan file as the model left it (never through a link, at most 256 KiB);
/// `None` when there is none or it cannot be read.
pub fn read_plan(keel_home: &Path, session: &keel_protocol::SessionId) -> Option<String> {
    let bytes =
        keel_tools::files::read_no_links(&plan_file(keel_home, session), 256 * 1024).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    Some(text.strip_prefix('\u{feff}').unwrap_or(&text).to_owned())
}

/// What a session's tools and gate are built from.
#[derive(Debug, Clone)]
pub struct ToolSetup {
    /// The working folder.
    pub cwd: PathBuf,
    /// Workspace folders besides the working folder (`--add-dir`).
    pub extra_roots: Vec<PathBuf>,
    /// Permission mode.
    pub mode: Mode,
    /// Sandbox.
    pub sandbox: SandboxMode,
    /// Shell environment cleaning.
    pub env_mode: keel_tools::EnvMode,
    /// Variables no command may see (the provider's key).
    pub secret_env_names: Vec<String>,
    /// Credential locations beyond the built-in list.
    pub extra_credentials: Vec<PathBuf>,
    /// The hosts commands may reach through keel's proxy.
    pub network: keel_tools::netproxy::NetworkRules,
    /// `$KEEL_HOME`.
    pub keel_home: Option<PathBuf>,
    /// The session's folder; outputs past the budget go to its `artifacts/`.
    pub session_dir: Option<PathBuf>,
    /// The tool-output budget.
    pub output: keel_tools::OutputLimits,
    /// The editor that holds the session's files, when a front end lends one (ACP).
    pub editor: Option<keel_tools::files::editor::Editor>,
    /// The terminal that shows the session's commands live, when a front end lends one.
    pub terminal: Option<keel_tools::bash::live::Terminal>,
    /// The session's plan file ([`plan_file`]): writable in plan mode only, and there the
    /// only writable file.
    pub plan_file: Option<PathBuf>,
    /// What commands the user trusted run: control files ([`keel_tools::protect::trusted`]).
    pub trusted_code: Vec<keel_tools::protect::TrustedPath>,
}

/// What a front end implements to hold files (an editor's buffers) and show commands live.
pub use keel_tools::bash::live::{LiveFeed, LiveTerminal, Terminal};
pub use keel_tools::files::editor::{Editor, EditorError, EditorFiles};

/// Lends a session an editor's files and terminals: ACP clients that offer `fs/*` and
/// `terminal/*`.
pub trait EditorProvider: Send + Sync {
    /// The editor for `session`, if its client offers one.
    fn editor(
        &self,
        session: &keel_protocol::SessionId,
    ) -> Option<keel_tools::files::editor::Editor>;
    /// A terminal that shows `session`'s commands live, if its client offers one.
    fn terminal(
        &self,
        _session: &keel_protocol::SessionId,
    ) -> Option<keel_tools::bash::live::Terminal> {
        None
    }
}

/// The folder of a session's archived outputs, inside its session folder.
pub const ARTIFACTS_DIR: &str = "artifacts";

impl ToolSetup {
    /// The setup for `settings` in `mode` and `sandbox`; the session database's own files
    /// (`db`) are hidden from commands like any credential when they live outside
    /// `$KEEL_HOME`.
    pub fn new(
        settings: &Settings,
        mode: Mode,
        sandbox: SandboxMode,
        env_mode: keel_tools::EnvMode,
        key_env: Option<String>,
        db: Option<&Path>,
    ) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cwd = settings.cwd.clone();
        let mut extra_credentials: Vec<PathBuf> = settings
            .loaded
            .config
            .credential_paths
            .iter()
            .map(|p| match (p.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => cwd.join(p),
            })
            .collect();
        if let Some(db) = db {
            let db = std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = db.clone().into_os_string();
                name.push(suffix);
                extra_credentials.push(PathBuf::from(name));
            }
        }
        Self {
            cwd,
            extra_roots: settings.extra_roots.clone(),
            mode,
            sandbox,
            env_mode,
            secret_env_names: key_env.into_iter().collect(),
            extra_credentials,
            network: settings.loaded.config.sandbox.network.rules(),
            keel_home: settings.keel_home.clone(),
            session_dir: None,
            output: settings
                .loaded
                .config
                .output_budget
                .limits()
                .unwrap_or_default(),
            editor: None,
            terminal: None,
            plan_file: None,
            trusted_code: Vec::new(),
        }
    }
}

/// A session's tools environment, permission gate and built-in tools.
pub struct SessionServices {
    /// What they were built from.
    pub setup: ToolSetup,
    /// The tools environment.
    pub env: Arc<ToolEnv>,
    /// The permission gate.
    pub gate: Arc<PermissionGate>,
    /// The gate as a `before_tool_call` hook (headless or asking the session's approver).
    pub permission: Arc<PermissionHook>,
    tools: OnceLock<Vec<ToolRef>>,
    /// Tools a small window held back that the model found: later turns offer them.
    pub(crate) found: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// What the last lean report said, so a change is told once.
    pub(crate) lean_told: std::sync::Mutex<Option<serde_json::Value>>,
}

impl std::fmt::Debug for SessionServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionServices")
            .field("setup", &self.setup)
            .finish_non_exhaustive()
    }
}

impl SessionServices {
    /// Builds the environment and gate; `approver` asks the user, `None` denies what
    /// would ask (headless).
    pub fn new(
        setup: ToolSetup,
        rules: keel_tools::permission::RuleSet,
        approver: Option<Arc<dyn Approver>>,
    ) -> Self {
        let mut env = ToolEnv::new(setup.cwd.clone());
        env.roots.extend(setup.extra_roots.iter().cloned());
        env.sandbox = setup.sandbox;
        env.env_mode = Some(setup.env_mode);
        env.protect_control = setup.mode != Mode::Full;
        env.keel_home.clone_from(&setup.keel_home);
        env.secret_env_names.clone_from(&setup.secret_env_names);
        env.extra_credentials.clone_from(&setup.extra_credentials);
        env.network = setup.network.clone();
        // In ask mode a host off the list is the user's to allow; otherwise it is refused.
        env.network_asker = approver
            .clone()
            .filter(|_| setup.mode == Mode::Ask)
            .map(keel_tools::netproxy::Asker);
        env.artifacts = setup
            .session_dir
            .as_ref()
            .map(|dir| dir.join(ARTIFACTS_DIR));
        env.output = setup.output;
        env.editor.clone_from(&setup.editor);
        env.terminal.clone_from(&setup.terminal);
        // The gate and the file tools know of the plan file only in plan mode.
        env.plan_file = setup.plan_file.clone().filter(|_| setup.mode == Mode::Plan);
        env.trusted_code.clone_from(&setup.trusted_code);
        let env = Arc::new(env);
        let gate = Arc::new(PermissionGate::new(&env, setup.mode, rules));
        let permission = Arc::new(match approver {
            Some(approver) => {
                let hook = PermissionHook::interactive(gate.clone(), approver);
                match &setup.keel_home {
                    // "Always" answers outlive the session in the user's own rule file.
                    Some(home) => hook.with_rules_file(
                        home.join(keel_tools::permission::rules::RULES_FILE),
                        std::env::var_os("HOME").map(std::path::PathBuf::from),
                    ),
                    None => hook,
                }
            }
            None => PermissionHook::headless(gate.clone()),
        });
        Self {
            setup,
            env,
            gate,
            permission,
            tools: OnceLock::new(),
            found: Arc::default(),
            lean_told: std::sync::Mutex::new(None),
        }
    }

    /// Records that the model found `name` behind `tool_search`: the session's later turns
    /// keep it offered while anything else can wait.
    pub fn remember_found(&self, name: &str) {
        self.found
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_owned());
    }

    /// Every built-in tool over this session's environment, built once.
    pub fn builtin_tools(&self) -> &[ToolRef] {
        self.tools
            .get_or_init(|| keel_tools::builtin_tools(self.env.clone()))
    }
}
