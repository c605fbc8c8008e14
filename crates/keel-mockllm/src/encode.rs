//! Server-side encoding of a scripted response in each wire API's SSE format.

use serde_json::{Value, json};

use crate::script::Usage;

/// The wire API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// `POST …/messages`.
    Anthropic,
    /// `POST …/chat/completions`.
    Completions,
    /// `POST …/responses`.
    Responses,
    /// `POST …/models/{model}:streamGenerateContent`.
    Google,
}

impl WireApi {
    /// The API of a request path.
    pub fn from_path(path: &str) -> Option<Self> {
        let path = path.split('?').next().unwrap_or(path);
        if path.ends_with("/messages") {
            Some(Self::Anthropic)
        } else if path.ends_with("/chat/completions") {
            Some(Self::Completions)
        } else if path.ends_with("/responses") {
            Some(Self::Responses)
        } else if path.contains(":streamGenerateContent") {
            Some(Self::Google)
        } else {
            None
        }
    }
}

/// One block of the answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Reasoning.
    Thinking(String),
    /// Text.
    Text(String),
    /// A tool call with its argument JSON.
    Call {
        /// Call id.
        id: String,
        /// Tool.
        name: String,
        /// Argument JSON text.
        arguments: String,
    },
}

/// Why the answer stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Finished.
    End,
    /// Output limit.
    Length,
    /// Wants tool results.
    ToolUse,
}

/// Everything needed to encode one answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Model name to report.
    pub model: String,
    /// Blocks in order.
    pub blocks: Vec<Block>,
    /// Characters per delta.
    pub chunk: usize,
    /// Chat Completions: thinking and text as lists of content parts (Mistral's shape).
    pub content_parts: bool,
    /// Stop reason.
    pub stop: Stop,
    /// Usage to report.
    pub usage: Usage,
}

fn frame(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// The SSE frames of `plan` in `api`'s format, in order. The last frame is the terminal one.
pub fn frames(api: WireApi, plan: &Plan) -> Vec<String> {
    match api {
        WireApi::Anthropic => anthropic(plan),
        WireApi::Completions => completions(plan),
        WireApi::Responses => responses(plan),
        WireApi::Google => google(plan),
    }
}

fn anthropic(plan: &Plan) -> Vec<String> {
    let u = plan.usage;
    let mut out = vec![frame(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message", "role": "assistant",
            "model": plan.model, "content": [], "stop_reason": null,
            "usage": {"input_tokens": u.input, "output_tokens": 1, "cache_read_input_tokens": u.cache_read, "cache_creation_input_tokens": 0}}}),
    )];
    for (index, block) in plan.blocks.iter().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = match block {
            Block::Thinking(text) => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                pieces(text, plan.chunk)
                    .into_iter()
                    .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                    .chain([json!({"type": "signature_delta", "signature": "mock-signature"})])
                    .collect(),
            ),
            Block::Text(text) => (
                json!({"type": "text", "text": ""}),
                pieces(text, plan.chunk)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect(),
            ),
            Block::Call {
                id,
                name,
                arguments,
            } => (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                pieces(arguments, plan.chunk)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
        };
        out.push(frame(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            out.push(frame(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push(frame(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let stop = match plan.stop {
        Stop::End => "end_turn",
        Stop::Length => "max_tokens",
        Stop::ToolUse => "tool_use",
    };
    out.push(frame(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": u.output}}),
    ));
    out.push(frame(
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    ));
    out
}

fn completions(plan: &Plan) -> Vec<String> {
    let u = plan.usage;
    let chunk = |delta: Value, finish: Value| {
        frame(
            None,
            &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": plan.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut call_index = 0;
    for block in &plan.blocks {
        match block {
            Block::Thinking(text) => {
                out.extend(pieces(text, plan.chunk).into_iter().map(|p| {
                    let delta = if plan.content_parts {
                        json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": p}]}]})
                    } else {
                        json!({"reasoning_content": p})
                    };
                    chunk(delta, Value::Null)
                }));
            }
            Block::Text(text) => {
                out.extend(pieces(text, plan.chunk).into_iter().map(|p| {
                    let delta = if plan.content_parts {
                        json!({"content": [{"type": "text", "text": p}]})
                    } else {
                        json!({"content": p})
                    };
                    chunk(delta, Value::Null)
                }));
            }
            Block::Call {
                id,
                name,
                arguments,
            } => {
                for (i, piece) in pieces(arguments, plan.chunk).into_iter().enumerate() {
                    let call = if i == 0 {
                        json!({"index": call_index, "id": id, "type": "function", "function": {"name": name, "arguments": piece}})
                    } else {
                        json!({"index": call_index, "function": {"arguments": piece}})
                    };
                    out.push(chunk(json!({"tool_calls": [call]}), Value::Null));
                }
                call_index += 1;
            }
        }
    }
    let finish = match plan.stop {
        Stop::End => "stop",
        Stop::Length => "length",
        Stop::ToolUse => "tool_calls",
    };
    out.push(chunk(json!({}), json!(finish)));
    out.push(frame(
        None,
        &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": plan.model, "choices": [],
            "usage": {"prompt_tokens": u.input + u.cache_read, "completion_tokens": u.output,
                      "total_tokens": u.input + u.cache_read + u.output,
                      "prompt_tokens_details": {"cached_tokens": u.cache_read},
                      "completion_tokens_details": {"reasoning_tokens": u.reasoning}}}),
    ));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn responses(plan: &Plan) -> Vec<String> {
    let u = plan.usage;
    let ev = |kind: &str, mut body: Value| {
        body["type"] = json!(kind);
        frame(Some(kind), &body)
    };
    let mut out = vec![ev(
        "response.created",
        json!({"response": {"id": "resp_mock", "status": "in_progress", "model": plan.model}}),
    )];
    let mut items = Vec::new();
    for (index, block) in plan.blocks.iter().enumerate() {
        let item_id = format!("item_{index}");
        match block {
            Block::Thinking(text) => {
                out.push(ev("response.output_item.added", json!({"output_index": index, "item": {"type": "reasoning", "id": item_id, "summary": []}})));
                for p in pieces(text, plan.chunk) {
                    out.push(ev("response.reasoning_summary_text.delta", json!({"item_id": item_id, "output_index": index, "summary_index": 0, "delta": p})));
                }
                let item = json!({"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": text}], "encrypted_content": "mock-encrypted"});
                out.push(ev(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ));
                items.push(item);
            }
            Block::Text(text) => {
                out.push(ev("response.output_item.added", json!({"output_index": index, "item": {"type": "message", "id": item_id, "role": "assistant", "content": []}})));
                for p in pieces(text, plan.chunk) {
                    out.push(ev("response.output_text.delta", json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": p})));
                }
                let item = json!({"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                                  "content": [{"type": "output_text", "text": text, "annotations": []}]});
                out.push(ev(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ));
                items.push(item);
            }
            Block::Call {
                id,
                name,
                arguments,
            } => {
                out.push(ev("response.output_item.added", json!({"output_index": index,
                    "item": {"type": "function_call", "id": item_id, "call_id": id, "name": name, "arguments": ""}})));
                for p in pieces(arguments, plan.chunk) {
                    out.push(ev(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": index, "delta": p}),
                    ));
                }
                let item = json!({"type": "function_call", "id": item_id, "call_id": id, "name": name, "arguments": arguments, "status": "completed"});
                out.push(ev(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ));
                items.push(item);
            }
        }
    }
    let usage = json!({"input_tokens": u.input + u.cache_read, "output_tokens": u.output,
        "input_tokens_details": {"cached_tokens": u.cache_read}, "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.cache_read + u.output});
    let (kind, status, incomplete) = match plan.stop {
        Stop::Length => (
            "response.incomplete",
            "incomplete",
            json!({"reason": "max_output_tokens"}),
        ),
        _ => ("response.completed", "completed", Value::Null),
    };
    out.push(ev(kind, json!({"response": {"id": "resp_mock", "status": status, "model": plan.model, "output": items,
        "usage": usage, "incomplete_details": incomplete}})));
    out
}

fn google(plan: &Plan) -> Vec<String> {
    let u = plan.usage;
    let chunk = |parts: Value| {
        frame(
            None,
            &json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], "modelVersion": plan.model}),
        )
    };
    let mut out = Vec::new();
    for block in &plan.blocks {
        match block {
            Block::Thinking(text) => {
                out.extend(
                    pieces(text, plan.chunk)
                        .into_iter()
                        .map(|p| chunk(json!([{"text": p, "thought": true}]))),
                );
            }
            Block::Text(text) => out.extend(
                pieces(text, plan.chunk)
                    .into_iter()
                    .map(|p| chunk(json!([{"text": p}]))),
            ),
            Block::Call {
                name, arguments, ..
            } => {
                let args: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
                out.push(chunk(
                    json!([{"functionCall": {"name": name, "args": args}}]),
                ));
            }
        }
    }
    let finish = match plan.stop {
        Stop::Length => "MAX_TOKENS",
        _ => "STOP",
    };
    out.push(frame(
        None,
        &json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": u.input + u.cache_read, "candidatesTokenCount": u.output.saturating_sub(u.reasoning),
                              "thoughtsTokenCount": u.reasoning, "cachedContentTokenCount": u.cache_read,
                              "totalTokenCount": u.input + u.cache_read + u.output},
            "modelVersion": plan.model}),
    ));
    out
}

/// The tools a request declared, as (name, parameters schema), whatever its API.
pub fn declared_tools(api: WireApi, body: &Value) -> Vec<(String, Value)> {
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let pair = |name: Option<&Value>, schema: Option<&Value>| {
        name.and_then(Value::as_str)
            .map(|n| (n.to_owned(), schema.cloned().unwrap_or(Value::Null)))
    };
    match api {
        WireApi::Anthropic => tools
            .iter()
            .filter_map(|t| pair(t.get("name"), t.get("input_schema")))
            .collect(),
        WireApi::Completions => tools
            .iter()
            .filter_map(|t| t.get("function"))
            .filter_map(|f| pair(f.get("name"), f.get("parameters")))
            .collect(),
        WireApi::Responses => tools
            .iter()
            .filter_map(|t| pair(t.get("name"), t.get("parameters")))
            .collect(),
        WireApi::Google => tools
            .iter()
            .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
            .flatten()
            .filter_map(|f| {
                pair(
                    f.get("name"),
                    f.get("parameters")
                        .or_else(|| f.get("parametersJsonSchema")),
                )
            })
            .collect(),
    }
}

/// Names that mark a shell-like tool, checked before falling back to any tool that takes
/// a `command`.
const SHELL_NAMES: &[&str] = &[
    "bash",
    "shell",
    "exec_command",
    "run_command",
    "run_shell_command",
    "terminal",
    "execute_command",
];

/// A call of `command` shaped for the client's shell-like tool: its name and arguments.
pub fn shape_shell(tools: &[(String, Value)], command: &str) -> Option<(String, Value)> {
    let by_name = tools
        .iter()
        .find(|(name, _)| SHELL_NAMES.contains(&name.to_ascii_lowercase().as_str()));
    let by_param = || {
        tools
            .iter()
            .find(|(_, schema)| schema.pointer("/properties/command").is_some())
    };
    let (name, schema) = by_name.or_else(by_param)?;
    let takes_argv = schema
        .pointer("/properties/command/type")
        .or_else(|| schema.pointer("/properties/cmd/type"))
        .and_then(Value::as_str)
        == Some("array");
    let command = if takes_argv {
        json!(["bash", "-lc", command])
    } else {
        json!(command)
    };
    // The command goes under the name the tool's schema gives it (`command`, or `cmd` as
    // Codex's `exec_command` takes it).
    let key = if schema.pointer("/properties/command").is_none()
        && schema.pointer("/properties/cmd").is_some()
    {
        "cmd"
    } else {
        "command"
    };
    let mut arguments = serde_json::Map::new();
    arguments.insert(key.to_owned(), command);
    let mut arguments = Value::Object(arguments);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if required.iter().any(|r| r == "description") {
        arguments["description"] = json!("Run a shell command");
    }
    Some((name.clone(), arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apis_are_recognised_by_path() {
        assert_eq!(WireApi::from_path("/v1/messages"), Some(WireApi::Anthropic));
        assert_eq!(
            WireApi::from_path("/anthropic/v1/messages"),
            Some(WireApi::Anthropic)
        );
        assert_eq!(
            WireApi::from_path("/v1/chat/completions"),
            Some(WireApi::Completions)
        );
        assert_eq!(
            WireApi::from_path("/v1/responses"),
            Some(WireApi::Responses)
        );
        assert_eq!(
            WireApi::from_path("/v1beta/models/g:streamGenerateContent?alt=sse"),
            Some(WireApi::Google)
        );
        assert_eq!(WireApi::from_path("/nope"), None);
    }

    #[test]
    fn shell_calls_fit_the_declared_tool() {
        let codex = vec![(
            "shell".to_owned(),
            json!({"properties": {"command": {"type": "array"}}}),
        )];
        assert_eq!(
            shape_shell(&codex, "ls"),
            Some(("shell".into(), json!({"command": ["bash", "-lc", "ls"]})))
        );
        let keel = vec![
            ("read".to_owned(), json!({"properties": {"path": {}}})),
            (
                "bash".to_owned(),
                json!({"properties": {"command": {"type": "string"}}, "required": ["command", "description"]}),
            ),
        ];
        assert_eq!(
            shape_shell(&keel, "ls"),
            Some((
                "bash".into(),
                json!({"command": "ls", "description": "Run a shell command"})
            ))
        );
        let other = vec![(
            "run".to_owned(),
            json!({"properties": {"command": {"type": "string"}}}),
        )];
        assert_eq!(shape_shell(&other, "ls").unwrap().0, "run");
        assert_eq!(shape_shell(&[], "ls"), None);
        // Codex's current shell tool takes `cmd`.
        let exec = vec![(
            "exec_command".to_owned(),
            json!({"properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}),
        )];
        assert_eq!(
            shape_shell(&exec, "ls"),
            Some(("exec_command".into(), json!({"cmd": "ls"})))
        );
    }

    #[test]
    fn every_api_ends_with_its_terminal_frame() {
        let plan = Plan {
            model: "m".into(),
            blocks: vec![
                Block::Text("hello".into()),
                Block::Call {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                },
            ],
            chunk: 2,
            content_parts: false,
            stop: Stop::ToolUse,
            usage: Usage::default(),
        };
        assert!(
            frames(WireApi::Anthropic, &plan)
                .last()
                .unwrap()
                .contains("message_stop")
        );
        assert!(
            frames(WireApi::Completions, &plan)
                .last()
                .unwrap()
                .contains("[DONE]")
        );
        assert!(
            frames(WireApi::Responses, &plan)
                .last()
                .unwrap()
                .contains("response.completed")
        );
        assert!(
            frames(WireApi::Google, &plan)
                .last()
                .unwrap()
                .contains("finishReason")
        );
    }
}
