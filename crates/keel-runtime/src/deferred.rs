//! Deferred disclosure's discovery step (DESIGN §11): a BM25 index over the held-back tools'
//! names and descriptions, and the `tool_search` tool, which makes what it finds callable
//! from the turn's next model call. MCP servers' tools and a small window's built-in tools
//! share one index a turn.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::{
    AgentTool, ToolAdditions, ToolCallContext, ToolError, ToolNature, ToolOutput, ToolRef,
};
use keel_protocol::ToolDefinition;
use keel_tools::args::{self, Int};
use serde_json::{Value, json};

/// The search tool's name.
pub const TOOL_SEARCH: &str = "tool_search";

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words of a text for the index: lower-case runs of letters and digits, with names split
/// at `_`, `-` and case changes (`getWeather` → `get`, `weather`).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            current.extend(c.to_lowercase());
        } else {
            previous_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A BM25 index over documents.
#[derive(Default)]
pub struct Index {
    documents: Vec<HashMap<String, usize>>,
    lengths: Vec<usize>,
    frequency: HashMap<String, usize>,
    average: f64,
}

impl Index {
    /// Indexes `texts`, one document each.
    pub fn new<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut documents = Vec::new();
        let mut lengths = Vec::new();
        let mut frequency: HashMap<String, usize> = HashMap::new();
        for text in texts {
            let mut counts: HashMap<String, usize> = HashMap::new();
            let words = words(text);
            lengths.push(words.len());
            for word in words {
                *counts.entry(word).or_default() += 1;
            }
            for word in counts.keys() {
                *frequency.entry(word.clone()).or_default() += 1;
            }
            documents.push(counts);
        }
        let total: usize = lengths.iter().sum();
        let average = if lengths.is_empty() {
            1.0
        } else {
            (total as f64 / lengths.len() as f64).max(1.0)
        };
        Self {
            documents,
            lengths,
            frequency,
            average,
        }
    }

    /// The best `top` documents for `query`, best first, with their scores; documents
    /// that match no word are left out.
    pub fn search(&self, query: &str, top: usize) -> Vec<(usize, f64)> {
        let terms: BTreeSet<String> = words(query).into_iter().collect();
        let n = self.documents.len() as f64;
        let mut scored: Vec<(usize, f64)> = self
            .documents
            .iter()
            .enumerate()
            .filter_map(|(i, counts)| {
                let length = self.lengths[i] as f64;
                let score: f64 = terms
                    .iter()
                    .filter_map(|term| {
                        let tf = *counts.get(term)? as f64;
                        let df = *self.frequency.get(term)? as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        Some(
                            idf * tf * (K1 + 1.0)
                                / (tf + K1 * (1.0 - B + B * length / self.average)),
                        )
                    })
                    .sum();
                (score > 0.0).then_some((i, score))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(top);
        scored
    }
}

/// The tools `tool_search` found in `history` (its results name them in their details).
pub fn found_in(history: &[Arc<keel_protocol::Message>]) -> Vec<String> {
    history
        .iter()
        .filter_map(|message| message.as_tool_result())
        .filter(|result| result.tool_name == TOOL_SEARCH && !result.is_error)
        .filter_map(|result| result.details.as_ref()?.get("found")?.as_array())
        .flatten()
        .filter_map(|name| name.as_str().map(str::to_owned))
        .collect()
}

/// Called with the name of each held-back tool the model finds.
pub type Remember = Arc<dyn Fn(&str) + Send + Sync>;

/// The tools a turn holds back, from every source (MCP servers past the disclosure
/// threshold, built-in tools a small window has no room for), and what the model has found
/// of them. One per turn, so the turn offers one `tool_search`.
pub struct Deferred {
    held: Mutex<Held>,
    top: usize,
    found: Mutex<BTreeSet<String>>,
    additions: ToolAdditions,
    /// Whether the search tool was handed out (to whoever first held tools back).
    offered: std::sync::atomic::AtomicBool,
    /// Whether the turn's request is lean (a small window): tools that join later wait
    /// here too instead of growing the request.
    lean: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Held {
    tools: Vec<(ToolRef, Remember)>,
    index: Index,
}

impl Held {
    fn new(tools: Vec<(ToolRef, Remember)>) -> Self {
        let texts: Vec<String> = tools
            .iter()
            .map(|(t, _)| {
                let d = t.definition();
                // The name counts twice: a word of the name says more than one of prose.
                format!("{} {} {}", d.name, d.name, d.description)
            })
            .collect();
        Self {
            index: Index::new(texts.iter().map(String::as_str)),
            tools,
        }
    }
}

impl Deferred {
    /// Nothing held yet; what a search finds joins `additions`, at most `top` a search.
    pub fn new(top: usize, additions: ToolAdditions) -> Self {
        Self {
            held: Mutex::new(Held::default()),
            top: top.max(1),
            found: Mutex::new(BTreeSet::new()),
            additions,
            offered: std::sync::atomic::AtomicBool::new(false),
            lean: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Marks the turn's request lean (see `lean`).
    pub fn set_lean(&self) {
        self.lean.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the turn's request is lean: a tool that joins later should be held back.
    pub fn is_lean(&self) -> bool {
        self.lean.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds `tools` back; each one found is passed to `remember` (so later turns of the
    /// session can offer it directly). Returns the `tool_search` tool the first time
    /// anything is held back this turn: the caller offers it.
    pub fn hold(self: &Arc<Self>, tools: Vec<ToolRef>, remember: Remember) -> Option<ToolRef> {
        if tools.is_empty() {
            return None;
        }
        {
            let mut held = self.held();
            let mut all = std::mem::take(&mut held.tools);
            all.extend(tools.into_iter().map(|t| (t, remember.clone())));
            *held = Held::new(all);
        }
        let first = !self.offered.swap(true, std::sync::atomic::Ordering::SeqCst);
        first.then(|| Arc::new(ToolSearch::new(self.clone())) as ToolRef)
    }

    /// Names of the tools held back.
    pub fn names(&self) -> Vec<String> {
        self.held()
            .tools
            .iter()
            .map(|(t, _)| t.definition().name.clone())
            .collect()
    }

    /// The held-back tools best matching `query`, at most `limit` (default: the
    /// configured number).
    pub fn search(&self, query: &str, limit: Option<usize>) -> Vec<ToolRef> {
        let top = limit.unwrap_or(self.top).clamp(1, self.top.max(1));
        let held = self.held();
        held.index
            .search(query, top)
            .into_iter()
            .map(|(i, _)| held.tools[i].0.clone())
            .collect()
    }

    fn select(&self, name: &str) -> Option<ToolRef> {
        self.held()
            .tools
            .iter()
            .find(|(t, _)| t.definition().name == name)
            .map(|(t, _)| t.clone())
    }

    fn unlock(&self, tools: &[ToolRef]) {
        let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
        let new: Vec<ToolRef> = tools
            .iter()
            .filter(|t| found.insert(t.definition().name.clone()))
            .cloned()
            .collect();
        drop(found);
        let held = self.held();
        for tool in &new {
            let name = &tool.definition().name;
            if let Some((_, remember)) = held
                .tools
                .iter()
                .find(|(t, _)| &t.definition().name == name)
            {
                remember(name);
            }
        }
        drop(held);
        self.additions.add(new);
    }
}

/// The arguments of `tool_search`; the doc comments are the descriptions the model reads.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words describing the capability, or select:NAME,NAME.
    query: String,
    /// Most tools to return (default 8).
    #[serde(default, deserialize_with = "args::present")]
    limit: Option<Int<1, 20>>,
}

/// The `tool_search` tool of one turn.
pub struct ToolSearch {
    deferred: Arc<Deferred>,
    definition: ToolDefinition,
}

/// `tool_search`'s definition, the same for every turn.
pub fn search_definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL_SEARCH.to_owned(),
        description: "Finds tools that are not listed yet (held back to save context). \
             Search with words about what you need (`query`), or name tools exactly with `select:NAME,NAME`. \
             The tools found are described here and can be called from your next step on."
            .to_owned(),
        parameters: args::schema::<SearchArgs>(),
    }
}

impl ToolSearch {
    /// Searches `deferred`.
    pub fn new(deferred: Arc<Deferred>) -> Self {
        Self {
            deferred,
            definition: search_definition(),
        }
    }
}

#[async_trait]
impl AgentTool for ToolSearch {
    fn nature(&self) -> ToolNature {
        // It searches the names and descriptions keel already holds.
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> keel_agent::ExecutionMode {
        keel_agent::ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: SearchArgs = args::arguments(arguments)?;
        let query = args.query.trim();
        let limit = args.limit.map(Int::usize);
        let found: Vec<ToolRef> = match query.strip_prefix("select:") {
            Some(names) => names
                .split(',')
                .filter_map(|n| self.deferred.select(n.trim()))
                .collect(),
            None => self.deferred.search(query, limit),
        };
        if found.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No held-back tool matches `{query}`. Try other words, or fewer."
            )));
        }
        self.deferred.unlock(&found);
        let mut text = format!(
            "{} tool(s) found; call them from your next step on:\n",
            found.len()
        );
        let mut names = Vec::new();
        for tool in &found {
            let d = tool.definition();
            names.push(d.name.clone());
            text.push_str(&format!(
                "\n## {}\n{}\nArguments (JSON Schema): {}\n",
                d.name, d.description, d.parameters
            ));
        }
        Ok(ToolOutput {
            details: Some(json!({"found": names})),
            ..ToolOutput::text(text)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn words_split_names_and_cases() {
        assert_eq!(
            words("getWeather mcp__s__read_file HTTP2x"),
            ["get", "weather", "mcp", "s", "read", "file", "http2x"]
        );
    }

    #[test]
    fn bm25_ranks_the_rare_word_first() {
        let index = Index::new([
            "read a file from the disk",
            "write a file to the disk",
            "the weather in a city",
            "zebra042 weather station readings",
        ]);
        let hits = index.search("zebra042", 8);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 3);
        let hits = index.search("weather", 8);
        assert_eq!(hits.len(), 2);
        let hits = index.search("read file", 1);
        assert_eq!(hits[0].0, 0);
        assert!(index.search("nothing-matches-here", 8).is_empty());
        assert!(Index::new([]).search("x", 3).is_empty());
    }
}
