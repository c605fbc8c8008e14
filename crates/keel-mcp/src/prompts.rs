//! A server's prompts as slash commands: `/<server>:<prompt> ARGS`, where ARGS are
//! `name=value` pairs or words in the order the prompt declares its arguments.

use serde_json::{Map, Value};

use crate::manager::Server;
use keel_runtime::extension::{CommandError, Expansion};

/// `<file> [focus]` from a prompt's declared arguments.
pub fn hint(prompt: &Value) -> Option<String> {
    let arguments = prompt.get("arguments")?.as_array()?;
    let parts: Vec<String> = arguments
        .iter()
        .filter_map(|a| {
            let name = a.get("name")?.as_str()?;
            let required = a.get("required").and_then(Value::as_bool).unwrap_or(false);
            Some(if required {
                format!("<{name}>")
            } else {
                format!("[{name}]")
            })
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// Words split as a shell would: quotes group, a backslash escapes.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    current.push(next);
                    started = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if started || !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            (None, c) => current.push(c),
        }
    }
    if started || !current.is_empty() {
        out.push(current);
    }
    out
}

/// The arguments of `/<server>:<prompt> text` for a prompt declaring `declared`.
pub fn arguments(declared: &Value, text: &str) -> Result<Map<String, Value>, CommandError> {
    let names: Vec<(String, bool)> = declared
        .get("arguments")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|a| {
                    Some((
                        a.get("name")?.as_str()?.to_owned(),
                        a.get("required").and_then(Value::as_bool).unwrap_or(false),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut map = Map::new();
    let words = words(text);
    let named = !words.is_empty()
        && words.iter().all(|w| {
            w.split_once('=')
                .is_some_and(|(k, _)| names.iter().any(|(n, _)| n == k))
        });
    if named {
        for word in &words {
            if let Some((key, value)) = word.split_once('=') {
                map.insert(key.to_owned(), Value::String(value.to_owned()));
            }
        }
    } else {
        let mut rest = words.into_iter();
        for (i, (name, _)) in names.iter().enumerate() {
            // The last declared argument takes every remaining word.
            let value = if i + 1 == names.len() {
                let remaining: Vec<String> = rest.by_ref().collect();
                (!remaining.is_empty()).then(|| remaining.join(" "))
            } else {
                rest.next()
            };
            if let Some(value) = value {
                map.insert(name.clone(), Value::String(value));
            }
        }
        if rest.next().is_some() || (names.is_empty() && !text.trim().is_empty()) {
            return Err(CommandError::Usage("too many arguments".to_owned()));
        }
    }
    if let Some((missing, _)) = names
        .iter()
        .find(|(n, required)| *required && !map.contains_key(n))
    {
        let hint = hint(declared).unwrap_or_default();
        return Err(CommandError::Usage(format!(
            "missing argument `{missing}` (arguments: {hint})"
        )));
    }
    Ok(map)
}

/// Gets the prompt and joins its messages into the text a turn starts with.
pub async fn expand(
    server: &Server,
    name: &str,
    declared: &Value,
    text: &str,
) -> Result<Expansion, CommandError> {
    let arguments = arguments(declared, text)?;
    let result = server
        .prompt(name, arguments)
        .await
        .map_err(CommandError::failed)?;
    let messages = result
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut parts = Vec::new();
    for message in &messages {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        let content = message.get("content").cloned().unwrap_or(Value::Null);
        let items = match content {
            Value::Array(items) => items,
            other => vec![other],
        };
        for block in crate::content::blocks(&items) {
            if let Some(text) = block.as_text() {
                parts.push(if role == "assistant" {
                    format!("(assistant) {text}")
                } else {
                    text.to_owned()
                });
            }
        }
    }
    if parts.is_empty() {
        return Err(CommandError::refused(format!(
            "the prompt `{name}` gave no text"
        )));
    }
    Ok(Expansion::Prompt(parts.join("\n\n")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn review() -> Value {
        json!({"name": "review", "arguments": [
            {"name": "file", "required": true},
            {"name": "focus"}
        ]})
    }

    #[test]
    fn arguments_by_position_or_name() {
        let map = arguments(&review(), "src/a.rs error handling").unwrap();
        assert_eq!(map["file"], "src/a.rs");
        assert_eq!(map["focus"], "error handling");
        let map = arguments(&review(), "focus=speed file='a b.rs'").unwrap();
        assert_eq!(map["file"], "a b.rs");
        assert_eq!(map["focus"], "speed");
        let error = arguments(&review(), "").unwrap_err();
        assert!(
            matches!(&error, CommandError::Usage(text) if text.contains("`file`")),
            "{error}"
        );
        assert!(arguments(&json!({"name": "x"}), "extra").is_err());
        assert!(arguments(&json!({"name": "x"}), "  ").unwrap().is_empty());
        assert_eq!(hint(&review()).unwrap(), "<file> [focus]");
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            words(r#"a "b c" 'd' e\ f """#),
            ["a", "b c", "d", "e f", ""]
        );
    }
}
