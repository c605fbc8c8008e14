//! The judgement: a tool call becomes a list of operations on real targets (read this file,
//! run this program, delete that folder, reach the network), each judged by the rules, the
//! mode's profile and the danger list; the call gets the worst verdict of its operations.
//!
//! Order per operation: a deny rule, then the mode's own denials (`plan` is read-only), then the
//! danger list (asks in every mode but `full`; no allow rule can silence it), then ask rules,
//! then allow rules, then the mode's profile. So rules can loosen or tighten a mode's asks, but
//! never a safety check or the read-only promise of `plan`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::danger;
use super::effects::{self, CommandClass};
use super::paths::real_path;
use super::rules::{
    Action, Effect, Matcher, PathPattern, Rule, RuleSet, Scope, Subject, strongest,
};
use super::shell::{self, Analysis, ShellEnv};
use crate::env::{ToolEnv, normalize};

/// Longest command or argument text quoted in a message (design choice: enough to recognise).
const MAX_QUOTE: usize = 300;

/// The permission mode: a fixed profile of what runs without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Reads inside the workspace run; everything else asks.
    #[default]
    Ask,
    /// Reads, shell and network run; writes and deletes inside the workspace run; writes
    /// outside the workspace ask.
    Auto,
    /// Everything runs; only deny and ask rules still apply (the danger list is off).
    Full,
    /// Read-only: reads and read-only commands run, writes and deletes are denied, network asks.
    Plan,
}

impl Mode {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::Full => "full",
            Mode::Plan => "plan",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission mode `{0}` (expected ask, auto, full or plan)")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ask" => Ok(Mode::Ask),
            "auto" => Ok(Mode::Auto),
            "full" => Ok(Mode::Full),
            "plan" => Ok(Mode::Plan),
            _ => Err(UnknownMode(s.to_owned())),
        }
    }
}

/// Who or what denied a call; the tag starts the message the model gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenySource {
    /// The user answered no.
    User,
    /// A deny rule matched.
    Rule,
    /// The danger list, in a run with no one to ask.
    Safety,
    /// The mode's profile (`plan` is read-only).
    Mode,
    /// An ask in a run with no one to ask.
    ApprovalNeeded,
}

impl DenySource {
    /// The fixed tag that starts a denial message.
    pub fn tag(self) -> &'static str {
        match self {
            DenySource::User => "[denied by user]",
            DenySource::Rule => "[denied by rule]",
            DenySource::Safety => "[denied by safety]",
            DenySource::Mode => "[denied by mode]",
            DenySource::ApprovalNeeded => "[denied: approval needed]",
        }
    }
}

/// A denial: its source and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Who denied.
    pub source: DenySource,
    /// Why, for the model.
    pub reason: String,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.source.tag(), self.reason)
    }
}

/// A call that needs the user's approval.
#[derive(Debug, Clone, PartialEq)]
pub struct AskRequest {
    /// The tool.
    pub tool: String,
    /// What the call does, in one line.
    pub summary: String,
    /// Why it needs approval.
    pub reasons: Vec<String>,
    /// The danger list asked: only "allow once" makes sense.
    pub safety: bool,
    /// "Always allow" choices, narrowest first; empty when only "allow once" is offered.
    pub scopes: Vec<Scope>,
}

/// The gate's verdict on one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user first.
    Ask(AskRequest),
    /// Do not run it.
    Deny(Denial),
}

/// The kind of a decision, for tests and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// Runs.
    Allow,
    /// Asks (mode or rule).
    Ask,
    /// Asks because of the danger list.
    Safety,
    /// Denied.
    Deny,
}

impl Decision {
    /// The kind.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Allow => DecisionKind::Allow,
            Decision::Ask(request) if request.safety => DecisionKind::Safety,
            Decision::Ask(_) => DecisionKind::Ask,
            Decision::Deny(_) => DecisionKind::Deny,
        }
    }

    /// The decision for a run with no one to ask: an ask becomes a denial with its reasons.
    pub fn headless(self) -> Decision {
        match self {
            Decision::Ask(request) => Decision::Deny(request.headless_denial()),
            other => other,
        }
    }
}

impl AskRequest {
    /// The denial given instead of this question when no one can answer it.
    pub fn headless_denial(&self) -> Denial {
        Denial {
            source: if self.safety {
                DenySource::Safety
            } else {
                DenySource::ApprovalNeeded
            },
            reason: format!(
                "{} (no one can approve it in this run)",
                self.reasons.join("; ")
            ),
        }
    }
}

/// What an operation acts on.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// Nothing in particular (running a program, the call itself).
    None,
    /// A real path; `children` when it stands for the entries inside it (`dir/*`).
    Path { real: PathBuf, children: bool },
    /// A path only known at run time.
    Unknown(String),
    /// A URL.
    Url(String),
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
        }
    }

    fn path(&self) -> Option<&Path> {
        match &self.target {
            Target::Path { real, .. } => Some(real),
            _ => None,
        }
    }
}

enum ModeVerdict {
    Allow,
    Ask(String),
    Deny(String),
}

/// Tools the gate knows the arguments of.
const KNOWN_TOOLS: &[&str] = &[
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "glob",
    "ls",
    "todowrite",
    "web_fetch",
];

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

/// The permission gate of one session: mode, rules, session rules and the workspace.
#[derive(Debug)]
pub struct PermissionGate {
    mode: RwLock<Mode>,
    rules: RuleSet,
    session: RwLock<Vec<Rule>>,
    cwd: PathBuf,
    roots: Vec<PathBuf>,
    homes: Vec<PathBuf>,
    home: Option<PathBuf>,
    shell: ShellEnv,
    read_only_tools: HashSet<String>,
}

impl PermissionGate {
    /// A gate for tools running in `env`, with variables taken from this process's environment.
    pub fn new(env: &ToolEnv, mode: Mode, rules: RuleSet) -> Self {
        let vars: HashMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let home = env.home.as_deref().map(normalize);
        let mut homes = Vec::new();
        if let Some(home) = &home {
            homes.push(home.clone());
            let real = real_path(home);
            if real != *home {
                homes.push(real);
            }
        }
        Self {
            mode: RwLock::new(mode),
            rules,
            session: RwLock::new(Vec::new()),
            cwd: real_path(&env.cwd),
            roots: env.roots.iter().map(|r| real_path(r)).collect(),
            homes,
            shell: ShellEnv {
                home: home.clone(),
                vars,
            },
            home,
            read_only_tools: HashSet::new(),
        }
    }

    /// Replaces the variables `$NAME` expands to in shell commands.
    pub fn with_vars(mut self, vars: HashMap<String, String>) -> Self {
        self.shell.vars = vars;
        self
    }

    /// Declares extra tools (for example MCP tools) read-only: they run in every mode.
    pub fn with_read_only_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.read_only_tools.extend(names);
        self
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
        let (ops, dangers, summary) = self.operations(tool, arguments);
        let decision = self.decide(mode, tool, &ops, dangers, summary);
        tracing::debug!(tool, mode = mode.name(), decision = ?decision.kind(), "permission decision");
        decision
    }

    fn in_workspace(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }

    /// Resolves a path argument against `cwd` into a real target.
    fn target(&self, text: &str, opaque: bool, glob: bool, cwd: Option<&Path>) -> Target {
        if opaque {
            return Target::Unknown(text.to_owned());
        }
        let expanded = match (text.strip_prefix('~'), &self.home) {
            (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                PathBuf::from(format!("{}{rest}", home.display()))
            }
            _ => PathBuf::from(text),
        };
        let absolute = if expanded.is_absolute() {
            expanded
        } else {
            match cwd {
                Some(cwd) => cwd.join(expanded),
                None => return Target::Unknown(text.to_owned()),
            }
        };
        let absolute = normalize(&absolute);
        if glob {
            let mut base = PathBuf::new();
            let mut children = false;
            for component in absolute.components() {
                if has_glob_meta(&component.as_os_str().to_string_lossy()) {
                    children = true;
                    break;
                }
                base.push(component);
            }
            return Target::Path {
                real: real_path(&base),
                children,
            };
        }
        Target::Path {
            real: real_path(&absolute),
            children: false,
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
            _ => shown,
        }
    }

    fn operations(&self, tool: &str, arguments: &Value) -> (Vec<Op>, Vec<String>, String) {
        let text = |key: &str| arguments.get(key).and_then(Value::as_str);
        let mut ops = vec![Op::call()];
        let mut dangers = Vec::new();
        let cwd = Some(self.cwd.as_path());
        let file_op = |action: Action, key: &str, recursive: bool| {
            let (target, shown) = match text(key) {
                Some(path) => (self.target(path, false, false, cwd), path.to_owned()),
                None => (
                    Target::Unknown(format!("<no {key}>")),
                    format!("<no {key}>"),
                ),
            };
            let describe = format!("{} {}", verb(action), self.show_path(&shown, &target));
            Op {
                action: Some(action),
                target,
                recursive,
                source: describe.clone(),
                describe,
                ..Op::call()
            }
        };
        let summary = match tool {
            "read" => {
                ops.push(file_op(Action::Read, "path", false));
                format!("read {}", clip(text("path").unwrap_or("")))
            }
            "write" | "edit" => {
                ops.push(file_op(Action::Write, "path", false));
                format!("{tool} {}", clip(text("path").unwrap_or("")))
            }
            "ls" | "grep" | "glob" => {
                let base = text("path").unwrap_or(".");
                let mut shown_base = base.to_owned();
                let mut folder = self.target(base, false, false, cwd);
                if tool == "glob" {
                    // The literal folders at the start of the pattern narrow what is listed.
                    let pattern = text("pattern").unwrap_or("");
                    let parts: Vec<&str> = pattern.split('/').collect();
                    let mut literal: Vec<&str> = parts
                        .iter()
                        .copied()
                        .take_while(|p| !has_glob_meta(p))
                        .collect();
                    if literal.len() == parts.len() {
                        // No glob at all: the last part names a file.
                        literal.pop();
                    }
                    let literal = literal.join("/");
                    let start = if pattern.starts_with('/') || pattern.starts_with('~') {
                        literal
                    } else if literal.is_empty() {
                        base.to_owned()
                    } else {
                        format!("{}/{literal}", base.trim_end_matches('/'))
                    };
                    let start = if start.is_empty() {
                        "/".to_owned()
                    } else {
                        start
                    };
                    folder = self.target(&start, false, false, cwd);
                    shown_base = start;
                }
                let describe = format!("{tool} in {}", self.show_path(&shown_base, &folder));
                ops.push(Op {
                    action: Some(Action::Read),
                    target: folder,
                    recursive: tool == "grep",
                    source: describe.clone(),
                    describe,
                    ..Op::call()
                });
                match text("pattern") {
                    Some(pattern) => format!("{tool} {} in {}", clip(pattern), clip(base)),
                    None => format!("{tool} {}", clip(base)),
                }
            }
            "web_fetch" => {
                let url = text("url").unwrap_or("");
                ops.push(Op {
                    action: Some(Action::Network),
                    target: Target::Url(url.to_owned()),
                    source: format!("fetching {}", clip(url)),
                    describe: format!("fetching {}", clip(url)),
                    ..Op::call()
                });
                format!("{} {}", text("method").unwrap_or("GET"), clip(url))
            }
            "bash" => {
                let command = text("command").unwrap_or("");
                let analysis = shell::analyze(command, Some(&self.cwd), &self.shell);
                self.shell_operations(&analysis, &mut ops, &mut dangers);
                clip(command)
            }
            "todowrite" => "update the todo list".to_owned(),
            _ => format!("{tool} {}", clip(&arguments.to_string())),
        };
        for op in &ops {
            self.op_dangers(op, &mut dangers);
        }
        let mut seen = HashSet::new();
        dangers.retain(|d| seen.insert(d.clone()));
        (ops, dangers, summary)
    }

    fn shell_operations(&self, analysis: &Analysis, ops: &mut Vec<Op>, dangers: &mut Vec<String>) {
        if analysis.truncated {
            dangers.push("the command nests too deeply to be checked".to_owned());
        }
        for unseen in &analysis.unseen {
            dangers.push(danger::unseen(unseen));
        }
        if analysis.scripts.iter().any(|s| danger::fork_bomb(s)) {
            dangers.push("defines a fork bomb".to_owned());
        }
        for invocation in &analysis.invocations {
            let cwd = invocation.cwd.as_deref();
            let words = invocation.words();
            let wrapped = invocation.outer_words();
            let shown = clip(&words.join(" "));
            let source = format!("`{shown}`");
            let program = invocation.program().map(str::to_owned);
            if let Some(reason) = danger::invocation(invocation) {
                dangers.push(reason);
            }
            match &program {
                None if invocation.argv.is_empty() => {}
                None => {
                    dangers.push(format!(
                        "runs a program whose name is only known at run time (`{shown}`)"
                    ));
                    ops.push(Op {
                        action: Some(Action::Execute),
                        command: Some(words.clone()),
                        wrapped: wrapped.clone(),
                        source: source.clone(),
                        describe: format!("running `{shown}`"),
                        ..Op::call()
                    });
                }
                Some(name) if matches!(name.as_str(), "cd" | "pushd" | "popd") => {}
                Some(name) if invocation.transparent => {
                    // Only runs a script whose parts are judged one by one.
                    ops.push(Op {
                        action: Some(Action::Execute),
                        command: Some(words.clone()),
                        wrapped: wrapped.clone(),
                        class: CommandClass::ReadOnly,
                        program: Some(name.clone()),
                        source: source.clone(),
                        describe: format!("running `{shown}`"),
                        ..Op::call()
                    });
                }
                Some(name) => {
                    let args = invocation.args();
                    ops.push(Op {
                        action: Some(Action::Execute),
                        command: Some(words.clone()),
                        wrapped: wrapped.clone(),
                        class: effects::classify(name, args),
                        program: Some(name.clone()),
                        source: source.clone(),
                        describe: format!("running `{shown}`"),
                        ..Op::call()
                    });
                    if effects::uses_network(name, args) {
                        ops.push(Op {
                            action: Some(Action::Network),
                            command: Some(words.clone()),
                            wrapped: wrapped.clone(),
                            program: Some(name.clone()),
                            source: source.clone(),
                            describe: format!("`{shown}` reaches the network"),
                            ..Op::call()
                        });
                    }
                    for effect in effects::file_effects(name, args) {
                        let target = self.target(
                            &effect.path.text,
                            effect.path.opaque,
                            effect.path.glob,
                            cwd,
                        );
                        ops.push(Op {
                            action: Some(effect.action),
                            command: Some(words.clone()),
                            wrapped: wrapped.clone(),
                            recursive: effect.recursive,
                            program: Some(name.clone()),
                            source: source.clone(),
                            describe: format!(
                                "`{shown}` {} {}",
                                verbs(effect.action),
                                self.show_path(&effect.path.text, &target)
                            ),
                            target,
                            ..Op::call()
                        });
                    }
                }
            }
            for redirect in &invocation.redirects {
                let target = self.target(&redirect.target.text, redirect.target.opaque, false, cwd);
                if let Target::Path { real, .. } = &target
                    && redirect.writes
                    && is_harmless_device(real)
                {
                    continue;
                }
                let action = if redirect.writes {
                    Action::Write
                } else {
                    Action::Read
                };
                let arrow = if redirect.writes { ">" } else { "<" };
                ops.push(Op {
                    action: Some(action),
                    source: format!("`{arrow} {}`", clip(&redirect.target.text)),
                    describe: format!(
                        "`{arrow} {}` {} {}",
                        clip(&redirect.target.text),
                        verbs(action),
                        self.show_path(&redirect.target.text, &target)
                    ),
                    target,
                    ..Op::call()
                });
            }
        }
    }

    fn op_dangers(&self, op: &Op, dangers: &mut Vec<String>) {
        let Some(action) = op.action else { return };
        match &op.target {
            Target::Path { real, children } => {
                if let Some(location) = danger::credential(real, &self.homes) {
                    dangers.push(format!(
                        "{} credentials in {location} ({})",
                        verbs(action),
                        op.source
                    ));
                }
                if action == Action::Read && op.recursive {
                    let holds = self.homes.iter().any(|home| {
                        danger::CREDENTIALS
                            .iter()
                            .any(|entry| home.join(entry).starts_with(real))
                    });
                    if holds {
                        dangers.push(format!("reads a folder holding credentials (~/.ssh, ~/.aws, …) as a whole ({})", op.source));
                    }
                }
                if action == Action::Write
                    && let Some(reason) = danger::device_write(real)
                {
                    dangers.push(format!("{reason} ({})", op.source));
                }
                let tree_change = (action == Action::Delete && op.recursive)
                    || (action == Action::Write
                        && op.recursive
                        && matches!(
                            op.program.as_deref(),
                            Some("chmod" | "chown" | "chgrp" | "chattr" | "setfacl")
                        ));
                if tree_change
                    && let Some(what) = danger::critical_tree(real, *children, &self.homes)
                {
                    let verb = if action == Action::Delete {
                        "deletes"
                    } else {
                        "changes permissions of"
                    };
                    dangers.push(format!("recursively {verb} {what} ({})", op.source));
                }
            }
            Target::Unknown(text) if action == Action::Delete && op.recursive => {
                dangers.push(format!(
                    "recursively deletes `{}`, a path only known at run time ({})",
                    clip(text),
                    op.source
                ));
            }
            _ => {}
        }
    }

    fn mode_verdict(&self, mode: Mode, tool: &str, op: &Op) -> ModeVerdict {
        let inside = op.path().is_some_and(|p| self.in_workspace(p));
        let Some(action) = op.action else {
            let known = KNOWN_TOOLS.contains(&tool) || self.read_only_tools.contains(tool);
            return match mode {
                _ if known => ModeVerdict::Allow,
                Mode::Full | Mode::Auto => ModeVerdict::Allow,
                Mode::Plan => ModeVerdict::Ask(format!(
                    "needs approval in plan mode: `{tool}` is not known to be read-only"
                )),
                Mode::Ask => {
                    ModeVerdict::Ask(format!("needs approval in ask mode: calling `{tool}`"))
                }
            };
        };
        match (mode, action) {
            (Mode::Full, _) => ModeVerdict::Allow,
            (Mode::Plan, Action::Read) => ModeVerdict::Allow,
            (Mode::Plan, Action::Write | Action::Delete) => {
                ModeVerdict::Deny(format!("plan mode is read-only: {}", op.describe))
            }
            (Mode::Plan, Action::Execute) => match op.class {
                CommandClass::ReadOnly => ModeVerdict::Allow,
                CommandClass::Network => {
                    ModeVerdict::Ask(format!("needs approval in plan mode: {}", op.describe))
                }
                CommandClass::Other => ModeVerdict::Deny(format!(
                    "plan mode is read-only and only runs read-only commands: {}",
                    op.describe
                )),
            },
            (Mode::Plan, Action::Network) => {
                ModeVerdict::Ask(format!("needs approval in plan mode: {}", op.describe))
            }
            (Mode::Ask, Action::Read) if inside => ModeVerdict::Allow,
            (Mode::Ask, Action::Read) => {
                ModeVerdict::Ask(format!("outside the workspace: {}", op.describe))
            }
            (Mode::Ask, Action::Execute) if op.class == CommandClass::ReadOnly => {
                ModeVerdict::Allow
            }
            (Mode::Ask, _) => {
                ModeVerdict::Ask(format!("needs approval in ask mode: {}", op.describe))
            }
            (Mode::Auto, Action::Read | Action::Execute | Action::Network) => ModeVerdict::Allow,
            (Mode::Auto, Action::Write | Action::Delete) if inside => ModeVerdict::Allow,
            (Mode::Auto, Action::Write | Action::Delete) => {
                ModeVerdict::Ask(format!("outside the workspace: {}", op.describe))
            }
        }
    }

    fn decide(
        &self,
        mode: Mode,
        tool: &str,
        ops: &[Op],
        dangers: Vec<String>,
        summary: String,
    ) -> Decision {
        let session = self.session.read().unwrap_or_else(PoisonError::into_inner);
        let mut reasons: Vec<String> = Vec::new();
        let mut rule_reasons: Vec<String> = Vec::new();
        let mut scope_ops: Vec<&Op> = Vec::new();
        let mut rule_asked = false;
        for op in ops {
            let subject = Subject {
                tool,
                action: op.action,
                command: op.command.as_deref(),
                wrapped: &op.wrapped,
                path: op.path(),
            };
            let rule = strongest(
                self.rules.rules().iter().chain(session.iter()),
                &subject,
                &self.roots,
            );
            if let Some(rule) = rule.filter(|r| r.effect == Effect::Deny) {
                let what = if op.describe.is_empty() {
                    format!("calling `{tool}`")
                } else {
                    op.describe.clone()
                };
                return Decision::Deny(Denial {
                    source: DenySource::Rule,
                    reason: format!("{what}: {rule}"),
                });
            }
            let verdict = self.mode_verdict(mode, tool, op);
            if let ModeVerdict::Deny(reason) = verdict {
                return Decision::Deny(Denial {
                    source: DenySource::Mode,
                    reason,
                });
            }
            match (rule.map(|r| r.effect), verdict) {
                (Some(Effect::Ask), _) => {
                    rule_asked = true;
                    let what = if op.describe.is_empty() {
                        format!("calling `{tool}`")
                    } else {
                        op.describe.clone()
                    };
                    if let Some(rule) = rule {
                        rule_reasons.push(format!("{what}: {rule}"));
                    }
                }
                (Some(Effect::Allow), _) | (_, ModeVerdict::Allow) => {}
                (_, ModeVerdict::Ask(reason)) => {
                    reasons.push(reason);
                    scope_ops.push(op);
                }
                (_, ModeVerdict::Deny(_)) => {}
            }
        }
        if mode != Mode::Full && !dangers.is_empty() {
            // The mode's own asks are implied by a safety question; rule asks are kept so the
            // user sees every reason their own rules give.
            let mut all = dangers;
            all.extend(rule_reasons);
            return Decision::Ask(AskRequest {
                tool: tool.to_owned(),
                summary,
                reasons: dedup(all),
                safety: true,
                scopes: Vec::new(),
            });
        }
        if !rule_reasons.is_empty() {
            rule_reasons.extend(reasons);
            reasons = rule_reasons;
        }
        if reasons.is_empty() {
            return Decision::Allow;
        }
        let scopes = if rule_asked {
            Vec::new()
        } else {
            self.scopes(tool, &scope_ops)
        };
        Decision::Ask(AskRequest {
            tool: tool.to_owned(),
            summary,
            reasons: dedup(reasons),
            safety: false,
            scopes,
        })
    }

    /// "Always allow" choices for the operations that asked, narrowest first.
    fn scopes(&self, tool: &str, ops: &[&Op]) -> Vec<Scope> {
        let ladders: Vec<Vec<(String, Matcher)>> =
            ops.iter().map(|op| self.ladder(tool, op)).collect();
        let levels = ladders.iter().map(Vec::len).max().unwrap_or(0);
        let mut scopes: Vec<Scope> = Vec::new();
        for level in 0..levels {
            let mut labels: Vec<String> = Vec::new();
            let mut matchers: Vec<Matcher> = Vec::new();
            for ladder in &ladders {
                let Some((label, matcher)) = ladder.get(level).or_else(|| ladder.last()) else {
                    continue;
                };
                if !matchers.contains(matcher) {
                    matchers.push(matcher.clone());
                    labels.push(label.clone());
                }
            }
            // A wider rule makes narrower ones of the same scope redundant only when it is the
            // tool itself; keep the list as is otherwise so the user sees what is added.
            if scopes.last().is_some_and(|s| s.matchers == matchers) || matchers.is_empty() {
                continue;
            }
            scopes.push(Scope {
                label: labels.join("; "),
                matchers,
            });
        }
        scopes
    }

    fn ladder(&self, tool: &str, op: &Op) -> Vec<(String, Matcher)> {
        let tool_rung = (format!("every `{tool}` call"), Matcher::tool(tool));
        if let Some(words) = &op.command {
            let mut rungs = vec![(
                format!("the command `{}`", clip(&words.join(" "))),
                Matcher::exact_command(words.clone()),
            )];
            let plain = |w: &String| {
                !w.starts_with('-')
                    && !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.:@+".contains(c))
            };
            let longest = words.len().saturating_sub(1).min(3);
            for len in (2..=longest).rev() {
                let prefix = words.get(..len).unwrap_or(&[]);
                if prefix.iter().skip(1).all(plain) {
                    rungs.push((
                        format!("commands starting with `{}`", prefix.join(" ")),
                        Matcher::command_prefix(prefix.to_vec()),
                    ));
                }
            }
            if let Some(program) = words.first().filter(|_| words.len() > 1) {
                rungs.push((
                    format!("any `{program}` command"),
                    Matcher::command_prefix(vec![program.clone()]),
                ));
            }
            rungs.push(tool_rung);
            return rungs;
        }
        match (&op.target, op.action) {
            (Target::Path { real, .. }, Some(action)) => {
                let mut rungs = vec![(
                    format!("{} {}", verb(action), real.display()),
                    Matcher::path(PathPattern::exact(real), action),
                )];
                if let Some(parent) = real.parent() {
                    rungs.push((
                        format!("{} anything in {}", verb(action), parent.display()),
                        Matcher::path(PathPattern::under(parent), action),
                    ));
                }
                if let Some(root) = self.roots.iter().find(|r| real.starts_with(r)) {
                    rungs.push((
                        format!(
                            "{} anything in the workspace {}",
                            verb(action),
                            root.display()
                        ),
                        Matcher::path(PathPattern::under(root), action),
                    ));
                }
                rungs
            }
            _ => vec![tool_rung],
        }
    }
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.clone()))
        .collect()
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

fn is_harmless_device(path: &Path) -> bool {
    path.starts_with("/dev") && danger::device_write(path).is_none() && path != Path::new("/dev")
}
