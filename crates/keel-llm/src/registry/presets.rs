//! The built-in provider presets, read from the embedded `models.json`.
//!
//! The presets are data, not code: each provider and model is a record with named fields
//! (`name`, `api`, `base_url`, `api_key_env`, `compat`, `headers`, `models` with `id`,
//! `context_window`, `max_output`, `prices {input, output, cache_read, cache_write}` in US
//! dollars per million tokens, and `capabilities`), so a price or a limit is changed where
//! it is named. A provider that offers another one's models under another endpoint says
//! `models_of` instead of repeating them. The file is parsed once per process, on first
//! use, and only by a command that resolves a model. A damaged file is caught by this
//! module's tests; should one ever ship, every lookup reports it as keel's own error
//! instead of panicking.

use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use serde::Deserialize;

use super::{ModelInfo, Provider};
use crate::model::{Api, Capabilities, Compat, Prices};

/// The embedded presets.
const PRESETS_JSON: &str = include_str!("../models.json");

/// The file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetFile {
    providers: Vec<PresetProvider>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetProvider {
    name: String,
    api: Api,
    base_url: String,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    compat: Compat,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    models: Vec<PresetModel>,
    /// The provider whose models this one offers too (another region or wire API).
    #[serde(default)]
    models_of: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetModel {
    id: String,
    context_window: u32,
    max_output: u32,
    #[serde(default)]
    prices: Prices,
    #[serde(default)]
    capabilities: Capabilities,
}

/// The built-in providers by name, or why the embedded file cannot give them.
pub(super) fn builtin() -> Result<&'static BTreeMap<String, Provider>, &'static str> {
    static PRESETS: OnceLock<Result<BTreeMap<String, Provider>, String>> = OnceLock::new();
    PRESETS
        .get_or_init(|| parse(PRESETS_JSON))
        .as_ref()
        .map_err(String::as_str)
}

/// Reads and checks a presets file: names and model ids unique, `models_of` naming a
/// listed provider that does not take another's models itself, and never given beside
/// `models`.
fn parse(text: &str) -> Result<BTreeMap<String, Provider>, String> {
    let file: PresetFile = serde_json::from_str(text).map_err(|error| error.to_string())?;
    let mut own_models: BTreeMap<&str, BTreeMap<String, ModelInfo>> = BTreeMap::new();
    for preset in &file.providers {
        let mut models = BTreeMap::new();
        for model in &preset.models {
            let info = ModelInfo {
                context_window: model.context_window,
                max_output: model.max_output,
                prices: model.prices,
                capabilities: model.capabilities.clone(),
            };
            if models.insert(model.id.clone(), info).is_some() {
                return Err(format!(
                    "provider `{}` lists model `{}` twice",
                    preset.name, model.id
                ));
            }
        }
        if own_models.insert(&preset.name, models).is_some() {
            return Err(format!("provider `{}` is listed twice", preset.name));
        }
    }
    let mut seen = HashSet::new();
    let mut providers = BTreeMap::new();
    for preset in &file.providers {
        seen.insert(preset.name.as_str());
        let models = match &preset.models_of {
            None => own_models.get(preset.name.as_str()).cloned(),
            Some(_) if !preset.models.is_empty() => {
                return Err(format!(
                    "provider `{}` has both `models` and `models_of`",
                    preset.name
                ));
            }
            Some(other) => match file.providers.iter().find(|p| &p.name == other) {
                Some(source) if source.models_of.is_none() => {
                    own_models.get(other.as_str()).cloned()
                }
                Some(_) => {
                    return Err(format!(
                        "provider `{}` takes the models of `{other}`, which takes another's itself",
                        preset.name
                    ));
                }
                None => {
                    return Err(format!(
                        "provider `{}` takes the models of `{other}`, which is not listed",
                        preset.name
                    ));
                }
            },
        };
        providers.insert(
            preset.name.clone(),
            Provider {
                api: preset.api,
                base_url: preset.base_url.clone(),
                api_key_env: preset.api_key_env.clone(),
                compat: preset.compat.clone(),
                headers: preset.headers.clone(),
                models: models.unwrap_or_default(),
            },
        );
    }
    Ok(providers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The file keel ships parses; a damaged one fails here, not at a user's first run.
    #[test]
    fn the_embedded_presets_parse() {
        let providers = parse(PRESETS_JSON).unwrap();
        assert!(providers.len() >= 14, "{:?}", providers.keys());
        assert!(builtin().is_ok());
    }

    #[test]
    fn a_damaged_presets_file_is_an_error_that_says_what_is_wrong() {
        let provider = |name: &str, rest: &str| {
            format!(
                r#"{{"name": "{name}", "api": "anthropic-messages", "base_url": "https://x"{rest}}}"#
            )
        };
        let file =
            |providers: Vec<String>| format!(r#"{{"providers": [{}]}}"#, providers.join(","));
        let model = r#"{"id": "m", "context_window": 10, "max_output": 5}"#;
        let cases = [
            (
                "{\"providers\": [".to_owned(),
                "EOF while parsing a list at line 1 column 15",
            ),
            (
                file(vec![provider("a", r#", "base-url": "y""#)]),
                "unknown field `base-url`",
            ),
            (
                file(vec![provider(
                    "a",
                    r#", "models": [{"id": "m", "context_window": 10}]"#,
                )]),
                "missing field `max_output`",
            ),
            (
                file(vec![provider("a", ""), provider("a", "")]),
                "provider `a` is listed twice",
            ),
            (
                file(vec![provider(
                    "a",
                    &format!(r#", "models": [{model}, {model}]"#),
                )]),
                "provider `a` lists model `m` twice",
            ),
            (
                file(vec![provider("a", r#", "models_of": "b""#)]),
                "provider `a` takes the models of `b`, which is not listed",
            ),
            (
                file(vec![
                    provider("a", r#", "models_of": "b""#),
                    provider("b", r#", "models_of": "c""#),
                    provider("c", ""),
                ]),
                "provider `a` takes the models of `b`, which takes another's itself",
            ),
            (
                file(vec![
                    provider("a", &format!(r#", "models": [{model}], "models_of": "b""#)),
                    provider("b", ""),
                ]),
                "provider `a` has both `models` and `models_of`",
            ),
        ];
        for (text, wanted) in cases {
            let error = parse(&text).unwrap_err();
            assert!(error.contains(wanted), "{text}: {error}");
        }
    }

    #[test]
    fn models_of_shares_another_providers_models() {
        let text = r#"{"providers": [
            {"name": "b", "api": "openai-completions", "base_url": "https://b", "models_of": "a"},
            {"name": "a", "api": "anthropic-messages", "base_url": "https://a", "api_key_env": "A_KEY",
             "models": [{"id": "m", "context_window": 10, "max_output": 5,
                         "prices": {"input": 1.5, "output": 2.0, "cache_read": 0.1, "cache_write": 0.0},
                         "capabilities": {"reasoning": true, "thinking_levels": ["low"]}}]}
        ]}"#;
        let providers = parse(text).unwrap();
        let a = &providers["a"];
        let b = &providers["b"];
        assert_eq!(b.models, a.models);
        assert_eq!(
            (b.api, b.base_url.as_str(), b.api_key_env.as_deref()),
            (Api::OpenAiCompletions, "https://b", None)
        );
        assert_eq!(
            a.models["m"],
            ModelInfo {
                context_window: 10,
                max_output: 5,
                prices: Prices {
                    input: 1.5,
                    output: 2.0,
                    cache_read: 0.1,
                    cache_write: 0.0,
                },
                capabilities: Capabilities {
                    tools: true,
                    images: false,
                    reasoning: true,
                    thinking_levels: vec![crate::request::ThinkingLevel::Low],
                },
            }
        );
    }
}
