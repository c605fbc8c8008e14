//! Behaviour of the search tools `grep`, `glob` and `ls` on temporary trees.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use keel_agent::{AgentTool, ExecutionMode, ToolError, ToolOutput};
use keel_tools::ToolEnv;
use keel_tools::search::{GlobTool, GrepTool, LsTool, SEARCH_MAX_BYTES, SearchError};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// A temporary tree and an environment whose cwd is its root.
struct Tree {
    dir: TempDir,
    env: Arc<ToolEnv>,
}

impl Tree {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tree = Self {
            env: Arc::new(ToolEnv::new(dir.path().canonicalize().unwrap())),
            dir,
        };
        for (path, content) in files {
            tree.write(path, content.as_bytes());
        }
        tree
    }

    fn root(&self) -> PathBuf {
        self.env.cwd.clone()
    }

    fn write(&self, path: &str, content: &[u8]) {
        let path = self.root().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    async fn grep(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        GrepTool::new(Arc::clone(&self.env))
            .run(arguments, &CancellationToken::new())
            .await
    }

    async fn glob(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        GlobTool::new(Arc::clone(&self.env))
            .run(arguments, &CancellationToken::new())
            .await
    }

    async fn ls(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        LsTool::new(Arc::clone(&self.env))
            .run(arguments, &CancellationToken::new())
            .await
    }
}

fn text(output: &ToolOutput) -> String {
    assert!(!output.is_error, "unexpected error result");
    output
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .collect::<Vec<_>>()
        .join("")
}

/// Text of a successful call.
fn ok(result: Result<ToolOutput, ToolError>) -> String {
    text(&result.unwrap())
}

/// Message of a failed call.
fn err(result: Result<ToolOutput, ToolError>) -> String {
    result.unwrap_err().message
}

fn details(result: Result<ToolOutput, ToolError>) -> Value {
    result.unwrap().details.unwrap()
}

fn code_tree() -> Tree {
    Tree::new(&[
        ("src/main.rs", "fn main() {\n    run();\n}\n"),
        ("src/lib.rs", "pub fn run() {}\n\nfn helper() {}\n"),
        ("src/nested/deep.rs", "// fn in a comment\nfn deep() {}\n"),
        ("README.md", "Run with `cargo run`.\nfn is a keyword.\n"),
        ("notes.txt", "nothing here\n"),
    ])
}

// ---------------------------------------------------------------- definitions

#[test]
fn tools_are_parallel_with_object_schemas() {
    let env = Arc::new(ToolEnv::new("/tmp"));
    let tools: Vec<Box<dyn AgentTool>> = vec![
        Box::new(GrepTool::new(Arc::clone(&env))),
        Box::new(GlobTool::new(Arc::clone(&env))),
        Box::new(LsTool::new(env)),
    ];
    let names: Vec<&str> = tools.iter().map(|t| t.definition().name.as_str()).collect();
    assert_eq!(names, ["grep", "glob", "ls"]);
    for tool in &tools {
        assert_eq!(tool.execution_mode(), ExecutionMode::Parallel);
        assert_eq!(tool.mutated_path(&json!({"path": "x"})), None);
        let schema = &tool.definition().parameters;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
    }
    let grep = &tools[0].definition().parameters;
    assert_eq!(grep["required"], json!(["pattern"]));
    assert_eq!(
        grep["properties"]["output_mode"]["enum"],
        json!(["files_with_matches", "content", "count"])
    );
}

#[test]
fn error_codes_are_stable() {
    let cases = [
        (SearchError::NotFound("x".into()), "not_found"),
        (
            SearchError::PermissionDenied("x".into()),
            "permission_denied",
        ),
        (SearchError::NotAFolder("x".into()), "not_a_folder"),
        (SearchError::NotSearchable("x".into()), "not_searchable"),
        (
            SearchError::UnknownFileType("x".into()),
            "unknown_file_type",
        ),
        (SearchError::Cancelled("grep"), "cancelled"),
    ];
    for (error, code) in cases {
        assert_eq!(error.code(), code);
    }
}

// ---------------------------------------------------------------- grep modes

#[tokio::test]
async fn grep_lists_matching_files_sorted_by_path() {
    let tree = code_tree();
    assert_eq!(
        ok(tree.grep(json!({"pattern": "fn \\w+\\("})).await),
        "Found 3 files for `fn \\w+\\(` in .:\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs\n"
    );
    assert_eq!(
        details(tree.grep(json!({"pattern": "fn \\w+\\("})).await),
        json!({
            "mode": "files_with_matches",
            "pattern": "fn \\w+\\(",
            "path": ".",
            "total_files": 3,
            "files_searched": 5,
            "offset": 0,
            "limit": 200,
            "shown": 3,
            "next_offset": null,
            "binary_skipped": 0,
            "unreadable": 0,
            "timed_out": false,
            "files": ["src/lib.rs", "src/main.rs", "src/nested/deep.rs"],
        })
    );
}

#[tokio::test]
async fn grep_content_shows_path_line_and_text() {
    let tree = code_tree();
    let out = tree
        .grep(json!({"pattern": "run", "output_mode": "content"}))
        .await;
    assert_eq!(
        ok(out),
        "Found 3 matching lines in 3 files for `run` in .:\n\
         README.md:1:Run with `cargo run`.\n\
         src/lib.rs:1:pub fn run() {}\n\
         src/main.rs:2:    run();\n"
    );
    let out = tree
        .grep(json!({"pattern": "run", "output_mode": "content", "path": "src/lib.rs"}))
        .await;
    let details = details(out);
    assert_eq!(details["path"], "src/lib.rs");
    assert_eq!(
        details["matches"],
        json!([{"path": "src/lib.rs", "line": 1, "text": "pub fn run() {}"}])
    );
}

#[tokio::test]
async fn grep_counts_matching_lines_per_file() {
    let tree = code_tree();
    let out = tree
        .grep(json!({"pattern": "fn", "output_mode": "count"}))
        .await;
    assert_eq!(
        ok(out),
        "Found 6 matching lines in 4 files for `fn` in .:\n\
         README.md:1\nsrc/lib.rs:2\nsrc/main.rs:1\nsrc/nested/deep.rs:2\n"
    );
    let out = tree
        .grep(json!({"pattern": "fn", "output_mode": "count", "limit": 1}))
        .await;
    let details = details(out);
    assert_eq!(details["total_matches"], 6);
    assert_eq!(
        details["counts"],
        json!([{"path": "README.md", "count": 1}])
    );
    assert_eq!(details["next_offset"], 1);
}

#[tokio::test]
async fn grep_case_insensitive() {
    let tree = code_tree();
    let sensitive = ok(tree.grep(json!({"pattern": "RUN"})).await);
    assert_eq!(sensitive, "No matches for `RUN` in ..");
    let out = ok(tree
        .grep(json!({"pattern": "RUN", "case_insensitive": true}))
        .await);
    assert_eq!(
        out,
        "Found 3 files for `RUN` in .:\nREADME.md\nsrc/lib.rs\nsrc/main.rs\n"
    );
}

#[tokio::test]
async fn grep_context_lines_with_separators() {
    let lines: String = (1..=20).map(|n| format!("line {n}\n")).collect();
    let tree = Tree::new(&[("a.txt", &lines), ("b.txt", "x\nline 1\ny\n")]);
    let out = ok(tree
        .grep(json!({"pattern": "^line (3|5|12)$", "output_mode": "content", "context": 1}))
        .await);
    assert_eq!(
        out,
        "Found 3 matching lines in 1 file for `^line (3|5|12)$` in .:\n\
         a.txt-2-line 2\n\
         a.txt:3:line 3\n\
         a.txt-4-line 4\n\
         a.txt:5:line 5\n\
         a.txt-6-line 6\n\
         --\n\
         a.txt-11-line 11\n\
         a.txt:12:line 12\n\
         a.txt-13-line 13\n"
    );
    let out = ok(tree
        .grep(json!({"pattern": "line 1$", "output_mode": "content", "before": 1, "after": 0}))
        .await);
    assert_eq!(
        out,
        "Found 2 matching lines in 2 files for `line 1$` in .:\n\
         a.txt:1:line 1\n\
         --\n\
         b.txt-1-x\n\
         b.txt:2:line 1\n"
    );
    let out = ok(tree
        .grep(json!({"pattern": "line 20", "output_mode": "content", "after": 3}))
        .await);
    assert_eq!(
        out,
        "Found 1 matching line in 1 file for `line 20` in .:\na.txt:20:line 20\n"
    );
}

#[tokio::test]
async fn grep_multiline_matches_span_lines() {
    let tree = Tree::new(&[("a.rs", "struct A {\n    x: u8,\n}\nstruct B;\n")]);
    let message = err(tree.grep(json!({"pattern": "A \\{\\n"})).await);
    assert!(
        message.starts_with("invalid regex `A \\{\\n`:"),
        "{message}"
    );
    assert!(message.contains("set `multiline: true`"), "{message}");
    let out = ok(tree
        .grep(json!({"pattern": "struct A \\{.*?\\}", "multiline": true, "output_mode": "content"}))
        .await);
    assert_eq!(
        out,
        "Found 1 matching line in 1 file for `struct A \\{.*?\\}` in .:\n\
         a.rs:1:struct A {\n\
         a.rs:2:    x: u8,\n\
         a.rs:3:}\n"
    );
}

// ---------------------------------------------------------------- grep paging

#[tokio::test]
async fn grep_pages_files_with_limit_and_offset() {
    let files: Vec<(String, String)> = (0..25)
        .map(|n| (format!("f{n:02}.txt"), "needle\n".to_owned()))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let tree = Tree::new(&refs);
    let first = ok(tree.grep(json!({"pattern": "needle", "limit": 10})).await);
    let expected_names: String = (0..10).map(|n| format!("f{n:02}.txt\n")).collect();
    assert_eq!(
        first,
        format!(
            "Found 25 files for `needle` in .; showing files 1-10, sorted by path:\n{expected_names}\n\
             15 more files not shown; call again with offset=10 to see them, or narrow the search."
        )
    );
    let last = ok(tree
        .grep(json!({"pattern": "needle", "limit": 10, "offset": 20}))
        .await);
    let expected_names: String = (20..25).map(|n| format!("f{n:02}.txt\n")).collect();
    assert_eq!(
        last,
        format!(
            "Found 25 files for `needle` in .; showing files 21-25, sorted by path:\n{expected_names}"
        )
    );
    let beyond = ok(tree.grep(json!({"pattern": "needle", "offset": 99})).await);
    assert_eq!(beyond, "No results at offset 99: there are only 25 files.");
}

#[tokio::test]
async fn grep_pages_content_by_matching_lines_across_files() {
    let tree = Tree::new(&[
        ("a.txt", "hit 1\nhit 2\nhit 3\n"),
        ("b.txt", "miss\nhit 4\nhit 5\n"),
        ("c.txt", "hit 6\n"),
    ]);
    let page = |offset: u64| json!({"pattern": "hit", "output_mode": "content", "limit": 2, "offset": offset});
    let out = ok(tree.grep(page(0)).await);
    assert_eq!(
        out,
        "Found 6 matching lines in 3 files for `hit` in .; showing matching lines 1-2, sorted by path:\n\
         a.txt:1:hit 1\n\
         a.txt:2:hit 2\n\
         \n4 more matching lines not shown; call again with offset=2 to see them, or narrow the search."
    );
    let out = ok(tree.grep(page(2)).await);
    assert_eq!(
        out,
        "Found 6 matching lines in 3 files for `hit` in .; showing matching lines 3-4, sorted by path:\n\
         a.txt:3:hit 3\n\
         b.txt:2:hit 4\n\
         \n2 more matching lines not shown; call again with offset=4 to see them, or narrow the search."
    );
    let out = ok(tree.grep(page(4)).await);
    assert_eq!(
        out,
        "Found 6 matching lines in 3 files for `hit` in .; showing matching lines 5-6, sorted by path:\n\
         b.txt:3:hit 5\n\
         c.txt:1:hit 6\n"
    );
}

#[tokio::test]
async fn grep_output_is_cut_at_the_byte_cap_with_the_offset_to_continue() {
    let line = "x".repeat(400);
    let content: String = (0..200).map(|_| format!("{line}\n")).collect();
    let tree = Tree::new(&[("big.txt", &content)]);
    let out = tree
        .grep(json!({"pattern": "x", "output_mode": "content", "limit": 200}))
        .await
        .unwrap();
    let body = text(&out);
    assert!(body.len() <= SEARCH_MAX_BYTES + 300, "{}", body.len());
    let details = out.details.unwrap();
    let shown = details["shown"].as_u64().unwrap();
    assert!(shown > 50 && shown < 200, "{shown}");
    assert_eq!(details["next_offset"], shown);
    assert!(
        body.ends_with(&format!(
            "Output cut at 32 KiB. {} more matching lines not shown; call again with offset={shown} to see them, or narrow the search.",
            200 - shown
        )),
        "{body}"
    );
}

#[tokio::test]
async fn grep_cuts_very_long_lines() {
    let long = format!("needle{}", "y".repeat(2_000));
    let tree = Tree::new(&[("min.js", &long)]);
    let out = ok(tree
        .grep(json!({"pattern": "needle", "output_mode": "content"}))
        .await);
    let expected = format!(
        "Found 1 matching line in 1 file for `needle` in .:\nmin.js:1:needle{}… [1506 more bytes]\n",
        "y".repeat(494)
    );
    assert_eq!(out, expected);
}

// ---------------------------------------------------------------- grep filters

#[tokio::test]
async fn grep_filters_by_glob_and_type() {
    let tree = code_tree();
    let out = ok(tree.grep(json!({"pattern": "fn", "glob": "*.md"})).await);
    assert_eq!(out, "Found 1 file for `fn` in .:\nREADME.md\n");
    let out = ok(tree
        .grep(json!({"pattern": "fn", "glob": "src/*/*.rs"}))
        .await);
    assert_eq!(out, "Found 1 file for `fn` in .:\nsrc/nested/deep.rs\n");
    let out = ok(tree.grep(json!({"pattern": "fn", "glob": "!*.rs"})).await);
    assert_eq!(out, "Found 1 file for `fn` in .:\nREADME.md\n");
    let out = ok(tree
        .grep(json!({"pattern": "fn", "type": "rust", "path": "src/nested"}))
        .await);
    assert_eq!(
        out,
        "Found 1 file for `fn` in src/nested:\nsrc/nested/deep.rs\n"
    );
    let out = ok(tree.grep(json!({"pattern": "zzz", "glob": "*.md"})).await);
    assert_eq!(
        out,
        "No matches for `zzz` in ..\n\nOnly files passing the glob/type filter were searched."
    );
    assert_eq!(
        err(tree
            .grep(json!({"pattern": "fn", "type": "nosuchtype"}))
            .await),
        SearchError::UnknownFileType("nosuchtype".into()).to_string()
    );
    let message = err(tree.grep(json!({"pattern": "fn", "glob": "{a"})).await);
    assert!(message.starts_with("invalid glob `{a`:"), "{message}");
}

#[tokio::test]
async fn grep_honours_ignore_files_and_skips_vcs_folders() {
    let tree = Tree::new(&[
        (".gitignore", "target/\n*.log\n"),
        (".ignore", "vendored.rs\n"),
        ("src/lib.rs", "needle\n"),
        ("target/debug/out.rs", "needle\n"),
        ("build.log", "needle\n"),
        ("vendored.rs", "needle\n"),
        (".git/config", "needle\n"),
        (".hg/store", "needle\n"),
        (".github/workflows/ci.yml", "needle\n"),
    ]);
    let out = ok(tree.grep(json!({"pattern": "needle"})).await);
    assert_eq!(
        out,
        "Found 2 files for `needle` in .:\n.github/workflows/ci.yml\nsrc/lib.rs\n"
    );
    // A nested .gitignore applies below its folder, and parent ignore files apply when
    // searching a subfolder.
    tree.write("src/.gitignore", b"generated.rs\n");
    tree.write("src/generated.rs", b"needle\n");
    tree.write("target/x.rs", b"needle\n");
    let out = ok(tree.grep(json!({"pattern": "needle", "path": "src"})).await);
    assert_eq!(out, "Found 1 file for `needle` in src:\nsrc/lib.rs\n");
}

#[tokio::test]
async fn grep_skips_binary_files_and_says_so() {
    let tree = Tree::new(&[("text.txt", "needle\n")]);
    tree.write("blob.bin", b"needle\x00\x01\x02needle");
    let out = ok(tree.grep(json!({"pattern": "needle"})).await);
    assert_eq!(
        out,
        "Found 1 file for `needle` in .:\ntext.txt\n\n1 binary file skipped."
    );
    let out = ok(tree
        .grep(json!({"pattern": "needle", "path": "blob.bin", "output_mode": "content"}))
        .await);
    assert_eq!(
        out,
        "No matches for `needle` in blob.bin.\n\n1 binary file skipped."
    );
}

// ---------------------------------------------------------------- grep errors

#[tokio::test]
async fn grep_invalid_regex_names_the_problem() {
    let tree = code_tree();
    let message = err(tree.grep(json!({"pattern": "fn main("})).await);
    assert!(
        message.starts_with("invalid regex `fn main(`:"),
        "{message}"
    );
    assert!(message.contains("unclosed group"), "{message}");
}

#[tokio::test]
async fn grep_reports_missing_paths_and_bad_arguments() {
    let tree = code_tree();
    assert_eq!(
        err(tree.grep(json!({"pattern": "x", "path": "nope"})).await),
        "path does not exist: nope"
    );
    assert_eq!(
        err(tree
            .grep(json!({"pattern": "x", "path": "README.md/inner"}))
            .await),
        "path does not exist: README.md/inner"
    );
    let message = err(tree.grep(json!({"pattern": "x", "bogus": 1})).await);
    assert!(
        message.starts_with("invalid arguments: unknown field `bogus`"),
        "{message}"
    );
    let message = err(tree.grep(json!({"path": "src"})).await);
    assert!(message.contains("missing field `pattern`"), "{message}");
}

#[tokio::test]
async fn grep_refuses_a_fifo() {
    let tree = code_tree();
    let fifo = tree.root().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        err(tree.grep(json!({"pattern": "x", "path": "pipe"})).await),
        SearchError::NotSearchable("pipe".into()).to_string()
    );
    // Inside a folder a FIFO is passed over instead of blocking the walk.
    let out = ok(tree.grep(json!({"pattern": "nothing here"})).await);
    assert_eq!(out, "Found 1 file for `nothing here` in .:\nnotes.txt\n");
}

/// Whether this process can read what it should not (root): permission tests skip then.
fn privileged(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let probe = dir.join("probe");
    fs::write(&probe, "x").unwrap();
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o000)).unwrap();
    let readable = fs::read(&probe).is_ok();
    fs::remove_file(&probe).unwrap();
    readable
}

#[tokio::test]
async fn permission_denied_is_reported_not_fatal() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new(&[("open/a.txt", "needle\n"), ("locked/b.txt", "needle\n")]);
    if privileged(&tree.root()) {
        eprintln!("running with privileges: permission checks skipped");
        return;
    }
    let locked = tree.root().join("locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let grep = tree.grep(json!({"pattern": "needle"})).await;
    let ls = tree.ls(json!({"path": "locked"})).await;
    let glob = tree.glob(json!({"pattern": "**/*.txt"})).await;
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    let out = ok(grep);
    assert!(
        out.starts_with("Found 1 file for `needle` in .:\nopen/a.txt\n"),
        "{out}"
    );
    assert!(out.contains("1 path could not be read"), "{out}");
    assert_eq!(err(ls), "permission denied: locked");
    let out = ok(glob);
    assert!(
        out.contains("open/a.txt") && out.contains("could not be read"),
        "{out}"
    );
}

// ---------------------------------------------------------------- non-UTF-8

#[tokio::test]
async fn non_utf8_names_and_contents_are_shown_lossily() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tree = Tree::new(&[]);
    let name = OsStr::from_bytes(b"bad\xffname.txt");
    fs::write(tree.root().join(name), b"caf\xe9 needle\n").unwrap();
    let out = ok(tree
        .grep(json!({"pattern": "needle", "output_mode": "content"}))
        .await);
    assert_eq!(
        out,
        "Found 1 matching line in 1 file for `needle` in .:\n\
         bad\u{fffd}name.txt:1:caf\u{fffd} needle\n\n\
         Some names are not valid UTF-8 and are shown with U+FFFD replacement characters.\n\
         Some lines are not valid UTF-8 and are shown with U+FFFD replacement characters."
    );
    let out = ok(tree.glob(json!({"pattern": "*.txt"})).await);
    assert!(
        out.contains("bad\u{fffd}name.txt") && out.contains("U+FFFD"),
        "{out}"
    );
    let out = ok(tree.ls(json!({})).await);
    assert!(
        out.contains("bad\u{fffd}name.txt") && out.contains("U+FFFD"),
        "{out}"
    );
}

// ---------------------------------------------------------------- cancellation, time

#[tokio::test]
async fn cancelled_and_timed_out_searches() {
    let tree = code_tree();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let grep = GrepTool::new(Arc::clone(&tree.env));
    assert_eq!(
        err(grep.run(json!({"pattern": "fn"}), &cancel).await),
        "grep was cancelled"
    );
    let grep = GrepTool::new(Arc::clone(&tree.env)).with_timeout(Duration::ZERO);
    let out = ok(grep
        .run(json!({"pattern": "fn"}), &CancellationToken::new())
        .await);
    assert!(out.contains("stopped after 0 s"), "{out}");
    let glob = GlobTool::new(Arc::clone(&tree.env)).with_timeout(Duration::ZERO);
    let out = glob
        .run(json!({"pattern": "*"}), &CancellationToken::new())
        .await;
    assert_eq!(details(out)["timed_out"], true);
}

// ---------------------------------------------------------------- glob

fn set_mtime(path: &Path, seconds_ago: u64) {
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds_ago))
        .unwrap();
}

#[tokio::test]
async fn glob_sorts_newest_first() {
    let tree = Tree::new(&[
        ("old.rs", ""),
        ("src/new.rs", ""),
        ("src/mid.rs", ""),
        ("other.txt", ""),
    ]);
    set_mtime(&tree.root().join("old.rs"), 3_000);
    set_mtime(&tree.root().join("src/mid.rs"), 2_000);
    set_mtime(&tree.root().join("src/new.rs"), 1_000);
    let out = ok(tree.glob(json!({"pattern": "**/*.rs"})).await);
    assert_eq!(
        out,
        "3 files match `**/*.rs` in ., newest first:\nsrc/new.rs\nsrc/mid.rs\nold.rs\n"
    );
    set_mtime(&tree.root().join("old.rs"), 10);
    let out = details(tree.glob(json!({"pattern": "*.rs"})).await);
    assert_eq!(out["files"], json!(["old.rs", "src/new.rs", "src/mid.rs"]));
}

#[tokio::test]
async fn glob_patterns_follow_gitignore_rules() {
    let tree = Tree::new(&[
        (".gitignore", "target/\n"),
        ("Cargo.toml", ""),
        ("crates/a/Cargo.toml", ""),
        ("crates/a/src/lib.rs", ""),
        ("crates/b/Cargo.toml", ""),
        ("target/debug/lib.rs", ""),
        (".git/HEAD", ""),
    ]);
    let files = |out: Result<ToolOutput, ToolError>| {
        let mut files: Vec<String> = details(out)["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_owned())
            .collect();
        files.sort();
        files
    };
    assert_eq!(
        files(tree.glob(json!({"pattern": "Cargo.toml"})).await),
        ["Cargo.toml", "crates/a/Cargo.toml", "crates/b/Cargo.toml"]
    );
    assert_eq!(
        files(tree.glob(json!({"pattern": "crates/*/Cargo.toml"})).await),
        ["crates/a/Cargo.toml", "crates/b/Cargo.toml"]
    );
    assert_eq!(
        files(tree.glob(json!({"pattern": "crates/*.toml"})).await),
        Vec::<String>::new()
    );
    assert_eq!(
        files(tree.glob(json!({"pattern": "**/*.rs"})).await),
        ["crates/a/src/lib.rs"]
    );
    assert_eq!(
        files(
            tree.glob(json!({"pattern": "*.toml", "path": "crates/a"}))
                .await
        ),
        ["crates/a/Cargo.toml"]
    );
    let absolute = format!("{}/crates/**/*.rs", tree.root().display());
    assert_eq!(
        files(tree.glob(json!({"pattern": absolute})).await),
        ["crates/a/src/lib.rs"]
    );
    assert_eq!(
        files(tree.glob(json!({"pattern": "HEAD"})).await),
        Vec::<String>::new()
    );
    assert_eq!(
        ok(tree.glob(json!({"pattern": "*.py"})).await),
        "No files match `*.py` in ..\n\n\
         Files ignored by .gitignore/.ignore and version-control folders are not listed."
    );
    assert_eq!(
        ok(tree.glob(json!({"pattern": "nope/**/*.rs"})).await),
        "No files match `nope/**/*.rs`: nope is not a folder."
    );
}

#[tokio::test]
async fn glob_limit_says_how_many_more() {
    let files: Vec<(String, String)> = (0..30)
        .map(|n| (format!("f{n:02}.rs"), String::new()))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let tree = Tree::new(&refs);
    for n in 0..30_u64 {
        set_mtime(&tree.root().join(format!("f{n:02}.rs")), 100 + n);
    }
    let out = ok(tree.glob(json!({"pattern": "*.rs", "limit": 3})).await);
    assert_eq!(
        out,
        "30 files match `*.rs` in .; the 3 newest:\nf00.rs\nf01.rs\nf02.rs\n\n\
         27 more files not shown; narrow the pattern or path, or raise limit (at most 2000)."
    );
}

#[tokio::test]
async fn glob_errors_for_missing_path_file_and_bad_pattern() {
    let tree = code_tree();
    assert_eq!(
        err(tree.glob(json!({"pattern": "*", "path": "missing"})).await),
        "path does not exist: missing"
    );
    assert_eq!(
        err(tree
            .glob(json!({"pattern": "*", "path": "README.md"}))
            .await),
        SearchError::NotAFolder("README.md".into()).to_string()
    );
    let message = err(tree.glob(json!({"pattern": "src/**/[a"})).await);
    assert!(
        message.starts_with("invalid glob `src/**/[a`:"),
        "{message}"
    );
}

// ---------------------------------------------------------------- ls

#[tokio::test]
async fn ls_lists_folders_first_with_markers() {
    let tree = Tree::new(&[
        ("b.txt", ""),
        ("A.md", ""),
        (".hidden", ""),
        ("src/lib.rs", ""),
        ("target/x", ""),
    ]);
    std::os::unix::fs::symlink("src", tree.root().join("link")).unwrap();
    let out = tree.ls(json!({})).await;
    assert_eq!(
        text(out.as_ref().unwrap()),
        "./ (6 entries):\nlink@ -> src/\nsrc/\ntarget/\n.hidden\nA.md\nb.txt\n"
    );
    assert_eq!(
        out.unwrap().details.unwrap(),
        json!({
            "path": ".",
            "total": 6,
            "shown": 6,
            "ignored": 0,
            "entries": [
                {"name": "link", "kind": "symlink"},
                {"name": "src", "kind": "folder"},
                {"name": "target", "kind": "folder"},
                {"name": ".hidden", "kind": "file"},
                {"name": "A.md", "kind": "file"},
                {"name": "b.txt", "kind": "file"},
            ],
        })
    );
    let out = ok(tree.ls(json!({"ignore": ["target/", ".*", "*.md"]})).await);
    assert_eq!(
        out,
        "./ (3 entries):\nlink@ -> src/\nsrc/\nb.txt\n\n3 entries hidden by the ignore patterns."
    );
    let out = ok(tree.ls(json!({"path": "src"})).await);
    assert_eq!(out, "src/ (1 entry):\nlib.rs\n");
}

#[tokio::test]
async fn ls_is_bounded_and_reports_errors() {
    let tree = Tree::new(&[("file.txt", "")]);
    fs::create_dir(tree.root().join("empty")).unwrap();
    for n in 0..1_005 {
        tree.write(&format!("many/{n:04}"), b"");
    }
    let out = ok(tree.ls(json!({"path": "many"})).await);
    assert!(
        out.starts_with("many/ (1005 entries):\n0000\n"),
        "{}",
        &out[..40]
    );
    assert!(out.contains("\n0999\n") && !out.contains("1000\n"));
    assert!(out.ends_with("5 more entries not shown; use glob, or `ignore` to hide entries."));
    assert_eq!(
        ok(tree.ls(json!({"path": "empty"})).await),
        "empty/ is empty."
    );
    assert_eq!(
        err(tree.ls(json!({"path": "nope"})).await),
        "path does not exist: nope"
    );
    assert_eq!(
        err(tree.ls(json!({"path": "file.txt"})).await),
        "file.txt is a file, not a folder; give its folder, or use `read` to see the file"
    );
    let message = err(tree.ls(json!({"ignore": ["[z"]})).await);
    assert!(message.starts_with("invalid glob `[z`:"), "{message}");
    let outside = tempfile::tempdir().unwrap();
    let out = ok(tree
        .ls(json!({"path": outside.path().to_str().unwrap()}))
        .await);
    assert!(out.starts_with(outside.path().to_str().unwrap()), "{out}");
    drop(tree.dir);
}
