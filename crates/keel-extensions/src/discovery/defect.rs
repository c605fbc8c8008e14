//! What is wrong with a skill, command or agent file, or a folder that holds them: said to
//! the user after the file's name ("SKILL.md is not a regular file").

use std::path::PathBuf;

use super::MAX_FILE_BYTES;

/// Why a definition file or folder cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Defect {
    /// The file system refused (the text is its reason).
    #[error("cannot be read: {0}")]
    Unreadable(String),
    /// A link where links are not followed.
    #[error("is a symbolic link; links are not followed in a project's skill and command folders")]
    Link,
    /// A link whose target is gone.
    #[error("is a link to nothing")]
    DanglingLink,
    /// A link out of its root.
    #[error(
        "is a link to {}, outside {}; only links that stay inside it are followed",
        target.display(),
        root.display()
    )]
    LinkOutside {
        /// Where it leads.
        target: PathBuf,
        /// The root it must stay in.
        root: PathBuf,
    },
    /// Another user's file in a project that is not trusted.
    #[error(
        "belongs to another user; keel ignores a project's files of other users unless the \
         folder is trusted (`keel trust`)"
    )]
    Foreign,
    /// Not a regular file (a folder, a pipe).
    #[error("is not a regular file")]
    NotAFile,
    /// Larger than a definition may be.
    #[error(
        "is larger than {} KiB, the most a skill or command file may be",
        MAX_FILE_BYTES / 1024
    )]
    TooBig,
    /// Not UTF-8.
    #[error("is not UTF-8 text (invalid byte at offset {0})")]
    NotUtf8(usize),
    /// A frontmatter that never ends.
    #[error("starts a frontmatter with a `---` line but never closes it with another")]
    Unclosed,
    /// A frontmatter that is not YAML.
    #[error("has invalid YAML frontmatter: {0}")]
    Yaml(String),
    /// A frontmatter that is not `key: value` lines.
    #[error("has frontmatter that is not a list of `key: value` lines")]
    NotAMapping,
    /// A key whose value is not text.
    #[error("has a frontmatter `{key}` that is {kind}, not text")]
    NotText {
        /// The key.
        key: &'static str,
        /// What it holds instead.
        kind: &'static str,
    },
    /// A skill without a frontmatter.
    #[error(
        "has no frontmatter: it must start with a `---` line, then `name:` and `description:`, \
         then another `---` line"
    )]
    NoFrontmatter,
    /// A skill whose `name` is empty.
    #[error("has an empty `name`")]
    EmptyName,
    /// A skill name keel does not take.
    #[error(
        "has the name `{0}`; a skill name is 1 to {max} lowercase letters, digits and hyphens",
        max = crate::skills::MAX_NAME_CHARS
    )]
    SkillName(String),
    /// A skill whose `description` is empty.
    #[error("has an empty `description`")]
    EmptyDescription,
    /// A skill without a `description`.
    #[error("has no `description`, which the model needs to know when to use it")]
    NoDescription,
    /// An agent name keel does not take.
    #[error("has the agent name `{0}`: use letters, digits, `_` and `-` (at most 64)")]
    AgentName(String),
    /// An agent file with nothing after its frontmatter.
    #[error("has no instructions after its frontmatter")]
    NoInstructions,
}

impl From<&std::io::Error> for Defect {
    fn from(error: &std::io::Error) -> Self {
        #[cfg(unix)]
        if error.raw_os_error() == Some(libc::ELOOP) {
            return Self::Link;
        }
        Self::Unreadable(error.to_string())
    }
}
