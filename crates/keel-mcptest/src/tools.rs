//! The tool catalog and what each tool does when called.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Resource, ResourceContents, Tool};
use serde_json::{Value, json};

use crate::state::Shared;

/// A 1×1 PNG, base64: the smallest image a client must still decode and pass on.
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// Exit status of the `crash` tool, distinct from a panic (101) or a clean end (0).
const CRASH_STATUS: i32 = 3;

/// The tools on offer now: the fixed ones, `added_later` after `mutate`, then the generated ones.
pub fn list(shared: &Shared) -> Vec<Tool> {
    let mutated = shared.mutated();
    let mut tools = vec![
        Tool::new(
            "echo",
            if mutated {
                "echo v2"
            } else {
                "Returns the message it is given, unchanged."
            },
            schema(&[("message", "string")]),
        ),
        Tool::new(
            "add",
            "Adds two numbers and returns their sum as structured content.",
            schema(&[("a", "number"), ("b", "number")]),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": { "sum": { "type": "number" } },
            "required": ["sum"]
        }))),
        Tool::new("tiny_image", "Returns a 1x1 PNG image.", schema(&[])),
        Tool::new(
            "links",
            "Returns a link to test://greeting and an embedded test://inline resource.",
            schema(&[]),
        ),
        Tool::new(
            "sleep",
            "Waits the given number of milliseconds, then answers.",
            schema(&[("ms", "integer")]),
        ),
        Tool::new(
            "crash",
            "Ends the server process at once, without answering.",
            schema(&[]),
        ),
        Tool::new(
            "env",
            "Lists the server's environment as sorted NAME=VALUE lines.",
            schema(&[]),
        ),
        Tool::new("fail", "Always answers with a tool error.", schema(&[])),
        Tool::new(
            "daemon",
            "Starts `sleep SECONDS` in a session of its own (setsid), detached, and answers.",
            schema(&[("seconds", "string")]),
        ),
        Tool::new(
            "huge",
            "Answers with a text of the given number of MiB.",
            schema(&[("mib", "integer")]),
        ),
        Tool::new(
            "mutate",
            "Changes this server's tool list and announces the change.",
            schema(&[]),
        ),
    ];
    if mutated {
        tools.push(Tool::new(
            "added_later",
            "A tool that appears after mutate.",
            schema(&[]),
        ));
    }
    tools.extend((0..shared.generated_tools).map(generated));
    tools.extend(shared.extra_tools.iter().map(|name| {
        Tool::new(
            name.clone(),
            "Returns the message it is given.",
            schema(&[("message", "string")]),
        )
    }));
    tools
}

/// Runs tool `name` (but `mutate`, which needs the peer); an unknown tool or a bad argument is a
/// protocol error (invalid params).
pub async fn call(
    shared: &Shared,
    name: &str,
    args: &JsonObject,
    cancelled: impl Future<Output = ()>,
) -> Result<CallToolResult, ErrorData> {
    let text = |text: String| Ok(CallToolResult::success(vec![ContentBlock::text(text)]));
    match name {
        "echo" => text(string_arg(args, "message")?),
        "add" => Ok(CallToolResult::structured(
            json!({ "sum": sum(number_arg(args, "a")?, number_arg(args, "b")?) }),
        )),
        "tiny_image" => Ok(CallToolResult::success(vec![
            ContentBlock::image(TINY_PNG, "image/png"),
            ContentBlock::text("a tiny image"),
        ])),
        "links" => Ok(CallToolResult::success(vec![
            ContentBlock::resource_link(
                Resource::new("test://greeting", "greeting").with_mime_type("text/plain"),
            ),
            ContentBlock::resource(ResourceContents::text(
                "inline text from keel-mcptest",
                "test://inline",
            )),
        ])),
        "sleep" => {
            let ms = integer_arg(args, "ms")?;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => text(format!("slept {ms}")),
                // rmcp drops the answer to a cancelled request; this only stops the wait.
                () = cancelled => Err(ErrorData::internal_error("cancelled", None)),
            }
        }
        "crash" => {
            shared.record("crashes");
            std::process::exit(CRASH_STATUS)
        }
        "env" => text(environment()),
        "daemon" => {
            let seconds = string_arg(args, "seconds")?;
            std::process::Command::new("setsid")
                .args(["sleep", &seconds])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| ErrorData::internal_error(format!("setsid: {e}"), None))?;
            text(format!("started sleep {seconds}"))
        }
        "huge" => {
            let mib = usize::try_from(integer_arg(args, "mib")?).unwrap_or(usize::MAX);
            text("z".repeat(mib.saturating_mul(1024 * 1024)))
        }
        other if shared.extra_tools.iter().any(|t| t == other) => {
            text(string_arg(args, "message")?)
        }
        "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
            "failed on purpose",
        )])),
        "added_later" if shared.mutated() => text("added later".to_owned()),
        _ => match generated_index(name, shared.generated_tools) {
            Some(_) => text(format!("{name} got {}", string_arg(args, "value")?)),
            None => Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            )),
        },
    }
}

/// Whole numbers stay whole (`3`, not `3.0`) so tests can compare the JSON exactly.
fn sum(a: &serde_json::Number, b: &serde_json::Number) -> Value {
    match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) if a.checked_add(b).is_some() => json!(a + b),
        _ => json!(a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN)),
    }
}

fn environment() -> String {
    let mut vars: Vec<String> = std::env::vars_os()
        .map(|(name, value)| format!("{}={}", name.to_string_lossy(), value.to_string_lossy()))
        .collect();
    vars.sort();
    vars.join("\n")
}

/// Topics and words that make each generated description distinct for a keyword search; the
/// codeword's index is padded so that one codeword (`zebra001`) is no prefix of another.
const TOPICS: [&str; 8] = [
    "the weather in city",
    "the opening hours of library",
    "the train timetable of station",
    "the stock price of company",
    "the recipe book of restaurant",
    "the football results of team",
    "the parcel tracking of depot",
    "the air quality of district",
];
const WORDS: [&str; 8] = [
    "zebra", "walrus", "pelican", "otter", "lynx", "heron", "bison", "gecko",
];

fn generated(index: usize) -> Tool {
    let topic = TOPICS[index % TOPICS.len()];
    let word = WORDS[(index / TOPICS.len()) % WORDS.len()];
    let description = format!(
        "Looks up {topic} {index} and reports it as plain text. The lookup is keyed by the \
         codeword {word}{index:03}, which no other tool on this server mentions, so a search for \
         it finds exactly this tool. Pass the query in `value`; the answer repeats the tool's \
         name and the value it got, which lets a test check the call reached it."
    );
    Tool::new(
        format!("tool_{index:03}"),
        description,
        schema(&[("value", "string")]),
    )
}

/// The index of a generated tool named `name`, if it is one of the `count` on offer.
fn generated_index(name: &str, count: usize) -> Option<usize> {
    let digits = name.strip_prefix("tool_")?;
    let index: usize = digits.parse().ok()?;
    (index < count && name == format!("tool_{index:03}")).then_some(index)
}

/// An object schema with every listed property required.
fn schema(properties: &[(&str, &str)]) -> Arc<JsonObject> {
    let props: serde_json::Map<String, Value> = properties
        .iter()
        .map(|(name, ty)| ((*name).to_owned(), json!({ "type": ty })))
        .collect();
    let required: Vec<&str> = properties.iter().map(|(name, _)| *name).collect();
    object(json!({ "type": "object", "properties": props, "required": required }))
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn bad_argument(name: &str, expected: &str) -> ErrorData {
    ErrorData::invalid_params(
        Cow::Owned(format!("argument `{name}` is missing or not {expected}")),
        Some(json!({ "argument": name })),
    )
}

fn string_arg(args: &JsonObject, name: &str) -> Result<String, ErrorData> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(bad_argument(name, "a string")),
    }
}

fn number_arg<'a>(args: &'a JsonObject, name: &str) -> Result<&'a serde_json::Number, ErrorData> {
    match args.get(name) {
        Some(Value::Number(n)) => Ok(n),
        _ => Err(bad_argument(name, "a number")),
    }
}

fn integer_arg(args: &JsonObject, name: &str) -> Result<u64, ErrorData> {
    args.get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| bad_argument(name, "a non-negative integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_round_trip_and_descriptions_are_distinct() {
        let tools: Vec<Tool> = (0..100).map(generated).collect();
        for (index, tool) in tools.iter().enumerate() {
            assert_eq!(generated_index(&tool.name, 100), Some(index));
            let description = tool.description.as_deref().unwrap_or_default();
            assert!((250..=400).contains(&description.len()), "{description}");
        }
        assert_eq!(generated_index("tool_100", 100), None);
        assert_eq!(generated_index("tool_7", 100), None);
        let mut descriptions: Vec<_> = tools.iter().map(|t| t.description.clone()).collect();
        descriptions.sort();
        descriptions.dedup();
        assert_eq!(descriptions.len(), 100);
    }
}
