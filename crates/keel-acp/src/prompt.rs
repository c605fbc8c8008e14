//! An ACP prompt (content blocks) as the text keel submits: text as written, links to files
//! as `@path` mentions, embedded text resources inline under their URI. Slash commands and
//! `!` shell commands are recognised only in text the user typed, never in an embedded
//! resource.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};
use base64::Engine as _;
use keel_protocol::ImageBlock;

/// Largest image a prompt may carry, decoded.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// What a prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Text for the model, and the images sent with it.
    Text(String, Vec<ImageBlock>),
    /// `!command` typed as the whole prompt: run in the session's shell, kept as context
    /// unless typed `!!command`.
    Shell {
        /// The command, without the `!`.
        command: String,
        /// Whether it joins the conversation.
        remember: bool,
    },
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
    keel_protocol::file_url_path(uri)
}

fn mention(path: &str) -> String {
    if path.chars().any(char::is_whitespace) {
        format!("@\"{path}\"")
    } else {
        format!("@{path}")
    }
}

/// Adds `bytes` to what the prompt attaches, or says the total is over `max`.
fn attach(total: &mut usize, bytes: usize, max: usize) -> Result<(), PromptError> {
    *total = total.saturating_add(bytes);
    if *total > max {
        return Err(PromptError(format!(
            "the prompt's attachments (images and embedded files) come to over {} MiB, \
             more than the {} MiB keel takes in one prompt (acp.max_attachments_mib)",
            *total / (1024 * 1024),
            max / (1024 * 1024)
        )));
    }
    Ok(())
}

/// Reads a prompt's blocks; its attachments (decoded images and embedded text) may total at
/// most `max_attachments` bytes.
pub fn read(blocks: &[ContentBlock], max_attachments: usize) -> Result<Prompt, PromptError> {
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
    // One typed line only: a multi-line prompt, a Markdown image (`![…]`) or a row of
    // `!!!` is text for the model.
    if let [ContentBlock::Text(only)] = blocks
        && !only.text.trim_end().contains('\n')
        && let Some((command, remember)) = keel_protocol::ops::RunShell::typed(&only.text)
    {
        return Ok(Prompt::Shell { command, remember });
    }
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut attached = 0;
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => match file_path(&link.uri) {
                Some(path) => parts.push(mention(&path)),
                None => parts.push(link.uri.clone()),
            },
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => {
                    attach(&mut attached, contents.text.len(), max_attachments)?;
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
                if !keel_protocol::IMAGE_TYPES.contains(&image.mime_type.as_str()) {
                    return Err(PromptError(format!(
                        "images of type {} are not taken (use PNG, JPEG, GIF or WebP)",
                        image.mime_type
                    )));
                }
                // Base64 is 4 bytes for 3: the total is checked before decoding anything.
                attach(&mut attached, image.data.len() / 4 * 3, max_attachments)?;
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
                // The declared type is the editor's word; the bytes say what it is.
                let Some(kind) = keel_protocol::image_type(&data) else {
                    return Err(PromptError(format!(
                        "an image declared {} is not one: its bytes are not PNG, JPEG, GIF or WebP",
                        image.mime_type
                    )));
                };
                images.push(ImageBlock {
                    data,
                    mime_type: kind.to_owned(),
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

    const MIB: usize = 1024 * 1024;

    fn read_all(blocks: &[ContentBlock]) -> Result<Prompt, PromptError> {
        read(blocks, 50 * MIB)
    }

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextContent::new(t))
    }

    #[test]
    fn links_become_mentions_and_resources_context() {
        let prompt = read_all(&[
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
            read_all(&[text("/model anthropic/x")]).unwrap(),
            Prompt::Command {
                name: "model".into(),
                args: "anthropic/x".into()
            }
        );
        // A slash command inside an embedded resource is text for the model.
        let embedded = read_all(&[ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "/new",
                "file:///w/x.md",
            )),
        ))])
        .unwrap();
        assert!(matches!(embedded, Prompt::Text(t, _) if t.contains("/new")));
        // `!` runs a command, `!!` runs it without keeping it; never from an embedded file.
        assert_eq!(
            read_all(&[text("!git status")]).unwrap(),
            Prompt::Shell {
                command: "git status".into(),
                remember: true
            }
        );
        assert_eq!(
            read_all(&[text("!! ls -a ")]).unwrap(),
            Prompt::Shell {
                command: "ls -a".into(),
                remember: false
            }
        );
        for not_a_command in [
            "![diagram](x.png) explain this",
            "!!! urgent: the build is red",
            "!ls\nand then tell me what you see",
            " !ls",
        ] {
            assert!(
                matches!(read_all(&[text(not_a_command)]).unwrap(), Prompt::Text(..)),
                "{not_a_command:?}"
            );
        }
        let embedded = read_all(&[ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "!rm -rf ~",
                "file:///w/x.md",
            )),
        ))])
        .unwrap();
        assert!(matches!(embedded, Prompt::Text(..)));
        let with_more = read_all(&[text("!ls"), text("and more")]).unwrap();
        assert!(matches!(with_more, Prompt::Text(..)));
        // A path is not a command.
        assert!(matches!(
            read_all(&[text("/usr/bin is odd")]).unwrap(),
            Prompt::Text(..)
        ));
    }

    #[test]
    fn images_are_decoded_and_checked() {
        assert!(read_all(&[]).is_err());
        assert!(read_all(&[text("  ")]).is_err());
        let image = read_all(&[
            text("what is this?"),
            ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ])
        .unwrap();
        let Prompt::Text(words, images) = image else {
            panic!("a text prompt")
        };
        assert_eq!(words, "what is this?");
        assert_eq!(images[0].data, b"\x89PNG\r\n\x1a\n");
        let bad = read_all(&[ContentBlock::Image(ImageContent::new("AAAA", "image/tiff"))]);
        assert!(bad.unwrap_err().0.contains("image/tiff"));
        let junk = read_all(&[ContentBlock::Image(ImageContent::new("%%%", "image/png"))]);
        assert!(junk.unwrap_err().0.contains("base64"));
        // An SVG called a PNG is refused by its bytes; a JPEG called a PNG goes as a JPEG.
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let svg = b64(b"<svg xmlns='http://www.w3.org/2000/svg'/>");
        let svg = read_all(&[ContentBlock::Image(ImageContent::new(svg, "image/png"))]);
        assert!(svg.unwrap_err().0.contains("not PNG, JPEG, GIF or WebP"));
        let jpeg = b64(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]);
        let Prompt::Text(_, images) =
            read_all(&[ContentBlock::Image(ImageContent::new(jpeg, "image/png"))]).unwrap()
        else {
            panic!("a text prompt")
        };
        assert_eq!(images[0].mime_type, "image/jpeg");
    }

    #[test]
    fn attachments_are_bounded_in_total() {
        let png = {
            let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
            bytes.resize(MIB, 0);
            base64::engine::general_purpose::STANDARD.encode(bytes)
        };
        let image = || ContentBlock::Image(ImageContent::new(png.clone(), "image/png"));
        assert!(read(&[image(), image()], 3 * MIB).is_ok());
        let over = read(&[image(), image(), image(), image()], 3 * MIB).unwrap_err();
        assert!(over.0.contains("acp.max_attachments_mib"), "{}", over.0);
        let file = ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "x".repeat(2 * MIB),
                "file:///w/big.txt",
            )),
        ));
        assert!(read(&[image(), file], 2 * MIB).is_err());
    }
}
