//! Skills: folders of instructions (and the scripts or references they point to) the model
//! loads by name when a task calls for one, in Claude Code's format so a user's existing
//! skills work unchanged.
//!
//! A skill is a folder holding `SKILL.md`: YAML frontmatter with `name` and `description`,
//! then the Markdown instructions. Only the name and the description go into the system
//! prompt ([`listing`]); the body, the folder and its file list come back from the `skill`
//! tool ([`skill_tool`]) when the model asks, so a hundred skills cost a few lines each.
//!
//! Claude Code compatibility: a name is 1 to 64 lowercase letters, digits and hyphens (Claude
//! Code's rule); without a `name` the folder's name is used, as Claude Code does, and a name
//! need not match its folder (Claude Code does not require it). Other keys (`allowed-tools`,
//! `license`, `metadata`, …) are ignored. Skills are looked for one level deep, as Claude
//! Code does: `skills/<folder>/SKILL.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::discovery::frontmatter::{self, Want};
use crate::discovery::{self, Kind, OpenRoot, Opened};

pub use crate::discovery::{Note, Problem, Root, Scope};
pub use listing::{listing, load, load_with_arguments};
pub use tool::{TOOL_NAME, skill_tool};

mod listing;
mod tool;

#[cfg(test)]
mod tests;

/// The file that makes a folder a skill.
pub const FILE_NAME: &str = "SKILL.md";

/// Most skills loaded over all roots (DESIGN: a planted folder of thousands must not flood
/// the prompt or the start-up); the rest are reported and skipped.
pub const MAX_SKILLS: usize = 500;

/// Longest skill name, Claude Code's limit.
pub const MAX_NAME_CHARS: usize = 64;

/// One loaded skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// What the model calls it by (`pdf-forms`).
    pub name: String,
    /// What it is for and when to use it, shown in the system prompt.
    pub description: String,
    /// Its folder, absolute (a followed link's target for a user skill).
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub file: PathBuf,
    /// Whose it is.
    pub scope: Scope,
    /// The instructions: `SKILL.md` without its frontmatter.
    pub body: String,
}

/// What discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Discovered {
    /// The skills, sorted by name, one per name (the last root's).
    pub skills: Vec<Skill>,
    /// Skills that could not be loaded, each with its path.
    pub problems: Vec<Problem>,
    /// Skills a later root replaced.
    pub notes: Vec<Note>,
}

/// The skill roots in override order: the project's `.claude/skills/` and `.keel/skills/`,
/// then the user's `~/.claude/skills/` and `$KEEL_HOME/skills/` (the user's win).
pub fn roots(
    keel_home: Option<&Path>,
    project: Option<&keel_runtime::settings::Project>,
) -> Vec<Root> {
    discovery::roots_in(
        keel_home,
        discovery::claude_home().as_deref(),
        project,
        "skills",
    )
}

/// The skills under `roots`; a later root's skill replaces an earlier one of the same name
/// (with a note). A broken skill is a problem and the others still load; a missing root is
/// nothing.
pub fn discover(roots: &[Root]) -> Discovered {
    let mut found: BTreeMap<String, Skill> = BTreeMap::new();
    let mut out = Discovered::default();
    let mut loaded = 0;
    'roots: for root in roots {
        let open = match discovery::open(root) {
            Opened::Missing => continue,
            Opened::Broken(problem) => {
                out.problems.push(problem);
                continue;
            }
            Opened::Ready(open) => open,
        };
        let listing = match discovery::list(&open.dir) {
            Ok(listing) => listing,
            Err(reason) => {
                out.problems.push(Problem::new(&open.dir, reason));
                continue;
            }
        };
        if listing.truncated {
            out.problems.push(discovery::truncated(&open.dir));
        }
        // Names taken in this root: two folders of one root naming the same skill is a
        // mistake, not an override.
        let mut here: BTreeMap<String, PathBuf> = BTreeMap::new();
        for entry in &listing.entries {
            let skill = match load_folder(&open, &entry.path, &entry.name) {
                Ok(Some(skill)) => skill,
                Ok(None) => continue,
                Err(problem) => {
                    out.problems.push(problem);
                    continue;
                }
            };
            if let Some(why) = discovery::reserved(&skill.name, "skill") {
                out.problems.push(Problem::new(&skill.file, why));
                continue;
            }
            if loaded == MAX_SKILLS {
                out.problems.push(Problem::new(
                    &open.dir,
                    format!("more than {MAX_SKILLS} skills; the rest were not loaded"),
                ));
                break 'roots;
            }
            loaded += 1;
            let listed = entry.path.join(FILE_NAME);
            if let Some(first) = here.get(&skill.name) {
                out.problems.push(Problem::new(
                    &listed,
                    format!(
                        "names the skill `{}`, already defined by {}",
                        skill.name,
                        first.display()
                    ),
                ));
                continue;
            }
            here.insert(skill.name.clone(), listed);
            if let Some(earlier) = found.get(&skill.name) {
                out.notes.push(Note {
                    path: skill.file.clone(),
                    message: discovery::replaced(
                        "skill",
                        &skill.name,
                        skill.scope,
                        &earlier.file,
                        earlier.scope,
                    ),
                });
            }
            found.insert(skill.name.clone(), skill);
        }
    }
    out.skills = found.into_values().collect();
    out
}

/// The skill in the folder at `path` (an entry of the root), `None` when it is not a skill
/// folder (a file, a folder without `SKILL.md`).
fn load_folder(
    root: &OpenRoot,
    path: &Path,
    folder_name: &std::ffi::OsStr,
) -> Result<Option<Skill>, Problem> {
    let dir = match root.follow(path) {
        Ok(Some(resolved)) if resolved.kind == Kind::Dir => resolved.path,
        Ok(_) => return Ok(None),
        Err(reason) => return Err(Problem::new(path, reason)),
    };
    let listed_file = path.join(FILE_NAME);
    let file = match root.follow(&dir.join(FILE_NAME)) {
        Ok(Some(resolved)) if resolved.kind == Kind::File => resolved.path,
        Ok(Some(_)) => return Err(Problem::new(&listed_file, discovery::Defect::NotAFile)),
        Ok(None) => return Ok(None),
        Err(reason) => return Err(Problem::new(&listed_file, reason)),
    };
    let problem = |reason: discovery::Defect| Problem::new(&listed_file, reason);
    let text = discovery::read_text(&file).map_err(problem)?;
    let split = frontmatter::split(&text).map_err(problem)?;
    let Some(header) = split.header else {
        return Err(problem(discovery::Defect::NoFrontmatter));
    };
    let fields = frontmatter::fields(header, &[("name", Want::Text), ("description", Want::Text)])
        .map_err(problem)?;
    let name = match fields.get("name") {
        Some(name) => name.trim().to_owned(),
        // Claude Code names a skill after its folder when the frontmatter does not.
        None => folder_name.to_string_lossy().into_owned(),
    };
    if name.is_empty() {
        return Err(problem(discovery::Defect::EmptyName));
    }
    if !valid_name(&name) {
        return Err(problem(discovery::Defect::SkillName(name)));
    }
    let description = match fields.get("description").map(|text| text.trim()) {
        Some("") => return Err(problem(discovery::Defect::EmptyDescription)),
        Some(text) => text.to_owned(),
        None => {
            return Err(problem(discovery::Defect::NoDescription));
        }
    };
    Ok(Some(Skill {
        name,
        description,
        dir,
        file,
        scope: root.scope,
        body: discovery::trim_body(split.body),
    }))
}

/// Whether `name` follows Claude Code's rule for skill names.
fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
}
