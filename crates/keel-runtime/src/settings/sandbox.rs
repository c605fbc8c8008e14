//! The `sandbox` key: a mode alone (`sandbox: workspace-write`), or a map with the mode and
//! the hosts commands may reach (`sandbox: {mode: ..., network: {allow: [...], deny: [...]}}`).

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use keel_tools::SandboxMode;
use keel_tools::netproxy::{DEFAULT_ALLOW, NetworkRules};

/// The `sandbox` key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxSetting {
    /// Where `bash` may write: read-only, workspace-write or danger-full-access.
    pub mode: Option<SandboxMode>,
    /// `network`: which hosts commands may reach through keel's proxy.
    pub network: NetworkSetting,
}

/// `sandbox.network`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkSetting {
    /// Hosts added to the default list (`*.example.com` for every name under it; `*` for
    /// every host, which gives commands the host's network with no proxy).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Hosts never reachable, even when allowed.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Start from the default list of package registries and source hosts.
    #[serde(default = "yes")]
    pub defaults: bool,
}

fn yes() -> bool {
    true
}

impl Default for NetworkSetting {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            deny: Vec::new(),
            defaults: true,
        }
    }
}

impl NetworkSetting {
    /// The rules the proxy enforces.
    pub fn rules(&self) -> NetworkRules {
        let defaults = DEFAULT_ALLOW
            .iter()
            .filter(|_| self.defaults)
            .map(|s| (*s).to_owned());
        NetworkRules::new(
            defaults.chain(self.allow.iter().cloned()),
            self.deny.iter().cloned(),
        )
    }
}

impl<'de> Deserialize<'de> for SandboxSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SettingVisitor)
    }
}

/// Always the map form, so `keel config show` names `sandbox.mode` and `sandbox.network`.
impl serde::Serialize for SandboxSetting {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("mode", &self.mode)?;
        map.serialize_entry("network", &self.network)?;
        map.end()
    }
}

struct SettingVisitor;

impl<'de> Visitor<'de> for SettingVisitor {
    type Value = SandboxSetting;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a sandbox mode (read-only, workspace-write, danger-full-access) or a map with `mode` and `network`")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        let mode = SandboxMode::deserialize(de::value::StrDeserializer::<E>::new(value))?;
        Ok(SandboxSetting {
            mode: Some(mode),
            network: NetworkSetting::default(),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut setting = SandboxSetting::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "mode" => setting.mode = Some(map.next_value()?),
                "network" => setting.network = map.next_value()?,
                other => {
                    return Err(de::Error::unknown_field(other, &["mode", "network"]));
                }
            }
        }
        Ok(setting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<SandboxSetting, String> {
        yaml_serde::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn a_mode_alone_or_a_map_reads() {
        assert_eq!(
            parse("read-only").unwrap().mode,
            Some(SandboxMode::ReadOnly)
        );
        let full = parse(
            "mode: workspace-write\nnetwork:\n  allow: [example.com, '*.corp.example']\n  deny: [bad.example.com]\n",
        )
        .unwrap();
        assert_eq!(full.mode, Some(SandboxMode::WorkspaceWrite));
        let rules = full.network.rules();
        assert!(rules.allows("example.com"));
        assert!(rules.allows("git.corp.example"));
        assert!(rules.allows("crates.io"), "the defaults stay");
        assert!(!rules.allows("evil.example"));
        let bare = parse("network: {allow: [example.com], defaults: false}").unwrap();
        assert_eq!(bare.mode, None);
        assert!(!bare.network.rules().allows("crates.io"));
    }

    #[test]
    fn a_wrong_key_or_mode_is_named() {
        let error = parse("mode: open").unwrap_err();
        assert!(error.contains("open"), "{error}");
        let error = parse("networks: {}").unwrap_err();
        assert!(error.contains("networks"), "{error}");
        let error = parse("network: {allowed: [x]}").unwrap_err();
        assert!(error.contains("allowed"), "{error}");
    }
}
