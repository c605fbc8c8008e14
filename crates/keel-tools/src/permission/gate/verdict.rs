//! The verdict on a call's operations: deny rules, then the mode's denials, then the danger
//! list, then ask and allow rules, then the mode's profile; and the "always allow" scopes
//! offered with a question, narrowest first. The policy, apart from how operations are found.

use std::sync::PoisonError;

use keel_agent::ToolNature;

use super::decision::{AskRequest, Decision, Denial, DenySource, Mode};
use super::operations::{Judged, dedup};
use super::{Op, PermissionGate, Target, clip, verb};
use crate::permission::effects::CommandClass;
use crate::permission::rules::{Action, Effect, Matcher, PathPattern, Scope, Subject, strongest};

enum ModeVerdict {
    Allow,
    Ask(String),
    Deny(String),
}

impl PermissionGate {
    fn mode_verdict(&self, mode: Mode, tool: &str, nature: ToolNature, op: &Op) -> ModeVerdict {
        let inside = op.path().is_some_and(|p| self.in_workspace(p));
        let Some(action) = op.action else {
            // The call itself: what a declared tool does is in its other operations.
            let known = !matches!(nature, ToolNature::Opaque | ToolNature::StartsWork);
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
        let runs_commands = matches!(nature, ToolNature::RunsCommand { .. });
        let no_network = || {
            ModeVerdict::Deny(format!(
                "commands have no network in plan mode: {}; ask for web_fetch instead",
                op.describe
            ))
        };
        match (mode, action) {
            (Mode::Full, _) => ModeVerdict::Allow,
            (Mode::Plan, Action::Read) => ModeVerdict::Allow,
            // The plan file is what plan mode is for; `plan` is only ever set on a file tool's
            // write of exactly that path.
            (Mode::Plan, Action::Write) if op.plan => ModeVerdict::Allow,
            (Mode::Plan, Action::Write | Action::Delete) => {
                ModeVerdict::Deny(format!("plan mode is read-only: {}", op.describe))
            }
            (Mode::Plan, Action::Execute) => match op.class {
                CommandClass::ReadOnly => ModeVerdict::Allow,
                CommandClass::Network => no_network(),
                CommandClass::Other => ModeVerdict::Deny(format!(
                    "plan mode is read-only and only runs read-only commands: {}",
                    op.describe
                )),
                CommandClass::Opaque => ModeVerdict::Deny(format!(
                    "plan mode only runs commands known to be read-only: {} runs code the gate cannot read",
                    op.describe
                )),
            },
            (Mode::Plan, Action::Network) if runs_commands => no_network(),
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
            (Mode::Auto, Action::Execute)
                if op.class == CommandClass::Opaque && !self.sandboxed =>
            {
                ModeVerdict::Ask(format!(
                    "{} runs code the gate cannot read, and the bash sandbox is off",
                    op.describe
                ))
            }
            (Mode::Auto, Action::Read | Action::Execute | Action::Network) => ModeVerdict::Allow,
            (Mode::Auto, Action::Write | Action::Delete) if inside => ModeVerdict::Allow,
            (Mode::Auto, Action::Write | Action::Delete) => {
                ModeVerdict::Ask(format!("outside the workspace: {}", op.describe))
            }
        }
    }

    pub(super) fn decide(
        &self,
        mode: Mode,
        tool: &str,
        nature: ToolNature,
        judged: Judged,
    ) -> Decision {
        let Judged {
            ops,
            dangers,
            protected,
            secrets,
            summary,
        } = judged;
        if mode != Mode::Full && !protected.is_empty() {
            return Decision::Deny(Denial {
                source: DenySource::Protected,
                reason: protected.join("; "),
            });
        }
        // While the sandbox hides credentials from commands, keel's own tools (which run in
        // keel, unsandboxed) never read them for the model, in any mode and without a
        // question: an "allow once" would hand the key to the model, and a steered model is
        // exactly what asks for it.
        let sandboxed = matches!(nature, ToolNature::RunsCommand { .. });
        if self.sandboxed && !sandboxed && !secrets.is_empty() {
            return Decision::Deny(Denial {
                source: DenySource::Protected,
                reason: format!(
                    "{}: credentials stay hidden from the model while the sandbox is on \
                     (the user can choose --sandbox danger-full-access to allow this)",
                    secrets.join("; ")
                ),
            });
        }
        let session = self.session.read().unwrap_or_else(PoisonError::into_inner);
        let mut reasons: Vec<String> = Vec::new();
        let mut rule_reasons: Vec<String> = Vec::new();
        let mut scope_ops: Vec<&Op> = Vec::new();
        let mut rule_asked = false;
        for op in &ops {
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
                &self.protection.roots,
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
            let verdict = self.mode_verdict(mode, tool, nature, op);
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
                saved: true,
            });
        }
        // A change to files is allowed for good, by default, only for this session: the
        // narrowest scope first again, unsaved (a file named once is rarely worth a rule in
        // every later session, and the saved one stays one step away).
        let files_only = ops
            .iter()
            .all(|op| op.command.is_none() && matches!(op.target, Target::Path { .. }));
        if files_only && let Some(narrowest) = scopes.first() {
            let session = Scope {
                label: format!("{} for this session", narrowest.label),
                matchers: narrowest.matchers.clone(),
                saved: false,
            };
            scopes.insert(0, session);
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
                if let Some(root) = self.protection.roots.iter().find(|r| real.starts_with(r)) {
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
