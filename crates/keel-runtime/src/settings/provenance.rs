//! `keel config show`: every key's value in effect and where it came from (a file and
//! line, a `-c` override, or keel's default).

use serde_json::Value;

use super::config::{Layer, Loaded};

/// One key in effect.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// The dotted path, as `-c` takes it (`sandbox.network.allow`).
    pub key: String,
    /// Its value (credentials under `env` and `headers` masked).
    pub value: Value,
    /// `FILE:LINE`, `-c key=value`, or `default`.
    pub source: String,
}

/// Every key of `loaded`'s configuration, in the order the configuration lists them.
pub fn explain(loaded: &Loaded) -> Vec<Explained> {
    let effective = serde_json::to_value(&loaded.config).unwrap_or_default();
    let mut leaves = Vec::new();
    flatten(&effective, &mut Vec::new(), &mut leaves);
    leaves
        .into_iter()
        .map(|(path, value)| {
            let source = loaded
                .layers
                .iter()
                .rev()
                .find(|layer| at(&layer.value, &path).is_some_and(|set| same(set, &value)))
                .map_or_else(|| "default".to_owned(), |layer| where_set(layer, &path));
            let value = if path.iter().any(|p| p == "env" || p == "headers") {
                masked(&value)
            } else {
                redacted(value)
            };
            Explained {
                key: path.join("."),
                value,
                source,
            }
        })
        .collect()
}

/// Leaves of `value`: a map's entries are followed, anything else (lists too) is a leaf;
/// an empty map is a leaf so that `mcp_servers: {}` still shows.
fn flatten(value: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, inner) in map {
                path.push(key.clone());
                flatten(inner, path, out);
                path.pop();
            }
        }
        _ => out.push((path.clone(), value.clone())),
    }
}

/// Whether a file's value is the one in effect: numbers by value (`20` in a file is `20.0`
/// once read as seconds).
fn same(set: &Value, effective: &Value) -> bool {
    match (set, effective) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => set == effective,
    }
}

fn at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// The layer's name, with the line the key is on when it is a file.
fn where_set(layer: &Layer, path: &[String]) -> String {
    let line = layer.text.as_deref().and_then(|text| line_of(text, path));
    let untrusted = if layer.trusted { "" } else { " (untrusted)" };
    match line {
        Some(line) => format!("{}:{line}{untrusted}", layer.source),
        None => format!("{}{untrusted}", layer.source),
    }
}

/// The 1-based line of `path` in a block-style YAML file: each segment is looked for below
/// the previous one, more indented; a parent written as a scalar is the line; `None` for
/// flow style (`{a: 1}`) or anything unusual.
fn line_of(text: &str, path: &[String]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut from = 0;
    let mut indent: Option<usize> = None;
    let mut found: Option<usize> = None;
    for segment in path {
        let hit = lines.iter().enumerate().skip(from).find_map(|(n, line)| {
            let trimmed = line.trim_start();
            let depth = line.len() - trimmed.len();
            if indent.is_some_and(|i| depth <= i)
                && !trimmed.is_empty()
                && !trimmed.starts_with('#')
            {
                return Some(Err(()));
            }
            // A top-level key is at the left edge.
            if indent.is_none() && depth > 0 {
                return None;
            }
            let key = trimmed
                .strip_prefix(segment.as_str())
                .or_else(|| trimmed.strip_prefix(&format!("\"{segment}\"")))
                .or_else(|| trimmed.strip_prefix(&format!("'{segment}'")))?;
            key.starts_with(':').then_some(Ok((n, depth)))
        });
        let Some(Ok((n, depth))) = hit else {
            // `sandbox: read-only` sets `sandbox.mode` on the parent's own line.
            let parent = found?;
            let written = lines[parent - 1].split_once(':')?.1.trim();
            return (!written.is_empty() && !written.starts_with('{')).then_some(parent);
        };
        from = n + 1;
        indent = Some(depth);
        found = Some(n + 1);
    }
    found
}

/// Anything that looks like a key (in a server's arguments, a URL's query) redacted.
fn redacted(value: Value) -> Value {
    match value {
        Value::String(text) => {
            let text = match text.split_once('?') {
                Some((base, _)) if text.starts_with("http") => format!("{base}?…"),
                _ => text,
            };
            Value::String(keel_tools::redact::redact(&text, &[]).text)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(redacted).collect()),
        other => other,
    }
}

/// A secret's value shown by its ends only.
fn masked(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            let chars: Vec<char> = text.chars().collect();
            if chars.len() < 12 {
                Value::String("…".into())
            } else {
                let head: String = chars[..4].iter().collect();
                let tail: String = chars[chars.len() - 2..].iter().collect();
                Value::String(format!("{head}…{tail}"))
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(masked).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), masked(v))).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::config::{ConfigFile, load};

    fn find<'a>(explained: &'a [Explained], key: &str) -> &'a Explained {
        explained
            .iter()
            .find(|e| e.key == key)
            .unwrap_or_else(|| panic!("{key}"))
    }

    #[test]
    fn each_value_names_the_file_line_or_override_that_set_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home.yaml");
        std::fs::write(
            &home,
            "# mine\nmodel: anthropic/claude-sonnet-4-5\nsandbox:\n  network:\n    allow: [example.com]\nmcp_servers:\n  gh:\n    command: gh-mcp\n    env:\n      GITHUB_TOKEN: ghp_abcdefghijklmnop\n",
        )
        .unwrap();
        let extra = dir.path().join("extra.yaml");
        std::fs::write(
            &extra,
            "permission: auto\nsandbox: read-only\nmcp_servers:\n  gh:\n    startup_timeout_sec: 20\n",
        )
        .unwrap();
        let loaded = load(
            &[
                ConfigFile::trusted(home.clone()),
                ConfigFile::trusted(extra.clone()),
            ],
            &["permission=plan".to_owned()],
        )
        .unwrap();
        let explained = explain(&loaded);
        let home = home.display().to_string();
        let extra = extra.display().to_string();
        assert_eq!(find(&explained, "model").source, format!("{home}:2"));
        assert_eq!(find(&explained, "permission").source, "-c permission=plan");
        assert_eq!(find(&explained, "permission").value, "plan");
        assert_eq!(
            find(&explained, "sandbox.mode").source,
            format!("{extra}:2")
        );
        assert_eq!(
            find(&explained, "sandbox.network.allow").source,
            format!("{home}:5")
        );
        assert_eq!(find(&explained, "durable").source, "default");
        assert_eq!(
            find(&explained, "mcp_servers.gh.startup_timeout_sec").source,
            format!("{extra}:5"),
            "a whole number is the float it is read as"
        );
        assert_eq!(
            find(&explained, "mcp_servers.gh.command").source,
            format!("{home}:8")
        );
        let token = find(&explained, "mcp_servers.gh.env.GITHUB_TOKEN");
        assert_eq!(token.value, "ghp_…op", "a credential is masked");
        assert_eq!(token.source, format!("{home}:10"));
    }

    #[test]
    fn a_line_is_found_only_under_its_parent() {
        let text = "a:\n  x: 1\nb:\n  x: 2\n";
        assert_eq!(line_of(text, &["b".into(), "x".into()]), Some(4));
        assert_eq!(line_of(text, &["a".into(), "x".into()]), Some(2));
        assert_eq!(line_of(text, &["a".into(), "y".into()]), None);
        assert_eq!(line_of("a: {x: 1}\n", &["a".into(), "x".into()]), None);
        assert_eq!(line_of("b:\n  a: 1\na: 2\n", &["a".into()]), Some(3));
    }
}
