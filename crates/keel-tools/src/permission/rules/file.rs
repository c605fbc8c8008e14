//! The rule file: its YAML shape (`allow`, `ask`, `deny` lists of raw rules), how a raw rule
//! compiles into a [`Matcher`] with errors that name the field, and reading the user's and
//! the project's files into a [`RuleSet`]. Kept apart from matching, which never sees YAML.

use std::path::Path;

use serde::Deserialize;

use super::matcher::{CommandPattern, Matcher, PathPattern, RuleProblem, ToolPattern};

use super::{Action, Effect, PROJECT_DIR, RULES_FILE, Rule, RuleError, RuleOrigin, RuleSet};
use crate::permission::shell::{Token, program_name, tokenize};

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Action),
    Many(Vec<Action>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: Option<String>,
    command: Option<String>,
    command_prefix: Option<String>,
    command_glob: Option<String>,
    path: Option<String>,
    action: Option<OneOrMany>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    allow: Vec<RawRule>,
    #[serde(default)]
    ask: Vec<RawRule>,
    #[serde(default)]
    deny: Vec<RawRule>,
}

/// The plain words of a command written in a rule (its program by base name).
pub(super) fn command_words(text: &str, field: &'static str) -> Result<Vec<String>, RuleProblem> {
    let mut words = Vec::new();
    for token in tokenize(text) {
        match token {
            Token::Word(word) => match word.literal() {
                Some(text) if !word.glob || word.quoted => words.push(text),
                _ => {
                    return Err(RuleProblem::NotPlain {
                        field,
                        text: text.to_owned(),
                    });
                }
            },
            _ => {
                return Err(RuleProblem::NotSimple {
                    field,
                    text: text.to_owned(),
                });
            }
        }
    }
    if let Some(first) = words.first_mut() {
        *first = program_name(first).to_owned();
    }
    if words.is_empty() {
        return Err(RuleProblem::Empty(field));
    }
    Ok(words)
}

fn compile(raw: RawRule, home: Option<&Path>) -> Result<Matcher, RuleProblem> {
    let commands = [&raw.command, &raw.command_prefix, &raw.command_glob]
        .iter()
        .filter(|c| c.is_some())
        .count();
    if commands > 1 {
        return Err(RuleProblem::SeveralCommands);
    }
    let actions = match raw.action {
        None => Vec::new(),
        Some(OneOrMany::One(action)) => vec![action],
        Some(OneOrMany::Many(actions)) if actions.is_empty() => {
            return Err(RuleProblem::NoActions);
        }
        Some(OneOrMany::Many(actions)) => actions,
    };
    let command = if let Some(text) = &raw.command {
        Some(CommandPattern::Exact(command_words(text, "command")?))
    } else if let Some(text) = &raw.command_prefix {
        Some(CommandPattern::Prefix(command_words(
            text,
            "command_prefix",
        )?))
    } else if let Some(text) = &raw.command_glob {
        if text.trim().is_empty() {
            return Err(RuleProblem::Empty("command_glob"));
        }
        let matcher = globset::Glob::new(text.trim())
            .map_err(|e| RuleProblem::Glob {
                what: "command_glob",
                pattern: text.to_owned(),
                reason: e.to_string(),
            })?
            .compile_matcher();
        Some(CommandPattern::Glob {
            raw: text.trim().to_owned(),
            matcher,
        })
    } else {
        None
    };
    let tool = raw.tool.as_deref().map(ToolPattern::new).transpose()?;
    let path = raw
        .path
        .as_deref()
        .map(|p| PathPattern::new(p, home))
        .transpose()?;
    if tool.is_none() && command.is_none() && path.is_none() && actions.is_empty() {
        return Err(RuleProblem::Nothing);
    }
    Ok(Matcher {
        tool,
        command,
        path,
        actions,
    })
}

impl RuleSet {
    /// Parses rule-file text; `source` names the file in errors and origins.
    pub fn parse(text: &str, source: &Path, home: Option<&Path>) -> Result<Self, RuleError> {
        let blank = text.lines().all(|line| {
            line.trim().is_empty() || line.trim_start().starts_with('#') || line.trim() == "---"
        });
        let raw: RawFile = if blank {
            RawFile::default()
        } else {
            yaml_serde::from_str::<Option<RawFile>>(text)
                .map_err(|e| RuleError::Syntax {
                    path: source.to_path_buf(),
                    message: e.to_string(),
                })?
                .unwrap_or_default()
        };
        let mut rules = Vec::new();
        for (effect, list) in [
            (Effect::Allow, raw.allow),
            (Effect::Ask, raw.ask),
            (Effect::Deny, raw.deny),
        ] {
            for (at, raw_rule) in list.into_iter().enumerate() {
                let matcher = compile(raw_rule, home).map_err(|problem| RuleError::Invalid {
                    path: source.to_path_buf(),
                    list: effect.name(),
                    number: at + 1,
                    problem,
                })?;
                rules.push(Rule {
                    effect,
                    matcher,
                    origin: RuleOrigin::File {
                        path: source.to_path_buf(),
                        number: at + 1,
                    },
                });
            }
        }
        Ok(Self { rules })
    }

    /// Loads one rule file; a missing file is an empty set.
    pub fn load_file(path: &Path, home: Option<&Path>) -> Result<Self, RuleError> {
        match crate::files::read_regular(path) {
            Ok(text) => Self::parse(&text, path, home),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::new()),
            Err(error) => Err(RuleError::Unreadable {
                path: path.to_path_buf(),
                message: error.to_string(),
            }),
        }
    }

    /// Loads `$KEEL_HOME/permissions.yaml` and the project's `.keel/permissions.yaml`
    /// (`keel_home` is the resolved folder, see [`keel_home`]).
    pub fn load(
        keel_home: Option<&Path>,
        project_root: Option<&Path>,
        home: Option<&Path>,
    ) -> Result<Self, RuleError> {
        let mut set = Self::new();
        if let Some(dir) = keel_home {
            set.extend(Self::load_file(&dir.join(RULES_FILE), home)?);
        }
        if let Some(root) = project_root {
            set.extend(Self::load_file(
                &root.join(PROJECT_DIR).join(RULES_FILE),
                home,
            )?);
        }
        Ok(set)
    }
}

/// A command's words as rule text that tokenizes back into the same words.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./=:@%+,-".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Matcher {
    /// The matcher as one rule of a rule file (a JSON object, which YAML reads as a flow
    /// mapping), so "always allow" can be saved exactly as it was shown.
    pub fn to_rule_text(&self) -> String {
        let mut rule = serde_json::Map::new();
        if let Some(tool) = &self.tool {
            rule.insert("tool".into(), tool.as_str().into());
        }
        match &self.command {
            Some(CommandPattern::Exact(words)) => {
                rule.insert("command".into(), shell_words(words).into());
            }
            Some(CommandPattern::Prefix(words)) => {
                rule.insert("command_prefix".into(), shell_words(words).into());
            }
            Some(CommandPattern::Glob { raw, .. }) => {
                rule.insert("command_glob".into(), raw.as_str().into());
            }
            None => {}
        }
        if let Some(path) = &self.path {
            rule.insert("path".into(), path.as_str().into());
        }
        match self.actions.as_slice() {
            [] => {}
            [one] => {
                rule.insert("action".into(), one.name().into());
            }
            many => {
                let names: Vec<serde_json::Value> = many.iter().map(|a| a.name().into()).collect();
                rule.insert("action".into(), names.into());
            }
        }
        serde_json::Value::Object(rule).to_string()
    }
}

/// Adds `matchers` as allow rules to the rule file at `path` (created 0600 when missing),
/// keeping what the file says, comments included. The new text must load and give exactly
/// the old rules plus these, or nothing is written.
pub fn append_allow(
    path: &Path,
    matchers: &[Matcher],
    home: Option<&Path>,
) -> Result<(), RuleError> {
    append_rules(path, Effect::Allow, matchers, home)
}

/// Adds `matchers` as rules of `effect` (under `allow:`, `ask:` or `deny:`) to the rule
/// file at `path`, with the checks of [`append_allow`].
pub fn append_rules(
    path: &Path,
    effect: Effect,
    matchers: &[Matcher],
    home: Option<&Path>,
) -> Result<(), RuleError> {
    let section = match effect {
        Effect::Allow => "allow",
        Effect::Ask => "ask",
        Effect::Deny => "deny",
    };
    let heading = format!("{section}:");
    let unreadable = |message: String| RuleError::Unreadable {
        path: path.to_path_buf(),
        message,
    };
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let before = RuleSet::parse(&old, path, home)?;
    let items: Vec<String> = matchers
        .iter()
        .map(|m| format!("  - {}", m.to_rule_text()))
        .collect();
    let lines: Vec<&str> = old.lines().collect();
    let text = match lines.iter().position(|l| l.trim_end() == heading) {
        Some(at) => {
            let mut out: Vec<String> = lines[..=at].iter().map(|l| (*l).to_owned()).collect();
            out.extend(items.iter().cloned());
            out.extend(lines[at + 1..].iter().map(|l| (*l).to_owned()));
            out.join("\n") + "\n"
        }
        None => {
            let mut out = old.clone();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&heading);
            out.push('\n');
            for item in &items {
                out.push_str(item);
                out.push('\n');
            }
            out
        }
    };
    let after = RuleSet::parse(&text, path, home)?;
    let mut expected: Vec<(Effect, &Matcher)> = before
        .rules()
        .iter()
        .map(|r| (r.effect, &r.matcher))
        .collect();
    expected.extend(matchers.iter().map(|m| (effect, m)));
    let got: Vec<(Effect, &Matcher)> = after
        .rules()
        .iter()
        .map(|r| (r.effect, &r.matcher))
        .collect();
    let same = expected.len() == got.len() && expected.iter().all(|m| got.contains(m));
    if !same {
        return Err(RuleError::Syntax {
            path: path.to_path_buf(),
            message: format!(
                "the file's {section} list could not be extended in place (write the rule by hand)"
            ),
        });
    }
    crate::output::replace_private(path, text.as_bytes())
        .map_err(|e| unreadable(format!("cannot save the rule: {e}")))
}
