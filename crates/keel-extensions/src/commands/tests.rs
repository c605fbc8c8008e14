use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::*;

fn write(dir: &Path, relative: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

fn root(dir: &Path, scope: Scope) -> Root {
    Root {
        dir: dir.to_owned(),
        scope,
        project: None,
    }
}

fn names(found: &Discovered) -> Vec<&str> {
    found
        .commands
        .iter()
        .map(|command| command.name.as_str())
        .collect()
}

fn problems(found: &Discovered) -> Vec<(PathBuf, String)> {
    let mut all: Vec<_> = found
        .problems
        .iter()
        .map(|problem| (problem.path.clone(), problem.reason.clone()))
        .collect();
    all.sort();
    all
}

#[test]
fn roots_are_the_projects_then_the_users() {
    assert_eq!(
        crate::discovery::shape(crate::discovery::roots_in(
            Some(Path::new("/h")),
            None,
            Some(&crate::discovery::at("/p")),
            "commands"
        )),
        vec![
            root(Path::new("/p/.claude/commands"), Scope::Project),
            root(Path::new("/p/.keel/commands"), Scope::Project),
            root(Path::new("/h/commands"), Scope::User),
        ]
    );
}

#[test]
fn files_become_commands_and_subfolders_namespaces() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let review = write(
        dir,
        "review.md",
        "---\ndescription: Review a pull request\nargument-hint: [pr] [priority]\n\
         allowed-tools: Bash(git diff:*), Read\nmodel: claude-sonnet\n---\n\nReview PR #$0.\n",
    );
    let build = write(
        dir,
        "frontend/build.md",
        "\n\n  Build the front end  \nThen test.\n",
    );
    write(dir, "a/b/deep.md", "Deep.");
    write(dir, "notes.txt", "not a command");
    write(dir, ".hidden.md", "hidden");
    write(dir, ".drafts/x.md", "hidden folder");
    write(dir, "long.md", "x".repeat(150));

    let found = discover(&[root(dir, Scope::Project)]);
    assert_eq!(found.problems, []);
    assert_eq!(
        names(&found),
        ["a:b:deep", "frontend:build", "long", "review"]
    );
    assert_eq!(
        found.commands[3],
        Command {
            name: "review".into(),
            description: "Review a pull request".into(),
            argument_hint: Some("[pr] [priority]".into()),
            body: "Review PR #$0.".into(),
            path: review,
            scope: Scope::Project,
        }
    );
    assert_eq!(
        found.commands[1],
        Command {
            name: "frontend:build".into(),
            description: "Build the front end".into(),
            argument_hint: None,
            body: "  Build the front end  \nThen test.".into(),
            path: build,
            scope: Scope::Project,
        }
    );
    assert_eq!(
        found.commands[2].description,
        format!("{}…", "x".repeat(MAX_DESCRIPTION_CHARS - 1))
    );
}

#[test]
fn the_users_commands_win_over_the_projects_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, claude, keel) = (
        tmp.path().join("home/commands"),
        tmp.path().join("p/.claude/commands"),
        tmp.path().join("p/.keel/commands"),
    );
    let user_fix = write(&home, "fix.md", "User fix");
    write(&home, "mine.md", "Mine");
    let claude_fix = write(&claude, "fix.md", "Claude fix");
    write(&claude, "git/commit.md", "Commit");
    let keel_commit = write(&keel, "git/commit.md", "keel commit");
    let found = discover(&crate::discovery::roots_in(
        Some(&tmp.path().join("home")),
        None,
        Some(&keel_runtime::settings::Project::of(
            &tmp.path().join("p"),
            None,
        )),
        "commands",
    ));
    assert_eq!(names(&found), ["fix", "git:commit", "mine"]);
    assert_eq!(found.commands[0].description, "User fix");
    assert_eq!(found.commands[0].scope, Scope::User);
    assert_eq!(found.commands[1].description, "keel commit");
    assert_eq!(found.commands[2].scope, Scope::User);
    assert_eq!(
        found.notes,
        vec![
            Note {
                path: keel_commit,
                message: format!(
                    "command `/git:commit` replaces the one in {}",
                    claude.join("git/commit.md").display()
                ),
            },
            Note {
                path: user_fix,
                message: format!(
                    "your command `/fix` is used; the project's of that name in {} is not",
                    claude_fix.display()
                ),
            },
        ]
    );
}

#[test]
fn every_broken_file_is_reported_with_its_path_and_the_rest_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let limit = usize::try_from(crate::discovery::MAX_FILE_BYTES).unwrap();
    let unclosed = write(dir, "unclosed.md", "---\ndescription: x\n");
    let latin1 = write(dir, "latin1.md", b"caf\xe9");
    let huge = write(dir, "huge.md", "x".repeat(limit + 1));
    let spaced = write(dir, "my command.md", "x");
    let folder = write(dir, "bad folder/x.md", "x");
    let typed = write(dir, "typed.md", "---\ndescription: {a: 1}\n---\nx");
    let bad_yaml = write(dir, "bad-yaml.md", "---\ndescription: [x\n---\nx");
    write(dir, "good.md", "Good.");
    // Tolerated: an ignored key that is not YAML.
    write(
        dir,
        "tolerant.md",
        "---\nallowed-tools: [a] [b]\n---\nTolerant.",
    );

    let found = discover(&[root(dir, Scope::User)]);
    assert_eq!(names(&found), ["good", "tolerant"]);
    let mut actual = problems(&found);
    let position = actual
        .iter()
        .position(|(path, _)| *path == bad_yaml)
        .unwrap();
    let (_, reason) = actual.remove(position);
    assert!(
        reason.starts_with("has invalid YAML frontmatter: "),
        "{reason}"
    );
    let rule = NAME_RULE.to_owned();
    let mut expected = vec![
        (
            unclosed,
            "starts a frontmatter with a `---` line but never closes it with another".to_owned(),
        ),
        (
            latin1,
            "is not UTF-8 text (invalid byte at offset 3)".to_owned(),
        ),
        (
            huge,
            "is larger than 256 KiB, the most a skill or command file may be".to_owned(),
        ),
        (spaced, rule.clone()),
        (folder.parent().unwrap().to_owned(), rule),
        (
            typed,
            "has a frontmatter `description` that is a mapping, not text".to_owned(),
        ),
    ];
    expected.sort();
    assert_eq!(actual, expected);
}

#[test]
fn links_are_refused_in_a_project_and_kept_inside_a_user_root() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    write(&outside, "steal.md", "Planted.");

    let proj = tmp.path().join("project");
    fs::create_dir_all(&proj).unwrap();
    symlink(outside.join("steal.md"), proj.join("steal.md")).unwrap();
    symlink(&outside, proj.join("folder")).unwrap();
    let found = discover(&[root(&proj, Scope::Project)]);
    assert_eq!(found.commands, []);
    let refused = "is a symbolic link; links are not followed in a project's skill and \
                   command folders";
    assert_eq!(
        problems(&found),
        [
            (proj.join("folder"), refused.to_owned()),
            (proj.join("steal.md"), refused.to_owned()),
        ]
    );

    let home = tmp.path().join("home");
    write(&home, "real.md", "Real.");
    symlink(home.join("real.md"), home.join("alias.md")).unwrap();
    symlink(outside.join("steal.md"), home.join("escape.md")).unwrap();
    let found = discover(&[root(&home, Scope::User)]);
    assert_eq!(names(&found), ["alias", "real"]);
    let reasons = problems(&found);
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, home.join("escape.md"));
    assert!(reasons[0].1.contains("outside"), "{reasons:?}");
}

#[test]
fn at_most_max_commands_load() {
    let tmp = tempfile::tempdir().unwrap();
    for index in 0..=MAX_COMMANDS {
        write(tmp.path(), &format!("c{index:03}.md"), "x");
    }
    let found = discover(&[root(tmp.path(), Scope::User)]);
    assert_eq!(found.commands.len(), MAX_COMMANDS);
    assert_eq!(
        problems(&found),
        [(
            tmp.path().to_owned(),
            format!("more than {MAX_COMMANDS} commands; the rest were not loaded")
        )]
    );
}
