//! The YAML header of a Markdown file, between `---` lines, as Claude Code writes it.
//!
//! Only the keys keel reads have to be valid. Claude Code's files carry keys keel ignores
//! (`allowed-tools`, `hooks`, …), and some common values are not strict YAML
//! (`argument-hint: [file] [line]`). So when the whole header does not parse, each key keel
//! reads is parsed alone, and the header is refused only when one of those fails; the error
//! shown is then the whole header's, whose line numbers match the file.

use std::collections::BTreeMap;

use super::defect::Defect;

use yaml_serde::Value;

/// A Markdown file cut at its frontmatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// The YAML between the `---` lines; `None` when the file does not start with one.
    pub(crate) header: Option<&'a str>,
    /// Everything after the closing `---` line (the whole file without a header).
    pub(crate) body: &'a str,
}

/// Whether `line` (with its line ending) is a `---` delimiter.
fn is_delimiter(line: &str) -> bool {
    line.trim_end() == "---"
}

/// `text` cut into header and body; an error when a header is opened but never closed.
pub(crate) fn split(text: &str) -> Result<Split<'_>, Defect> {
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next().filter(|line| is_delimiter(line)) else {
        return Ok(Split {
            header: None,
            body: text,
        });
    };
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if is_delimiter(line) {
            return Ok(Split {
                header: Some(&text[start..offset]),
                body: &text[offset + line.len()..],
            });
        }
        offset += line.len();
    }
    Err(Defect::Unclosed)
}

/// What a reader wants from a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Text; a number or a boolean counts as its text.
    Text,
    /// A hint shown to the user: text, a list shown as `[a] [b]`, or, when the value is not
    /// YAML at all, its raw text (Claude Code's `argument-hint: [file] [line]`).
    Hint,
}

/// The keys read, by name; a key that is absent or empty (`key:`) is left out.
pub(crate) type Fields = BTreeMap<&'static str, String>;

/// The `wanted` keys of `header`, or why the header cannot be used.
pub(crate) fn fields(header: &str, wanted: &[(&'static str, Want)]) -> Result<Fields, Defect> {
    match yaml_serde::from_str::<Value>(header) {
        Ok(value) => from_value(&value, wanted),
        Err(error) => fallback(header, wanted).ok_or_else(|| Defect::Yaml(error.to_string())),
    }
}

fn from_value(value: &Value, wanted: &[(&'static str, Want)]) -> Result<Fields, Defect> {
    let mut fields = Fields::new();
    let mapping = match value {
        Value::Null => return Ok(fields),
        Value::Mapping(mapping) => mapping,
        _ => return Err(Defect::NotAMapping),
    };
    for &(key, want) in wanted {
        let Some(value) = mapping.get(key).filter(|value| !value.is_null()) else {
            continue;
        };
        let text = text_of(value, want).map_err(|kind| Defect::NotText { key, kind })?;
        fields.insert(key, text);
    }
    Ok(fields)
}

/// A scalar's text, or what kind of value it is instead.
fn text_of(value: &Value, want: Want) -> Result<String, &'static str> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Number(number) => Ok(number.to_string()),
        Value::Sequence(items) if want == Want::Hint => {
            let parts: Result<Vec<String>, _> = items
                .iter()
                .map(|item| text_of(item, Want::Text).map(|text| format!("[{text}]")))
                .collect();
            parts.map(|parts| parts.join(" "))
        }
        Value::Sequence(_) => Err("a list"),
        Value::Mapping(_) => Err("a mapping"),
        Value::Tagged(_) => Err("a tagged value"),
    }
}

/// The wanted keys when the whole header is not YAML: each key's own lines parsed alone.
/// `None` when one of them fails too (a hint then falls back to its raw text).
fn fallback(header: &str, wanted: &[(&'static str, Want)]) -> Option<Fields> {
    let blocks = blocks(header);
    let mut fields = Fields::new();
    for &(key, want) in wanted {
        let Some(block) = blocks.iter().find(|block| block.key == key) else {
            continue;
        };
        let parsed = yaml_serde::from_str::<Value>(block.text)
            .ok()
            .and_then(|value| from_value(&value, &[(key, want)]).ok());
        match (parsed, want) {
            (Some(mut one), _) => {
                if let Some(text) = one.remove(key) {
                    fields.insert(key, text);
                }
            }
            (None, Want::Hint) => {
                let raw = block.first_value.trim();
                if !raw.is_empty() {
                    fields.insert(key, raw.to_owned());
                }
            }
            (None, Want::Text) => return None,
        }
    }
    Some(fields)
}

/// The lines of one top-level key.
struct Block<'a> {
    key: &'a str,
    /// What follows `key:` on its own line.
    first_value: &'a str,
    /// The key's line and the lines after it up to the next top-level key.
    text: &'a str,
}

/// `header` cut at each top-level `key:` line (one that starts at the margin and is neither a
/// comment nor a list item); lines before the first key belong to none.
fn blocks(header: &str) -> Vec<Block<'_>> {
    let mut blocks: Vec<Block<'_>> = Vec::new();
    let mut offset = 0;
    let mut start = None;
    for line in header.split_inclusive('\n') {
        let top_level = !line.starts_with([' ', '\t', '#', '-']);
        if let (true, Some((key, value))) = (top_level, line.split_once(':')) {
            if let (Some(begin), Some(last)) = (start, blocks.last_mut()) {
                last.text = &header[begin..offset];
            }
            start = Some(offset);
            blocks.push(Block {
                key: key.trim(),
                first_value: value,
                text: &header[offset..],
            });
        }
        offset += line.len();
    }
    blocks
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const SKILL: &[(&str, Want)] = &[("name", Want::Text), ("description", Want::Text)];
    const COMMAND: &[(&str, Want)] = &[("description", Want::Text), ("argument-hint", Want::Hint)];

    fn fields_of(pairs: &[(&'static str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|&(key, value)| (key, value.to_owned()))
            .collect()
    }

    #[test]
    fn a_header_is_cut_from_its_body() {
        assert_eq!(
            split("---\nname: a\r\n---  \r\nBody\n"),
            Ok(Split {
                header: Some("name: a\r\n"),
                body: "Body\n"
            })
        );
        assert_eq!(
            split("---\n---\n"),
            Ok(Split {
                header: Some(""),
                body: ""
            })
        );
        assert_eq!(
            split("Just text\n---\n"),
            Ok(Split {
                header: None,
                body: "Just text\n---\n"
            })
        );
        assert!(split("---\nname: a\n").is_err());
    }

    #[test]
    fn keys_are_read_and_others_ignored() {
        let header = "name: pdf\ndescription: >\n  Reads PDFs\n  and forms.\nlicense: MIT\n\
                      metadata:\n  version: 1\nallowed-tools: [Read, Bash]\n";
        assert_eq!(
            fields(header, SKILL),
            Ok(fields_of(&[
                ("name", "pdf"),
                ("description", "Reads PDFs and forms.\n")
            ]))
        );
        assert_eq!(fields("", SKILL), Ok(Fields::new()));
        assert_eq!(fields("# only a comment\n", SKILL), Ok(Fields::new()));
        assert_eq!(
            fields("name: 2048\ndescription:\n", SKILL),
            Ok(fields_of(&[("name", "2048")]))
        );
    }

    #[test]
    fn an_ignored_key_that_is_not_yaml_is_tolerated() {
        let header = "description: Build it\nallowed-tools: [Read] [Bash]\nmodel: x\n";
        assert!(yaml_serde::from_str::<Value>(header).is_err());
        assert_eq!(
            fields(header, SKILL),
            Ok(fields_of(&[("description", "Build it")]))
        );
    }

    #[test]
    fn argument_hints_keep_claude_codes_forms() {
        assert_eq!(
            fields("argument-hint: [message]\n", COMMAND),
            Ok(fields_of(&[("argument-hint", "[message]")]))
        );
        assert_eq!(
            fields(
                "argument-hint: [pr] [priority]\ndescription: Review\n",
                COMMAND
            ),
            Ok(fields_of(&[
                ("argument-hint", "[pr] [priority]"),
                ("description", "Review")
            ]))
        );
        assert_eq!(
            fields("argument-hint: add [id] | remove [id]\n", COMMAND),
            Ok(fields_of(&[("argument-hint", "add [id] | remove [id]")]))
        );
    }

    #[test]
    fn a_wanted_key_that_is_broken_refuses_the_header() {
        let error = fields("name: [unclosed\ndescription: x\n", SKILL).unwrap_err();
        assert!(matches!(error, Defect::Yaml(_)), "{error}");
        let mapping = fields("name:\n  first: a\ndescription: x\n", SKILL).unwrap_err();
        assert_eq!(
            mapping.to_string(),
            "has a frontmatter `name` that is a mapping, not text"
        );
        assert_eq!(fields("- a\n- b\n", SKILL), Err(Defect::NotAMapping));
    }
}
