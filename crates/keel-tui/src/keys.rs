//! The key map: which key does what, the defaults of SPEC §15, and overrides from
//! `$KEEL_HOME/keybindings.yaml` (`action: key` or `action: [keys]`). A file with an unknown
//! action, a key that does not parse, or two actions on one key is reported and ignored
//! whole, so a typo never leaves a half-applied map.

use std::collections::BTreeMap;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

/// What a key does in the composer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Send (steer while a turn runs).
    Submit,
    /// Queue a follow-up for after the turn.
    Queue,
    /// Insert a newline.
    Newline,
    /// Interrupt the turn, close a popup; twice on an empty composer: rewind.
    Interrupt,
    /// Cycle the permission mode.
    CycleMode,
    /// Clear the composer; twice: quit.
    Clear,
    /// Quit when the composer is empty.
    Exit,
    /// Search the prompt history.
    HistorySearch,
    /// Show the todo list.
    Todos,
    /// Edit the draft in `$EDITOR`.
    Editor,
    /// Expand or collapse long output.
    ToggleExpand,
    /// Pull the last queued message back into the composer.
    PullQueued,
    /// Suspend keel (job control).
    Suspend,
}

/// Every action: its name in keybindings.yaml and its default keys (SPEC §15).
const ACTIONS: [(Action, &str, &[&str]); 13] = [
    (Action::Submit, "submit", &["enter"]),
    (Action::Queue, "queue", &["alt+enter"]),
    (Action::Newline, "newline", &["shift+enter", "ctrl+j"]),
    (Action::Interrupt, "interrupt", &["esc"]),
    (Action::CycleMode, "cycle_mode", &["shift+tab"]),
    (Action::Clear, "clear", &["ctrl+c"]),
    (Action::Exit, "exit", &["ctrl+d"]),
    (Action::HistorySearch, "history_search", &["ctrl+r"]),
    (Action::Todos, "todos", &["ctrl+t"]),
    (Action::Editor, "editor", &["ctrl+g"]),
    (Action::ToggleExpand, "toggle_expand", &["ctrl+o"]),
    (Action::PullQueued, "pull_queued", &["alt+up"]),
    (Action::Suspend, "suspend", &["ctrl+z"]),
];

impl Action {
    /// The action's name in keybindings.yaml.
    pub fn name(self) -> &'static str {
        ACTIONS
            .iter()
            .find(|(a, _, _)| *a == self)
            .map_or("", |(_, n, _)| n)
    }

    fn from_name(name: &str) -> Option<Self> {
        ACTIONS
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(a, _, _)| *a)
    }
}

/// A key with its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    code: KeyCodeKey,
    ctrl: bool,
    alt: bool,
    shift: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyCodeKey {
    Char(char),
    Enter,
    Esc,
    Tab,
    BackTab,
    Up,
    Down,
    Backspace,
    F(u8),
}

/// Why a key or the key map is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Nothing was given.
    #[error("empty key `{0}`")]
    Empty(String),
    /// A modifier keel does not know.
    #[error("unknown modifier `{modifier}` in `{key}`")]
    Modifier {
        /// The modifier.
        modifier: String,
        /// The key as written.
        key: String,
    },
    /// A plain character with no ctrl or alt.
    #[error("`{0}` is a plain character: bindings need ctrl or alt, or a named key")]
    Plain(String),
    /// A key name keel does not know.
    #[error("unknown key `{name}` in `{key}`")]
    Unknown {
        /// The name.
        name: String,
        /// The key as written.
        key: String,
    },
    /// The file is not a map.
    #[error("not a map of action: key(s): {0}")]
    NotAMap(String),
    /// An action keel does not have.
    #[error("unknown action `{name}` (known: {known})")]
    Action {
        /// The name.
        name: String,
        /// The actions there are.
        known: String,
    },
    /// A key of an action is wrong.
    #[error("{action}: {error}")]
    In {
        /// The action.
        action: String,
        /// What is wrong with its key.
        error: Box<KeyError>,
    },
    /// One key for two actions.
    #[error("{key} is bound to both {first} and {second}")]
    Conflict {
        /// The key.
        key: String,
        /// One action.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
}

impl Key {
    /// The key of a terminal event, normalised (letters lower-case, Shift folded into the
    /// character where the terminal sends it that way).
    pub fn of(event: &KeyEvent) -> Option<Self> {
        let m = event.modifiers;
        let ctrl = m.contains(KeyModifiers::CONTROL);
        let alt = m.contains(KeyModifiers::ALT);
        let mut shift = m.contains(KeyModifiers::SHIFT);
        let code = match event.code {
            KeyCode::Char(c) => {
                if c.is_ascii_uppercase() && (ctrl || alt) {
                    shift = true;
                }
                if !(ctrl || alt) {
                    shift = false;
                }
                KeyCodeKey::Char(c.to_ascii_lowercase())
            }
            KeyCode::Enter => KeyCodeKey::Enter,
            KeyCode::Esc => KeyCodeKey::Esc,
            KeyCode::Tab => KeyCodeKey::Tab,
            KeyCode::BackTab => {
                shift = true;
                KeyCodeKey::BackTab
            }
            KeyCode::Up => KeyCodeKey::Up,
            KeyCode::Down => KeyCodeKey::Down,
            KeyCode::Backspace => KeyCodeKey::Backspace,
            KeyCode::F(n) => KeyCodeKey::F(n),
            _ => return None,
        };
        Some(Self {
            code,
            ctrl,
            alt,
            shift,
        })
    }

    /// Parses `ctrl+o`, `alt+enter`, `shift+tab`, `f2`.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut key = Key {
            code: KeyCodeKey::Enter,
            ctrl: false,
            alt: false,
            shift: false,
        };
        let lower = text.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split('+').collect();
        let Some((last, mods)) = parts.split_last() else {
            return Err(KeyError::Empty(text.to_owned()));
        };
        for m in mods {
            match *m {
                "ctrl" | "control" | "c" => key.ctrl = true,
                "alt" | "meta" | "option" | "m" => key.alt = true,
                "shift" | "s" => key.shift = true,
                other => {
                    return Err(KeyError::Modifier {
                        modifier: other.to_owned(),
                        key: text.to_owned(),
                    });
                }
            }
        }
        key.code = match *last {
            "enter" | "return" => KeyCodeKey::Enter,
            "esc" | "escape" => KeyCodeKey::Esc,
            "tab" if key.shift => KeyCodeKey::BackTab,
            "tab" => KeyCodeKey::Tab,
            "up" => KeyCodeKey::Up,
            "down" => KeyCodeKey::Down,
            "backspace" => KeyCodeKey::Backspace,
            f if f.len() >= 2 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCodeKey::F(f[1..].parse().unwrap_or(1))
            }
            c if c.chars().count() == 1 => {
                let ch = c.chars().next().unwrap_or(' ');
                if !(key.ctrl || key.alt || ch == ' ') {
                    return Err(KeyError::Plain(text.to_owned()));
                }
                KeyCodeKey::Char(ch)
            }
            other => {
                return Err(KeyError::Unknown {
                    name: other.to_owned(),
                    key: text.to_owned(),
                });
            }
        };
        Ok(key)
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ctrl {
            f.write_str("ctrl+")?;
        }
        if self.alt {
            f.write_str("alt+")?;
        }
        if self.shift && self.code != KeyCodeKey::BackTab {
            f.write_str("shift+")?;
        }
        match self.code {
            KeyCodeKey::Char(c) => write!(f, "{c}"),
            KeyCodeKey::Enter => f.write_str("enter"),
            KeyCodeKey::Esc => f.write_str("esc"),
            KeyCodeKey::Tab => f.write_str("tab"),
            KeyCodeKey::BackTab => f.write_str("shift+tab"),
            KeyCodeKey::Up => f.write_str("up"),
            KeyCodeKey::Down => f.write_str("down"),
            KeyCodeKey::Backspace => f.write_str("backspace"),
            KeyCodeKey::F(n) => write!(f, "f{n}"),
        }
    }
}

/// The key map in force.
#[derive(Debug, Clone)]
pub struct KeyMap {
    bindings: BTreeMap<Key, Action>,
}

fn k(text: &str) -> Key {
    // Only called on the literals below, which a unit test parses.
    Key::parse(text).unwrap_or(Key {
        code: KeyCodeKey::F(24),
        ctrl: false,
        alt: false,
        shift: false,
    })
}

impl Default for KeyMap {
    fn default() -> Self {
        let mut bindings = BTreeMap::new();
        for (action, _, keys) in ACTIONS {
            for key in keys {
                bindings.insert(k(key), action);
            }
        }
        Self { bindings }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl KeyMap {
    /// The action bound to `event`.
    pub fn action(&self, event: &KeyEvent) -> Option<Action> {
        let key = Key::of(event)?;
        self.bindings.get(&key).copied()
    }

    /// The keys bound to `action`, for help texts.
    pub fn keys_of(&self, action: Action) -> Vec<String> {
        self.bindings
            .iter()
            .filter(|(_, a)| **a == action)
            .map(|(k, _)| k.to_string())
            .collect()
    }

    /// The defaults with the overrides of `text` applied: each action named in the file
    /// gets exactly the keys listed there.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let raw: BTreeMap<String, OneOrMany> =
            yaml_serde::from_str(text).map_err(|e| KeyError::NotAMap(e.to_string()))?;
        let mut overrides: BTreeMap<Action, Vec<Key>> = BTreeMap::new();
        for (name, keys) in raw {
            let action = Action::from_name(&name).ok_or_else(|| KeyError::Action {
                name: name.clone(),
                known: ACTIONS
                    .iter()
                    .map(|(_, n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
            let keys = match keys {
                OneOrMany::One(key) => vec![key],
                OneOrMany::Many(keys) => keys,
            };
            let parsed = keys
                .iter()
                .map(|key| {
                    Key::parse(key).map_err(|e| KeyError::In {
                        action: name.clone(),
                        error: Box::new(e),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            overrides.insert(action, parsed);
        }
        let mut bindings: BTreeMap<Key, Action> = BTreeMap::new();
        for (action, _, keys) in ACTIONS {
            if overrides.contains_key(&action) {
                continue;
            }
            for key in keys {
                bindings.insert(k(key), action);
            }
        }
        for (action, keys) in overrides {
            for key in keys {
                if let Some(other) = bindings.insert(key, action)
                    && other != action
                {
                    return Err(KeyError::Conflict {
                        key: key.to_string(),
                        first: other.name(),
                        second: action.name(),
                    });
                }
            }
        }
        Ok(Self { bindings })
    }

    /// The map from `$KEEL_HOME/keybindings.yaml`, or the defaults and the reason the file
    /// was not used.
    pub fn load(home: Option<&Path>) -> (Self, Option<String>) {
        let Some(path) = home.map(|h| h.join("keybindings.yaml")) else {
            return (Self::default(), None);
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => match Self::parse(&text) {
                Ok(map) => (map, None),
                Err(error) => (
                    Self::default(),
                    Some(format!("{} ignored: {error}", path.display())),
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Self::default(), None),
            Err(e) => (
                Self::default(),
                Some(format!("{} ignored: cannot read it: {e}", path.display())),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn defaults_parse_and_map() {
        for (_, _, keys) in ACTIONS {
            for key in keys {
                Key::parse(key).unwrap();
            }
        }
        let map = KeyMap::default();
        assert_eq!(
            map.action(&press(KeyCode::Enter, KeyModifiers::NONE)),
            Some(Action::Submit)
        );
        assert_eq!(
            map.action(&press(KeyCode::Enter, KeyModifiers::ALT)),
            Some(Action::Queue)
        );
        assert_eq!(
            map.action(&press(KeyCode::Enter, KeyModifiers::SHIFT)),
            Some(Action::Newline)
        );
        assert_eq!(
            map.action(&press(KeyCode::Char('j'), KeyModifiers::CONTROL)),
            Some(Action::Newline)
        );
        assert_eq!(
            map.action(&press(KeyCode::BackTab, KeyModifiers::SHIFT)),
            Some(Action::CycleMode)
        );
        assert_eq!(
            map.action(&press(KeyCode::Up, KeyModifiers::ALT)),
            Some(Action::PullQueued)
        );
        assert_eq!(
            map.action(&press(KeyCode::Char('x'), KeyModifiers::NONE)),
            None
        );
    }

    #[test]
    fn overrides_replace_an_actions_keys() {
        let map = KeyMap::parse("toggle_expand: ctrl+e\nqueue: [alt+q, f2]\n").unwrap();
        assert_eq!(
            map.action(&press(KeyCode::Char('e'), KeyModifiers::CONTROL)),
            Some(Action::ToggleExpand)
        );
        assert_eq!(
            map.action(&press(KeyCode::Char('o'), KeyModifiers::CONTROL)),
            None
        );
        assert_eq!(
            map.action(&press(KeyCode::F(2), KeyModifiers::NONE)),
            Some(Action::Queue)
        );
    }

    #[test]
    fn conflicts_and_typos_reject_the_whole_file() {
        let err = KeyMap::parse("todos: ctrl+r\n").unwrap_err().to_string();
        assert!(err.contains("ctrl+r is bound to both"), "{err}");
        assert!(
            KeyMap::parse("explode: ctrl+x")
                .unwrap_err()
                .to_string()
                .contains("unknown action `explode`")
        );
        assert!(
            KeyMap::parse("todos: hyper+x")
                .unwrap_err()
                .to_string()
                .contains("unknown modifier")
        );
        assert!(
            KeyMap::parse("todos: x")
                .unwrap_err()
                .to_string()
                .contains("plain character")
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keybindings.yaml"), "todos: ctrl+r\n").unwrap();
        let (map, warning) = KeyMap::load(Some(dir.path()));
        assert!(warning.unwrap().contains("ignored"));
        assert_eq!(
            map.action(&press(KeyCode::Char('t'), KeyModifiers::CONTROL)),
            Some(Action::Todos)
        );
    }
}
