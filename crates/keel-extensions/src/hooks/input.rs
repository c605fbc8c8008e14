//! What a hook reads on stdin: one JSON object in Claude Code's exact shape, the fields
//! every event has and the event's own.
//!
//! Tools appear under their Claude Code names with Claude Code's argument names added
//! ([`super::mapping`]); everything else keel passes as it has it. `tool_response` is keel's
//! result, not Claude Code's per-tool shape, which keel's tools do not produce.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::mapping::{claude_tool_name, to_claude_input_in};
use super::settings::HookEvent;

/// The fields every hook input has.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    /// The session's id.
    pub session_id: String,
    /// The session's transcript, if keel has one as a file; `""` in the input otherwise.
    pub transcript_path: Option<PathBuf>,
    /// The working folder; hooks also run in it.
    pub cwd: PathBuf,
    /// The permission mode, in Claude Code's words.
    pub permission_mode: PermissionMode,
}

/// Claude Code's names for how tool calls are approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionMode {
    /// Ask as the rules say.
    Default,
    /// Read-only planning.
    Plan,
    /// File edits are approved without asking.
    AcceptEdits,
    /// Nothing is asked.
    BypassPermissions,
}

impl PermissionMode {
    /// The value of `permission_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Plan => "plan",
            Self::AcceptEdits => "acceptEdits",
            Self::BypassPermissions => "bypassPermissions",
        }
    }
}

/// Why a session (re)started, the `source` of SessionStart and what its matcher sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSource {
    /// A new session.
    Startup,
    /// A session resumed.
    Resume,
    /// The conversation was cleared.
    Clear,
    /// The context was just compacted.
    Compact,
}

impl SessionSource {
    /// The value of `source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Startup => "startup",
            Self::Resume => "resume",
            Self::Clear => "clear",
            Self::Compact => "compact",
        }
    }
}

/// Why a session ended, the `reason` of SessionEnd and what its matcher sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The conversation was cleared.
    Clear,
    /// The user logged out.
    Logout,
    /// The user left the prompt (end of input, `/exit`).
    PromptInputExit,
    /// Anything else (a one-shot run ending, a signal).
    Other,
}

impl EndReason {
    /// The value of `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clear => "clear",
            Self::Logout => "logout",
            Self::PromptInputExit => "prompt_input_exit",
            Self::Other => "other",
        }
    }
}

/// What started a compaction, the `trigger` of PreCompact and what its matcher sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactTrigger {
    /// The user asked for it.
    Manual,
    /// The context was full.
    Auto,
}

impl CompactTrigger {
    /// The value of `trigger`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Auto => "auto",
        }
    }
}

/// One event and its data, keel's way (keel's tool names and arguments).
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    /// A tool call about to run.
    PreToolUse {
        /// keel's tool name.
        tool: String,
        /// keel's arguments.
        input: Value,
        /// The call's id.
        tool_use_id: String,
    },
    /// A tool call that succeeded.
    PostToolUse {
        /// keel's tool name.
        tool: String,
        /// keel's arguments.
        input: Value,
        /// The call's id.
        tool_use_id: String,
        /// What the tool returned.
        response: Value,
    },
    /// A prompt the user submitted.
    UserPromptSubmit {
        /// Its text.
        prompt: String,
    },
    /// The agent is about to end its turn.
    Stop {
        /// Whether a Stop hook already made it go on once this turn (scripts check it to
        /// avoid looping).
        stop_hook_active: bool,
    },
    /// A session started.
    SessionStart {
        /// How.
        source: SessionSource,
    },
    /// A session ended.
    SessionEnd {
        /// Why.
        reason: EndReason,
    },
    /// The context is about to be compacted.
    PreCompact {
        /// What started it.
        trigger: CompactTrigger,
        /// The user's instructions for a manual compaction; empty otherwise.
        custom_instructions: String,
    },
    /// keel wants the user's attention.
    Notification {
        /// What to tell the user.
        message: String,
        /// A short title, when there is one.
        title: Option<String>,
        /// Claude Code's kind of notification (`permission_prompt`, `idle_prompt`, …),
        /// what its matcher sees.
        notification_type: String,
    },
}

impl EventData {
    /// The event this is.
    pub fn event(&self) -> HookEvent {
        match self {
            Self::PreToolUse { .. } => HookEvent::PreToolUse,
            Self::PostToolUse { .. } => HookEvent::PostToolUse,
            Self::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            Self::Stop { .. } => HookEvent::Stop,
            Self::SessionStart { .. } => HookEvent::SessionStart,
            Self::SessionEnd { .. } => HookEvent::SessionEnd,
            Self::PreCompact { .. } => HookEvent::PreCompact,
            Self::Notification { .. } => HookEvent::Notification,
        }
    }

    /// What the event's matchers are tested against: the tool's Claude Code name, the
    /// source, reason, trigger or notification type.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Self::PreToolUse { tool, .. } | Self::PostToolUse { tool, .. } => {
                Some(claude_tool_name(tool))
            }
            Self::SessionStart { source } => Some(source.as_str()),
            Self::SessionEnd { reason } => Some(reason.as_str()),
            Self::PreCompact { trigger, .. } => Some(trigger.as_str()),
            Self::Notification {
                notification_type, ..
            } => Some(notification_type),
            Self::UserPromptSubmit { .. } | Self::Stop { .. } => None,
        }
    }
}

/// The JSON a hook reads on stdin for `event`.
pub fn input_json(common: &Common, event: &EventData) -> Value {
    let path = |p: &PathBuf| p.to_string_lossy().into_owned();
    let mut input = Map::new();
    input.insert("session_id".into(), json!(common.session_id));
    input.insert(
        "transcript_path".into(),
        json!(
            common
                .transcript_path
                .as_ref()
                .map(path)
                .unwrap_or_default()
        ),
    );
    input.insert("cwd".into(), json!(path(&common.cwd)));
    input.insert(
        "permission_mode".into(),
        json!(common.permission_mode.as_str()),
    );
    input.insert("hook_event_name".into(), json!(event.event().name()));
    let tool = |tool: &str, args: &Value, id: &str| {
        [
            ("tool_name", json!(claude_tool_name(tool))),
            ("tool_input", to_claude_input_in(tool, args, &common.cwd)),
            ("tool_use_id", json!(id)),
        ]
    };
    let fields: Vec<(&str, Value)> = match event {
        EventData::PreToolUse {
            tool: name,
            input: args,
            tool_use_id,
        } => tool(name, args, tool_use_id).into(),
        EventData::PostToolUse {
            tool: name,
            input: args,
            tool_use_id,
            response,
        } => {
            let mut fields = Vec::from(tool(name, args, tool_use_id));
            fields.push(("tool_response", response.clone()));
            fields
        }
        EventData::UserPromptSubmit { prompt } => vec![("prompt", json!(prompt))],
        EventData::Stop { stop_hook_active } => {
            vec![("stop_hook_active", json!(stop_hook_active))]
        }
        EventData::SessionStart { source } => vec![("source", json!(source.as_str()))],
        EventData::SessionEnd { reason } => vec![("reason", json!(reason.as_str()))],
        EventData::PreCompact {
            trigger,
            custom_instructions,
        } => vec![
            ("trigger", json!(trigger.as_str())),
            ("custom_instructions", json!(custom_instructions)),
        ],
        EventData::Notification {
            message,
            title,
            notification_type,
        } => {
            let mut fields = vec![("message", json!(message))];
            if let Some(title) = title {
                fields.push(("title", json!(title)));
            }
            fields.push(("notification_type", json!(notification_type)));
            fields
        }
    };
    for (key, value) in fields {
        input.insert(key.to_owned(), value);
    }
    Value::Object(input)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn common() -> Common {
        Common {
            session_id: "s-1".into(),
            transcript_path: Some("/home/u/.keel/s-1.jsonl".into()),
            cwd: "/work/p".into(),
            permission_mode: PermissionMode::Default,
        }
    }

    /// `extra` with the common fields of `event` added.
    fn with_common(event: &str, extra: Value) -> Value {
        let mut all = json!({
            "session_id": "s-1",
            "transcript_path": "/home/u/.keel/s-1.jsonl",
            "cwd": "/work/p",
            "permission_mode": "default",
            "hook_event_name": event,
        });
        for (key, value) in extra.as_object().unwrap() {
            all[key] = value.clone();
        }
        all
    }

    #[test]
    fn pre_tool_use() {
        let event = EventData::PreToolUse {
            tool: "edit".into(),
            input: json!({"path": "src/a.rs", "edits": [{"old_string": "a", "new_string": "b"}]}),
            tool_use_id: "call-7".into(),
        };
        assert_eq!(
            input_json(&common(), &event),
            with_common(
                "PreToolUse",
                json!({
                    "tool_name": "Edit",
                    "tool_input": {
                        "path": "src/a.rs",
                        "file_path": "/work/p/src/a.rs",
                        "edits": [{"old_string": "a", "new_string": "b"}],
                        "old_string": "a",
                        "new_string": "b",
                        "replace_all": false
                    },
                    "tool_use_id": "call-7"
                })
            )
        );
        assert_eq!(event.subject(), Some("Edit"));
    }

    #[test]
    fn post_tool_use() {
        let event = EventData::PostToolUse {
            tool: "mcp__db__query".into(),
            input: json!({"sql": "select 1"}),
            tool_use_id: "call-8".into(),
            response: json!({"rows": 1}),
        };
        assert_eq!(
            input_json(&common(), &event),
            with_common(
                "PostToolUse",
                json!({
                    "tool_name": "mcp__db__query",
                    "tool_input": {"sql": "select 1"},
                    "tool_use_id": "call-8",
                    "tool_response": {"rows": 1}
                })
            )
        );
    }

    #[test]
    fn events_without_tools() {
        let mut no_transcript = common();
        no_transcript.transcript_path = None;
        no_transcript.permission_mode = PermissionMode::AcceptEdits;
        let prompt = EventData::UserPromptSubmit {
            prompt: "fix it".into(),
        };
        let mut expected = with_common("UserPromptSubmit", json!({"prompt": "fix it"}));
        expected["transcript_path"] = json!("");
        expected["permission_mode"] = json!("acceptEdits");
        assert_eq!(input_json(&no_transcript, &prompt), expected);

        let cases = [
            (
                EventData::Stop {
                    stop_hook_active: true,
                },
                with_common("Stop", json!({"stop_hook_active": true})),
            ),
            (
                EventData::SessionStart {
                    source: SessionSource::Resume,
                },
                with_common("SessionStart", json!({"source": "resume"})),
            ),
            (
                EventData::SessionEnd {
                    reason: EndReason::PromptInputExit,
                },
                with_common("SessionEnd", json!({"reason": "prompt_input_exit"})),
            ),
            (
                EventData::PreCompact {
                    trigger: CompactTrigger::Manual,
                    custom_instructions: "keep the plan".into(),
                },
                with_common(
                    "PreCompact",
                    json!({"trigger": "manual", "custom_instructions": "keep the plan"}),
                ),
            ),
            (
                EventData::Notification {
                    message: "keel needs your permission to use Bash".into(),
                    title: Some("Permission needed".into()),
                    notification_type: "permission_prompt".into(),
                },
                with_common(
                    "Notification",
                    json!({
                        "message": "keel needs your permission to use Bash",
                        "title": "Permission needed",
                        "notification_type": "permission_prompt"
                    }),
                ),
            ),
            (
                EventData::Notification {
                    message: "waiting".into(),
                    title: None,
                    notification_type: "idle_prompt".into(),
                },
                with_common(
                    "Notification",
                    json!({"message": "waiting", "notification_type": "idle_prompt"}),
                ),
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(input_json(&common(), &event), expected, "{event:?}");
        }
    }

    #[test]
    fn subjects() {
        let subjects = [
            (
                EventData::SessionStart {
                    source: SessionSource::Compact,
                },
                Some("compact"),
            ),
            (
                EventData::PreCompact {
                    trigger: CompactTrigger::Auto,
                    custom_instructions: String::new(),
                },
                Some("auto"),
            ),
            (
                EventData::Stop {
                    stop_hook_active: false,
                },
                None,
            ),
        ];
        for (event, subject) in subjects {
            assert_eq!(event.subject(), subject);
        }
    }
}
