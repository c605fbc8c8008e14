//! The words a session is configured with: its permission mode, the bash sandbox and how
//! hard the model thinks. One type each, here, so every crate and front end matches on the
//! same values and parses and prints them the same way.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A word that names none of a vocabulary's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    /// What was being named (`permission mode`).
    pub what: &'static str,
    /// The word given.
    pub word: String,
    /// The words that exist, as people read them (`ask, auto, full or plan`).
    pub expected: &'static str,
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}` (use {})",
            self.what, self.word, self.expected
        )
    }
}

impl std::error::Error for UnknownWord {}

/// Finds the value whose name is `word` (trimmed, any case).
fn find<T: Copy>(
    all: &[T],
    name: impl Fn(T) -> &'static str,
    word: &str,
    what: &'static str,
    expected: &'static str,
) -> Result<T, UnknownWord> {
    let wanted = word.trim().to_ascii_lowercase();
    all.iter()
        .copied()
        .find(|value| name(*value) == wanted)
        .ok_or_else(|| UnknownWord {
            what,
            word: word.to_owned(),
            expected,
        })
}

/// The permission mode: a fixed profile of what runs without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    /// Reads inside the workspace run; everything else asks.
    #[default]
    Ask,
    /// Reads, shell and network run; writes and deletes inside the workspace run; writes
    /// outside the workspace ask; code the gate cannot read runs only inside the bash sandbox.
    Auto,
    /// Everything runs; only deny and ask rules still apply (the danger list is off).
    Full,
    /// Read-only: reads and read-only commands run; writes, deletes, commands with other
    /// effects and commands that reach the network are denied; `web_fetch` asks.
    Plan,
}

impl PermissionMode {
    /// Every mode, in the order people cycle through them.
    pub const ALL: [Self; 4] = [Self::Ask, Self::Auto, Self::Full, Self::Plan];

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Auto => "auto",
            Self::Full => "full",
            Self::Plan => "plan",
        }
    }

    /// The name people read (`Full access`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Ask => "Ask",
            Self::Auto => "Auto",
            Self::Full => "Full access",
            Self::Plan => "Plan",
        }
    }

    /// What the mode lets the agent do, in one line, for every front end's picker.
    pub fn summary(self) -> &'static str {
        match self {
            Self::Ask => "Ask before every edit and command; reads run freely",
            Self::Auto => "Edit and run inside the workspace; ask before anything riskier",
            Self::Full => "Run everything without asking (the sandbox still applies)",
            Self::Plan => "Read and investigate only; no edits or commands that change things",
        }
    }

    /// How much the mode holds back: a project may only choose a stricter one.
    pub fn strictness(self) -> u8 {
        match self {
            Self::Full => 0,
            Self::Auto => 1,
            Self::Ask => 2,
            Self::Plan => 3,
        }
    }

    /// The next mode in [`Self::ALL`], round.
    pub fn next(self) -> Self {
        let at = Self::ALL.iter().position(|m| *m == self).unwrap_or(0);
        Self::ALL[(at + 1) % Self::ALL.len()]
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PermissionMode {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        find(
            &Self::ALL,
            Self::name,
            s,
            "permission mode",
            "ask, auto, full or plan",
        )
    }
}

/// Where bash may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Writes nowhere but temp folders.
    ReadOnly,
    /// Writes inside the workspace roots and temp folders.
    #[default]
    WorkspaceWrite,
    /// No restriction.
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, strictest first.
    pub const ALL: [Self; 3] = [Self::ReadOnly, Self::WorkspaceWrite, Self::DangerFullAccess];

    /// The mode's name as configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SandboxMode {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        find(
            &Self::ALL,
            Self::name,
            s,
            "sandbox mode",
            "read-only, workspace-write or danger-full-access",
        )
    }
}

/// How hard the model should think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingLevel {
    /// No reasoning.
    Off,
    /// Minimal reasoning.
    Minimal,
    /// Low effort.
    Low,
    /// Medium effort.
    Medium,
    /// High effort.
    High,
}

impl ThinkingLevel {
    /// Every level, least first.
    pub const ALL: [Self; 5] = [
        Self::Off,
        Self::Minimal,
        Self::Low,
        Self::Medium,
        Self::High,
    ];

    /// The level's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

impl fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ThinkingLevel {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        find(
            &Self::ALL,
            Self::name,
            s,
            "thinking level",
            "off, minimal, low, medium or high",
        )
    }
}

/// A session's choice of thinking: a level, or the model's own (`default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThinkingChoice {
    /// Whatever the model does by default.
    #[default]
    Default,
    /// This level.
    Level(ThinkingLevel),
}

impl ThinkingChoice {
    /// The chosen level; `None` for the model's own.
    pub fn level(self) -> Option<ThinkingLevel> {
        match self {
            Self::Default => None,
            Self::Level(level) => Some(level),
        }
    }

    /// The choice's name: `default` or a level's.
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Level(level) => level.name(),
        }
    }
}

impl From<Option<ThinkingLevel>> for ThinkingChoice {
    fn from(level: Option<ThinkingLevel>) -> Self {
        level.map_or(Self::Default, Self::Level)
    }
}

impl fmt::Display for ThinkingChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ThinkingChoice {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("default") {
            return Ok(Self::Default);
        }
        s.parse().map(Self::Level).map_err(|_| UnknownWord {
            what: "thinking level",
            word: s.to_owned(),
            expected: "off, minimal, low, medium, high or default",
        })
    }
}

impl Serialize for ThinkingChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ThinkingChoice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = String::deserialize(deserializer)?;
        word.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_word_reads_back_as_itself_and_serde_agrees() {
        for mode in PermissionMode::ALL {
            assert_eq!(mode.name().parse::<PermissionMode>().unwrap(), mode);
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.name());
        }
        for mode in SandboxMode::ALL {
            assert_eq!(mode.name().parse::<SandboxMode>().unwrap(), mode);
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.name());
        }
        for level in ThinkingLevel::ALL {
            assert_eq!(level.name().parse::<ThinkingLevel>().unwrap(), level);
            assert_eq!(serde_json::to_value(level).unwrap(), level.name());
            let choice = ThinkingChoice::Level(level);
            assert_eq!(serde_json::to_value(choice).unwrap(), level.name());
        }
        let default: ThinkingChoice = serde_json::from_value("default".into()).unwrap();
        assert_eq!(default, ThinkingChoice::Default);
    }

    #[test]
    fn an_unknown_word_names_what_exists() {
        let error = " Loud ".parse::<PermissionMode>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown permission mode ` Loud ` (use ask, auto, full or plan)"
        );
        assert_eq!(
            " AUTO ".parse::<PermissionMode>().unwrap(),
            PermissionMode::Auto
        );
        let error = "max".parse::<ThinkingChoice>().unwrap_err();
        assert!(error.to_string().contains("or default"), "{error}");
        assert_eq!(PermissionMode::Plan.next(), PermissionMode::Ask);
    }
}
