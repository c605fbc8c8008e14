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
    /// A line for the end of the system prompt naming what is held back, so the model can
    /// ask for it by name (the prompt and reminders name `todowrite`, for one).
    pub note: Option<String>,
    /// Estimated tokens of the system prompt (with the note) and the offered tools.
    pub fixed: u64,
}

/// The model's limits and the configured reserve and safety margin: what its budget is
/// made from, for any window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The output limit O.
    pub output: u64,
    /// `context.reserve_tokens`, when set.
    pub reserve: Option<u64>,
    /// `context.safety_tokens`, when set.
    pub safety: Option<u64>,
}

impl Limits {
    /// Output limit `output`, reserve and safety scaled to the window.
    pub fn scaled(output: u64) -> Self {
        Self {
            output,
            reserve: None,
            safety: None,
        }
    }

    /// The limits of `spec`'s model with the reserve and safety margin of `context`: the
    /// one place a model's budget is made from, for the manager, the view and the lean
    /// request alike.
    pub fn of(spec: &keel_llm::ModelSpec, context: &crate::settings::ContextConfig) -> Self {
        Self {
            output: u64::from(spec.max_output),
            reserve: context.reserve_tokens,
            safety: context.safety_tokens,
        }
    }

    /// The budget of a `window`-token window.
    pub fn budget(self, window: u64) -> Budget {
        Budget::configured(window, self.output, self.reserve, self.safety)
    }

    /// Whether a fixed part of `fixed` tokens fits a quarter of `window` and leaves a step
    /// of room under its input limit.
    pub fn holds(self, fixed: u64, window: u64) -> bool {
        window > 0
            && fixed <= fixed_limit(window)
            && fixed + STEP_TOKENS <= self.budget(window).input_limit
    }
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

/// The smallest window, in steps of 256 tokens, that holds a fixed part of `fixed` tokens
/// (see [`Limits::holds`]).
pub fn smallest_window(fixed: u64, limits: Limits) -> u64 {
    let mut c = fixed.saturating_mul(4).max(1_024).next_multiple_of(256);
    while !limits.holds(fixed, c) && c < (1 << 24) {
        c += 256;
    }
    c
}

/// What the turn must keep and may hold back.
pub struct Room<'a> {
    /// Where held-back tools wait (`None` where the turn's tools cannot grow, such as a task
    /// limited to a fixed list).
    pub deferred: Option<&'a Arc<crate::deferred::Deferred>>,
    /// Tools to keep offered while anything else can be held: the session found them, or
    /// the user asked for them to stay (`mcp.disclosure.always_expose`). Asked for only
    /// when something must be held back.
    pub keep: &'a dyn Fn() -> BTreeSet<String>,
    /// Called with the name of each held tool the model finds.
    pub remember: crate::deferred::Remember,
}

/// The line naming what `held` holds back.
fn note(held: &[String]) -> String {
    format!(
        "To save context, these tools are not listed; call tool_search with \
         `select:NAME` to use one: {}.",
        held.join(", ")
    )
}

/// Fits `tools` beside `system_prompt` into a quarter of `window`.
pub fn fit(
    system_prompt: &str,
    tools: Vec<ToolRef>,
    window: u64,
    limits: Limits,
    room: Room<'_>,
) -> Result<Fitted, TooSmall> {
    let system = system_size(system_prompt).tokens;
    let size = |t: &ToolRef| tools_size(std::slice::from_ref(t.definition())).tokens;
    let limit = fixed_limit(window);
    let fixed = system + tools.iter().map(size).sum::<u64>();
    // An unknown window (0) is not judged.
    if window == 0 || fixed <= limit {
        return Ok(Fitted {
            tools,
            shortened: false,
            held: Vec::new(),
            note: None,
            fixed,
        });
    }
    let mut tools: Vec<ToolRef> = tools.into_iter().map(Short::wrap).collect();
    // What the smallest window would hold back: everything past the core.
    let past_core: Vec<String> = tools
        .iter()
        .map(|t| t.definition().name.clone())
        .filter(|name| !CORE.contains(&name.as_str()))
        .collect();
    let mut held: Vec<String> = Vec::new();
    let mut fixed = system + tools.iter().map(size).sum::<u64>();
    if let Some(deferred) = room.deferred.filter(|_| fixed > limit) {
        let already = tools.iter().any(|t| t.definition().name == TOOL_SEARCH);
        let search = if already {
            0
        } else {
            tools_size(&[crate::deferred::search_definition()]).tokens
        };
        // Past the core, the largest first; what the session found or the user keeps, only
        // when nothing else is left.
        let keep = (room.keep)();
        let mut order: Vec<(bool, u64, usize)> = tools
            .iter()
            .enumerate()
            .filter(|(_, t)| !CORE.contains(&t.definition().name.as_str()))
            .map(|(i, t)| (keep.contains(&t.definition().name), size(t), i))
            .collect();
        order.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut chosen = BTreeSet::new();
        let mut left = fixed;
        for (_, tokens, i) in order {
            left -= tokens;
            chosen.insert(i);
            held.push(tools[i].definition().name.clone());
            let with_note = left + search + system_size(&note(&held)).tokens;
            if with_note <= limit {
                break;
            }
        }
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
        if !wait.is_empty() {
            deferred.set_lean();
            let search = deferred.hold(wait, room.remember);
            if !already {
                tools.extend(search);
            }
        }
        fixed = system + tools.iter().map(size).sum::<u64>();
        if !held.is_empty() {
            fixed += system_size(&note(&held)).tokens;
        }
    }
    if !limits.holds(fixed, window) {
        // The window that works offers the core tools alone, with `tool_search` when there
        // is anything to hold back.
        let floor = match room.deferred {
            Some(_) => lean_floor(&tools, system, &past_core),
            None => fixed,
        };
        return Err(TooSmall {
            window,
            fixed: floor,
            smallest: smallest_window(floor, limits),
            hint: String::new(),
        });
    }
    let note = (!held.is_empty()).then(|| note(&held));
    Ok(Fitted {
        tools,
        shortened: true,
        held,
        note,
        fixed,
    })
}

/// Estimated tokens of the leanest request over `system_prompt`: keel's core tools
/// shortened and `tool_search`, as a turn in the smallest window offers them.
pub fn core_floor(system_prompt: &str, cwd: &std::path::Path) -> u64 {
    let env = Arc::new(keel_tools::ToolEnv::new(cwd));
    let tools: Vec<ToolRef> = keel_tools::builtin_tools(env)
        .into_iter()
        .map(Short::wrap)
        .collect();
    let past_core: Vec<String> = tools
        .iter()
        .map(|t| t.definition().name.clone())
        .filter(|name| !CORE.contains(&name.as_str()))
        .collect();
    lean_floor(&tools, system_size(system_prompt).tokens, &past_core)
}

/// At start: the refusal a turn of a model with `window` and `limits` would meet over
/// `system_prompt`, so it can be said before anything is typed.
pub fn check(
    system_prompt: &str,
    cwd: &std::path::Path,
    window: u64,
    limits: Limits,
    provider: &str,
) -> Option<TooSmall> {
    // Unknown (0), or far from small: keel's core tools are under 1,000 tokens.
    if window == 0 || fixed_limit(window) >= system_size(system_prompt).tokens + 4_000 {
        return None;
    }
    let fixed = core_floor(system_prompt, cwd);
    (!limits.holds(fixed, window)).then(|| {
        TooSmall {
            window,
            fixed,
            smallest: smallest_window(fixed, limits),
            hint: String::new(),
        }
        .for_provider(provider)
    })
}

/// The fixed part of the system prompt and the core tools alone, with `tool_search` and the
/// line naming the rest (`past_core`) when there is any.
fn lean_floor(tools: &[ToolRef], system: u64, past_core: &[String]) -> u64 {
    let mut core: Vec<ToolDefinition> = tools
        .iter()
        .filter(|t| CORE.contains(&t.definition().name.as_str()))
        .map(|t| t.definition().clone())
        .collect();
    if past_core.is_empty() {
        return system + tools_size(&core).tokens;
    }
    if !core.iter().any(|d| d.name == TOOL_SEARCH) {
        core.push(crate::deferred::search_definition());
    }
    system + tools_size(&core).tokens + system_size(&note(past_core)).tokens
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

    fn room<'a>(
        deferred: Option<&'a Arc<crate::deferred::Deferred>>,
        keep: &'a dyn Fn() -> BTreeSet<String>,
    ) -> Room<'a> {
        Room {
            deferred,
            keep,
            remember: Arc::new(|_: &str| {}),
        }
    }

    fn fit_in(window: u64) -> Result<Fitted, TooSmall> {
        let (prompt, tools) = builtins();
        let deferred = deferred();
        fit(
            &prompt,
            tools,
            window,
            Limits::scaled(4_096),
            room(Some(&deferred), &BTreeSet::new),
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
        let limits = Limits::scaled(4_096);
        let here = Path::new("/work/project");
        let told = check(&prompt, here, 4_096, limits, "ollama").unwrap();
        assert_eq!(told.smallest, refused.smallest);
        assert!(told.to_string().contains("OLLAMA_CONTEXT_LENGTH"), "{told}");
        // Every window a turn accepts, the start check accepts, and no other.
        for window in (4_096..told.smallest + 512).step_by(64) {
            assert_eq!(
                check(&prompt, here, window, limits, "x").is_none(),
                fit_in(window).is_ok(),
                "window {window}"
            );
        }
        assert!(check(&prompt, here, 200_000, limits, "x").is_none());
        assert!(check(&prompt, here, 0, limits, "x").is_none());
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
        let deferred = deferred();
        let fitted = fit(
            &prompt,
            tools.clone(),
            200_000,
            Limits::scaled(4_096),
            room(Some(&deferred), &BTreeSet::new),
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
        let first = deferred();
        let fitted = fit(
            &prompt,
            tools.clone(),
            8_192,
            Limits::scaled(4_096),
            room(Some(&first), &|| found.clone()),
        )
        .unwrap();
        assert!(names(&fitted.tools).contains(&"grep".to_owned()));
        assert!(!fitted.held.contains(&"grep".to_owned()));
        // Near the floor it is held after all rather than the window refused.
        let smallest = fit_in(4_096).err().unwrap().smallest;
        let second = deferred();
        let fitted = fit(
            &prompt,
            tools,
            smallest,
            Limits::scaled(4_096),
            room(Some(&second), &|| found.clone()),
        )
        .unwrap();
        assert!(
            fitted.held.contains(&"grep".to_owned()),
            "{:?}",
            fitted.held
        );
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
            Limits::scaled(4_096),
            room(None, &BTreeSet::new),
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
            let window = smallest_window(floor, Limits::scaled(output)) + extra;
            let budget = Budget::new(window, output);
            prop_assert!(budget.input_limit >= floor + STEP_TOKENS, "{budget:?}");
            prop_assert!(budget.compact_at <= budget.input_limit, "{budget:?}");
            prop_assert!(floor <= fixed_limit(window));
        }
    }
}
