//! Custom slash commands: Markdown prompts the user runs as `/name arguments`, in Claude
//! Code's format so a user's existing commands work unchanged.
//!
//! `name.md` under a commands root is `/name`. A file in a subfolder takes the folders as a
//! namespace joined by `:`, as Claude Code does: `frontend/build.md` is `/frontend:build`
//! (Claude Code builds the same name from the relative path; its older `/project:…` prefix
//! is not used). The frontmatter is optional; `description` and `argument-hint` are read,
//! other keys (`allowed-tools`, `model`, …) ignored. Without a description, the body's first
//! non-empty line stands in, as in Claude Code.
//!
//! Safety is the skills' (see [`crate::discovery`]): no link followed in a project root,
//! files capped at 256 KiB and UTF-8, at most [`MAX_COMMANDS`] files.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::discovery::frontmatter::{self, Want};
use crate::discovery::{self, Kind, OpenRoot, Opened};

pub use crate::discovery::{Note, Problem, Root, Scope};
pub use expand::{expand, split_arguments};

mod expand;

#[cfg(test)]
mod tests;

/// Most commands loaded over all roots; the rest are reported and skipped.
pub const MAX_COMMANDS: usize = 500;

/// Longest description taken from a body's first line.
pub const MAX_DESCRIPTION_CHARS: usize = 100;

/// How many folders deep a command may sit (`a/b/…/name.md`).
const MAX_DEPTH: usize = 8;

/// One loaded command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The name typed after `/`, namespaces joined by `:` (`frontend:build`).
    pub name: String,
    /// What it does, for the command menu.
    pub description: String,
    /// What arguments it takes (`[file] [line]`), for the command menu.
    pub argument_hint: Option<String>,
    /// The prompt: the file without its frontmatter, placeholders not yet expanded.
    pub body: String,
    /// Its file.
    pub path: PathBuf,
    /// Whose it is.
    pub scope: Scope,
}

/// What discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Discovered {
    /// The commands, sorted by name, one per name (the last root's).
    pub commands: Vec<Command>,
    /// Files that could not be loaded, each with its path.
    pub problems: Vec<Problem>,
    /// Commands a later root replaced.
    pub notes: Vec<Note>,
}

/// The command roots in override order: the project's `.claude/commands/` and
/// `.keel/commands/`, then the user's `~/.claude/commands/` and `$KEEL_HOME/commands/` (the
/// user's win).
pub fn roots(
    keel_home: Option<&Path>,
    project: Option<&keel_runtime::settings::Project>,
) -> Vec<Root> {
    discovery::roots_in(
        keel_home,
        discovery::claude_home().as_deref(),
        project,
        "commands",
    )
}

/// The commands under `roots`; a later root's command replaces an earlier one of the same
/// name (with a note). A broken file is a problem and the others still load; a missing root
/// is nothing.
pub fn discover(roots: &[Root]) -> Discovered {
    let mut found: BTreeMap<String, Command> = BTreeMap::new();
    let mut out = Discovered::default();
    let mut walker = Walker::default();
    for root in roots {
        let open = match discovery::open(root) {
            Opened::Missing => continue,
            Opened::Broken(problem) => {
                out.problems.push(problem);
                continue;
            }
            Opened::Ready(open) => open,
        };
        walker.walk(&open, &open.dir, &mut Vec::new());
        out.problems.append(&mut walker.problems);
        for command in walker.commands.drain(..) {
            if let Some(why) = discovery::reserved(&command.name, "command") {
                out.problems.push(Problem::new(&command.path, why));
                continue;
            }
            if let Some(earlier) = found.get(&command.name) {
                out.notes.push(Note {
                    path: command.path.clone(),
                    message: discovery::replaced(
                        "command",
                        &format!("/{}", command.name),
                        command.scope,
                        &earlier.path,
                        earlier.scope,
                    ),
                });
            }
            found.insert(command.name.clone(), command);
        }
        if walker.full {
            out.problems.push(Problem::new(
                &open.dir,
                format!("more than {MAX_COMMANDS} commands; the rest were not loaded"),
            ));
            break;
        }
    }
    out.commands = found.into_values().collect();
    out
}

/// Walks the roots' folders, one root at a time.
#[derive(Default)]
struct Walker {
    /// Command files read so far, over all roots.
    read: usize,
    /// One more file was found after [`MAX_COMMANDS`]: the walk stops.
    full: bool,
    /// The current root's commands.
    commands: Vec<Command>,
    /// The current root's problems.
    problems: Vec<Problem>,
}

impl Walker {
    /// Loads the commands in `dir`, whose namespace is `namespace`.
    fn walk(&mut self, root: &OpenRoot, dir: &Path, namespace: &mut Vec<String>) {
        let listing = match discovery::list(dir) {
            Ok(listing) => listing,
            Err(reason) => {
                self.problems.push(Problem::new(dir, reason));
                return;
            }
        };
        if listing.truncated {
            self.problems.push(discovery::truncated(dir));
        }
        for entry in &listing.entries {
            if self.full {
                return;
            }
            let resolved = match root.follow(&entry.path) {
                Ok(Some(resolved)) => resolved,
                Ok(None) => continue,
                Err(reason) => {
                    self.problems.push(Problem::new(&entry.path, reason));
                    continue;
                }
            };
            match resolved.kind {
                Kind::Dir if namespace.len() + 1 < MAX_DEPTH => {
                    let Some(part) = name_part(&entry.name) else {
                        self.problems.push(Problem::new(&entry.path, NAME_RULE));
                        continue;
                    };
                    namespace.push(part.to_owned());
                    self.walk(root, &resolved.path, namespace);
                    namespace.pop();
                }
                Kind::Dir => self.problems.push(Problem::new(
                    &entry.path,
                    format!("is more than {MAX_DEPTH} folders deep; its commands were not loaded"),
                )),
                Kind::File if Path::new(&entry.name).extension() == Some(OsStr::new("md")) => {
                    let stem = Path::new(&entry.name).file_stem().and_then(name_part);
                    let Some(stem) = stem else {
                        self.problems.push(Problem::new(&entry.path, NAME_RULE));
                        continue;
                    };
                    let mut name = namespace.join(":");
                    if !name.is_empty() {
                        name.push(':');
                    }
                    name.push_str(stem);
                    if self.read == MAX_COMMANDS {
                        self.full = true;
                        return;
                    }
                    self.read += 1;
                    match load(&resolved.path, name, root.scope) {
                        Ok(command) => self.commands.push(command),
                        Err(reason) => self.problems.push(Problem::new(&entry.path, reason)),
                    }
                }
                Kind::File | Kind::Other => {}
            }
        }
    }
}

/// Why a file or folder name cannot make a command name.
const NAME_RULE: &str = "cannot be part of a command name: use letters, digits, `_`, `.` and `-`";

/// `name` as part of a command name, if it may be one.
fn name_part(name: &OsStr) -> Option<&str> {
    let name = name.to_str()?;
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-'));
    valid.then_some(name)
}

/// The command `name` in the file at `path`, or why it cannot be loaded.
fn load(path: &Path, name: String, scope: Scope) -> Result<Command, discovery::Defect> {
    let text = discovery::read_text(path)?;
    let split = frontmatter::split(&text)?;
    let fields = match split.header {
        Some(header) => frontmatter::fields(
            header,
            &[("description", Want::Text), ("argument-hint", Want::Hint)],
        )?,
        None => frontmatter::Fields::new(),
    };
    let body = discovery::trim_body(split.body);
    let description = fields
        .get("description")
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| first_line(&body));
    let argument_hint = fields
        .get("argument-hint")
        .map(|text| text.trim())
        .filter(|text| !text.is_empty())
        .map(str::to_owned);
    Ok(Command {
        name,
        description,
        argument_hint,
        body,
        path: path.to_owned(),
        scope,
    })
}

/// The first non-empty line of `body`, trimmed and cut to [`MAX_DESCRIPTION_CHARS`].
fn first_line(body: &str) -> String {
    body.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| keel_tools::output::one_line(line, MAX_DESCRIPTION_CHARS))
        .unwrap_or_default()
}
