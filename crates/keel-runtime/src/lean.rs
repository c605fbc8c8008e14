//! The lean request of a small window (DESIGN §12): the system prompt and tool definitions
//! may take at most a quarter of the window. When the whole set passes that, the tools are
//! offered with shorter descriptions; when that still passes it, the largest tools past the
//! core ones wait behind the turn's `tool_search`, by their measured size. A window too
//! small even for the core is refused before any request, naming the smallest that works.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::{
    AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput, ToolRef,
};
use keel_llm::budget::Budget;
use keel_llm::measure::{system_size, tools_size};
use keel_protocol::ToolDefinition;
use serde_json::Value;

use crate::deferred::TOOL_SEARCH;

/// The source of the lean request's event.
pub const LEAN: &str = "host.lean";

/// Tools a lean request always offers: enough to read, change and run code.
pub const CORE: &[&str] = &["read", "edit", "write", "bash", TOOL_SEARCH];

/// Tokens one step needs past the fixed part: the model's answer with a tool call and a
/// short result.
pub const STEP_TOKENS: u64 = 1_024;

/// The share of the window the fixed part may take: a quarter.
pub fn fixed_limit(window: u64) -> u64 {
    window / 4
}

/// What [`fit`] made of a turn's tools.
pub struct Fitted {
    /// The tools to offer.
    pub tools: Vec<ToolRef>,
    /// Whether descriptions were shortened.
    pub shortened: bool,
    /// Tools held back behind `tool_search`, largest first.
    pub held: Vec<String>,
    /// Estimated tokens of the system prompt and offered tools.
    pub fixed: u64,
}

/// A window too small for the lean request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the model's {window}-token window is too small: the system prompt (with any project \
     and user instructions) and keel's core tools are about {fixed} tokens, and they may take \
     a quarter of the window with room left for a step; use a model whose window is at least \
     {smallest} tokens, or set a larger context_window for it if it has one{hint}"
)]
pub struct TooSmall {
    /// The model's window.
    pub window: u64,
    /// The lean fixed part.
    pub fixed: u64,
    /// The smallest window that works.
    pub smallest: u64,
    /// How to give this model a larger window, where keel knows (a local server).
    pub hint: String,
}

impl TooSmall {
    /// The refusal ahead of time, in one short sentence: a turn gives the whole reason.
    pub fn warning(&self) -> String {
        format!(
            "the model's {}-token window is too small for keel, which needs at least {} \
             tokens: its turns will be refused until another model is chosen{}",
            self.window, self.smallest, self.hint
        )
    }

    /// The same refusal with how `provider`'s server gives a model a larger window.
    pub fn for_provider(mut self, provider: &str) -> Self {
        self.hint = match provider {
            "ollama" => format!(
                " (Ollama: restart the server with OLLAMA_CONTEXT_LENGTH={} or more, or set \
                 the model's num_ctx, then load the model again)",
                self.smallest.next_multiple_of(1024)
            ),
            "lmstudio" => format!(
                " (LM Studio: load the model again with a context length of {} or more)",
                self.smallest.next_multiple_of(1024)
            ),
            _ => String::new(),
        };
        self
    }
}

/// The smallest window whose budget holds a fixed part of `fixed` tokens in a quarter of
/// it and leaves a step of room under the input limit, for output limit `output`.
pub fn smallest_window(fixed: u64, output: u64) -> u64 {
    let works = |c: u64| {
        fixed <= fixed_limit(c) && fixed + STEP_TOKENS <= Budget::new(c, output).input_limit
    };
    let mut c = (fixed.saturating_mul(4)).max(1_024).next_multiple_of(256);
    while !works(c) && c < (1 << 24) {
        c += 256;
    }
    c
}

/// Fits `tools` beside `system_prompt` into a quarter of `window`. `deferred` holds what
/// waits behind `tool_search` (`None` where the turn's tools cannot grow, such as a task
/// limited to a fixed list); `found` names tools the session already found and
/// `remember` records a new find.
pub fn fit(
    system_prompt: &str,
    tools: Vec<ToolRef>,
    window: u64,
    output: u64,
    deferred: Option<&Arc<crate::deferred::Deferred>>,
    found: &BTreeSet<String>,
    remember: crate::deferred::Remember,
) -> Result<Fitted, TooSmall> {
    let system = system_size(system_prompt).tokens;
    let measure = |tools: &[ToolRef]| {
        let definitions: Vec<ToolDefinition> =
            tools.iter().map(|t| t.definition().clone()).collect();
        system + tools_size(&definitions).tokens
    };
    let limit = fixed_limit(window);
    let fixed = measure(&tools);
    if window == 0 || fixed <= limit {
        return Ok(Fitted {
            tools,
            shortened: false,
            held: Vec::new(),
            fixed,
        });
    }
    let mut tools: Vec<ToolRef> = tools.into_iter().map(Short::wrap).collect();
    let mut fixed = measure(&tools);
    let mut held = Vec::new();
    if let Some(deferred) = deferred.filter(|_| fixed > limit) {
        // The search tool is part of what is offered once anything is held back.
        let over = (fixed + SEARCH_TOKENS).saturating_sub(limit);
        let chosen = largest_past_core(&tools, found, over, |t| {
            measure(std::slice::from_ref(t)) - system
        });
        let mut wait = Vec::new();
        tools = tools
            .into_iter()
            .enumerate()
            .filter_map(|(i, t)| {
                if chosen.contains(&i) {
                    wait.push(t);
                    None
                } else {
                    Some(t)
                }
            })
            .collect();
        held = wait.iter().map(|t| t.definition().name.clone()).collect();
        let already = tools.iter().any(|t| t.definition().name == TOOL_SEARCH);
        let search = deferred.hold(wait, remember);
        if !already {
            tools.extend(search);
        }
        fixed = measure(&tools);
    }
    if fixed > limit || fixed + STEP_TOKENS > Budget::new(window, output).input_limit {
        // The window that works offers the core tools alone (and `tool_search` when there
        // is anything to hold back).
        let floor = match deferred {
            Some(_) => lean_floor(&tools, system),
            None => fixed,
        };
        return Err(TooSmall {
            window,
            fixed: floor,
            smallest: smallest_window(floor, output),
            hint: String::new(),
        });
    }
    Ok(Fitted {
        tools,
        shortened: true,
        held,
        fixed,
    })
}

/// About what `tool_search`'s own definition costs, once anything is held back.
const SEARCH_TOKENS: u64 = 200;

/// Indexes of the tools to hold back to save `over` tokens: the largest first (by `size`),
/// never a core tool or one the session found.
fn largest_past_core(
    tools: &[ToolRef],
    found: &BTreeSet<String>,
    over: u64,
    size: impl Fn(&ToolRef) -> u64,
) -> BTreeSet<usize> {
    let mut candidates: Vec<(u64, usize)> = tools
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            let name = &t.definition().name;
            !CORE.contains(&name.as_str()) && !found.contains(name)
        })
        .map(|(i, t)| (size(t), i))
        .collect();
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut left = over;
    let mut chosen = BTreeSet::new();
    for (tokens, i) in candidates {
        if left == 0 {
            break;
        }
        left = left.saturating_sub(tokens);
        chosen.insert(i);
    }
    chosen
}

/// Estimated tokens of the leanest request over `system_prompt`: keel's core tools
/// shortened and `tool_search`, as a turn in the smallest window offers them.
pub fn core_floor(system_prompt: &str, cwd: &std::path::Path) -> u64 {
    let env = Arc::new(keel_tools::ToolEnv::new(cwd));
    let mut definitions: Vec<ToolDefinition> = keel_tools::builtin_tools(env)
        .into_iter()
        .filter(|t| CORE.contains(&t.definition().name.as_str()))
        .map(|t| Short::wrap(t).definition().clone())
        .collect();
    let search = crate::deferred::ToolSearch::new(Arc::new(crate::deferred::Deferred::new(
        1,
        keel_agent::ToolAdditions::default(),
    )));
    definitions.push(search.definition().clone());
    system_size(system_prompt).tokens + tools_size(&definitions).tokens
}

/// At start: the refusal a turn of a model with `window` and `output` would meet over
/// `system_prompt`, so it can be said before anything is typed.
pub fn check(
    system_prompt: &str,
    cwd: &std::path::Path,
    window: u64,
    output: u64,
    provider: &str,
) -> Option<TooSmall> {
    // Far from small: keel's core tools are under 1,000 tokens.
    if fixed_limit(window) >= system_size(system_prompt).tokens + 4_000 {
        return None;
    }
    let fixed = core_floor(system_prompt, cwd);
    let smallest = smallest_window(fixed, output);
    (window < smallest).then(|| {
        TooSmall {
            window,
            fixed,
            smallest,
            hint: String::new(),
        }
        .for_provider(provider)
    })
}

/// The fixed part of the system prompt and the core tools alone.
fn lean_floor(tools: &[ToolRef], system: u64) -> u64 {
    let core: Vec<ToolDefinition> = tools
        .iter()
        .filter(|t| CORE.contains(&t.definition().name.as_str()))
        .map(|t| t.definition().clone())
        .collect();
    system + tools_size(&core).tokens
}

/// `text` up to the end of its first sentence.
fn first_sentence(text: &str) -> &str {
    for (at, mark) in text.match_indices(['.', '\n']) {
        if mark == "\n" {
            return text[..at].trim_end();
        }
        // A full stop ends the sentence only before a space or the end (not `a.b`).
        if text[at + 1..]
            .chars()
            .next()
            .is_none_or(char::is_whitespace)
        {
            return &text[..=at];
        }
    }
    text.trim_end()
}

/// A schema with every `description` cut to its first sentence.
fn short_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("description", Value::String(text)) => {
                            Value::String(first_sentence(text).to_owned())
                        }
                        _ => short_schema(value),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(short_schema).collect()),
        other => other.clone(),
    }
}

/// A tool offered with its short definition; everything else is the tool's own.
struct Short {
    tool: ToolRef,
    definition: ToolDefinition,
}

impl Short {
    fn wrap(tool: ToolRef) -> ToolRef {
        let full = tool.definition();
        let definition = ToolDefinition {
            name: full.name.clone(),
            description: first_sentence(&full.description).to_owned(),
            parameters: short_schema(&full.parameters),
        };
        if definition == *full {
            return tool;
        }
        Arc::new(Self { tool, definition })
    }
}

#[async_trait]
impl AgentTool for Short {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn nature(&self) -> ToolNature {
        self.tool.nature()
    }

    fn execution_mode(&self) -> ExecutionMode {
        self.tool.execution_mode()
    }

    fn mutated_path(&self, arguments: &Value) -> Option<std::path::PathBuf> {
        self.tool.mutated_path(arguments)
    }

    async fn preview(
        &self,
        call: &keel_protocol::ToolCallId,
        arguments: &Value,
    ) -> Option<keel_protocol::ToolPreview> {
        self.tool.preview(call, arguments).await
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.tool.execute(arguments, context).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

    /// keel's own system prompt for a plain folder, and every built-in tool.
    fn builtins() -> (String, Vec<ToolRef>) {
        let prompt = crate::settings::instructions::system_prompt(
            Path::new("/work/project"),
            &[],
            None,
            &crate::settings::project::Project::default(),
        );
        let env = Arc::new(keel_tools::ToolEnv::new("/work/project"));
        (prompt, keel_tools::builtin_tools(env))
    }

    fn deferred() -> Arc<crate::deferred::Deferred> {
        Arc::new(crate::deferred::Deferred::new(
            8,
            keel_agent::ToolAdditions::default(),
        ))
    }

    fn fit_in(window: u64) -> Result<Fitted, TooSmall> {
        let (prompt, tools) = builtins();
        fit(
            &prompt,
            tools,
            window,
            4_096,
            Some(&deferred()),
            &BTreeSet::new(),
            Arc::new(|_: &str| {}),
        )
    }

    fn names(tools: &[ToolRef]) -> Vec<String> {
        tools.iter().map(|t| t.definition().name.clone()).collect()
    }

    /// The fixed part of the leanest request: the system prompt, the core tools shortened
    /// and `tool_search`.
    fn lean_floor_tokens() -> u64 {
        core_floor(&builtins().0, Path::new("/work/project"))
    }

    #[test]
    fn the_start_check_agrees_with_the_turns_refusal() {
        let (prompt, _) = builtins();
        let refused = fit_in(4_096).err().unwrap();
        let told = check(&prompt, Path::new("/work/project"), 4_096, 4_096, "ollama").unwrap();
        assert_eq!(told.smallest, refused.smallest);
        assert!(told.to_string().contains("OLLAMA_CONTEXT_LENGTH"), "{told}");
        assert!(
            check(
                &prompt,
                Path::new("/work/project"),
                told.smallest,
                4_096,
                "x"
            )
            .is_none()
        );
        assert!(check(&prompt, Path::new("/work/project"), 200_000, 4_096, "x").is_none());
    }

    #[test]
    fn sentences_and_schemas_are_cut_at_the_first_full_stop() {
        assert_eq!(first_sentence("Read a file. Then more."), "Read a file.");
        assert_eq!(first_sentence("Use `a.b` here. More"), "Use `a.b` here.");
        assert_eq!(first_sentence("One line\nTwo"), "One line");
        assert_eq!(first_sentence("No stop at all"), "No stop at all");
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "A path. Relative or not."}},
            "description": "Args. Long.",
        });
        let short = short_schema(&schema);
        assert_eq!(short["properties"]["path"]["description"], "A path.");
        assert_eq!(short["description"], "Args.");
        assert_eq!(short["properties"]["path"]["type"], "string");
    }

    #[test]
    fn a_large_window_gets_the_tools_as_they_are() {
        let (prompt, tools) = builtins();
        let fitted = fit(
            &prompt,
            tools.clone(),
            200_000,
            4_096,
            Some(&deferred()),
            &BTreeSet::new(),
            Arc::new(|_: &str| {}),
        )
        .unwrap();
        assert!(!fitted.shortened);
        assert!(fitted.held.is_empty());
        assert_eq!(names(&fitted.tools), names(&tools));
        for (a, b) in fitted.tools.iter().zip(&tools) {
            assert!(Arc::ptr_eq(a, b), "the very same tools");
        }
    }

    #[test]
    fn an_8k_window_shortens_and_holds_back_the_largest_tools_past_the_core() {
        let fitted = fit_in(8_192).unwrap();
        assert!(fitted.shortened);
        assert!(fitted.fixed <= fixed_limit(8_192), "{}", fitted.fixed);
        let offered = names(&fitted.tools);
        for core in CORE {
            assert!(offered.iter().any(|n| n == core), "{core} in {offered:?}");
        }
        assert!(!fitted.held.is_empty());
        for name in &fitted.held {
            assert!(!offered.contains(name), "{name} is held and offered");
            assert!(!CORE.contains(&name.as_str()));
        }
        // Held back by size: the largest definition goes first.
        assert!(
            fitted.held.contains(&"grep".to_owned()),
            "{:?}",
            fitted.held
        );
    }

    #[test]
    fn a_tool_the_session_found_stays_offered() {
        let (prompt, tools) = builtins();
        let found: BTreeSet<String> = ["grep".to_owned()].into();
        let fitted = fit(
            &prompt,
            tools,
            8_192,
            4_096,
            Some(&deferred()),
            &found,
            Arc::new(|_: &str| {}),
        )
        .unwrap();
        assert!(names(&fitted.tools).contains(&"grep".to_owned()));
        assert!(!fitted.held.contains(&"grep".to_owned()));
    }

    #[test]
    fn a_window_too_small_for_the_core_names_the_smallest_that_works() {
        let error = fit_in(4_096).err().unwrap();
        assert_eq!(error.window, 4_096);
        assert!(error.smallest > 4_096, "{error}");
        let works = fit_in(error.smallest).unwrap();
        assert!(works.fixed <= fixed_limit(error.smallest));
        assert!(fit_in(error.smallest - 256).is_err(), "{error}");
        assert!(
            error.to_string().contains(&error.smallest.to_string()),
            "{error}"
        );
    }

    #[test]
    fn without_room_to_grow_nothing_is_held_back() {
        let (prompt, tools) = builtins();
        let error = fit(
            &prompt,
            tools,
            8_192,
            4_096,
            None,
            &BTreeSet::new(),
            Arc::new(|_: &str| {}),
        )
        .err()
        .unwrap();
        assert!(error.smallest > 8_192, "{error}");
    }

    proptest! {
        /// For every window from the smallest that works and any output limit, the input
        /// limit holds the leanest fixed part and a step, and compaction starts within it.
        #[test]
        fn every_working_window_holds_the_lean_request_and_a_step(
            extra in 0u64..4_000_000,
            output in 1u64..1_000_000,
        ) {
            let floor = lean_floor_tokens();
            let window = smallest_window(floor, output) + extra;
            let budget = Budget::new(window, output);
            prop_assert!(budget.input_limit >= floor + STEP_TOKENS, "{budget:?}");
            prop_assert!(budget.compact_at <= budget.input_limit, "{budget:?}");
            prop_assert!(floor <= fixed_limit(window));
        }
    }
}
