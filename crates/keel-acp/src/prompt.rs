//! An ACP prompt (content blocks) as the text keel submits: text as written, links to files
//! as `@path` mentions, embedded text resources inline under their URI. Slash commands are
//! recognised only in text the user typed, never in an embedded resource.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

/// What a prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Text for the model.
    Text(String),
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
            ContentBlock::Image(_) => {
                return Err(PromptError(
                    "keel acp does not take images in prompts (promptCapabilities.image is false); link the file instead"
                        .into(),
                ));
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
    if text.trim().is_empty() {
        return Err(PromptError("the prompt is empty".into()));
    }
    Ok(Prompt::Text(text))
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
                    .into()
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
        assert!(matches!(embedded, Prompt::Text(t) if t.contains("/new")));
        // A path is not a command.
        assert!(matches!(
            read(&[text("/usr/bin is odd")]).unwrap(),
            Prompt::Text(_)
        ));
    }

    #[test]
    fn empty_and_image_prompts_are_refused() {
        assert!(read(&[]).is_err());
        assert!(read(&[text("  ")]).is_err());
        let image = read(&[ContentBlock::Image(ImageContent::new("AAAA", "image/png"))]);
        assert!(image.unwrap_err().0.contains("image"));
    }
}
