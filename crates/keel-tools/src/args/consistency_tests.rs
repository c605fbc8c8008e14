//! Schema and parser agree: for every built-in tool, an argument value passes the JSON Schema
//! the model is sent (checked with the same validator the loop uses) exactly when the tool's
//! parser accepts it. Three kinds of input: every boundary the schema states, probed from the
//! schema itself; a table of chosen cases with the verdict decided for each; and random
//! near-valid values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::ToolEnv;

type Parser = fn(Value) -> Result<(), String>;

fn accepts<T: DeserializeOwned>(arguments: Value) -> Result<(), String> {
    super::parse::<T>(arguments)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Each built-in tool's parser, by tool name.
const PARSERS: [(&str, Parser); 9] = [
    ("grep", accepts::<crate::search::GrepArgs>),
    ("glob", accepts::<crate::search::GlobArgs>),
    ("ls", accepts::<crate::search::LsArgs>),
    ("read", accepts::<crate::files::read::Args>),
    ("write", accepts::<crate::files::write::Args>),
    ("edit", accepts::<crate::files::edit::Args>),
    ("bash", accepts::<crate::bash::Args>),
    ("todowrite", accepts::<crate::todo::Args>),
    ("web_fetch", accepts::<crate::fetch::Args>),
];

/// A tool's schema (as sent to the model) beside its parser.
struct Checked {
    name: String,
    schema: Value,
    validator: jsonschema::Validator,
    parse: Parser,
}

impl Checked {
    /// `(schema accepts, parser accepts)`.
    fn verdicts(&self, arguments: &Value) -> (bool, bool) {
        (
            self.validator.is_valid(arguments),
            (self.parse)(arguments.clone()).is_ok(),
        )
    }
}

fn tools() -> Vec<Checked> {
    let tools = crate::builtin_tools(Arc::new(ToolEnv::new("/tmp")));
    tools
        .iter()
        .map(|tool| {
            let definition = tool.definition();
            let parse = PARSERS
                .iter()
                .find(|(name, _)| *name == definition.name)
                .map(|(_, parse)| *parse)
                .unwrap_or_else(|| panic!("no parser listed for `{}`", definition.name));
            Checked {
                name: definition.name.clone(),
                schema: definition.parameters.clone(),
                validator: jsonschema::validator_for(&definition.parameters).unwrap(),
                parse,
            }
        })
        .collect()
}

fn tool(name: &str) -> Checked {
    tools().into_iter().find(|t| t.name == name).unwrap()
}

#[test]
fn every_builtin_tool_has_its_parser_listed_here() {
    let listed: BTreeSet<&str> = PARSERS.iter().map(|(name, _)| *name).collect();
    let tools = tools();
    let built: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(built, listed);
}

// ------------------------------------------------------------------ the schema dialect

/// Keywords OpenAI and Gemini function declarations both take.
const PORTABLE_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "minimum",
    "maximum",
    "minItems",
    "minLength",
];

/// Everything wrong with `schema` for a provider, with the path to it.
fn dialect_problems(schema: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        problems.push(format!("{at}: not an object"));
        return;
    };
    for key in object.keys() {
        if !PORTABLE_KEYWORDS.contains(&key.as_str()) {
            problems.push(format!("{at}: keyword `{key}`"));
        }
    }
    match object.get("type").and_then(Value::as_str) {
        Some("object") => {
            if object.get("additionalProperties") != Some(&Value::Bool(false)) {
                problems.push(format!(
                    "{at}: an object without additionalProperties: false"
                ));
            }
            let properties = object.get("properties").and_then(Value::as_object);
            for name in object
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let known = name
                    .as_str()
                    .is_some_and(|name| properties.is_some_and(|p| p.contains_key(name)));
                if !known {
                    problems.push(format!("{at}: requires {name}, which it does not define"));
                }
            }
            for (name, sub) in properties.into_iter().flatten() {
                dialect_problems(sub, &format!("{at}.{name}"), problems);
            }
        }
        Some("array") => match object.get("items") {
            Some(items) => dialect_problems(items, &format!("{at}[]"), problems),
            None => problems.push(format!("{at}: an array without items")),
        },
        Some("string") => {
            if let Some(values) = object.get("enum") {
                let all_strings = values
                    .as_array()
                    .is_some_and(|v| v.iter().all(Value::is_string));
                if !all_strings {
                    problems.push(format!("{at}: an enum of something other than strings"));
                }
            }
        }
        Some("integer" | "boolean") => {}
        _ => problems.push(format!("{at}: type is not one plain type name")),
    }
}

#[test]
fn schemas_use_only_what_every_provider_accepts() {
    let mut problems = Vec::new();
    for tool in tools() {
        if tool.schema.get("type") != Some(&json!("object")) {
            problems.push(format!("{}: the root is not an object", tool.name));
        }
        dialect_problems(&tool.schema, &tool.name, &mut problems);
    }
    assert_eq!(problems, Vec::<String>::new());
}

// ------------------------------------------------------------------ boundary probes

/// A value `schema` accepts, made from the schema alone.
fn example(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("integer") => schema["minimum"].clone(),
        Some("string") => json!("x"),
        Some("boolean") => json!(false),
        Some("array") => json!([example(&schema["items"])]),
        Some("object") => {
            let mut object = Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                object.insert(name.to_owned(), example(&schema["properties"][name]));
            }
            Value::Object(object)
        }
        other => panic!("no example for type {other:?}"),
    }
}

/// Values that probe every edge `schema` states, most of them of the right type.
fn probes(schema: &Value) -> Vec<Value> {
    let mut out = vec![
        Value::Null,
        json!(true),
        json!(7),
        json!("x"),
        json!([]),
        json!({}),
    ];
    if let Some(values) = schema["enum"].as_array() {
        for value in values {
            let text = value.as_str().unwrap();
            out.push(value.clone());
            out.push(json!(text.to_uppercase()));
            out.push(json!(text.to_lowercase()));
            out.push(json!(format!("{text} ")));
        }
        out.push(json!("unknown"));
        out.push(json!(""));
        // serde_json alone reads `{"name": null}` as the unit variant `name`.
        out.extend(values.iter().map(|v| json!({v.as_str().unwrap(): null})));
        return out;
    }
    match schema["type"].as_str() {
        Some("integer") => {
            let mut edges: Vec<i128> = vec![-1, 0, 1, 2, i128::from(i64::MIN)];
            edges.push(i128::from(u64::MAX));
            for bound in ["minimum", "maximum"] {
                if let Some(bound) = schema[bound].as_u64() {
                    let bound = i128::from(bound);
                    edges.extend([bound - 1, bound, bound + 1]);
                }
            }
            for edge in edges {
                out.push(match (u64::try_from(edge), i64::try_from(edge)) {
                    (Ok(n), _) => json!(n),
                    (_, Ok(n)) => json!(n),
                    _ => unreachable!("edges fit in u64 or i64"),
                });
            }
            out.extend([
                json!(2.0),
                json!(1.5),
                json!(-0.0),
                json!(-3.0),
                json!(1e20),
                json!("1"),
            ]);
        }
        Some("string") => out.extend([json!(""), json!("ünï code"), json!("0")]),
        Some("boolean") => out.extend([json!(false), json!("true"), json!(0), json!(1)]),
        Some("array") => {
            let item = example(&schema["items"]);
            out.push(json!([item.clone(), item.clone()]));
            out.push(json!([item, 1]));
            out.extend(probes(&schema["items"]).into_iter().map(|p| json!([p])));
        }
        Some("object") => {
            let base = example(schema);
            let Value::Object(base) = base else {
                unreachable!()
            };
            out.push(Value::Object(base.clone()));
            for name in schema["required"].as_array().into_iter().flatten() {
                let mut missing = base.clone();
                missing.remove(name.as_str().unwrap());
                out.push(Value::Object(missing));
            }
            for (name, sub) in schema["properties"].as_object().into_iter().flatten() {
                for probe in probes(sub) {
                    let mut changed = base.clone();
                    changed.insert(name.clone(), probe);
                    out.push(Value::Object(changed));
                }
            }
            // serde_json alone reads an array as the struct's fields in declaration order.
            out.push(Value::Array(base.values().cloned().collect()));
            let mut extra = base;
            extra.insert("bogus".to_owned(), json!(1));
            out.push(Value::Object(extra));
        }
        other => panic!("no probes for type {other:?}"),
    }
    out
}

#[test]
fn schema_and_parser_agree_on_every_boundary_the_schema_states() {
    let mut disagreements = Vec::new();
    for tool in tools() {
        let cases = probes(&tool.schema);
        let mut accepted = 0;
        for case in &cases {
            let (schema_ok, parser_ok) = tool.verdicts(case);
            if schema_ok != parser_ok {
                disagreements.push(format!(
                    "{}: {case} schema {schema_ok}, parser {parser_ok}",
                    tool.name
                ));
            }
            accepted += usize::from(schema_ok);
        }
        // Neither side may be vacuous: each tool sees both verdicts.
        assert!(
            accepted > 0 && accepted < cases.len(),
            "{}: {accepted} of {} accepted",
            tool.name,
            cases.len()
        );
    }
    assert_eq!(disagreements, Vec::<String>::new());
}

// ------------------------------------------------------------------ chosen verdicts

#[test]
fn read_offset_zero_is_refused_by_schema_and_parser() {
    // The schema said `minimum: 1` while the parser took 0 and read from line 1.
    let read = tool("read");
    assert_eq!(
        read.verdicts(&json!({"path": "a.txt", "offset": 0})),
        (false, false)
    );
    assert_eq!(
        read.verdicts(&json!({"path": "a.txt", "offset": 1})),
        (true, true)
    );
    let refused = super::parse::<crate::files::read::Args>(json!({"path": "a.txt", "offset": 0}));
    assert_eq!(
        refused.err().map(|e| e.to_string()).as_deref(),
        Some("invalid value: integer `0`, expected an integer of at least 1")
    );
}

/// Cases whose verdict was a decision (where the parser and the schema used to differ, or a
/// reader could guess either way), with the verdict both sides must give.
fn decided() -> Vec<(&'static str, Value, bool)> {
    vec![
        ("read", json!({"path": "a", "limit": 0}), false),
        ("read", json!({"path": "a", "limit": 100_000}), true),
        ("read", json!({"path": "a", "offset": 2.0}), true),
        ("read", json!({"path": "a", "offset": 1.5}), false),
        ("read", json!({"path": "a", "offset": null}), false),
        ("read", json!({"path": "a", "offset": "3"}), false),
        ("read", json!({"path": "a", "bogus": 1}), false),
        ("read", json!({"offset": 1}), false),
        ("write", json!({"path": "a", "content": ""}), true),
        (
            "write",
            json!({"path": "a", "content": "", "mode": 420}),
            false,
        ),
        ("edit", json!({"path": "a", "edits": []}), false),
        (
            "edit",
            json!({"path": "a", "edits": [{"old_string": "a", "new_string": "b"}]}),
            true,
        ),
        (
            "edit",
            json!({"path": "a", "edits": [{"old_string": "a", "new_string": "b", "replace_all": null}]}),
            false,
        ),
        (
            "edit",
            json!({"path": "a", "edits": [{"old_string": "a", "new_string": "b", "count": 1}]}),
            false,
        ),
        ("bash", json!({"command": "ls", "timeout": 0}), false),
        ("bash", json!({"command": "ls", "timeout": 1}), true),
        ("bash", json!({"command": "ls", "timeout": 600_000}), true),
        ("bash", json!({"command": "ls", "timeout": 600_001}), false),
        (
            "bash",
            json!({"command": "ls", "description": "list files"}),
            true,
        ),
        ("bash", json!({"command": "ls", "cwd": "/"}), false),
        ("grep", json!({"pattern": "x", "context": 20}), true),
        ("grep", json!({"pattern": "x", "context": 21}), false),
        ("grep", json!({"pattern": "x", "limit": 2_001}), false),
        ("grep", json!({"pattern": "x", "offset": 0}), true),
        (
            "grep",
            json!({"pattern": "x", "output_mode": "files_with_matches"}),
            true,
        ),
        (
            "grep",
            json!({"pattern": "x", "output_mode": "content"}),
            true,
        ),
        (
            "grep",
            json!({"pattern": "x", "output_mode": "count"}),
            true,
        ),
        (
            "grep",
            json!({"pattern": "x", "output_mode": "Content"}),
            false,
        ),
        (
            "grep",
            json!({"pattern": "x", "output_mode": "lines"}),
            false,
        ),
        (
            "grep",
            json!({"pattern": "x", "case_insensitive": null}),
            false,
        ),
        ("glob", json!({"pattern": "*", "limit": 2_000}), true),
        ("glob", json!({"pattern": "*", "limit": 2_001}), false),
        ("ls", json!({}), true),
        ("ls", json!({"ignore": []}), true),
        ("ls", json!({"ignore": "*.log"}), false),
        ("todowrite", json!({"todos": []}), true),
        (
            "todowrite",
            json!({"todos": [{"content": "", "status": "pending"}]}),
            false,
        ),
        (
            "todowrite",
            json!({"todos": [{"content": "a", "status": "done"}]}),
            false,
        ),
        (
            "web_fetch",
            json!({"url": "https://a.test", "method": "GET"}),
            true,
        ),
        (
            "web_fetch",
            json!({"url": "https://a.test", "method": "HEAD"}),
            true,
        ),
        (
            "web_fetch",
            json!({"url": "https://a.test", "method": "get"}),
            false,
        ),
        (
            "web_fetch",
            json!({"url": "https://a.test", "method": "POST"}),
            false,
        ),
    ]
}

#[test]
fn decided_cases_get_the_decided_verdict_from_both() {
    let tools = tools();
    let cases = decided();
    let actual: Vec<(&str, Value, (bool, bool))> = cases
        .iter()
        .map(|(name, arguments, _)| {
            let tool = tools.iter().find(|t| t.name == *name).unwrap();
            (*name, arguments.clone(), tool.verdicts(arguments))
        })
        .collect();
    let expected: Vec<(&str, Value, (bool, bool))> = cases
        .into_iter()
        .map(|(name, arguments, ok)| (name, arguments, (ok, ok)))
        .collect();
    assert_eq!(actual, expected);
}

// ------------------------------------------------------------------ random values

/// Any JSON scalar or empty container: the "wrong type" a model might send.
fn any_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-8i32..8).prop_map(|n| json!(f64::from(n) / 2.0)),
        ".{0,3}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
    ]
    .boxed()
}

/// Mostly values of the type `schema` asks for, near its bounds, sometimes anything.
fn near(schema: &Value) -> BoxedStrategy<Value> {
    let right = if let Some(values) = schema["enum"].as_array() {
        prop_oneof![
            proptest::sample::select(values.clone()),
            "[a-zA-Z_]{0,12}".prop_map(Value::from),
        ]
        .boxed()
    } else {
        match schema["type"].as_str() {
            Some("integer") => {
                let min = schema["minimum"].as_i64().unwrap_or(0);
                let max = schema["maximum"].as_i64().unwrap_or(min + 5_000);
                prop_oneof![
                    (min - 3..=max + 3).prop_map(Value::from),
                    any::<i64>().prop_map(Value::from),
                    any::<u64>().prop_map(Value::from),
                    (min * 2 - 6..=max * 2 + 6).prop_map(|n| json!(n as f64 / 2.0)),
                ]
                .boxed()
            }
            Some("string") => ".{0,3}".prop_map(Value::from).boxed(),
            Some("boolean") => any::<bool>().prop_map(Value::from).boxed(),
            Some("array") => proptest::collection::vec(near(&schema["items"]), 0..3)
                .prop_map(Value::Array)
                .boxed(),
            Some("object") => near_object(schema),
            other => panic!("no strategy for type {other:?}"),
        }
    };
    prop_oneof![8 => right, 1 => any_leaf()].boxed()
}

/// Objects with each property present or not (required ones mostly present), sometimes with
/// one the schema does not define.
fn near_object(schema: &Value) -> BoxedStrategy<Value> {
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, sub)| {
            let present = if required.contains(name.as_str()) {
                9
            } else {
                1
            };
            let name = name.clone();
            prop_oneof![
                present => near(sub).prop_map(move |value| Some((name.clone(), value))),
                1 => Just(None),
            ]
            .boxed()
        })
        .collect();
    let extra = proptest::option::weighted(0.1, Just(("bogus".to_owned(), json!(1))));
    (fields, extra)
        .prop_map(|(fields, extra)| {
            Value::Object(fields.into_iter().flatten().chain(extra).collect())
        })
        .boxed()
}

#[test]
fn schema_and_parser_agree_on_random_arguments() {
    for tool in tools() {
        let mut runner = TestRunner::new(Config {
            cases: 400,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&near(&tool.schema), |arguments| {
            let (schema_ok, parser_ok) = tool.verdicts(&arguments);
            prop_assert_eq!(
                schema_ok,
                parser_ok,
                "{}: {} (schema {}, parser {})",
                tool.name,
                arguments,
                schema_ok,
                parser_ok
            );
            Ok(())
        });
        if let Err(failure) = result {
            panic!("{failure}");
        }
    }
}
