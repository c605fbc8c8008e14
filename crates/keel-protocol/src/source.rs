//! Who started a turn (DESIGN §5 turn sources).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Who started a turn: a front end, a schedule, a thread goal or a named channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum TurnSource {
    /// A front end or API caller.
    #[default]
    Api,
    /// A scheduled job.
    Cron,
    /// A thread goal continuing on its own.
    ThreadGoal,
    /// A named channel (chat bridge, webhook).
    Channel(String),
}

impl TurnSource {
    /// Whether a front end or API caller started it (the default).
    pub fn is_api(&self) -> bool {
        *self == Self::Api
    }

    /// The stable text form: `api`, `cron`, `thread-goal`, `channel:NAME`.
    pub fn as_text(&self) -> String {
        match self {
            Self::Api => "api".into(),
            Self::Cron => "cron".into(),
            Self::ThreadGoal => "thread-goal".into(),
            Self::Channel(name) => format!("channel:{name}"),
        }
    }

    /// Parses the text form; `None` for anything else (a channel needs a name).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "api" => Some(Self::Api),
            "cron" => Some(Self::Cron),
            "thread-goal" => Some(Self::ThreadGoal),
            other => other
                .strip_prefix("channel:")
                .filter(|name| !name.is_empty())
                .map(|name| Self::Channel(name.to_owned())),
        }
    }
}

impl std::fmt::Display for TurnSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_text())
    }
}

impl Serialize for TurnSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_text())
    }
}

impl<'de> Deserialize<'de> for TurnSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown turn source `{text}`: expected api, cron, thread-goal or channel:NAME"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_source_round_trips_through_its_text() {
        for source in [
            TurnSource::Api,
            TurnSource::Cron,
            TurnSource::ThreadGoal,
            TurnSource::Channel("slack".into()),
        ] {
            let json = serde_json::to_string(&source).unwrap();
            assert_eq!(serde_json::from_str::<TurnSource>(&json).unwrap(), source);
        }
        assert_eq!(
            serde_json::to_string(&TurnSource::Channel("ci".into())).unwrap(),
            "\"channel:ci\""
        );
    }

    #[test]
    fn a_channel_without_a_name_is_refused() {
        let error = serde_json::from_str::<TurnSource>("\"channel:\"").unwrap_err();
        assert!(error.to_string().contains("unknown turn source"), "{error}");
        assert!(serde_json::from_str::<TurnSource>("\"webhook\"").is_err());
    }
}
