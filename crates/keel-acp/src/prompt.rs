//! An ACP prompt (content blocks) as the text keel submits: text as written, links to files
//! as `@path` mentions, embedded text resources inline under their URI. Slash commands are
//! recognised only in text the user typed, never in an embedded resource.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use base64::Engine as _;
use keel_protocol::ImageBlock;

/// Largest image a prompt may carry, decoded.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;
/// Image types every wire API keel speaks accepts.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// What a prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Text for the model, and the images sent with it.
    Text(String, Vec<ImageBlock>),
    /// A slash command typed as the whole prompt: its name and arguments.
    Command {
        /// The name, without the slash.
        name: String,
        /// The rest of the line and anything after it.
        args: String,
    },
}

/// Why a prompt cannot be submitted (a JSON-RPC invalid-params error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PromptError(pub String);

fn file_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    // file:///abs/path or file://localhost/abs/path; percent escapes decoded.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    decode_percent(rest)
}

fn decode_percent(text: &str) -> Option<String> {
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

fn mention(path: &str) -> String {
    if path.chars().any(char::is_whitespace) {
        format!("@\"{path}\"")
    } else {
        format!("@{path}")
    }
}

/// Reads a prompt's blocks.
pub fn read(blocks: &[ContentBlock]) -> Result<Prompt, PromptError> {
    if let [ContentBlock::Text(first), ..] = blocks
        && let Some(line) = first.text.trim_start().strip_prefix('/')
        && blocks.len() == 1
    {
        let (name, args) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
        {
            return Ok(Prompt::Command {
                name: name.to_owned(),
                args: args.trim().to_owned(),
            });
        }
    }
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => match file_path(&link.uri) {
                Some(path) => parts.push(mention(&path)),
                None => parts.push(link.uri.clone()),
            },
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => {
                    let name = file_path(&contents.uri).unwrap_or_else(|| contents.uri.clone());
                    parts.push(format!(
                        "<context source=\"{}\">\n{}\n</context>",
                        name.replace('"', "%22"),
                        contents.text.replace("</context>", "</ context>")
                    ));
                }
                _ => {
                    return Err(PromptError(
                        "binary resources cannot be sent to the model; embed text or link the file"
                            .into(),
                    ));
                }
            },
            ContentBlock::Image(image) => {
                if !IMAGE_TYPES.contains(&image.mime_type.as_str()) {
                    return Err(PromptError(format!(
                        "images of type {} are not taken (use PNG, JPEG, GIF or WebP)",
                        image.mime_type
                    )));
                }
                let data = base64::engine::general_purpose::STANDARD
                    .decode(image.data.trim())
                    .map_err(|_| PromptError("an image's data is not base64".into()))?;
                if data.len() > MAX_IMAGE_BYTES {
                    return Err(PromptError(format!(
                        "an image of {} MiB is larger than the {} MiB keel sends",
                        data.len() / (1024 * 1024),
                        MAX_IMAGE_BYTES / (1024 * 1024)
                    )));
                }
                images.push(ImageBlock {
                    data,
                    mime_type: image.mime_type.clone(),
                });
            }
            ContentBlock::Audio(_) => {
                return Err(PromptError(
                    "keel acp does not take audio in prompts (promptCapabilities.audio is false)"
                        .into(),
                ));
            }
            _ => {
                return Err(PromptError(
                    "the prompt holds a content block keel does not know".into(),
                ));
            }
        }
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() && images.is_empty() {
        return Err(PromptError("the prompt is empty".into()));
    }
    Ok(Prompt::Text(text, images))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agent_client_protocol::v1::schema::{
        EmbeddedResource, ImageContent, ResourceLink, TextContent, TextResourceContents,
    };

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextContent::new(t))
    }

    #[test]
    fn links_become_mentions_and_resources_context() {
        let prompt = read(&[
            text("look at"),
            ContentBlock::ResourceLink(ResourceLink::new("a b.rs", "file:///w/a%20b.rs")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///w/main.rs",
                )),
            )),
        ])
        .unwrap();
        assert_eq!(
            prompt,
            Prompt::Text(
                "look at\n\n@\"/w/a b.rs\"\n\n<context source=\"/w/main.rs\">\nfn main() {}\n</context>"
                    .into(),
                Vec::new()
            )
        );
    }

    #[test]
    fn commands_only_from_typed_text() {
        assert_eq!(
            read(&[text("/model anthropic/x")]).unwrap(),
            Prompt::Command {
                name: "model".into(),
                args: "anthropic/x".into()
            }
        );
        // A slash command inside an embedded resource is text for the model.
        let embedded = read(&[ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "/new",
                "file:///w/x.md",
            )),
        ))])
        .unwrap();
        assert!(matches!(embedded, Prompt::Text(t, _) if t.contains("/new")));
        // A path is not a command.
        assert!(matches!(
            read(&[text("/usr/bin is odd")]).unwrap(),
            Prompt::Text(..)
        ));
    }

    #[test]
    fn images_are_decoded_and_checked() {
        assert!(read(&[]).is_err());
        assert!(read(&[text("  ")]).is_err());
        let image = read(&[
            text("what is this?"),
            ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ])
        .unwrap();
        let Prompt::Text(words, images) = image else {
            panic!("a text prompt")
        };
        assert_eq!(words, "what is this?");
        assert_eq!(images[0].data, b"\x89PNG\r\n\x1a\n");
        let bad = read(&[ContentBlock::Image(ImageContent::new("AAAA", "image/tiff"))]);
        assert!(bad.unwrap_err().0.contains("image/tiff"));
        let junk = read(&[ContentBlock::Image(ImageContent::new("%%%", "image/png"))]);
        assert!(junk.unwrap_err().0.contains("base64"));
    }
}
