//! The script a mock server answers from, and the benchmark workload generator.

use serde::Deserialize;

/// A whole script: responses served in order, one per request.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Responses, one per request, in order.
    #[serde(default)]
    pub responses: Vec<Response>,
}

impl Script {
    /// Parses a script: either `{"responses": [...]}` or a bare list of responses.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        if value.is_array() {
            Ok(Self {
                responses: serde_json::from_value(value)?,
            })
        } else {
            serde_json::from_value(value)
        }
    }
}

/// One scripted response.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    /// Reasoning text (streamed first).
    #[serde(default)]
    pub thinking: Option<String>,
    /// Answer text.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// A shell command, sent as a call to whichever shell-like tool the client declared.
    #[serde(default)]
    pub shell: Option<String>,
    /// Chat Completions only: stream thinking and text as lists of typed content parts,
    /// the way Mistral's Magistral models do, instead of `reasoning_content` and strings.
    #[serde(default)]
    pub content_parts: bool,
    /// Characters per streamed delta (default: whole blocks).
    #[serde(default)]
    pub chunk_size: Option<usize>,
    /// Milliseconds before the first byte of the body.
    #[serde(default)]
    pub first_delay_ms: u64,
    /// Milliseconds between events.
    #[serde(default)]
    pub delay_ms: u64,
    /// Reported usage.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Stop because of the output limit.
    #[serde(default)]
    pub max_tokens: bool,
    /// A fault instead of (or in the middle of) the response.
    #[serde(default)]
    pub fault: Option<Fault>,
    /// The response waits until this file exists (a test's signal that the moment has
    /// come), at most 30 s, before its first byte.
    #[serde(default)]
    pub wait_for: Option<String>,
    /// Served only to a request whose body holds this text (a session's own prompt, when
    /// several sessions ask at once); a request gets the first response in the script that
    /// it may have.
    #[serde(default)]
    pub when: Option<String>,
    /// Served only to a request whose body does not hold this text (a turn's step, not
    /// the summary call that a compaction makes between its steps).
    #[serde(default)]
    pub unless: Option<String>,
}

impl Response {
    /// Whether this response may answer a request whose body is `text`.
    pub fn admits(&self, text: &str) -> bool {
        self.when.as_deref().is_none_or(|w| text.contains(w))
            && self.unless.as_deref().is_none_or(|u| !text.contains(u))
    }

    /// Whether this response answers only some requests.
    pub fn is_conditional(&self) -> bool {
        self.when.is_some() || self.unless.is_some()
    }
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Call id (generated when absent).
    #[serde(default)]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// Token counts to report.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Prompt tokens (uncached).
    #[serde(default)]
    pub input: u64,
    /// Output tokens.
    #[serde(default)]
    pub output: u64,
    /// Cached prompt tokens.
    #[serde(default)]
    pub cache_read: u64,
    /// Reasoning tokens (part of output).
    #[serde(default)]
    pub reasoning: u64,
}

/// Faults the server can inject.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// HTTP 429 with `retry-after` (seconds) and `retry-after-ms`.
    RateLimit {
        /// Seconds to ask the client to wait.
        #[serde(default)]
        retry_after_s: Option<f64>,
    },
    /// HTTP 500.
    ServerError,
    /// HTTP 529, overloaded.
    Overloaded,
    /// HTTP 400 (a request the provider rejects).
    BadRequest,
    /// HTTP 401 (the key is refused).
    Unauthorized,
    /// HTTP 400 saying the request does not fit the context window, in the words of the
    /// request's API (OpenAI's `context_length_exceeded`, Anthropic's "prompt is too
    /// long", Gemini's token count).
    ContextOverflow,
    /// Reset the connection after `after_events` events.
    Reset {
        /// Events sent before the reset.
        #[serde(default)]
        after_events: usize,
    },
    /// End the body cleanly after `after_events` events, without the terminal event.
    Truncate {
        /// Events sent before the end.
        #[serde(default)]
        after_events: usize,
    },
    /// Send a data line that is not JSON after `after_events` events.
    Malformed {
        /// Events sent before the bad line.
        #[serde(default)]
        after_events: usize,
    },
    /// Stop sending after `after_events` events and keep the connection open.
    Stall {
        /// Events sent before the stall.
        #[serde(default)]
        after_events: usize,
    },
}

/// The long benchmark workload: `steps` responses of about `kib` KiB of streamed markdown
/// plus one shell call each, then a final answer.
pub fn workload(steps: usize, kib: usize, chunk_size: usize) -> Script {
    let mut responses = Vec::with_capacity(steps + 1);
    for step in 0..steps {
        responses.push(Response {
            text: Some(markdown(step, kib * 1024)),
            shell: Some(step_command(step)),
            chunk_size: Some(chunk_size),
            usage: Some(Usage {
                input: 1_000 + step as u64 * 300,
                output: (kib * 256) as u64,
                ..Usage::default()
            }),
            ..Response::default()
        });
    }
    responses.push(Response {
        text: Some(format!("All {steps} steps are done.")),
        chunk_size: Some(chunk_size),
        ..Response::default()
    });
    Script { responses }
}

/// The public long-run benchmark's commands, in turn: `ls`, `echo …`, `pwd`, `ls -la`.
fn step_command(step: usize) -> String {
    match step % 4 {
        0 => "ls".to_owned(),
        1 => format!("echo step {step}"),
        2 => "pwd".to_owned(),
        _ => "ls -la".to_owned(),
    }
}

/// About `bytes` bytes of plausible markdown for step `step`.
fn markdown(step: usize, bytes: usize) -> String {
    let mut out = format!("## Step {step}\n\n");
    let mut paragraph = 0;
    while out.len() < bytes {
        paragraph += 1;
        out.push_str(&format!(
            "Paragraph {paragraph} of step {step}: the harness streams this text in small deltas, \
             so the client must fold each one without copying what it already has.\n\n\
             - item one for `src/module_{paragraph}.rs`\n- item two with **bold** and _emphasis_\n\n\
             ```rust\nfn step_{step}_{paragraph}() -> usize {{ {paragraph} }}\n```\n\n"
        ));
    }
    out.truncate(bytes.max(16));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse_in_both_shapes_and_typos_are_named() {
        let list = Script::parse(
            r#"[{"text": "hi"}, {"fault": {"kind": "rate_limit", "retry_after_s": 1}}]"#,
        )
        .unwrap();
        assert_eq!(list.responses.len(), 2);
        let object = Script::parse(r#"{"responses": [{"shell": "ls"}]}"#).unwrap();
        assert_eq!(object.responses[0].shell.as_deref(), Some("ls"));
        let err = Script::parse(r#"[{"txt": "hi"}]"#).unwrap_err();
        assert!(err.to_string().contains("txt"), "{err}");
    }

    #[test]
    fn the_workload_has_the_requested_shape() {
        let script = workload(3, 4, 64);
        assert_eq!(script.responses.len(), 4);
        let text = script.responses[0].text.as_deref().unwrap();
        assert!(text.len() >= 4000 && text.len() <= 4096, "{}", text.len());
        let commands: Vec<&str> = script.responses[..3]
            .iter()
            .filter_map(|r| r.shell.as_deref())
            .collect();
        assert_eq!(commands, ["ls", "echo step 1", "pwd"]);
    }
}
