//! The JSON Schema of `config.yaml`, generated from the configuration types, for editors
//! (`# yaml-language-server: $schema=…`) and `keel config schema`.

use std::borrow::Cow;

use keel_protocol::{PermissionMode, SandboxMode};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::config::Config;
use super::sandbox::{NetworkSetting, SandboxSetting};

/// The schema of the whole file, as JSON.
pub fn config_schema() -> serde_json::Value {
    let mut schema = SchemaGenerator::default().into_root_schema_for::<Config>();
    schema.insert("title".into(), "keel configuration (config.yaml)".into());
    schema.to_value()
}

/// `permission`: one of the modes, by name.
pub(super) fn permission_mode(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.name()).collect();
    json_schema!({
        "type": ["string", "null"],
        "enum": names,
        "description": "Permission mode: ask, auto, full or plan."
    })
}

impl JsonSchema for SandboxSetting {
    fn schema_name() -> Cow<'static, str> {
        "SandboxSetting".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let modes: Vec<&str> = SandboxMode::ALL.iter().map(|m| m.name()).collect();
        let network = generator.subschema_for::<NetworkSetting>();
        json_schema!({
            "description": "A mode alone, or the mode and the hosts commands may reach.",
            "anyOf": [
                {"type": "string", "enum": modes},
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "mode": {"type": "string", "enum": modes},
                        "network": network
                    }
                }
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every top-level key the loader accepts is in the schema, and nothing else.
    #[test]
    fn the_schema_names_every_key_and_refuses_others() {
        let schema = config_schema();
        let properties = schema["properties"].as_object().unwrap();
        for key in [
            "model",
            "permission",
            "sandbox",
            "mcp_servers",
            "hooks",
            "tui",
            "context",
        ] {
            assert!(properties.contains_key(key), "{key}");
        }
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            properties["permission"]["enum"],
            serde_json::json!(["ask", "auto", "full", "plan"])
        );
        // Every key of a full example file is known to the schema.
        let example: serde_json::Value = yaml_serde::from_str(
            "model: anthropic/claude-sonnet-4-5\npermission: auto\nsandbox: read-only\n",
        )
        .unwrap();
        for key in example.as_object().unwrap().keys() {
            assert!(properties.contains_key(key), "{key}");
        }
    }

    /// The schema in docs/ is this one: regenerate it with `keel config schema`.
    #[test]
    fn the_published_schema_is_current() {
        // Compared as values: key order depends on serde_json's features in this build.
        let published: serde_json::Value =
            serde_json::from_str(include_str!("../../../../docs/config.schema.json")).unwrap();
        assert!(
            published == config_schema(),
            "docs/config.schema.json is stale: run `keel config schema > docs/config.schema.json`"
        );
    }
}
