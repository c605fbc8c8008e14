//! Content blocks: the pieces a message is made of.

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::ToolCallId;

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text(TextBlock),
    /// Model reasoning, possibly signed or redacted by the provider.
    Thinking(ThinkingBlock),
    /// An image given inline.
    Image(ImageBlock),
    /// A request from the model to run a tool.
    ToolCall(ToolCall),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextBlock { text: text.into() })
    }

    /// The text of a text block, if this is one.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(block) => Some(&block.text),
            _ => None,
        }
    }

    /// The tool call, if this block is one.
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            Self::ToolCall(call) => Some(call),
            _ => None,
        }
    }
}

/// Plain text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
}

/// Model reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThinkingBlock {
    /// The reasoning text (empty when redacted).
    pub thinking: String,
    /// Provider signature that must be echoed back to the same provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The provider withheld the reasoning; `signature` carries its opaque payload.
    #[serde(default, skip_serializing_if = "is_false")]
    pub redacted: bool,
}

/// An inline image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageBlock {
    /// Raw image bytes; base64 in JSON.
    #[serde(serialize_with = "to_base64", deserialize_with = "from_base64")]
    pub data: Vec<u8>,
    /// MIME type, for example `image/png`.
    pub mime_type: String,
}

/// Image types every wire API keel speaks accepts, known by their first bytes.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The type of an image by its bytes: PNG, JPEG, GIF or WebP, `None` for anything else
/// (an SVG or an HTML page called `image/png` included). A declared type is never trusted.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// A tool call proposed by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned call id, echoed in the result.
    pub id: ToolCallId,
    /// Name of the tool to run.
    pub name: String,
    /// Arguments as JSON. Arguments that did not parse are kept as a JSON string holding
    /// the raw text, so validation can echo exactly what the model sent.
    pub arguments: serde_json::Value,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn to_base64<S: Serializer>(data: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
}

fn from_base64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(deserializer)?;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(serde::de::Error::custom)
}

/// The path of a `file://` URL (`file:///abs` or `file://localhost/abs`), its `%XX` escapes
/// decoded; `None` for another scheme, a broken escape or a path that is not UTF-8.
pub fn file_url_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let text = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn blocks_are_internally_tagged() {
        let blocks = vec![
            ContentBlock::text("hi"),
            ContentBlock::Thinking(ThinkingBlock {
                thinking: "hmm".into(),
                signature: Some("sig".into()),
                redacted: false,
            }),
            ContentBlock::Image(ImageBlock {
                data: vec![1, 2, 3],
                mime_type: "image/png".into(),
            }),
            ContentBlock::ToolCall(ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: json!({"path": "a"}),
            }),
        ];
        let value = serde_json::to_value(&blocks).unwrap();
        assert_eq!(
            value,
            json!([
                {"type": "text", "text": "hi"},
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "image", "data": "AQID", "mime_type": "image/png"},
                {"type": "tool_call", "id": "c1", "name": "read", "arguments": {"path": "a"}}
            ])
        );
        let back: Vec<ContentBlock> = serde_json::from_value(value).unwrap();
        assert_eq!(back, blocks);
    }

    #[test]
    fn bad_base64_is_an_error() {
        let err = serde_json::from_value::<ContentBlock>(
            json!({"type": "image", "data": "!!", "mime_type": "image/png"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("Invalid"), "{err}");
    }
}

#[cfg(test)]
mod image_tests {
    use super::image_type;

    #[test]
    fn images_are_known_by_their_bytes() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(image_type(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a..."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(
            image_type(b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>"),
            None
        );
        assert_eq!(image_type(b"\x89PN"), None);
        assert_eq!(image_type(b""), None);
    }
}
