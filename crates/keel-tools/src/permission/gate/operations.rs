//! From a tool call to operations: file tools become a read or write of one resolved path,
//! `bash` commands are analysed into every program they run and every file those programs
//! and redirections touch. Each operation is also checked against the danger list and the
//! protected control files here, so `verdict` only weighs what it is handed.

use std::collections::HashSet;
use std::path::Path;

use keel_agent::ToolNature;
use serde_json::Value;

use super::{Links, Mode, Op, PermissionGate, Target, clip, has_glob_meta, verb, verbs};
use crate::permission::danger;
use crate::permission::effects::{self, CommandClass};
use crate::permission::envvars::{self, VarKind};
use crate::permission::rules::Action;
use crate::permission::shell::{self, Analysis, Arg, Invocation};

/// Folders whose programs are the system's own, not files the model may have written.
const SYSTEM_BIN: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/libexec",
    "/usr/lib/git-core",
];

/// What a call does, found before it is judged.
pub(super) struct Judged {
    pub(super) ops: Vec<Op>,
    /// Reasons from the danger list.
    pub(super) dangers: Vec<String>,
    /// Writes or deletes of protected control files.
    pub(super) protected: Vec<String>,
    /// Reaches into credential locations (also listed among the dangers).
    pub(super) secrets: Vec<String>,
    pub(super) summary: String,
}

impl PermissionGate {
    pub(super) fn operations(
        &self,
        mode: Mode,
        tool: &str,
        nature: ToolNature,
        arguments: &Value,
    ) -> Judged {
        let text = |key: &str| arguments.get(key).and_then(Value::as_str);
        let mut ops = vec![Op::call()];
        let mut dangers = Vec::new();
        let file_ops = |action: Action, key: &str, recursive: bool| -> Vec<Op> {
            let (targets, shown) = match text(key) {
                Some(path) => (self.tool_targets(path), path.to_owned()),
                None => (
                    vec![Target::Unknown(format!("<no {key}>"))],
                    format!("<no {key}>"),
                ),
            };
            targets
                .into_iter()
                .map(|target| {
                    let describe = format!("{} {}", verb(action), self.show_path(&shown, &target));
                    Op {
                        action: Some(action),
                        target,
                        recursive,
                        source: describe.clone(),
                        describe,
                        ..Op::call()
                    }
                })
                .collect()
        };
        let summary = match nature {
            ToolNature::ReadsFile { path } => {
                ops.extend(self.plan_ops(mode, file_ops(Action::Read, path, false)));
                format!("{tool} {}", clip(text(path).unwrap_or("")))
            }
            ToolNature::WritesFile { path } => {
                ops.extend(self.plan_ops(mode, file_ops(Action::Write, path, false)));
                format!("{tool} {}", clip(text(path).unwrap_or("")))
            }
            ToolNature::SearchesFolder {
                path,
                pattern,
                recursive,
            } => {
                let base = text(path).unwrap_or(".");
                let pattern = pattern.and_then(text);
                // A glob's fixed start narrows where it lists.
                let start = pattern.map_or_else(|| base.to_owned(), |p| glob_start(base, p));
                for folder in self.tool_targets(&start) {
                    let describe = format!("{tool} in {}", self.show_path(&start, &folder));
                    ops.push(Op {
                        action: Some(Action::Read),
                        target: folder,
                        recursive,
                        source: describe.clone(),
                        describe,
                        ..Op::call()
                    });
                }
                // A search's own pattern (grep's expression) is shown too.
                match pattern.or_else(|| text("pattern")) {
                    Some(pattern) => format!("{tool} {} in {}", clip(pattern), clip(base)),
                    None => format!("{tool} {}", clip(base)),
                }
            }
            ToolNature::Fetches { url } => {
                let url = text(url).unwrap_or("");
                ops.push(Op {
                    action: Some(Action::Network),
                    target: Target::Url(url.to_owned()),
                    source: format!("fetching {}", clip(url)),
                    describe: format!("fetching {}", clip(url)),
                    ..Op::call()
                });
                format!("{} {}", text("method").unwrap_or("GET"), clip(url))
            }
            ToolNature::RunsCommand { command } => {
                let command = text(command).unwrap_or("");
                let analysis = shell::analyze(command, Some(&self.cwd), &self.shell);
                self.shell_operations(&analysis, &mut ops, &mut dangers);
                clip(command)
            }
            _ => format!("{tool} {}", clip(&arguments.to_string())),
        };
        let mut protected = Vec::new();
        let mut secrets = Vec::new();
        for op in &ops {
            self.op_dangers(op, &mut dangers, &mut secrets);
            self.op_protected(op, &mut protected);
        }
        Judged {
            ops,
            dangers: dedup(dangers),
            protected: dedup(protected),
            secrets: dedup(secrets),
            summary,
        }
    }

    /// A file tool's operations, marked as the plan file's when, in plan mode, every one of
    /// them resolves to exactly that file (where the tool opens the path and where the
    /// kernel would take it must both be it).
    fn plan_ops(&self, mode: Mode, mut ops: Vec<Op>) -> Vec<Op> {
        let Some(plan) = self.plan_file.as_deref().filter(|_| mode == Mode::Plan) else {
            return ops;
        };
        if ops.iter().all(|op| op.path() == Some(plan)) {
            for op in &mut ops {
                op.plan = true;
            }
        }
        ops
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
        let mut links = Links::default();
        for invocation in &analysis.invocations {
            self.invocation_operations(invocation, &links, ops, dangers);
            self.add_links(invocation, &mut links);
        }
    }

    fn invocation_operations(
        &self,
        invocation: &Invocation,
        links: &Links,
        ops: &mut Vec<Op>,
        dangers: &mut Vec<String>,
    ) {
        let cwd = invocation.cwd.as_deref();
        let words = invocation.words();
        let wrapped = invocation.outer_words();
        let shown = clip(&words.join(" "));
        let source = format!("`{shown}`");
        let program = invocation.program().map(str::to_owned);
        dangers.extend(danger::invocation(
            invocation,
            &self.credentials,
            &self.shell.vars,
        ));
        let redirect_targets = invocation.redirects.iter().map(|r| &r.target);
        for arg in invocation.argv.iter().chain(redirect_targets) {
            if let Some(reason) = &arg.unexpanded {
                dangers.push(format!(
                    "cannot tell which files `{}` stands for: {reason} ({source})",
                    clip(&arg.text)
                ));
            }
        }
        let execute = |class: CommandClass, program: Option<String>| Op {
            action: Some(Action::Execute),
            command: Some(words.clone()),
            wrapped: wrapped.clone(),
            class: env_class(invocation, class, &self.shell.vars),
            program,
            source: source.clone(),
            describe: format!("running `{shown}`"),
            ..Op::call()
        };
        match &program {
            None if invocation.argv.is_empty() => {}
            None => {
                dangers.push(format!(
                    "runs a program whose name is only known at run time (`{shown}`)"
                ));
                ops.push(execute(CommandClass::Opaque, None));
            }
            Some(name) if matches!(name.as_str(), "cd" | "pushd" | "popd") => {}
            // Only runs a script whose parts are judged one by one.
            Some(name) if invocation.transparent => {
                ops.push(execute(CommandClass::ReadOnly, Some(name.clone())));
            }
            Some(name) => {
                let args = invocation.args();
                let mut class = if self.system_program(invocation) {
                    effects::classify(name, args)
                } else {
                    CommandClass::Opaque
                };
                if name == "git"
                    && class == CommandClass::ReadOnly
                    && !self.workspace_repository(args, invocation.cwd.as_deref())
                {
                    // Even `git log` runs what a repository's own configuration names
                    // (textconv, fsmonitor); only the workspace's repository has a protected
                    // one.
                    class = CommandClass::Opaque;
                }
                ops.push(execute(class, Some(name.clone())));
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
                let protected = if name == "git" {
                    effects::git_protected(args)
                } else {
                    danger::schedules(name, args)
                };
                if let Some(reason) = protected {
                    ops.push(Op {
                        action: Some(Action::Write),
                        target: Target::Protected(reason),
                        command: Some(words.clone()),
                        source: source.clone(),
                        describe: source.clone(),
                        ..Op::call()
                    });
                }
                for effect in effects::file_effects(name, args) {
                    let target = match &effect.anchor {
                        Some(link) => self.link_target(&effect.path, link, cwd, links),
                        // Deleting a link removes the link, not where it leads.
                        None if effect.action == Action::Delete => {
                            self.delete_target(&effect.path, cwd, links)
                        }
                        None => self.target(&effect.path, cwd, links),
                    };
                    ops.push(Op {
                        action: Some(effect.action),
                        command: Some(words.clone()),
                        wrapped: wrapped.clone(),
                        recursive: effect.recursive || effect.path.tree,
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
            let target = self.target(&redirect.target, cwd, links);
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
            let written = match &redirect.via {
                Some(option) => format!("{option} {}", clip(&redirect.target.text)),
                None => {
                    let arrow = if redirect.writes { ">" } else { "<" };
                    format!("{arrow} {}", clip(&redirect.target.text))
                }
            };
            ops.push(Op {
                action: Some(action),
                source: format!("`{written}`"),
                describe: format!(
                    "`{written}` {} {}",
                    verbs(action),
                    self.show_path(&redirect.target.text, &target)
                ),
                target,
                ..Op::call()
            });
        }
    }

    /// Whether the program is the one its name says: found on the search path, or named by
    /// a path into a system folder. `./cat` is a script the model may have written.
    fn system_program(&self, invocation: &Invocation) -> bool {
        let Some(first) = invocation.argv.first() else {
            return false;
        };
        if !first.text.contains('/') {
            return true;
        }
        let Some(path) = self.absolute(&first.text, invocation.cwd.as_deref()) else {
            return false;
        };
        let real = crate::permission::paths::real_path(&path);
        SYSTEM_BIN.iter().any(|dir| real.starts_with(dir))
    }

    /// A symlink's target: relative targets resolve against the link's folder (the link
    /// itself when it names an existing folder).
    fn link_target(&self, target: &Arg, link: &Arg, cwd: Option<&Path>, links: &Links) -> Target {
        if target.text.starts_with('/') || target.text.starts_with('~') {
            return self.target(target, cwd, links);
        }
        let Some(at) = self.absolute(&link.text, cwd) else {
            return Target::Unknown(target.text.clone());
        };
        let folder = if crate::permission::paths::real_path(&at).is_dir() {
            at
        } else {
            at.parent().map(Path::to_path_buf).unwrap_or(at)
        };
        self.target(target, Some(&folder), links)
    }

    /// Records the links an invocation makes, for the parts of the command after it.
    fn add_links(&self, invocation: &Invocation, links: &mut Links) {
        let Some(program) = invocation.program() else {
            return;
        };
        let cwd = invocation.cwd.as_deref();
        for made in effects::link_effects(program, invocation.args()) {
            let Some(at) = self.absolute(&made.at.text, cwd) else {
                continue;
            };
            let parent = at.parent().map(crate::permission::paths::real_path);
            let real = match (parent, at.file_name()) {
                (Some(parent), Some(name)) => parent.join(name),
                _ => crate::permission::paths::real_path(&at),
            };
            if made.tree {
                links.trees.push(crate::permission::paths::real_path(&at));
            } else if real.is_dir() && !made.names.is_empty() {
                let folder = crate::permission::paths::real_path(&at);
                links
                    .exact
                    .extend(made.names.iter().map(|name| folder.join(name)));
            } else {
                links.exact.push(real);
            }
        }
    }

    /// Whether git, started in `cwd` with `args`, uses the workspace root's own repository
    /// (or one outside the workspace, which the model cannot have written), rather than one
    /// the workspace holds: a shipped bare repository, a nested clone, one named by
    /// `--git-dir`.
    fn workspace_repository(
        &self,
        args: &[crate::permission::shell::Arg],
        cwd: Option<&Path>,
    ) -> bool {
        let (moves, names_repository) = effects::git_start(args);
        if names_repository {
            return false;
        }
        let Some(mut at) = cwd
            .map(Path::to_path_buf)
            .or_else(|| Some(self.cwd.clone()))
        else {
            return false;
        };
        for dir in moves {
            at = crate::env::normalize(&at.join(dir));
        }
        let at = crate::permission::paths::real_path(&at);
        let repository = at.ancestors().find(|dir| {
            std::fs::symlink_metadata(dir.join(".git")).is_ok()
                || (dir.join("HEAD").is_file()
                    && dir.join("objects").is_dir()
                    && dir.join("refs").is_dir())
        });
        match repository {
            None => true,
            Some(dir) => {
                let inside = self
                    .protection
                    .roots
                    .iter()
                    .any(|root| dir.starts_with(root));
                !inside
                    || self
                        .protection
                        .roots
                        .iter()
                        .any(|root| root.as_path() == dir)
            }
        }
    }

    fn op_dangers(&self, op: &Op, dangers: &mut Vec<String>, secrets: &mut Vec<String>) {
        let Some(action) = op.action else { return };
        if op.plan {
            // The plan file lies in keel's home, a credential location, but is the session's
            // own and holds what the model wrote.
            return;
        }
        match &op.target {
            Target::Path { real, children } => {
                let readable = action == Action::Read && self.credentials.is_readable(real);
                if let Some(location) = self.credentials.location(real).filter(|_| !readable) {
                    let reason = format!("{} credentials in {location} ({})", verbs(action), op.source);
                    secrets.push(reason.clone());
                    dangers.push(reason);
                }
                // keel's search tools walk around credential locations; a command would not.
                if action == Action::Read
                    && op.recursive
                    && (danger::Credentials::holds_process_secrets(real)
                        || (op.command.is_some() && self.credentials.held_in(real)))
                {
                    let reason = format!(
                        "reads a folder holding credentials (~/.ssh, ~/.aws, …) as a whole ({})",
                        op.source
                    );
                    secrets.push(reason.clone());
                    dangers.push(reason);
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
                    && let Some(what) = danger::critical_tree(real, *children, &self.protection.homes)
                {
                    let verb = if action == Action::Delete {
                        "deletes"
                    } else {
                        "changes permissions of"
                    };
                    dangers.push(format!("recursively {verb} {what} ({})", op.source));
                }
            }
            Target::ThroughLink(text) => dangers.push(format!(
                "{} `{}` through a link the command itself makes, which cannot be checked before it runs ({})",
                verbs(action),
                clip(text),
                op.source
            )),
            Target::Unknown(text) => {
                if let Some(secret) = self.credentials.in_unknown(text) {
                    let reason = format!("{} {secret} ({})", verbs(action), op.source);
                    secrets.push(reason.clone());
                    dangers.push(reason);
                }
                if action == Action::Delete && op.recursive {
                    dangers.push(format!(
                        "recursively deletes `{}`, a path only known at run time ({})",
                        clip(text),
                        op.source
                    ));
                }
            }
            _ => {}
        }
    }

    /// Writes and deletes that reach keel's control files or files that make programs run
    /// code ([`protect`]).
    fn op_protected(&self, op: &Op, protected: &mut Vec<String>) {
        if !self.protect_control || op.plan {
            return;
        }
        let why = match (&op.target, op.action) {
            (Target::Protected(reason), _) => Some(reason.clone()),
            (Target::Path { real, .. }, Some(Action::Write)) => {
                self.protection.control_file(real).or_else(|| {
                    let name = real.file_name().and_then(|n| n.to_str());
                    (op.recursive && matches!(name, Some(".git" | ".claude")))
                        .then(|| format!("{} (it holds protected control files)", real.display()))
                })
            }
            // Files picked inside a folder (`find -delete`, `xargs rm` of what find lists):
            // only a folder that is itself protected counts, not one that holds such files.
            (
                Target::Path {
                    real,
                    children: true,
                },
                Some(Action::Delete),
            ) => self.protection.control_file(real),
            (Target::Path { real, .. }, Some(Action::Delete)) => {
                self.protection.removes_control(real)
            }
            _ => None,
        };
        if let Some(pattern) = why {
            let what = if op.describe.is_empty() {
                op.source.clone()
            } else {
                op.describe.clone()
            };
            protected.push(format!(
                "{what}: {pattern} is protected (keel's control files and files that make programs run code); the user must make this change, or switch to full mode"
            ));
        }
    }
}

/// A command's class with the variables it is started with taken into account: any but
/// harmless ones make it not read-only, and those that load or run code make it code the
/// gate cannot read.
fn env_class(
    invocation: &Invocation,
    class: CommandClass,
    inherited: &std::collections::HashMap<String, String>,
) -> CommandClass {
    let mut worst = class;
    for (name, value) in &invocation.env {
        match envvars::kind_given(name, &value.text, inherited) {
            VarKind::Harmless => {}
            VarKind::Other if worst == CommandClass::ReadOnly => worst = CommandClass::Other,
            VarKind::Other => {}
            VarKind::Opaque(_) | VarKind::RunsCode(_) => worst = CommandClass::Opaque,
        }
    }
    worst
}

/// Where a `glob` call starts listing: the literal folders at the start of its pattern.
fn glob_start(base: &str, pattern: &str) -> String {
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
    if start.is_empty() {
        "/".to_owned()
    } else {
        start
    }
}

/// `items` without repeats, in first-seen order.
pub(super) fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.clone()))
        .collect()
}

fn is_harmless_device(path: &Path) -> bool {
    path.starts_with("/dev") && danger::device_write(path).is_none() && path != Path::new("/dev")
}
