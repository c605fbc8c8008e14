//! The system prompt: keel's own instructions plus the user's project instructions.
//!
//! Project instructions are `AGENTS.md` files (a folder without one may have `CLAUDE.md`
//! instead) from Claude Code's `~/.claude/` and `$KEEL_HOME` (the user's own), the project root (the git root, else the working folder:
//! [`super::project`]) and every folder from the root down to the working folder; a file
//! of another user's is left out with a warning. Together they are capped at 32 KiB; when
//! they do not all fit, the most specific ones (nearest the working folder) are kept and the
//! others are named. Their text is data, not keel's: keel's own tags in it are defused.

use std::path::{Path, PathBuf};

use super::project::Project;

/// Total size of project instructions in the system prompt (issue 5).
pub const MAX_INSTRUCTIONS: usize = 32 * 1024;

/// File names read, in order of preference within one folder.
const NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// keel's own words: who it is and how it works.
const PREAMBLE: &str = "You are keel, a coding agent working in a terminal on the user's machine. \
You help with software tasks: reading and changing code, running commands, finding and fixing bugs, \
explaining what you find.

How you work:
- Look before you change: read the files involved, search for related code, and check how the \
project builds and tests before editing.
- Make focused changes with the edit tool; create files with write only when a new file is needed. \
Keep the project's style, line endings and conventions.
- Run the project's tests or build after a change when you can, and report what you ran and what \
happened, including failures.
- Use todowrite to keep a short plan for work of several steps, with one item in progress at a time.
- Tool calls may be denied by the user's permission settings; when that happens, say so and adapt \
instead of retrying the same call.
- Be concise. When you are done, say what you changed and anything left to do.";

/// One instructions file found.
#[derive(Debug, Clone, PartialEq)]
pub struct Instructions {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its text (possibly cut to fit).
    pub text: String,
}

/// The project root of `cwd`: the git root, else `cwd` ([`Project`]).
pub fn project_root(cwd: &Path) -> PathBuf {
    Project::of(cwd, None).root
}

/// The instruction files between the project's root and `cwd` that keel leaves out because
/// another user owns them, each as a warning (only looked at, never read).
pub fn foreign(cwd: &Path, project: &Project) -> Vec<String> {
    if project.folder_trusted {
        return Vec::new();
    }
    cwd.ancestors()
        .take_while(|dir| dir.starts_with(&project.root))
        .filter_map(file_in)
        .filter_map(|path| project.admit(&path).err())
        .map(|why| why.to_string())
        .collect()
}

fn file_in(dir: &Path) -> Option<PathBuf> {
    NAMES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
}

/// Instructions files from general to specific, within the size cap, and the files left out;
/// project files of other users are passed over ([`foreign`] names them).
pub fn collect(
    cwd: &Path,
    keel_home: Option<&Path>,
    project: &Project,
) -> (Vec<Instructions>, Vec<PathBuf>) {
    let root = &project.root;
    let mut folders: Vec<PathBuf> = Vec::new();
    // The user's own, general first: Claude Code's `~/.claude/CLAUDE.md`, then keel's.
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        folders.push(PathBuf::from(home).join(".claude"));
    }
    if let Some(home) = keel_home {
        folders.push(home.to_path_buf());
    }
    let mut chain: Vec<PathBuf> = cwd
        .ancestors()
        .take_while(|dir| dir.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    chain.reverse();
    let first_project = folders.len();
    folders.extend(chain);
    let mut files: Vec<PathBuf> = Vec::new();
    for (at, folder) in folders.into_iter().enumerate() {
        let Some(path) = file_in(&folder).filter(|p| !files.contains(p)) else {
            continue;
        };
        if at >= first_project
            && keel_home.is_none_or(|home| !path.starts_with(home))
            && project.admit(&path).is_err()
        {
            continue;
        }
        files.push(path);
    }
    // Fill the budget from the most specific file backwards.
    let mut budget = MAX_INSTRUCTIONS;
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for path in files.into_iter().rev() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            left_out.push(path);
            continue;
        };
        let text = crate::tags::defuse(text.trim()).into_owned();
        if text.is_empty() {
            continue;
        }
        if budget == 0 {
            left_out.push(path);
            continue;
        }
        let text = if text.len() > budget {
            let mut cut = budget;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!(
                "{}\n[… cut to fit the {} KiB limit on instructions]",
                &text[..cut],
                MAX_INSTRUCTIONS / 1024
            )
        } else {
            text
        };
        budget = budget.saturating_sub(text.len());
        kept.push(Instructions { path, text });
    }
    kept.reverse();
    left_out.reverse();
    (kept, left_out)
}

/// The whole system prompt for a run in `cwd` of `project`.
pub fn system_prompt(
    cwd: &Path,
    extra_roots: &[PathBuf],
    keel_home: Option<&Path>,
    project: &Project,
) -> String {
    let mut prompt = String::from(PREAMBLE);
    prompt.push_str(&format!(
        "\n\nEnvironment:\n- Working folder: {}\n",
        cwd.display()
    ));
    for root in extra_roots {
        prompt.push_str(&format!("- Also in the workspace: {}\n", root.display()));
    }
    prompt.push_str(&format!(
        "- Platform: {} {}\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    let (kept, left_out) = collect(cwd, keel_home, project);
    if !kept.is_empty() {
        prompt.push_str(
            "\nProject instructions follow, from general to specific; where they disagree, the more \
specific ones (nearer the working folder) win, and the user's own requests win over all of them.\n",
        );
        for file in &kept {
            prompt.push_str(&format!("\n## {}\n\n{}\n", file.path.display(), file.text));
        }
    }
    if !left_out.is_empty() {
        let names: Vec<String> = left_out.iter().map(|p| p.display().to_string()).collect();
        prompt.push_str(&format!(
            "\n(Instructions not included, over the size limit or unreadable: {}. Read them if they matter.)\n",
            names.join(", ")
        ));
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_home_root_and_every_folder_down_with_claude_md_as_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let root = dir.path().join("repo");
        let deep = root.join("crates/app");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(home.join("AGENTS.md"), "global rule").unwrap();
        std::fs::write(root.join("AGENTS.md"), "root rule").unwrap();
        std::fs::write(root.join("CLAUDE.md"), "ignored: AGENTS.md wins").unwrap();
        std::fs::write(root.join("crates/CLAUDE.md"), "crates rule").unwrap();
        std::fs::write(deep.join("AGENTS.md"), "app rule").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "outside the project").unwrap();
        let project = Project::of(&deep, None);
        let (kept, left_out) = collect(&deep, Some(&home), &project);
        let texts: Vec<&str> = kept.iter().map(|k| k.text.as_str()).collect();
        assert_eq!(
            texts,
            ["global rule", "root rule", "crates rule", "app rule"]
        );
        assert!(left_out.is_empty());
        let prompt = system_prompt(&deep, &[], Some(&home), &project);
        assert!(prompt.starts_with("You are keel"));
        assert!(prompt.find("root rule").unwrap() < prompt.find("app rule").unwrap());
    }

    #[test]
    fn the_cap_keeps_the_most_specific_instructions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let deep = root.join("sub");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("AGENTS.md"), "r".repeat(30 * 1024)).unwrap();
        std::fs::write(deep.join("AGENTS.md"), "s".repeat(4 * 1024)).unwrap();
        let project = Project::of(&deep, None);
        let (kept, _) = collect(&deep, None, &project);
        let total: usize = kept.iter().map(|k| k.text.len()).sum();
        assert!(total <= MAX_INSTRUCTIONS + 100, "{total}");
        assert_eq!(kept.last().unwrap().text, "s".repeat(4 * 1024));
        assert!(kept[0].text.ends_with("limit on instructions]"));
        std::fs::write(deep.join("AGENTS.md"), "s".repeat(40 * 1024)).unwrap();
        let (kept, left_out) = collect(&deep, None, &project);
        assert_eq!(kept.len(), 1);
        assert_eq!(left_out, [root.join("AGENTS.md")]);
    }
}
