//! The `hooks` value of Claude Code's `settings.json` (keel's `config.yaml` carries the same
//! shape under `hooks:`): for each event, groups of command hooks behind a matcher.
//!
//! Reading never fails on content keel does not understand: an unknown event, a hook type
//! keel does not run (`prompt`, `http`, …) or a malformed entry becomes a problem for the
//! user and the rest still works, so a settings file written for a newer Claude Code keeps
//! its usable hooks. Matchers follow Claude Code: a plain list of names (`Bash|Edit`) is
//! compared exactly, anything else is an unanchored regular expression, `*` or empty
//! matches everything.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// How long a hook may run when its settings give no `timeout` (Claude Code's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The events keel runs hooks on, named as in Claude Code's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    /// Before a tool call runs: may allow, deny, ask for or rewrite it.
    PreToolUse,
    /// After a tool call succeeded: may tell the model something.
    PostToolUse,
    /// When the user submits a prompt: may refuse it or add context.
    UserPromptSubmit,
    /// When the agent is about to end its turn: may make it go on.
    Stop,
    /// When a session starts, resumes or is cleared: may add context.
    SessionStart,
    /// When a session ends: for clean-up only.
    SessionEnd,
    /// Before the context is compacted: for side effects only.
    PreCompact,
    /// When keel wants the user's attention: for side effects only.
    Notification,
}

impl HookEvent {
    /// Every event, in the order Claude Code's reference lists them.
    pub const ALL: [Self; 8] = [
        Self::PreToolUse,
        Self::PostToolUse,
        Self::UserPromptSubmit,
        Self::Stop,
        Self::SessionStart,
        Self::SessionEnd,
        Self::PreCompact,
        Self::Notification,
    ];

    /// The event's name in settings and in `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::Stop => "Stop",
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::PreCompact => "PreCompact",
            Self::Notification => "Notification",
        }
    }

    /// The event called `name` in settings, if keel has it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.name() == name)
    }

    /// Whether groups of this event are filtered by their matcher; Claude Code ignores the
    /// matcher of events that have nothing to match against.
    pub fn uses_matcher(self) -> bool {
        match self {
            Self::PreToolUse
            | Self::PostToolUse
            | Self::SessionStart
            | Self::SessionEnd
            | Self::PreCompact
            | Self::Notification => true,
            Self::UserPromptSubmit | Self::Stop => false,
        }
    }
}

/// One `{"type": "command"}` hook: a shell command and how long it may run.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandHook {
    /// The command, run with `bash -c` (or `sh -c` without bash).
    pub command: String,
    /// When it is killed; its settings' `timeout` seconds or [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
}

/// What a group applies to.
#[derive(Debug, Clone)]
enum Matcher {
    /// No matcher, empty or `*`.
    All,
    /// Only names and `|`: one of these exactly.
    Names(Vec<String>),
    /// Anything else: a regular expression found anywhere in the subject, as JavaScript's
    /// `RegExp.test` does in Claude Code.
    Pattern(Regex),
    /// A matcher that is not a valid expression: Claude Code matches nothing with it.
    Never,
}

impl Matcher {
    fn parse(text: &str) -> Result<Self, regex::Error> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Self::All);
        }
        if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            let names = text.split('|').filter(|n| !n.is_empty());
            return Ok(Self::Names(names.map(str::to_owned).collect()));
        }
        Regex::new(text).map(Self::Pattern)
    }

    fn matches(&self, subject: Option<&str>) -> bool {
        match (self, subject) {
            (Self::All, _) => true,
            (Self::Names(names), Some(subject)) => names.iter().any(|n| n == subject),
            (Self::Pattern(pattern), Some(subject)) => pattern.is_match(subject),
            (Self::Names(_) | Self::Pattern(_), None) | (Self::Never, _) => false,
        }
    }
}

/// A matcher and the hooks it guards.
#[derive(Debug, Clone)]
struct Group {
    matcher: Matcher,
    hooks: Vec<CommandHook>,
}

/// The hooks of every event, with what could not be used listed in [`problems`](Self::problems).
#[derive(Debug, Clone, Default)]
pub struct HookSettings {
    groups: BTreeMap<HookEvent, Vec<Group>>,
    problems: Vec<String>,
}

impl<'de> Deserialize<'de> for HookSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through a JSON value so that JSON and YAML read alike and nothing inside is fatal.
        Value::deserialize(deserializer).map(|value| Self::from_value(&value))
    }
}

impl HookSettings {
    /// Settings read from the `hooks` value; what cannot be used becomes a problem.
    pub fn from_value(value: &Value) -> Self {
        let mut settings = Self::default();
        match value {
            Value::Null => {}
            Value::Object(events) => {
                // By name, so problems come in one order whether or not serde_json keeps
                // the file's key order (a feature another crate of the build may turn on).
                let mut events: Vec<_> = events.iter().collect();
                events.sort_by_key(|(name, _)| name.as_str());
                for (name, groups) in events {
                    settings.add_event(name, groups);
                }
            }
            other => settings.problems.push(format!(
                "hooks: expected a map from event names to lists, found {}; no hooks run",
                kind(other)
            )),
        }
        settings
    }

    /// Warnings about entries that were skipped (unknown events, other hook types, bad
    /// matchers or timeouts), for the user.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Whether no hook is configured for any event.
    pub fn is_empty(&self) -> bool {
        self.groups.values().flatten().all(|g| g.hooks.is_empty())
    }

    /// Whether some hook is configured for `event`, whatever its matcher.
    pub fn has(&self, event: HookEvent) -> bool {
        self.groups
            .get(&event)
            .is_some_and(|groups| groups.iter().any(|g| !g.hooks.is_empty()))
    }

    /// Every hook's command, each once, whatever its event and matcher.
    pub fn commands(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for hook in self.groups.values().flatten().flat_map(|g| g.hooks.iter()) {
            if !out.contains(&hook.command.as_str()) {
                out.push(&hook.command);
            }
        }
        out
    }

    /// The hooks to run for `event` on `subject` (the tool's Claude Code name, the session
    /// source, the compaction trigger…), in settings order, each command once.
    pub fn matching(&self, event: HookEvent, subject: Option<&str>) -> Vec<&CommandHook> {
        let mut seen = HashSet::new();
        self.groups
            .get(&event)
            .into_iter()
            .flatten()
            .filter(|group| !event.uses_matcher() || group.matcher.matches(subject))
            .flat_map(|group| &group.hooks)
            .filter(|hook| seen.insert(hook.command.as_str()))
            .collect()
    }

    fn add_event(&mut self, name: &str, groups: &Value) {
        let Some(event) = HookEvent::from_name(name) else {
            self.problems.push(format!(
                "hooks.{name}: keel has no such event; its hooks are skipped"
            ));
            return;
        };
        let Value::Array(groups) = groups else {
            self.problems.push(format!(
                "hooks.{name}: expected a list of matcher groups, found {}; skipped",
                kind(groups)
            ));
            return;
        };
        for (i, group) in groups.iter().enumerate() {
            let at = format!("hooks.{name}[{i}]");
            if let Some(group) = self.group(&at, group) {
                self.groups.entry(event).or_default().push(group);
            }
        }
    }

    fn group(&mut self, at: &str, value: &Value) -> Option<Group> {
        let Value::Object(map) = value else {
            self.problems.push(format!(
                "{at}: expected a map with `hooks`, found {}; skipped",
                kind(value)
            ));
            return None;
        };
        let matcher = match map.get("matcher") {
            None | Some(Value::Null) => Matcher::All,
            Some(Value::String(text)) => Matcher::parse(text).unwrap_or_else(|error| {
                self.problems.push(format!(
                    "{at}.matcher: `{text}` is not a valid regular expression ({error}); \
                     it matches nothing"
                ));
                Matcher::Never
            }),
            Some(other) => {
                self.problems.push(format!(
                    "{at}.matcher: expected a string, found {}; it matches nothing",
                    kind(other)
                ));
                Matcher::Never
            }
        };
        let Some(Value::Array(list)) = map.get("hooks") else {
            self.problems
                .push(format!("{at}: expected a list under `hooks`; skipped"));
            return None;
        };
        let hooks = list
            .iter()
            .enumerate()
            .filter_map(|(i, hook)| self.hook(&format!("{at}.hooks[{i}]"), hook))
            .collect();
        Some(Group { matcher, hooks })
    }

    fn hook(&mut self, at: &str, value: &Value) -> Option<CommandHook> {
        let Value::Object(map) = value else {
            self.problems.push(format!(
                "{at}: expected a map, found {}; skipped",
                kind(value)
            ));
            return None;
        };
        match map.get("type").and_then(Value::as_str) {
            Some("command") => {}
            Some(other) => {
                self.problems.push(format!(
                    "{at}: hook type `{other}` is not supported by keel (only `command`); skipped"
                ));
                return None;
            }
            None => {
                self.problems.push(format!(
                    "{at}: no `type` (keel runs `command` hooks); skipped"
                ));
                return None;
            }
        }
        let Some(command) = command_of(map) else {
            self.problems
                .push(format!("{at}: `command` is missing or empty; skipped"));
            return None;
        };
        let timeout = match map.get("timeout") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT,
            Some(value) => seconds(value).unwrap_or_else(|| {
                self.problems.push(format!(
                    "{at}.timeout: expected a positive number of seconds, found {value}; \
                     using {} s",
                    DEFAULT_TIMEOUT.as_secs()
                ));
                DEFAULT_TIMEOUT
            }),
        };
        Some(CommandHook { command, timeout })
    }
}

/// The settings of `a` followed by those of `b` (user, then project, then local, as Claude
/// Code runs them all); a command in both still runs once.
pub fn merge(mut a: HookSettings, b: HookSettings) -> HookSettings {
    for (event, groups) in b.groups {
        a.groups.entry(event).or_default().extend(groups);
    }
    a.problems.extend(b.problems);
    a
}

fn command_of(map: &Map<String, Value>) -> Option<String> {
    map.get("command")
        .and_then(Value::as_str)
        .filter(|command| !command.trim().is_empty())
        .map(str::to_owned)
}

fn seconds(value: &Value) -> Option<Duration> {
    let seconds = value.as_f64().filter(|s| *s > 0.0)?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// What kind of JSON value `value` is, for problem messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
