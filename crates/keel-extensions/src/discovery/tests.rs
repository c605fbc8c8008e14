use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::*;

fn root(dir: &Path, scope: Scope) -> Root {
    Root {
        dir: dir.to_owned(),
        scope,
        project: None,
    }
}

fn ready(root: &Root) -> OpenRoot {
    match open(root) {
        Opened::Ready(open) => open,
        other => panic!("not ready: {other:?}"),
    }
}

#[test]
fn roots_come_project_first_then_the_users_which_win() {
    let home = Path::new("/home/u/.keel");
    let claude = Path::new("/home/u/.claude");
    let project = at("/work/p");
    assert_eq!(
        shape(roots_in(Some(home), Some(claude), Some(&project), "skills")),
        vec![
            root(Path::new("/work/p/.claude/skills"), Scope::Project),
            root(Path::new("/work/p/.keel/skills"), Scope::Project),
            root(Path::new("/home/u/.claude/skills"), Scope::User),
            root(Path::new("/home/u/.keel/skills"), Scope::User),
        ]
    );
    assert_eq!(roots_in(None, None, None, "commands"), vec![]);
    // keel run in the home folder: the project's `.keel` and `.claude` are the user's.
    assert_eq!(
        shape(roots_in(
            Some(home),
            Some(claude),
            Some(&at("/home/u")),
            "commands"
        )),
        vec![
            root(Path::new("/home/u/.claude/commands"), Scope::User),
            root(Path::new("/home/u/.keel/commands"), Scope::User),
        ]
    );
}

#[test]
fn a_missing_root_is_not_a_problem_and_a_file_is() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = root(&tmp.path().join("nope/skills"), Scope::Project);
    assert!(matches!(open(&missing), Opened::Missing));
    fs::write(tmp.path().join("file"), "x").unwrap();
    let file = root(&tmp.path().join("file"), Scope::User);
    match open(&file) {
        Opened::Broken(problem) => assert_eq!(problem.reason, "is not a folder"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_project_root_that_is_a_link_or_sits_in_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere/skills");
    fs::create_dir_all(&elsewhere).unwrap();
    let project = tmp.path().join("project");
    fs::create_dir_all(project.join(".claude")).unwrap();
    symlink(&elsewhere, project.join(".claude/skills")).unwrap();
    symlink(tmp.path().join("elsewhere"), project.join(".keel")).unwrap();
    for dir in [".claude/skills", ".keel/skills"] {
        match open(&root(&project.join(dir), Scope::Project)) {
            Opened::Broken(problem) => assert_eq!(problem.reason, Defect::Link.to_string()),
            other => panic!("{dir}: {other:?}"),
        }
    }
    // The user's own root may be a link.
    let user = tmp.path().join("home/skills");
    fs::create_dir_all(tmp.path().join("home")).unwrap();
    symlink(&elsewhere, &user).unwrap();
    assert!(matches!(open(&root(&user, Scope::User)), Opened::Ready(_)));
}

#[test]
fn user_links_are_followed_only_inside_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("skills");
    fs::create_dir_all(dir.join("real")).unwrap();
    fs::create_dir_all(tmp.path().join("outside")).unwrap();
    symlink(dir.join("real"), dir.join("inside")).unwrap();
    symlink(tmp.path().join("outside"), dir.join("escape")).unwrap();
    symlink(dir.join("gone"), dir.join("dangling")).unwrap();

    let user = ready(&root(&dir, Scope::User));
    let inside = user.follow(&dir.join("inside")).unwrap().unwrap();
    assert_eq!(inside.kind, Kind::Dir);
    assert_eq!(inside.path, fs::canonicalize(dir.join("real")).unwrap());
    let escape = user.follow(&dir.join("escape")).unwrap_err();
    assert!(matches!(escape, Defect::LinkOutside { .. }), "{escape}");
    assert_eq!(
        user.follow(&dir.join("dangling")),
        Err(Defect::DanglingLink)
    );
    assert_eq!(user.follow(&dir.join("absent")), Ok(None));

    let project = ready(&root(&dir, Scope::Project));
    assert_eq!(project.follow(&dir.join("inside")), Err(Defect::Link));
    assert_eq!(
        project.follow(&dir.join("real")),
        Ok(Some(Resolved {
            path: dir.join("real"),
            kind: Kind::Dir
        }))
    );
}

#[test]
fn listings_are_sorted_skip_hidden_entries_and_stop() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["b", "a", ".hidden", "c"] {
        fs::write(tmp.path().join(name), "").unwrap();
    }
    let listing = list(tmp.path()).unwrap();
    let names: Vec<_> = listing.entries.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(!listing.truncated);

    for index in 0..MAX_ENTRIES {
        fs::write(tmp.path().join(format!("f{index}")), "").unwrap();
    }
    let listing = list(tmp.path()).unwrap();
    assert!(listing.truncated);
    assert!(listing.entries.len() < MAX_ENTRIES);
}

#[test]
fn files_are_read_only_when_small_regular_utf8_and_not_links() {
    let tmp = tempfile::tempdir().unwrap();
    let path = |name: &str| -> PathBuf { tmp.path().join(name) };
    fs::write(path("ok.md"), "\u{feff}hello").unwrap();
    assert_eq!(read_text(&path("ok.md")), Ok("hello".to_owned()));

    let limit = usize::try_from(MAX_FILE_BYTES).unwrap();
    fs::write(path("big.md"), "x".repeat(limit + 1)).unwrap();
    assert_eq!(read_text(&path("big.md")), Err(Defect::TooBig));
    fs::write(path("edge.md"), "x".repeat(limit)).unwrap();
    assert!(read_text(&path("edge.md")).is_ok());

    fs::write(path("latin1.md"), b"caf\xe9").unwrap();
    assert_eq!(read_text(&path("latin1.md")), Err(Defect::NotUtf8(3)));

    symlink(path("ok.md"), path("link.md")).unwrap();
    assert_eq!(read_text(&path("link.md")), Err(Defect::Link));

    // A FIFO would block a plain open until someone writes to it.
    let fifo = path("fifo.md");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    assert_eq!(read_text(&fifo), Err(Defect::NotAFile));
}

#[test]
fn bodies_lose_leading_blank_lines_and_trailing_space() {
    assert_eq!(trim_body("\n  \n  indented\nnext\n\n"), "  indented\nnext");
    assert_eq!(trim_body(" \n\t\n"), "");
    assert_eq!(trim_body("text"), "text");
}
