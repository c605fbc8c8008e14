//! Thought signatures across a round trip: decoded from a stream, folded into a message and
//! sent back in the next request on the part Gemini put them on.

use super::*;
use pretty_assertions::assert_eq;

/// Gemini 3 signs the first function call of a step even when no thought is shown, and
/// refuses the next request unless that call carries its signature back.
#[test]
fn a_signed_call_without_thoughts_keeps_its_signature_for_the_next_request() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"id": "c1", "name": "read", "args": {"path": "a.rs"}}, "thoughtSignature": "sig-3"}, {"functionCall": {"id": "c2", "name": "read", "args": {"path": "b.rs"}}}],"role": "model"},"finishReason": "STOP","index": 0}],"modelVersion": "gemini-3-pro","responseId": "resp-9"}"#,
    ]);
    assert_eq!(
        &events[1..3],
        &[
            StreamEvent::ThinkingStart { index: 0 },
            StreamEvent::ThinkingEnd {
                index: 0,
                signature: Some("sig-3".into()),
                redacted: false
            },
        ]
    );
    let mut builder = AssistantBuilder::new();
    for event in &events {
        builder.apply(event).unwrap();
    }
    let answer = builder.finish();
    assert_eq!(answer.tool_calls().count(), 2);
    let req = request(
        vec![Message::user_text("read both"), Message::Assistant(answer)],
        RequestOptions::default(),
    );
    let body = build(&model(), &req, None).body;
    assert_eq!(
        body["contents"][1]["parts"],
        json!([
            {"functionCall": {"name": "read", "args": {"path": "a.rs"}, "id": "c1"},
             "thoughtSignature": "sig-3"},
            {"functionCall": {"name": "read", "args": {"path": "b.rs"}, "id": "c2"}},
        ]),
        "no empty thought part, the signature back on the first call only"
    );
}

/// A thought that carries its own signature keeps it; the call's signature travels on the
/// call, not over the thought's.
#[test]
fn a_calls_signature_does_not_replace_its_thoughts_signature() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Plan.", "thought": true, "thoughtSignature": "sig-thought"}, {"functionCall": {"id": "c1", "name": "read", "args": {}}, "thoughtSignature": "sig-call"}],"role": "model"},"finishReason": "STOP","index": 0}]}"#,
    ]);
    let mut builder = AssistantBuilder::new();
    for event in &events {
        builder.apply(event).unwrap();
    }
    let req = request(
        vec![
            Message::user_text("go"),
            Message::Assistant(builder.finish()),
        ],
        RequestOptions::default(),
    );
    let body = build(&model(), &req, None).body;
    assert_eq!(
        body["contents"][1]["parts"],
        json!([
            {"text": "Plan.", "thought": true, "thoughtSignature": "sig-thought"},
            {"functionCall": {"name": "read", "args": {}, "id": "c1"}, "thoughtSignature": "sig-call"},
        ])
    );
}

/// A text-only answer (no thoughts shown, no call) signed on its last chunk: the signature
/// went nowhere and the next request lacked it. Decoded, folded and encoded again, it rides
/// on the answer's text as it came.
#[test]
fn a_signed_text_only_answer_sends_its_signature_back_on_the_text() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"modelVersion": "gemini-3-pro","responseId": "resp-t"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": ", world", "thoughtSignature": "sig-text"}],"role": "model"},"finishReason": "STOP","index": 0}],"modelVersion": "gemini-3-pro","responseId": "resp-t"}"#,
    ]);
    let answer = fold(&events);
    assert_eq!(
        answer.content,
        vec![
            text("Hello, world"),
            ContentBlock::Thinking(ThinkingBlock {
                thinking: String::new(),
                signature: Some("sig-text".into()),
                redacted: false,
            }),
        ]
    );
    let req = request(
        vec![
            Message::user_text("greet"),
            Message::Assistant(answer),
            Message::user_text("again"),
        ],
        RequestOptions::default(),
    );
    assert_eq!(
        build(&model(), &req, None).body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "greet"}]},
            {"role": "model", "parts": [{"text": "Hello, world", "thoughtSignature": "sig-text"}]},
            {"role": "user", "parts": [{"text": "again"}]},
        ])
    );
}

/// A signature ends the text part it rides on: text after it is a part of its own, and a
/// signed call after it keeps its own signature.
#[test]
fn text_after_a_signed_part_and_a_signed_call_keep_their_own_signatures() {
    let events = decode(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "One.", "thoughtSignature": "sig-a"}, {"text": "Two."}],"role": "model"},"index": 0}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "Three.", "thoughtSignature": "sig-b"}, {"functionCall": {"id": "c1", "name": "read", "args": {}}, "thoughtSignature": "sig-call"}],"role": "model"},"finishReason": "STOP","index": 0}]}"#,
    ]);
    let req = request(
        vec![Message::user_text("go"), Message::Assistant(fold(&events))],
        RequestOptions::default(),
    );
    assert_eq!(
        build(&model(), &req, None).body["contents"][1]["parts"],
        json!([
            {"text": "One.", "thoughtSignature": "sig-a"},
            {"text": "Two.Three.", "thoughtSignature": "sig-b"},
            {"functionCall": {"name": "read", "args": {}, "id": "c1"}, "thoughtSignature": "sig-call"},
        ])
    );
}
