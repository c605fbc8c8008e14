//! What the model sees of skills: the listing in the system prompt, and what the `skill`
//! tool returns for one.
//!
//! The listing has a budget because every request carries it. Over budget, descriptions are
//! shortened first (all to the same length, so the longest lose most), down to
//! [`MIN_DESCRIPTION_CHARS`]; only then are skills dropped from the end, with a line saying
//! how many; the model can still load a dropped one, as the tool names every skill when
//! asked for one it does not know.

use std::path::{Path, PathBuf};

use keel_tools::output::one_line;

use super::{FILE_NAME, Skill, TOOL_NAME};
use crate::{commands, discovery};

/// Shortest a description is cut to before skills are dropped instead: enough for a phrase.
pub const MIN_DESCRIPTION_CHARS: usize = 40;

/// Most files [`Skill::files`] lists.
pub const MAX_FILES: usize = 100;

/// How deep [`Skill::files`] looks into a skill's folder.
const MAX_DEPTH: usize = 8;

/// Most entries [`Skill::files`] looks at, so a skill folder holding a dependency tree
/// cannot make loading it slow.
const MAX_VISITED: usize = 5_000;

impl Skill {
    /// The other files in the skill's folder, relative to it, sorted, at most [`MAX_FILES`];
    /// hidden files and links are left out.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut room = MAX_VISITED;
        collect(&self.dir, Path::new(""), &mut files, &mut room);
        files
    }
}

/// Adds the files under `dir` (at `rel` inside the skill) to `files`, in sorted order.
fn collect(dir: &Path, rel: &Path, files: &mut Vec<PathBuf>, room: &mut usize) {
    let Ok(listing) = discovery::list(dir) else {
        return;
    };
    for entry in listing.entries {
        if files.len() == MAX_FILES || *room == 0 {
            return;
        }
        *room -= 1;
        let Some(file_type) = entry.file_type else {
            continue;
        };
        let path = rel.join(&entry.name);
        if file_type.is_dir() {
            if rel.components().count() < MAX_DEPTH {
                collect(&entry.path, &path, files, room);
            }
        } else if file_type.is_file() && path != Path::new(FILE_NAME) {
            files.push(path);
        }
    }
}

/// The system-prompt text naming every skill (`name: description`) and telling the model to
/// load one with the `skill` tool first, in at most `budget_chars` characters. `None` when
/// there are no skills, or when not even the header fits.
pub fn listing(skills: &[Skill], budget_chars: usize) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let fits = |text: &String| text.chars().count() <= budget_chars;
    let full = render(skills, skills.len(), None);
    if fits(&full) {
        return Some(full);
    }
    let longest = skills
        .iter()
        .map(|skill| skill.description.chars().count())
        .max()
        .unwrap_or(0);
    // The longest cap that fits (a shorter cap never makes the text longer), then, at the
    // shortest cap, the most skills that fit (one more never makes it shorter).
    let cap = largest(MIN_DESCRIPTION_CHARS, longest, |cap| {
        fits(&render(skills, skills.len(), Some(cap)))
    });
    if let Some(cap) = cap {
        return Some(render(skills, skills.len(), Some(cap)));
    }
    let cap = Some(MIN_DESCRIPTION_CHARS);
    let kept = largest(0, skills.len() - 1, |kept| fits(&render(skills, kept, cap)))?;
    Some(render(skills, kept, cap))
}

/// The largest value in `low..=high` for which `ok` holds, `ok` being true up to some value
/// and false after it.
fn largest(mut low: usize, mut high: usize, ok: impl Fn(usize) -> bool) -> Option<usize> {
    let mut best = None;
    while low <= high {
        let middle = low + (high - low) / 2;
        if ok(middle) {
            best = Some(middle);
            low = middle + 1;
        } else if middle == 0 {
            break;
        } else {
            high = middle - 1;
        }
    }
    best
}

/// The listing of the first `kept` skills, descriptions cut to `cap` characters.
fn render(skills: &[Skill], kept: usize, cap: Option<usize>) -> String {
    let mut text = format!(
        "Skills are instructions for particular tasks, kept in folders. When a task matches a \
         skill below, call the `{TOOL_NAME}` tool with its name before you start, then follow \
         what it returns.\n"
    );
    for skill in &skills[..kept] {
        let description = one_line(&skill.description, cap.unwrap_or(usize::MAX));
        text.push_str(&format!("- {}: {description}\n", skill.name));
    }
    let left_out = skills.len() - kept;
    if left_out > 0 {
        let noun = if left_out == 1 {
            "skill is"
        } else {
            "skills are"
        };
        text.push_str(&format!(
            "- ({left_out} more {noun} not listed, for lack of room.)\n"
        ));
    }
    text
}

/// What the `skill` tool returns for `skill`: its folder, its instructions and its files.
pub fn load(skill: &Skill) -> String {
    load_with_arguments(skill, "")
}

/// [`load`] with `arguments` substituted into the instructions the way a custom command's
/// are ([`commands::expand`]), as Claude Code does for skills; `${CLAUDE_SKILL_DIR}` becomes
/// the folder, so a skill written for Claude Code finds its scripts.
pub fn load_with_arguments(skill: &Skill, arguments: &str) -> String {
    let dir = skill.dir.display().to_string();
    let body = commands::expand(&skill.body, arguments).replace("${CLAUDE_SKILL_DIR}", &dir);
    let mut text = format!(
        "Skill `{}`, in the folder {dir}\n(a relative path in it is relative to that folder)\n\n{}\n",
        skill.name, body
    );
    let files = skill.files();
    if !files.is_empty() {
        text.push_str(
            "\nFiles in the skill's folder (read one when the instructions call for it):\n",
        );
        for file in &files {
            text.push_str(&format!("- {}\n", file.display()));
        }
        if files.len() == MAX_FILES {
            text.push_str(&format!("(only the first {MAX_FILES} are listed)\n"));
        }
    }
    text
}
