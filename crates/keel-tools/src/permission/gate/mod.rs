//! The judgement: a tool call becomes a list of operations on real targets (read this file,
//! run this program, delete that folder, reach the network), each judged by the rules, the
//! mode's profile and the danger list; the call gets the worst verdict of its operations.
//!
//! Order: a write or delete of a protected control file denies the call in every mode but
//! `full`; then per operation a deny rule, then the mode's own denials (`plan` is read-only but
//! for `write` and `edit` of the session's plan file, and has no network), then the danger list (asks in every mode but `full`; no allow rule can
//! silence it), then ask rules, then allow rules, then the mode's profile. So rules can loosen
//! or tighten a mode's asks, but never a safety check, a control file or the read-only promise
//! of `plan`.
//!
//! The pieces: `decision` holds the verdict types the host and front ends see, `operations`
//! turns a call into `Op`s and collects dangers, `verdict` applies that order and offers
//! "always allow" scopes. This file holds the gate itself and the path resolution they share.

mod decision;
mod operations;
mod verdict;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, Weak};

use keel_agent::{AgentTool, ToolNature, ToolRef};
use serde_json::Value;

use super::danger::Credentials;
use super::effects::CommandClass;
use super::paths::{real_path, resolve_until};
use super::rules::{Action, Effect, Rule, RuleSet, Scope};
use super::shell::{Arg, ShellEnv};
use crate::env::{SandboxMode, ToolEnv, normalize};

pub use decision::{AskRequest, Decision, DecisionKind, Denial, DenySource, Mode};

/// Longest command or argument text quoted in a message (design choice: enough to recognise).
const MAX_QUOTE: usize = 300;

/// What an operation acts on.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// Nothing in particular (running a program, the call itself).
    None,
    /// A real path; `children` when it stands for the entries inside it (`dir/*`).
    Path { real: PathBuf, children: bool },
    /// A path only known at run time.
    Unknown(String),
    /// A path through a link the command itself makes before it gets there: where it leads
    /// cannot be known until the command runs.
    ThroughLink(String),
    /// A URL.
    Url(String),
    /// A protected control location reached without naming it, and how
    /// (`git -c core.hooksPath=…`).
    Protected(String),
}

/// One thing a call does.
#[derive(Debug, Clone)]
struct Op {
    action: Option<Action>,
    target: Target,
    command: Option<Vec<String>>,
    wrapped: Vec<Vec<String>>,
    class: CommandClass,
    recursive: bool,
    program: Option<String>,
    /// What caused it, for danger messages: "`rm -rf /`", "`> /dev/sda`", "read ~/.ssh/id_rsa".
    source: String,
    /// What it does, for mode and rule messages: "`rm x` deletes /ws/x".
    describe: String,
    /// A file tool's read or write of exactly the session's plan file, in plan mode: the
    /// one place in keel's home the mode lets the model write (and read back).
    plan: bool,
}

impl Op {
    fn call() -> Self {
        Self {
            action: None,
            target: Target::None,
            command: None,
            wrapped: Vec::new(),
            class: CommandClass::Other,
            recursive: false,
            program: None,
            source: String::new(),
            describe: String::new(),
            plan: false,
        }
    }

    fn path(&self) -> Option<&Path> {
        match &self.target {
            Target::Path { real, .. } => Some(real),
            _ => None,
        }
    }
}

fn clip(text: &str) -> String {
    let line = text.replace('\n', " ⏎ ");
    if line.chars().count() <= MAX_QUOTE {
        line
    } else {
        let head: String = line.chars().take(MAX_QUOTE).collect();
        format!("{head}…")
    }
}

fn has_glob_meta(text: &str) -> bool {
    text.contains(['*', '?', '[', '{'])
}

/// Links a command makes before a later part of it runs: paths through them cannot be judged
/// from the file system as it is now.
#[derive(Debug, Default)]
struct Links {
    /// Links (or moved files) at these real paths.
    exact: Vec<PathBuf>,
    /// Folders where any path that does not exist yet may turn out to be a link.
    trees: Vec<PathBuf>,
}

impl Links {
    fn blocks(&self, prefix: &Path) -> bool {
        self.exact.iter().any(|link| link == prefix)
            || self.trees.iter().any(|tree| {
                prefix != tree
                    && prefix.starts_with(tree)
                    && std::fs::symlink_metadata(prefix).is_err()
            })
    }
}

/// The permission gate of one session: mode, rules, session rules and the workspace.
#[derive(Debug)]
pub struct PermissionGate {
    mode: RwLock<Mode>,
    rules: RuleSet,
    session: RwLock<Vec<Rule>>,
    cwd: PathBuf,
    home: Option<PathBuf>,
    shell: ShellEnv,
    /// What each tool offered to the model says it does ([`AgentTool::nature`]); a name
    /// not declared is [`ToolNature::Opaque`].
    natures: RwLock<HashMap<String, ToolNature>>,
    /// The tools themselves, for the previews of calls the user is asked about.
    tools: Offered,
    credentials: Credentials,
    /// What is protected (control patterns, keel's home, the user's start-up files, what
    /// trusted commands run), and the workspace roots and home folders it resolved.
    protection: crate::protect::Protection,
    /// In plan mode, the session's plan file as resolved paths show it
    /// ([`ToolEnv::plan_target`]).
    plan_file: Option<PathBuf>,
    /// Writes to control files are denied short of `full` ([`ToolEnv::protect_control`]).
    protect_control: bool,
    /// The bash sandbox bounds what commands can reach ([`ToolEnv::sandbox`] is not full
    /// access), so `auto` may run code the gate cannot read.
    sandboxed: bool,
}

/// The tools offered by name, for the previews of the gate's questions. Held weakly: a tool
/// ends with its session (the bash tool's end kills its background commands and undoes
/// what they did to control files), never with the gate.
#[derive(Default)]
struct Offered(RwLock<HashMap<String, Weak<dyn AgentTool>>>);

impl std::fmt::Debug for Offered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools = self.0.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_set().entries(tools.keys()).finish()
    }
}

impl PermissionGate {
    /// A gate for tools running in `env`, with the variables a command would see: the
    /// environment commands start from, cleaned as for a command. keel's own secrets are
    /// never expanded, so no judgement or message can carry them to the model.
    pub fn new(env: &ToolEnv, mode: Mode, rules: RuleSet) -> Self {
        let base: Vec<(String, String)> = match &env.base_env {
            Some(vars) => vars.clone(),
            None => std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        };
        // An unknown cleaning mode stops keel before any command; judge as the strictest.
        let cleaning =
            crate::bash::envclean::mode(env.env_mode, &base).unwrap_or(crate::EnvMode::Strict);
        let (kept, _) = crate::bash::envclean::clean(base, cleaning, &env.secret_env_names);
        let vars: HashMap<String, String> = kept.into_iter().collect();
        let home = env.home.as_deref().map(normalize);
        Self {
            mode: RwLock::new(mode),
            rules,
            session: RwLock::new(Vec::new()),
            cwd: real_path(&env.cwd),
            shell: ShellEnv {
                home: home.clone(),
                vars,
            },
            home,
            natures: RwLock::new(HashMap::new()),
            tools: Offered::default(),
            credentials: match env.artifacts_root() {
                Some(dir) => {
                    Credentials::new(&env.credentials(), env.home.as_deref()).readable_in(dir)
                }
                None => Credentials::new(&env.credentials(), env.home.as_deref()),
            },
            protection: crate::protect::Protection::of(env),
            plan_file: env.plan_target(),
            protect_control: env.protect_control,
            sandboxed: env.sandbox != SandboxMode::DangerFullAccess,
        }
    }

    /// Replaces the variables `$NAME` expands to in shell commands.
    pub fn with_vars(mut self, vars: HashMap<String, String>) -> Self {
        self.shell.vars = vars;
        self
    }

    /// Takes what `tools` declare they do; the gate judges their calls by that.
    pub fn declare_tools(&self, tools: &[ToolRef]) {
        let mut natures = self.natures.write().unwrap_or_else(PoisonError::into_inner);
        let mut known = self.tools.0.write().unwrap_or_else(PoisonError::into_inner);
        // Each turn offers mostly the last turn's tools: only what changed is written.
        for tool in tools {
            let (name, nature) = (&tool.definition().name, tool.nature());
            if natures.get(name) != Some(&nature) {
                natures.insert(name.clone(), nature);
            }
            if !known
                .get(name)
                .is_some_and(|held| std::ptr::addr_eq(held.as_ptr(), Arc::as_ptr(tool)))
            {
                known.insert(name.clone(), Arc::downgrade(tool));
            }
        }
    }

    /// The tool offered as `name`, for a preview of its call.
    pub fn tool(&self, name: &str) -> Option<ToolRef> {
        self.tools
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .and_then(Weak::upgrade)
    }

    /// What tool `name` declared it does ([`ToolNature::Opaque`] for one that did not).
    pub fn nature(&self, name: &str) -> ToolNature {
        self.natures
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .copied()
            .unwrap_or(ToolNature::Opaque)
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.mode.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Switches mode (the user toggled it).
    pub fn set_mode(&self, mode: Mode) {
        *self.mode.write().unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// Adds a rule for the rest of the session.
    pub fn add_session_rule(&self, rule: Rule) {
        self.session
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(rule);
    }

    /// Adds the allow rules of an "always allow" answer.
    pub fn allow_scope(&self, scope: &Scope) {
        let mut session = self.session.write().unwrap_or_else(PoisonError::into_inner);
        for matcher in &scope.matchers {
            session.push(Rule::session(Effect::Allow, matcher.clone()));
        }
    }

    /// Adds the deny rules of a "reject always" answer.
    pub fn deny_scope(&self, scope: &Scope) {
        let mut session = self.session.write().unwrap_or_else(PoisonError::into_inner);
        for matcher in &scope.matchers {
            session.push(Rule::session(Effect::Deny, matcher.clone()));
        }
    }

    /// The rules added in this session.
    pub fn session_rules(&self) -> Vec<Rule> {
        self.session
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Judges one call.
    pub fn check(&self, tool: &str, arguments: &Value) -> Decision {
        let mode = self.mode();
        let nature = self.nature(tool);
        let judged = self.operations(mode, tool, nature, arguments);
        let decision = self.decide(mode, tool, nature, judged);
        tracing::debug!(tool, mode = mode.name(), decision = ?decision.kind(), "permission decision");
        decision
    }

    fn in_workspace(&self, path: &Path) -> bool {
        self.protection
            .roots
            .iter()
            .any(|root| path.starts_with(root))
    }

    /// `~` expanded and made absolute against `cwd`; `None` when `cwd` is unknown.
    fn absolute(&self, text: &str, cwd: Option<&Path>) -> Option<PathBuf> {
        let expanded = match (text.strip_prefix('~'), &self.home) {
            (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                PathBuf::from(format!("{}{rest}", home.display()))
            }
            _ => PathBuf::from(text),
        };
        if expanded.is_absolute() {
            Some(expanded)
        } else {
            cwd.map(|cwd| cwd.join(expanded))
        }
    }

    /// Resolves a path argument of a command against `cwd` into a real target, as the kernel
    /// will: links first, then `..`; unknown when it goes through a link the command makes.
    fn target(&self, arg: &Arg, cwd: Option<&Path>, links: &Links) -> Target {
        if arg.opaque || arg.unexpanded.is_some() {
            return Target::Unknown(arg.text.clone());
        }
        let Some(absolute) = self.absolute(&arg.text, cwd) else {
            return Target::Unknown(arg.text.clone());
        };
        let (path, children) = if arg.glob {
            // A pattern that matched nothing yet: the folder before its first pattern part.
            let mut base = PathBuf::new();
            for component in absolute.components() {
                if has_glob_meta(&component.as_os_str().to_string_lossy()) {
                    break;
                }
                base.push(component);
            }
            (base, true)
        } else {
            (absolute, arg.tree)
        };
        match resolve_until(&path, &|prefix| links.blocks(prefix)) {
            Some(real) => Target::Path { real, children },
            None => Target::ThroughLink(arg.text.clone()),
        }
    }

    /// Like [`Self::target`] for a path that is deleted: only the folders on the way to it
    /// must not be links the command makes.
    fn delete_target(&self, arg: &Arg, cwd: Option<&Path>, links: &Links) -> Target {
        let target = self.target(arg, cwd, &Links::default());
        let parent = self
            .absolute(&arg.text, cwd)
            .and_then(|p| p.parent().map(Path::to_path_buf));
        match parent {
            Some(parent) if resolve_until(&parent, &|prefix| links.blocks(prefix)).is_none() => {
                Target::ThroughLink(arg.text.clone())
            }
            _ => target,
        }
    }

    /// The real targets of a file tool's path: where the tool opens it (`..` folded first,
    /// as [`ToolEnv::resolve`] does) and where the kernel would take it (links first), when
    /// those differ.
    fn tool_targets(&self, text: &str) -> Vec<Target> {
        let Some(absolute) = self.absolute(text, Some(&self.cwd)) else {
            return vec![Target::Unknown(text.to_owned())];
        };
        let opened = Target::Path {
            real: real_path(&normalize(&absolute)),
            children: false,
        };
        let kernel = Target::Path {
            real: real_path(&absolute),
            children: false,
        };
        if opened == kernel {
            vec![opened]
        } else {
            vec![opened, kernel]
        }
    }

    /// A path as written, with its real location when that differs (`link (→ /real)`).
    fn show_path(&self, written: &str, target: &Target) -> String {
        let shown = clip(written);
        match target {
            Target::Path { real, children } => {
                let real_text = real.to_string_lossy();
                let real_text = if *children {
                    format!("{}/*", real_text.trim_end_matches('/'))
                } else {
                    real_text.into_owned()
                };
                if real_text == written
                    || real_text.trim_end_matches('/') == written.trim_end_matches('/')
                {
                    shown
                } else {
                    format!("{shown} (→ {})", clip(&real_text))
                }
            }
            Target::ThroughLink(_) => format!("{shown} (through a link the command makes)"),
            _ => shown,
        }
    }
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Read => "read",
        Action::Write => "write",
        Action::Delete => "delete",
        Action::Execute => "run",
        Action::Network => "reach",
    }
}

fn verbs(action: Action) -> &'static str {
    match action {
        Action::Read => "reads",
        Action::Write => "writes",
        Action::Delete => "deletes",
        Action::Execute => "runs",
        Action::Network => "reaches",
    }
}
