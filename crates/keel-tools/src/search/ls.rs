//! `ls`: one folder's entries, folders first.
//!
//! Unlike `glob` it lists one level and ignores nothing by default (hidden entries and
//! ignored folders such as `target/` show), because its job is to show what is there;
//! `ignore` globs hide entries by name when the model asks.

use std::ffi::OsString;
use std::fs::FileType;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use globset::{Glob, GlobSet, GlobSetBuilder};
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    LOSSY_NAMES_NOTE, PathKind, SEARCH_TIMEOUT, SearchError, Unreadable, counted, display_path,
    inspect, parse_args, run_walk,
};
use crate::args::{self, present};
use crate::env::ToolEnv;

/// The most entries one listing shows.
pub const LS_MAX_ENTRIES: usize = 1_000;

/// The arguments of `ls`; its doc comments are the descriptions the model reads.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LsArgs {
    /// Folder to list; default the working folder.
    #[serde(default, deserialize_with = "present")]
    path: Option<String>,
    /// Glob patterns of entry names to leave out.
    #[serde(default, deserialize_with = "present")]
    ignore: Option<Vec<String>>,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "ls".to_owned(),
    description: format!(
        "List one folder's entries (default the working folder), folders first, then \
         files, each sorted by name. Folders end in `/`, symbolic links in `@` with their \
         target. Hidden entries are included; hide entries by name with `ignore` globs \
         (e.g. [\"target\", \"*.log\"]). At most {LS_MAX_ENTRIES} entries are shown. To \
         find files deeper down, use glob."
    ),
    parameters: args::schema::<LsArgs>(),
});

/// The `ls` tool: one folder's entries, with kind markers.
#[derive(Debug)]
pub struct LsTool {
    env: Arc<ToolEnv>,
}

impl LsTool {
    /// An ls tool listing folders in `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self { env }
    }

    /// Runs one call outside the agent loop (tests); `execute` delegates here.
    pub async fn run(
        &self,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, ToolError> {
        Ok(self.ls(arguments, cancel).await?)
    }

    async fn ls(
        &self,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, SearchError> {
        let args: LsArgs = parse_args(arguments)?;
        let folder = self.env.resolve(args.path.as_deref().unwrap_or("."));
        let (shown, _) = display_path(&self.env, &folder);
        if inspect(&folder, &shown).await? == PathKind::File {
            return Err(SearchError::NotAFolder(shown));
        }
        let ignore = IgnoreSet::new(args.ignore.as_deref().unwrap_or_default())?;
        let read_folder = folder.clone();
        let read_shown = shown.clone();
        let (listing, _) = run_walk("ls", cancel, SEARCH_TIMEOUT, move |_| {
            list(&read_folder, &read_shown, &ignore)
        })
        .await?;
        let listing = listing?;
        Ok(render(&shown, listing))
    }
}

#[async_trait]
impl AgentTool for LsTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SearchesFolder {
            path: "path",
            pattern: None,
            recursive: false,
        }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.run(arguments, &context.cancel).await
    }
}

/// Entry names to leave out; a pattern ending in `/` applies to folders only.
struct IgnoreSet {
    any: GlobSet,
    folders: GlobSet,
}

impl IgnoreSet {
    fn new(patterns: &[String]) -> Result<Self, SearchError> {
        let mut any = GlobSetBuilder::new();
        let mut folders = GlobSetBuilder::new();
        for pattern in patterns {
            let (builder, glob) = match pattern.strip_suffix('/') {
                Some(folder) => (&mut folders, folder),
                None => (&mut any, pattern.as_str()),
            };
            let glob = Glob::new(glob).map_err(|err| SearchError::InvalidGlob {
                glob: pattern.clone(),
                message: err.kind().to_string(),
            })?;
            builder.add(glob);
        }
        let build = |builder: GlobSetBuilder| {
            builder.build().map_err(|err| SearchError::InvalidGlob {
                glob: patterns.join(", "),
                message: err.to_string(),
            })
        };
        Ok(Self {
            any: build(any)?,
            folders: build(folders)?,
        })
    }

    fn ignores(&self, name: &OsString, kind: Kind) -> bool {
        let name = Path::new(name);
        self.any.is_match(name) || (kind.is_folder() && self.folders.is_match(name))
    }
}

/// What an entry is, for its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Folder,
    File,
    /// A symbolic link; whether its target is a folder.
    Link {
        to_folder: bool,
    },
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    fn of(file_type: FileType, path: &Path) -> Self {
        if file_type.is_dir() {
            Self::Folder
        } else if file_type.is_file() {
            Self::File
        } else if file_type.is_symlink() {
            Self::Link {
                to_folder: std::fs::metadata(path).is_ok_and(|meta| meta.is_dir()),
            }
        } else {
            Self::Other
        }
    }

    fn is_folder(self) -> bool {
        matches!(self, Self::Folder | Self::Link { to_folder: true })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Folder => "folder",
            Self::File => "file",
            Self::Link { .. } => "symlink",
            Self::Other => "other",
        }
    }
}

struct Entry {
    name: OsString,
    path: PathBuf,
    kind: Kind,
}

struct Listing {
    entries: Vec<Entry>,
    ignored: usize,
    unreadable: Unreadable,
}

fn list(folder: &Path, shown: &str, ignore: &IgnoreSet) -> Result<Listing, SearchError> {
    let reader = std::fs::read_dir(folder).map_err(|err| SearchError::io(&err, shown))?;
    let mut listing = Listing {
        entries: Vec::new(),
        ignored: 0,
        unreadable: Unreadable::default(),
    };
    for entry in reader {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                listing.unreadable.note(|| err.to_string());
                continue;
            }
        };
        let path = entry.path();
        let kind = match entry.file_type() {
            Ok(file_type) => Kind::of(file_type, &path),
            Err(err) => {
                listing
                    .unreadable
                    .note(|| format!("{}: {err}", path.display()));
                continue;
            }
        };
        let name = entry.file_name();
        if ignore.ignores(&name, kind) {
            listing.ignored += 1;
            continue;
        }
        listing.entries.push(Entry { name, path, kind });
    }
    // Folders first, then the rest; names compared as bytes, so the order is stable.
    listing.entries.sort_unstable_by(|a, b| {
        b.kind
            .is_folder()
            .cmp(&a.kind.is_folder())
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(listing)
}

fn render(shown: &str, listing: Listing) -> ToolOutput {
    let total = listing.entries.len();
    let mut lossy = false;
    let mut body = String::new();
    let mut details = Vec::new();
    for entry in listing.entries.iter().take(LS_MAX_ENTRIES) {
        let name = match entry.name.to_str() {
            Some(name) => name.to_owned(),
            None => {
                lossy = true;
                entry.name.to_string_lossy().into_owned()
            }
        };
        let line = match entry.kind {
            Kind::Folder => format!("{name}/"),
            Kind::File | Kind::Other => name.clone(),
            Kind::Link { to_folder } => {
                let target = std::fs::read_link(&entry.path)
                    .map(|target| target.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| "?".to_owned());
                let marker = if to_folder { "/" } else { "" };
                format!("{name}@ -> {target}{marker}")
            }
        };
        body.push_str(&line);
        body.push('\n');
        details.push(json!({"name": name, "kind": entry.kind.as_str()}));
    }
    let folder = if shown.ends_with('/') {
        shown.to_owned()
    } else {
        format!("{shown}/")
    };
    let mut text = if total == 0 {
        format!("{folder} is empty.")
    } else {
        format!(
            "{folder} ({}):\n{body}",
            counted(total as u64, "entry", "entries")
        )
    };
    let mut notes = Vec::new();
    if total > LS_MAX_ENTRIES {
        notes.push(format!(
            "{} not shown; use glob, or `ignore` to hide entries.",
            counted(
                (total - LS_MAX_ENTRIES) as u64,
                "more entry",
                "more entries"
            )
        ));
    }
    if listing.ignored > 0 {
        notes.push(format!(
            "{} by the ignore patterns.",
            counted(listing.ignored as u64, "entry hidden", "entries hidden")
        ));
    }
    if let Some(note) = listing.unreadable.note_line() {
        notes.push(note);
    }
    if lossy {
        notes.push(LOSSY_NAMES_NOTE.to_owned());
    }
    if !notes.is_empty() {
        text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
        text.push_str(&notes.join("\n"));
    }
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details: Some(json!({
            "path": shown,
            "total": total,
            "shown": details.len(),
            "ignored": listing.ignored,
            "entries": details,
        })),
        is_error: false,
        terminate: false,
    }
}
