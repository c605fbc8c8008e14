//! MCP results as keel's content blocks: text as text, images as images, resource links
//! and embedded resources as text naming them, structured content as JSON text when the
//! server gave no text of it.

use base64::Engine;
use keel_agent::ToolOutput;
use keel_protocol::{ContentBlock, ImageBlock};
use serde_json::{Value, json};

/// Images past this size are described instead of sent.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The content blocks of an MCP `content` array.
pub fn blocks(content: &[Value]) -> Vec<ContentBlock> {
    content.iter().map(block).collect()
}

fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn block(item: &Value) -> ContentBlock {
    match item.get("type").and_then(Value::as_str).unwrap_or_default() {
        "text" => ContentBlock::text(text_of(item, "text")),
        "image" => image(&text_of(item, "data"), &text_of(item, "mimeType")),
        "audio" => ContentBlock::text(format!(
            "[audio ({}) not shown: keel passes no audio to models]",
            text_of(item, "mimeType")
        )),
        "resource_link" => {
            let mut line = format!("Resource link: {}", text_of(item, "uri"));
            for (key, label) in [
                ("name", "name"),
                ("mimeType", "type"),
                ("description", "about"),
            ] {
                let value = text_of(item, key);
                if !value.is_empty() {
                    line.push_str(&format!("\n  {label}: {value}"));
                }
            }
            line.push_str("\n  (read it with read_mcp_resource)");
            ContentBlock::text(line)
        }
        "resource" => resource(item.get("resource").unwrap_or(&Value::Null)),
        other => ContentBlock::text(format!("[{other} content not shown]")),
    }
}

/// An embedded resource (`{uri, mimeType, text|blob}`).
pub fn resource(resource: &Value) -> ContentBlock {
    let uri = text_of(resource, "uri");
    let mime = text_of(resource, "mimeType");
    if let Some(text) = resource.get("text").and_then(Value::as_str) {
        return ContentBlock::text(format!("Resource {uri}:\n{text}"));
    }
    let blob = text_of(resource, "blob");
    if mime.starts_with("image/") {
        return image(&blob, &mime);
    }
    let size = base64::engine::general_purpose::STANDARD
        .decode(blob.as_bytes())
        .map_or(0, |b| b.len());
    ContentBlock::text(format!(
        "[binary resource {uri} ({}, {size} bytes) not shown]",
        if mime.is_empty() {
            "unknown type"
        } else {
            &mime
        }
    ))
}

fn image(data: &str, mime: &str) -> ContentBlock {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) else {
        return ContentBlock::text(format!(
            "[image ({mime}) not shown: its data is not base64]"
        ));
    };
    // The declared type is the server's word; the bytes say what the image is.
    match keel_protocol::image_type(&bytes) {
        Some(kind) if bytes.len() <= MAX_IMAGE_BYTES => ContentBlock::Image(ImageBlock {
            data: bytes,
            mime_type: kind.to_owned(),
        }),
        Some(_) => ContentBlock::text(format!(
            "[image ({mime}, {} bytes) not shown: keel sends images up to 20 MiB]",
            bytes.len()
        )),
        None => ContentBlock::text(format!(
            "[image declared {mime} ({} bytes) not shown: its bytes are not PNG, JPEG, GIF or WebP]",
            bytes.len()
        )),
    }
}

/// A `tools/call` result (the MCP schema's JSON) as a tool output for the model, with the
/// server, tool and structured content in the details for front ends.
pub fn output(server: &str, tool: &str, result: &Value) -> ToolOutput {
    let content: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut blocks = blocks(&content);
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if let Some(structured) = structured {
        // Servers should also give the JSON as text; when none of the text is that JSON,
        // the model gets it here.
        let given = content.iter().any(|item| {
            item.get("text")
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .is_some_and(|v| &v == structured)
        });
        if !given {
            blocks.push(ContentBlock::text(format!(
                "Structured content:\n{}",
                serde_json::to_string_pretty(structured).unwrap_or_default()
            )));
        }
    }
    if blocks.is_empty() {
        blocks.push(ContentBlock::text("(the tool returned no content)"));
    }
    ToolOutput {
        content: blocks,
        details: Some(json!({
            "mcp_server": server,
            "mcp_tool": tool,
            "structured_content": structured,
        })),
        is_error: result
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        terminate: false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_kind_of_content_maps() {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let png = b64(b"\x89PNG\r\n\x1a\n");
        let svg = b64(b"<svg xmlns='http://www.w3.org/2000/svg'><script/></svg>");
        let tiff = b64(b"II*\0\x08\0\0\0");
        let result = json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": png, "mimeType": "image/png"},
                {"type": "image", "data": "!!", "mimeType": "image/png"},
                {"type": "image", "data": tiff, "mimeType": "image/tiff"},
                {"type": "image", "data": svg, "mimeType": "image/png"},
                {"type": "resource_link", "uri": "test://a", "name": "a", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "test://b", "text": "inline"}},
                {"type": "resource", "resource": {"uri": "test://c", "blob": png, "mimeType": "application/x"}},
                {"type": "audio", "data": png, "mimeType": "audio/wav"},
            ],
            "structuredContent": {"sum": 3},
            "isError": false
        });
        let out = output("s", "t", &result);
        assert!(!out.is_error);
        assert!(matches!(&out.content[0], ContentBlock::Text(t) if t.text == "hello"));
        assert!(
            matches!(&out.content[1], ContentBlock::Image(i) if i.data.starts_with(b"\x89PNG"))
        );
        let texts: Vec<String> = out
            .content
            .iter()
            .filter_map(|b| b.as_text().map(str::to_owned))
            .collect();
        let all = texts.join("\n");
        assert!(all.contains("not base64"));
        assert!(all.contains("image/tiff"));
        // An SVG called a PNG is not sent as one.
        assert!(
            all.contains("declared image/png (55 bytes) not shown"),
            "{all}"
        );
        assert_eq!(
            out.content
                .iter()
                .filter(|b| matches!(b, ContentBlock::Image(_)))
                .count(),
            1
        );
        assert!(all.contains("Resource link: test://a"));
        assert!(all.contains("Resource test://b:\ninline"));
        assert!(all.contains("test://c (application/x, 8 bytes)"));
        assert!(all.contains("audio"));
        assert!(all.contains("\"sum\": 3"));
        assert_eq!(
            out.details.unwrap()["structured_content"],
            json!({"sum": 3})
        );
    }

    #[test]
    fn structured_content_already_given_as_text_is_not_repeated() {
        let result = json!({
            "content": [{"type": "text", "text": "{\"sum\":3}"}],
            "structuredContent": {"sum": 3}
        });
        assert_eq!(output("s", "t", &result).content.len(), 1);
        let failed = json!({"content": [], "isError": true});
        let out = output("s", "t", &failed);
        assert!(out.is_error);
        assert_eq!(out.content.len(), 1);
    }
}
