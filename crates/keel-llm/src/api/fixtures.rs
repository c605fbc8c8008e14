//! Conversations shared by the wire-API encoder tests.

use keel_protocol::{
    AssistantMessage, ContentBlock, ImageBlock, Message, StopReason, ThinkingBlock, ToolCall,
    ToolCallId, ToolResultMessage, UserMessage,
};
use serde_json::json;

/// A thinking block.
pub(super) fn thinking(text: &str, signature: Option<&str>, redacted: bool) -> ContentBlock {
    ContentBlock::Thinking(ThinkingBlock {
        thinking: text.into(),
        signature: signature.map(Into::into),
        redacted,
    })
}

/// One step: a question with an image; an answer with `before` and `after` around its text
/// that reads an image and runs a failing command (call ids `ids`); the image result and the
/// error result.
pub(super) fn image_tool_step(
    ids: [&str; 2],
    before: Vec<ContentBlock>,
    after: Vec<ContentBlock>,
) -> Vec<Message> {
    let mut answer = before;
    answer.push(ContentBlock::text("Let me check."));
    answer.extend(after);
    answer.push(ContentBlock::ToolCall(ToolCall {
        id: ids[0].into(),
        name: "read".into(),
        arguments: json!({"path": "a.png"}),
    }));
    answer.push(ContentBlock::ToolCall(ToolCall {
        id: ids[1].into(),
        name: "bash".into(),
        arguments: json!({"command": "false"}),
    }));
    vec![
        Message::User(UserMessage {
            content: vec![
                ContentBlock::text("What is in this image?"),
                ContentBlock::Image(ImageBlock {
                    data: vec![1, 2, 3],
                    mime_type: "image/png".into(),
                }),
            ],
            timestamp: 0,
            batch_id: None,
            hidden: false,
            shell: None,
        }),
        Message::Assistant(AssistantMessage {
            content: answer,
            stop_reason: StopReason::ToolUse,
            ..AssistantMessage::default()
        }),
        Message::ToolResult(ToolResultMessage {
            tool_call_id: ToolCallId::new(ids[0]),
            tool_name: "read".into(),
            content: vec![
                ContentBlock::text("an image"),
                ContentBlock::Image(ImageBlock {
                    data: vec![4, 5],
                    mime_type: "image/jpeg".into(),
                }),
            ],
            details: None,
            is_error: false,
            timestamp: 0,
        }),
        Message::ToolResult(ToolResultMessage::error(
            ToolCallId::new(ids[1]),
            "bash",
            "exit code 1",
        )),
    ]
}
