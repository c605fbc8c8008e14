//! Edits `mcp_servers:` in `$KEEL_HOME/config.yaml` as text rather than re-serialising the
//! whole file, so the user's comments, key order and formatting survive.
//!
//! Text edits on YAML are easy to get subtly wrong, so every edit is read back (as a YAML
//! value and through the runtime's own configuration loader) and compared with what it
//! should mean; if they differ the file is left untouched and the user is told to edit it
//! by hand. The new text replaces the file by a rename in the same folder, so a crash
//! leaves either the old file or the new one, never half of each.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use keel_runtime::settings::config::{self, ConfigFile};
use keel_runtime::settings::extend::McpServerConfig;
use yaml_serde::{Mapping, Value};

/// The top-level key holding the servers.
const SECTION: &str = "mcp_servers";
/// Indentation of a new block's entries.
const DEFAULT_INDENT: usize = 2;

/// One change to the servers.
pub enum Change<'a> {
    /// Add `name` (which must not exist) defined by `entry`, a YAML mapping.
    Add {
        /// The server's name.
        name: &'a str,
        /// Its definition.
        entry: &'a Mapping,
    },
    /// Remove `name` (which must exist).
    Remove {
        /// The server's name.
        name: &'a str,
    },
}

/// Holds `file`'s edit lock (`FILE.lock` beside it, 0600) until dropped, so edits of the
/// file by several keel processes take turns.
pub fn lock(file: &Path) -> anyhow::Result<std::fs::File> {
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut name = file.as_os_str().to_owned();
    name.push(".lock");
    let path = std::path::PathBuf::from(name);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(lock)
}

/// The servers `file` defines now (none when it does not exist).
pub fn servers_in(
    file: &Path,
) -> anyhow::Result<std::collections::BTreeMap<String, McpServerConfig>> {
    if !file.exists() {
        return Ok(Default::default());
    }
    let loaded = config::load(&[ConfigFile::trusted(file.to_path_buf())], &[])?;
    Ok(loaded.config.mcp_servers)
}

/// Applies `change` to `file`, creating the file (0600) and its folder (0700) if missing.
pub fn apply(file: &Path, change: &Change<'_>) -> anyhow::Result<()> {
    // Write through a link to the file it points at, rather than replacing the link.
    let file = match std::fs::canonicalize(file) {
        Ok(real) => real,
        Err(_) => file.to_path_buf(),
    };
    let old_text = crate::assembly::read_if_present(&file)?.unwrap_or_default();
    let old_value = parse_value(&old_text).map_err(|e| {
        anyhow!(
            "{} does not parse as YAML ({e}); fix it first",
            file.display()
        )
    })?;
    let old_servers = servers_in(&file)?;
    let mut expected_servers = old_servers.clone();
    let mut expected_value = old_value;
    let section = section_mut(&mut expected_value)
        .ok_or_else(|| anyhow!("{}: `{SECTION}` is not a mapping", file.display()))?;
    let new_text = match change {
        Change::Add { name, entry } => {
            let server: McpServerConfig = yaml_serde::from_value(Value::Mapping((*entry).clone()))
                .context("the new server does not convert to configuration")?;
            expected_servers.insert((*name).to_owned(), server);
            section.insert(
                Value::String((*name).to_owned()),
                Value::Mapping((*entry).clone()),
            );
            with_entry(&old_text, name, entry).map_err(|why| refusal(&file, &why))?
        }
        Change::Remove { name } => {
            expected_servers.remove(*name);
            section.remove(*name);
            without_entry(&old_text, name)
                .map_err(|why| refusal(&file, &why))?
                .ok_or_else(|| {
                    refusal(
                        &file,
                        &format!("no `{name}:` line found under `{SECTION}:`"),
                    )
                })?
        }
    };
    let temp = write_temp(&file, &new_text)?;
    let checked = check(&temp, &new_text, &expected_value, &expected_servers);
    let renamed = checked.and_then(|()| {
        std::fs::rename(&temp, &file).map_err(|e| anyhow!("cannot replace {}: {e}", file.display()))
    });
    if renamed.is_err() {
        // Best effort: the temporary file is ours and useless now.
        let _ = std::fs::remove_file(&temp);
    }
    renamed.map_err(|e| refusal(&file, &format!("{e:#}")))
}

fn refusal(file: &Path, why: &str) -> anyhow::Error {
    anyhow!(
        "{} was left unchanged: {why}. Edit its `{SECTION}:` by hand.",
        file.display()
    )
}

/// Whether the text written to `temp` means exactly what was intended.
fn check(
    temp: &Path,
    text: &str,
    expected_value: &Value,
    expected_servers: &std::collections::BTreeMap<String, McpServerConfig>,
) -> anyhow::Result<()> {
    let mut value =
        parse_value(text).map_err(|e| anyhow!("the edited text does not parse ({e})"))?;
    // An emptied block reads as null; it means no servers.
    let _ = section_mut(&mut value);
    if &value != expected_value {
        bail!("the edited text would change more than the one server");
    }
    let loaded = config::load(&[ConfigFile::trusted(temp.to_path_buf())], &[])
        .map_err(|e| anyhow!("the edited text would not load ({e})"))?;
    if &loaded.config.mcp_servers != expected_servers {
        bail!("the edited text would not hold exactly the intended servers");
    }
    Ok(())
}

/// `text` as a YAML value; an empty document is an empty mapping.
fn parse_value(text: &str) -> Result<Value, yaml_serde::Error> {
    let value: Value = yaml_serde::from_str(text)?;
    Ok(match value {
        Value::Null => Value::Mapping(Mapping::new()),
        other => other,
    })
}

/// The servers' mapping in `root`, made an empty one when absent or null.
fn section_mut(root: &mut Value) -> Option<&mut Mapping> {
    let Value::Mapping(root) = root else {
        return None;
    };
    let section = root
        .entry(Value::String(SECTION.to_owned()))
        .or_insert(Value::Mapping(Mapping::new()));
    if section.is_null() {
        *section = Value::Mapping(Mapping::new());
    }
    section.as_mapping_mut()
}

/// Writes `text` to a new file beside `file`, with `file`'s permissions (0600 for a new
/// file: it may hold tokens), creating the folder 0700 if missing.
fn write_temp(file: &Path, text: &str) -> anyhow::Result<PathBuf> {
    let dir = file
        .parent()
        .ok_or_else(|| anyhow!("{} has no folder", file.display()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.keel-mcp-{}.tmp", std::process::id()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .map_err(|e| anyhow!("cannot create {}: {e}", temp.display()))?;
    let written = out
        .write_all(text.as_bytes())
        .and_then(|()| match std::fs::metadata(file) {
            Ok(meta) => std::fs::set_permissions(&temp, meta.permissions()),
            Err(_) => Ok(()),
        })
        .and_then(|()| out.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        bail!("cannot write {}: {e}", temp.display());
    }
    Ok(temp)
}

/// Where the servers' block is.
enum Section {
    /// No top-level `mcp_servers:`.
    Missing,
    /// A block mapping whose key is on this line.
    Block(usize),
    /// `mcp_servers: {…}` or another inline value, which this editor leaves alone.
    Inline,
}

/// `text` with `name: entry` added at the end of the servers' block (a new block at the
/// end of the file when there is none).
fn with_entry(text: &str, name: &str, entry: &Mapping) -> Result<String, String> {
    let mut one = Mapping::new();
    one.insert(
        Value::String(name.to_owned()),
        Value::Mapping(entry.clone()),
    );
    let yaml = yaml_serde::to_string(&one).map_err(|e| format!("cannot write the entry ({e})"))?;
    let mut lines = split(text);
    match find_section(&lines) {
        Section::Inline => Err(format!(
            "`{SECTION}:` is written inline (flow style), which keel mcp does not rewrite"
        )),
        Section::Missing => {
            let mut out = text.to_owned();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(SECTION);
            out.push_str(":\n");
            out.push_str(&indented(&yaml, DEFAULT_INDENT));
            Ok(out)
        }
        Section::Block(header) => {
            let end = block_end(&lines, header);
            let indent = child_indent(&lines[header + 1..end]).unwrap_or(DEFAULT_INDENT);
            // After the block's last indented line: a comment at column 0 that follows it
            // belongs to the next key.
            let after = (header + 1..end)
                .rev()
                .find(|&i| !is_blank(lines[i]) && indent_of(lines[i]) > 0)
                .unwrap_or(header);
            let new = indented(&yaml, indent);
            let mut out: String = lines[..=after].concat();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&new);
            lines.drain(..=after);
            out.push_str(&lines.concat());
            Ok(out)
        }
    }
}

/// `text` without the lines of server `name` (`None`: it has none).
fn without_entry(text: &str, name: &str) -> Result<Option<String>, String> {
    let lines = split(text);
    let header = match find_section(&lines) {
        Section::Missing => return Ok(None),
        Section::Inline => {
            return Err(format!(
                "`{SECTION}:` is written inline (flow style), which keel mcp does not rewrite"
            ));
        }
        Section::Block(header) => header,
    };
    let end = block_end(&lines, header);
    let Some(indent) = child_indent(&lines[header + 1..end]) else {
        return Ok(None);
    };
    let Some(first) = (header + 1..end)
        .find(|&i| indent_of(lines[i]) == indent && key_of(lines[i]) == Some(name))
    else {
        return Ok(None);
    };
    // The entry is its key line and every more-indented line after it; blank lines count
    // only when more of the entry follows them.
    let mut last = first;
    for (i, line) in lines.iter().enumerate().skip(first + 1) {
        if is_blank(line) {
            continue;
        }
        if indent_of(line) <= indent {
            break;
        }
        last = i;
    }
    let mut out: String = lines[..first].concat();
    out.push_str(&lines[last + 1..].concat());
    Ok(Some(out))
}

/// Lines with their endings.
fn split(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

fn find_section(lines: &[&str]) -> Section {
    for (i, line) in lines.iter().enumerate() {
        if indent_of(line) != 0 || key_of(line) != Some(SECTION) {
            continue;
        }
        let Some((_, rest)) = line.split_once(':') else {
            continue;
        };
        let rest = rest.trim();
        return if rest.is_empty() || rest.starts_with('#') {
            Section::Block(i)
        } else {
            Section::Inline
        };
    }
    Section::Missing
}

/// The line after the block whose key is on line `header`: the next line with content at
/// column 0 that is not a comment.
fn block_end(lines: &[&str], header: usize) -> usize {
    (header + 1..lines.len())
        .find(|&i| {
            let line = lines[i];
            !is_blank(line) && indent_of(line) == 0 && !line.starts_with('#')
        })
        .unwrap_or(lines.len())
}

/// The indentation of the block's keys: its first line with content.
fn child_indent(block: &[&str]) -> Option<usize> {
    block
        .iter()
        .find(|l| !is_blank(l) && !l.trim_start().starts_with('#') && indent_of(l) > 0)
        .map(|l| indent_of(l))
}

/// The key a `key: …` line starts with, unquoted.
fn key_of(line: &str) -> Option<&str> {
    let body = line.trim_start();
    let (key, rest) = if let Some(quoted) = body.strip_prefix('"') {
        let (key, rest) = quoted.split_once('"')?;
        (key, rest)
    } else if let Some(quoted) = body.strip_prefix('\'') {
        let (key, rest) = quoted.split_once('\'')?;
        (key, rest)
    } else {
        let end = body.find(':')?;
        (body[..end].trim_end(), &body[end..])
    };
    let after = rest.trim_start().strip_prefix(':')?;
    (after.is_empty() || after.starts_with(char::is_whitespace)).then_some(key)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// `yaml` with `by` spaces before every line that has content.
fn indented(yaml: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    yaml.split_inclusive('\n')
        .map(|line| {
            if is_blank(line) {
                line.to_owned()
            } else {
                format!("{pad}{line}")
            }
        })
        .collect()
}

/// `text` (a project's `.mcp.json`, `None`: none yet) with server `name` added to its
/// `mcpServers`. The rest of the file is kept as written: the entry is inserted as text,
/// and the result is checked to parse to the old servers plus the new one.
pub fn add_to_project_file(
    text: Option<&str>,
    name: &str,
    entry: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, String> {
    let entry_text = serde_json::to_string_pretty(entry).map_err(|e| e.to_string())?;
    let item = format!(
        "{}: {}",
        serde_json::Value::String(name.to_owned()),
        entry_text.replace('\n', "\n    ")
    );
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(format!("{{\n  \"mcpServers\": {{\n    {item}\n  }}\n}}\n"));
    };
    let old: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("is not JSON ({e}); fix it first"))?;
    let servers = old.get("mcpServers");
    if servers.and_then(|s| s.get(name)).is_some() {
        return Err(format!("already has a server named `{name}`"));
    }
    let updated = match servers {
        Some(serde_json::Value::Object(existing)) => {
            // The `{` after the (only) `"mcpServers"` key; the entry goes right after it.
            let key = text
                .find("\"mcpServers\"")
                .ok_or("its mcpServers key is written in a way keel does not edit")?;
            let open = key
                + text[key..]
                    .find('{')
                    .ok_or("its mcpServers is not an object")?;
            let comma = if existing.is_empty() { "" } else { "," };
            format!("{}\n    {item}{comma}{}", &text[..=open], &text[open + 1..])
        }
        Some(_) => return Err("its mcpServers is not an object".into()),
        None => {
            let close = text.rfind('}').ok_or("is not a JSON object")?;
            let object = old.as_object().ok_or("is not a JSON object")?;
            let comma = if object.is_empty() { "" } else { "," };
            let body = text[..close].trim_end();
            format!(
                "{body}{comma}\n  \"mcpServers\": {{\n    {item}\n  }}\n{}",
                &text[close..]
            )
        }
    };
    let new: serde_json::Value = serde_json::from_str(&updated).map_err(|e| e.to_string())?;
    let mut expected = old.clone();
    expected
        .as_object_mut()
        .ok_or("is not a JSON object")?
        .entry("mcpServers")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .ok_or("its mcpServers is not an object")?
        .insert(name.to_owned(), serde_json::Value::Object(entry.clone()));
    if new != expected {
        return Err("keel could not add to it without changing what else it says".into());
    }
    Ok(updated)
}

/// Writes `file` whole through a new file beside it, created fresh (never through a link
/// someone planted under its name) and renamed over it; a link at `file` itself is
/// replaced, not written through.
pub fn replace_file(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = file.parent().unwrap_or(Path::new("."));
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    for attempt in 0..16u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let fresh = dir.join(format!(".{name}.{}.{nanos}.{attempt}", std::process::id()));
        let mut out = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&fresh)
        {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(anyhow::anyhow!("{}: {e}", fresh.display())),
        };
        let written = out.write_all(bytes).and_then(|()| out.sync_all());
        if let Err(e) = written.and_then(|()| std::fs::rename(&fresh, file)) {
            let _ = std::fs::remove_file(&fresh);
            return Err(anyhow::anyhow!("{}: {e}", file.display()));
        }
        return Ok(());
    }
    Err(anyhow::anyhow!(
        "{}: cannot create a file beside it",
        file.display()
    ))
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
