//! From a tool call to operations: file tools become a read or write of one resolved path,
//! `bash` commands are analysed into every program they run and every file those programs
//! and redirections touch. Each operation is also checked against the danger list here, so
//! `verdict` only weighs operations and dangers it is handed.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::{Op, PermissionGate, Target, clip, has_glob_meta, verb, verbs};
use crate::permission::danger;
use crate::permission::effects::{self, CommandClass};
use crate::permission::rules::Action;
use crate::permission::shell::{self, Analysis};

impl PermissionGate {
    pub(super) fn operations(
        &self,
        tool: &str,
        arguments: &Value,
    ) -> (Vec<Op>, Vec<String>, String) {
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
}

fn is_harmless_device(path: &Path) -> bool {
    path.starts_with("/dev") && danger::device_write(path).is_none() && path != Path::new("/dev")
}
