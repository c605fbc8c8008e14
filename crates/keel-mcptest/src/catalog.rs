//! The resources and the prompt this server offers.

use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
    Resource, ResourceContents, Role,
};
use serde_json::Value;

const GREETING_URI: &str = "test://greeting";
const GREETING: &str = "hello from keel-mcptest";
const BLOB_URI: &str = "test://blob";
/// The bytes 0x00..=0x0f, base64: binary content no client may mistake for text.
const BLOB: &str = "AAECAwQFBgcICQoLDA0ODw==";
const BLOB_MIME: &str = "application/octet-stream";

/// The listed resources.
pub fn resources() -> Vec<Resource> {
    vec![
        Resource::new(GREETING_URI, "greeting")
            .with_description("A short text greeting.")
            .with_mime_type("text/plain"),
        Resource::new(BLOB_URI, "blob")
            .with_description("Sixteen bytes of binary data.")
            .with_mime_type(BLOB_MIME)
            .with_size(16),
    ]
}

/// The contents of resource `uri`; an unknown one is a resource-not-found error.
pub fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = match uri {
        GREETING_URI => ResourceContents::text(GREETING, uri),
        BLOB_URI => ResourceContents::blob(BLOB, uri).with_mime_type(BLOB_MIME),
        _ => {
            return Err(ErrorData::resource_not_found(
                format!("no resource `{uri}`"),
                None,
            ));
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// The listed prompts.
pub fn prompts() -> Vec<Prompt> {
    vec![Prompt::new(
        "review",
        Some("Asks for a review of one file."),
        Some(vec![
            PromptArgument::new("file")
                .with_description("The file to review.")
                .with_required(true),
            PromptArgument::new("focus")
                .with_description("What the review should look at most.")
                .with_required(false),
        ]),
    )]
}

/// Prompt `name` filled in with `args`; an unknown prompt or a missing `file` is invalid params.
pub fn prompt(name: &str, args: Option<&JsonObject>) -> Result<GetPromptResult, ErrorData> {
    if name != "review" {
        return Err(ErrorData::invalid_params(
            format!("unknown prompt `{name}`"),
            None,
        ));
    }
    let arg = |key: &str| args.and_then(|a| a.get(key)).and_then(Value::as_str);
    let file = arg("file").ok_or_else(|| {
        ErrorData::invalid_params("argument `file` is missing or not a string", None)
    })?;
    let text = match arg("focus") {
        Some(focus) => format!("Review {file}, focusing on {focus}."),
        None => format!("Review {file}."),
    };
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        text,
    )]))
}
