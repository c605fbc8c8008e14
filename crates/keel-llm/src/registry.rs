//! Provider presets and the model registry.
//!
//! Built in (the data file `models.json`, read by [`presets`]): MiniMax (Anthropic- and OpenAI-compatible endpoints, global and China
//! regions), Anthropic, OpenAI, Google Gemini, OpenRouter, DeepSeek, Mistral, and local
//! OpenAI-compatible servers (Ollama, llama.cpp, vLLM, LM Studio; no key). Users add or
//! override providers and models through [`RegistryConfig`]. A model the registry does not
//! know still works, with a 200,000-token window and 16,384 output tokens, and a warning.
//! Prices are US dollars per million tokens as published by each provider; they change,
//! which is why every field can be overridden.

mod presets;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Api, Capabilities, Compat, ModelEntry, Prices};

/// Context window assumed for a model the registry does not know.
pub const UNKNOWN_CONTEXT_WINDOW: u32 = 200_000;
/// Output limit assumed for a model the registry does not know.
pub const UNKNOWN_MAX_OUTPUT: u32 = 16_384;

/// A provider: how to reach it and the models it offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// Wire API.
    pub api: Api,
    /// Base URL.
    pub base_url: String,
    /// Environment variable holding the API key; `None` for servers that need none.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Quirks for OpenAI-compatible servers.
    #[serde(default)]
    pub compat: Compat,
    /// Headers sent with every request.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Known models by id.
    #[serde(default)]
    pub models: BTreeMap<String, ModelInfo>,
}

/// What the registry knows about one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// Context window.
    pub context_window: u32,
    /// Output limit.
    pub max_output: u32,
    /// Prices.
    #[serde(default)]
    pub prices: Prices,
    /// Capabilities.
    #[serde(default)]
    pub capabilities: Capabilities,
}

/// User configuration: providers and models to add or override. Fields left out keep the
/// built-in values.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// Providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderOverride>,
}

/// Changes to one provider.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderOverride {
    /// Wire API (required for a new provider).
    #[serde(default)]
    pub api: Option<Api>,
    /// Base URL (required for a new provider).
    #[serde(default)]
    pub base_url: Option<String>,
    /// Key variable.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Quirks.
    #[serde(default)]
    pub compat: Option<Compat>,
    /// Extra headers.
    #[serde(default)]
    pub headers: Option<Vec<(String, String)>>,
    /// Models to add or replace.
    #[serde(default)]
    pub models: BTreeMap<String, ModelInfo>,
}

/// A registry lookup or configuration failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No such provider.
    #[error("unknown provider `{name}`; known providers: {known}")]
    UnknownProvider {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
    },
    /// A configured provider lacks what a new provider needs.
    #[error("provider `{name}` is new, so its configuration needs `{field}`")]
    Incomplete {
        /// Provider.
        name: String,
        /// Missing field.
        field: &'static str,
    },
    /// The presets built into keel do not read (a defect of the build, not of any input).
    #[error(
        "keel's built-in provider presets (models.json) are damaged, which is a bug in keel: {reason}"
    )]
    Presets {
        /// What is wrong with them.
        reason: String,
    },
}

impl RegistryError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownProvider { .. } => "unknown_provider",
            Self::Incomplete { .. } => "incomplete_provider",
            Self::Presets { .. } => "presets_damaged",
        }
    }
}

/// The result of resolving a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The model.
    pub entry: ModelEntry,
    /// Key variable to read.
    pub api_key_env: Option<String>,
    /// Set when the model was unknown and defaults were assumed.
    pub warning: Option<String>,
}

/// Providers and their models.
#[derive(Debug, Clone, PartialEq)]
pub struct Registry {
    providers: BTreeMap<String, Provider>,
}

impl Registry {
    /// The built-in presets.
    pub fn builtin() -> Result<Self, RegistryError> {
        let providers = presets::builtin().map_err(|reason| RegistryError::Presets {
            reason: reason.to_owned(),
        })?;
        Ok(Self {
            providers: providers.clone(),
        })
    }

    /// Applies user configuration on top.
    pub fn apply(&mut self, config: RegistryConfig) -> Result<(), RegistryError> {
        for (name, change) in config.providers {
            let provider = match self.providers.remove(&name) {
                Some(mut provider) => {
                    if let Some(api) = change.api {
                        provider.api = api;
                    }
                    if let Some(url) = change.base_url {
                        provider.base_url = url;
                    }
                    if change.api_key_env.is_some() {
                        provider.api_key_env = change.api_key_env;
                    }
                    if let Some(compat) = change.compat {
                        provider.compat = compat;
                    }
                    if let Some(headers) = change.headers {
                        provider.headers = headers;
                    }
                    provider.models.extend(change.models);
                    provider
                }
                None => Provider {
                    api: change.api.ok_or(RegistryError::Incomplete {
                        name: name.clone(),
                        field: "api",
                    })?,
                    base_url: change.base_url.ok_or(RegistryError::Incomplete {
                        name: name.clone(),
                        field: "base_url",
                    })?,
                    api_key_env: change.api_key_env,
                    compat: change.compat.unwrap_or_default(),
                    headers: change.headers.unwrap_or_default(),
                    models: change.models,
                },
            };
            self.providers.insert(name, provider);
        }
        Ok(())
    }

    /// Names of all providers.
    pub fn providers(&self) -> impl Iterator<Item = (&str, &Provider)> {
        self.providers.iter().map(|(name, p)| (name.as_str(), p))
    }

    /// The model `id` of `provider`. An unknown model id gets default limits and a warning.
    pub fn resolve(&self, provider: &str, id: &str) -> Result<Resolved, RegistryError> {
        let Some(p) = self.providers.get(provider) else {
            let known = self
                .providers
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            return Err(RegistryError::UnknownProvider {
                name: provider.to_owned(),
                known,
            });
        };
        let (info, warning) = match p.models.get(id) {
            Some(info) => (info.clone(), None),
            None => (
                ModelInfo {
                    context_window: UNKNOWN_CONTEXT_WINDOW,
                    max_output: UNKNOWN_MAX_OUTPUT,
                    prices: Prices::default(),
                    capabilities: Capabilities {
                        images: true,
                        ..Capabilities::default()
                    },
                },
                Some(format!(
                    "model `{id}` is not in the registry for provider `{provider}`; assuming a {UNKNOWN_CONTEXT_WINDOW}-token context window and {UNKNOWN_MAX_OUTPUT} output tokens (set them in config)"
                )),
            ),
        };
        let entry = ModelEntry {
            provider: provider.to_owned(),
            id: id.to_owned(),
            api: p.api,
            base_url: p.base_url.clone(),
            context_window: info.context_window,
            max_output: info.max_output,
            prices: info.prices,
            capabilities: info.capabilities,
            compat: p.compat.clone(),
            headers: p.headers.clone(),
        };
        Ok(Resolved {
            entry,
            api_key_env: p.api_key_env.clone(),
            warning,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn every_required_provider_is_built_in() {
        let registry = Registry::builtin().unwrap();
        let names: Vec<&str> = registry.providers().map(|(n, _)| n).collect();
        for wanted in [
            "minimax",
            "minimax-cn",
            "minimax-openai",
            "minimax-openai-cn",
            "anthropic",
            "openai",
            "google",
            "openrouter",
            "deepseek",
            "mistral",
            "ollama",
            "llamacpp",
            "vllm",
            "lmstudio",
        ] {
            assert!(names.contains(&wanted), "{wanted} missing");
        }
        let m3 = registry.resolve("minimax", "MiniMax-M3").unwrap();
        assert_eq!(m3.entry.api, Api::AnthropicMessages);
        assert!(m3.warning.is_none());
        let cn = registry
            .resolve("minimax-openai-cn", "MiniMax-M2.7")
            .unwrap();
        assert!(cn.entry.compat.reasoning_split);
        assert_eq!(cn.entry.base_url, "https://api.minimaxi.com/v1");
        assert_eq!(
            registry.resolve("ollama", "qwen3:8b").unwrap().api_key_env,
            None
        );
    }

    #[test]
    fn unknown_models_get_defaults_and_a_warning() {
        let resolved = Registry::builtin()
            .unwrap()
            .resolve("anthropic", "claude-next")
            .unwrap();
        assert_eq!(resolved.entry.context_window, 200_000);
        assert_eq!(resolved.entry.max_output, 16_384);
        assert!(resolved.warning.unwrap().contains("claude-next"));
    }

    #[test]
    fn config_overrides_and_adds_providers() {
        let mut registry = Registry::builtin().unwrap();
        let config: RegistryConfig = serde_json::from_value(json!({
            "providers": {
                "anthropic": {"base_url": "http://127.0.0.1:9/proxy",
                              "models": {"claude-sonnet-4-5": {"context_window": 1000000, "max_output": 64000}}},
                "corp": {"api": "openai-completions", "base_url": "https://llm.corp/v1", "api_key_env": "CORP_KEY",
                         "models": {"coder": {"context_window": 32768, "max_output": 4096}}}
            }
        }))
        .unwrap();
        registry.apply(config).unwrap();
        let sonnet = registry
            .resolve("anthropic", "claude-sonnet-4-5")
            .unwrap()
            .entry;
        assert_eq!(
            (sonnet.base_url.as_str(), sonnet.context_window),
            ("http://127.0.0.1:9/proxy", 1_000_000)
        );
        let corp = registry.resolve("corp", "coder").unwrap();
        assert_eq!(corp.api_key_env.as_deref(), Some("CORP_KEY"));
        let err = registry
            .apply(
                serde_json::from_value(json!({"providers": {"x": {"base_url": "http://x"}}}))
                    .unwrap(),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "provider `x` is new, so its configuration needs `api`"
        );
        let err = registry.resolve("nope", "m").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown provider `nope`; known providers: anthropic")
        );
    }

    /// Every built-in preset, one line per provider and one per model, each line the
    /// compact JSON of all its fields.
    fn listing(registry: &Registry) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, provider) in registry.providers() {
            let mut fields = serde_json::to_value(provider).unwrap();
            fields.as_object_mut().unwrap().remove("models");
            // Canonical: the recorded lines sort keys, whatever order the build's maps keep.
            lines.push(format!(
                "{name} {}",
                keel_protocol::canonical::string(&fields)
            ));
            for (id, info) in &provider.models {
                lines.push(format!(
                    "{name}/{id} {}",
                    keel_protocol::canonical::string(&serde_json::to_value(info).unwrap())
                ));
            }
        }
        lines
    }

    /// The presets as they stood when they were written as code (`registry_presets.txt` was
    /// captured from it): the data file must give exactly these, every field of every
    /// provider and model. A deliberate change to a preset changes both files.
    #[test]
    fn the_builtin_presets_are_exactly_the_recorded_ones() {
        let recorded: Vec<&str> = include_str!("registry_presets.txt").lines().collect();
        assert_eq!(listing(&Registry::builtin().unwrap()), recorded);
    }

    #[test]
    fn a_typo_in_config_is_named() {
        let err =
            serde_json::from_value::<RegistryConfig>(json!({"providers": {"a": {"baseurl": "x"}}}))
                .unwrap_err();
        assert!(err.to_string().contains("baseurl"), "{err}");
    }
}
