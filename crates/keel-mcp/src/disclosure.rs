//! Deferred disclosure's decision (DESIGN §11): after the switch, the model allow-list and
//! the active window, the size of all MCP tool descriptions against a share of the window.

use keel_agent::ToolRef;
use keel_runtime::settings::extend::DisclosureConfig;
use keel_runtime::settings::model_matches;
use serde_json::{Value, json};

/// Bytes of JSON per token, for estimating what a definition costs (tool schemas are
/// mostly ASCII words and punctuation).
const BYTES_PER_TOKEN: usize = 4;

/// What the policy decided for a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Whether eligible tools move behind `tool_search`.
    pub deferred: bool,
    /// Why, in a few words.
    pub reason: &'static str,
    /// The estimated tokens of every MCP tool definition.
    pub tokens: usize,
    /// The tokens the threshold allows.
    pub limit: usize,
    /// MCP tools in all.
    pub tools: usize,
}

impl Decision {
    /// The decision as an `extension.event`'s details.
    pub fn details(&self) -> Value {
        json!({
            "deferred": self.deferred,
            "reason": self.reason,
            "estimated_tokens": self.tokens,
            "threshold_tokens": self.limit,
            "mcp_tools": self.tools,
        })
    }
}

/// The estimated tokens of `tool`'s definition as sent.
pub fn estimate(tool: &ToolRef) -> usize {
    let d = tool.definition();
    let bytes = d.name.len() + d.description.len() + d.parameters.to_string().len() + 16;
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// Decides for `model` with `window` tokens of context and the MCP `tools` a turn would
/// offer.
pub fn decide(config: &DisclosureConfig, model: &str, window: u32, tools: &[ToolRef]) -> Decision {
    let tokens: usize = tools.iter().map(estimate).sum();
    let window = usize::try_from(window).unwrap_or(usize::MAX);
    let limit = if config.threshold.is_finite() && config.threshold > 0.0 {
        (window as f64 * config.threshold) as usize
    } else {
        0
    };
    let decision = |deferred, reason| Decision {
        deferred,
        reason,
        tokens,
        limit,
        tools: tools.len(),
    };
    if !config.enabled {
        return decision(false, "disclosure is switched off");
    }
    if !model_matches(&config.models, model) {
        return decision(false, "the model is not on the disclosure list");
    }
    if window == 0 {
        return decision(false, "the model's window is unknown");
    }
    if tokens <= limit {
        return decision(false, "the descriptions fit under the threshold");
    }
    decision(true, "the descriptions pass the threshold")
}

/// Whether `name` is configured to stay offered directly.
pub fn always_exposed(config: &DisclosureConfig, name: &str) -> bool {
    model_matches(&config.always_expose, name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    struct Fake(keel_protocol::ToolDefinition);

    #[async_trait::async_trait]
    impl keel_agent::AgentTool for Fake {
        fn definition(&self) -> &keel_protocol::ToolDefinition {
            &self.0
        }
        async fn execute(
            &self,
            _: Value,
            _: keel_agent::ToolCallContext,
        ) -> Result<keel_agent::ToolOutput, keel_agent::ToolError> {
            Ok(keel_agent::ToolOutput::text(""))
        }
    }

    fn tools(n: usize, description: usize) -> Vec<ToolRef> {
        (0..n)
            .map(|i| {
                Arc::new(Fake(keel_protocol::ToolDefinition {
                    name: format!("mcp__s__tool_{i:03}"),
                    description: "w".repeat(description),
                    parameters: json!({"type": "object", "properties": {"value": {"type": "string"}}}),
                })) as ToolRef
            })
            .collect()
    }

    #[test]
    fn a_large_catalog_is_deferred_and_a_small_one_is_not() {
        let config = DisclosureConfig::default();
        let many = decide(&config, "openai/gpt-x", 64_000, &tools(120, 300));
        assert!(many.deferred, "{many:?}");
        assert_eq!(many.limit, 9_600);
        let few = decide(&config, "openai/gpt-x", 64_000, &tools(5, 300));
        assert!(!few.deferred);
        let off = DisclosureConfig {
            enabled: false,
            ..DisclosureConfig::default()
        };
        assert!(!decide(&off, "m", 64_000, &tools(120, 300)).deferred);
        let listed = DisclosureConfig {
            models: vec!["anthropic/*".into()],
            ..DisclosureConfig::default()
        };
        assert!(!decide(&listed, "openai/gpt-x", 64_000, &tools(120, 300)).deferred);
        assert!(decide(&listed, "anthropic/claude", 64_000, &tools(120, 300)).deferred);
        assert!(!decide(&config, "m", 0, &tools(120, 300)).deferred);
    }
}
