//! The trusted-command reading of issue 27, case by case.

use super::*;
use pretty_assertions::assert_eq;

fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for folder in ["scripts", "tools", "conf", "lib"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    for file in [
        "scripts/lint.sh",
        "tools/server.py",
        "tools/helpers.py",
        "conf/server.toml",
        "server.py",
    ] {
        std::fs::write(root.join(file), "x").unwrap();
    }
    (dir, root)
}

fn shell(root: &Path, line: &str) -> Reach {
    let env = ShellEnv {
        home: Some(PathBuf::from("/home/u")),
        vars: [("CLAUDE_PROJECT_DIR".to_owned(), root.display().to_string())]
            .into_iter()
            .collect(),
    };
    reach(CommandLine::Shell(line), root, &[root.to_path_buf()], &env)
}

fn argv(root: &Path, program: &str, args: &[&str]) -> Reach {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    reach(
        CommandLine::Argv {
            program,
            args: &args,
            env: &[],
        },
        root,
        &[root.to_path_buf()],
        &ShellEnv::default(),
    )
}

#[test]
fn a_hook_script_and_its_folder_are_protected() {
    let (_dir, root) = project();
    let found = shell(&root, "sh scripts/lint.sh --fix");
    assert_eq!(
        found.paths,
        vec![root.join("scripts/lint.sh"), root.join("scripts")]
    );
    assert!(found.any_code.is_empty(), "{:?}", found.any_code);
    let found = shell(&root, "\"$CLAUDE_PROJECT_DIR\"/scripts/lint.sh");
    assert_eq!(
        found.paths,
        vec![root.join("scripts/lint.sh"), root.join("scripts")]
    );
    let found = shell(&root, "bash -c 'cd tools && python3 server.py'");
    assert_eq!(
        found.paths,
        vec![root.join("tools/server.py"), root.join("tools")]
    );
    // A script that does not exist yet is protected too: the model must not create it.
    let found = shell(&root, "sh scripts/missing.sh");
    assert_eq!(
        found.paths,
        vec![root.join("scripts/missing.sh"), root.join("scripts")]
    );
}

#[test]
fn a_server_script_its_folder_and_its_files_are_protected() {
    let (_dir, root) = project();
    let found = argv(
        &root,
        "python3",
        &["-u", "tools/server.py", "--config", "conf/server.toml"],
    );
    assert_eq!(
        found.paths,
        vec![
            root.join("tools/server.py"),
            root.join("tools"),
            root.join("conf/server.toml")
        ]
    );
    assert!(found.any_code.is_empty());
    let env = vec![("PYTHONPATH".to_owned(), "lib:/usr/lib".to_owned())];
    let found = reach(
        CommandLine::Argv {
            program: "python3",
            args: &["tools/server.py".to_owned()],
            env: &env,
        },
        &root,
        std::slice::from_ref(&root),
        &ShellEnv::default(),
    );
    assert!(found.paths.contains(&root.join("lib")), "{:?}", found.paths);
}

#[test]
fn a_script_in_the_top_folder_says_it_loads_anything_there() {
    let (_dir, root) = project();
    let found = argv(&root, "python3", &["server.py"]);
    assert_eq!(found.paths, vec![root.join("server.py")]);
    assert_eq!(found.any_code.len(), 1, "{:?}", found.any_code);
    assert!(found.any_code[0].contains("top folder"));
}

#[test]
fn build_tools_and_package_scripts_run_any_code() {
    let (_dir, root) = project();
    for line in [
        "npm run lint",
        "make check",
        "cargo clippy",
        "python -m tools.server",
        "uv run server.py",
        "just fmt",
        "env FOO=1 make",
    ] {
        let found = shell(&root, line);
        assert_eq!(found.any_code.len(), 1, "{line}: {:?}", found.any_code);
    }
    // A package fetched by npx runs no project code until the project has packages.
    assert!(
        argv(&root, "npx", &["-y", "@scope/server"])
            .any_code
            .is_empty()
    );
    std::fs::write(root.join("package.json"), "{}").unwrap();
    assert_eq!(
        argv(&root, "npx", &["-y", "@scope/server"]).any_code.len(),
        1
    );
    // Nothing at all from a program outside the project.
    let found = shell(&root, "/usr/bin/true");
    assert_eq!(found, Reach::default());
}

#[test]
fn folders_a_command_works_on_stay_the_models() {
    let (_dir, root) = project();
    // A formatter's folder is data; its configuration file is not.
    let found = shell(
        &root,
        "/usr/bin/shfmt --write tools/ --config conf/server.toml",
    );
    assert_eq!(found.paths, vec![root.join("conf/server.toml")]);
    // A build tool's arguments: nothing to protect, it runs any code anyway.
    let found = shell(&root, "npm run lint -- conf/server.toml");
    assert!(found.paths.is_empty(), "{:?}", found.paths);
    assert_eq!(found.any_code.len(), 1);
}

/// The forms an attack round found unprotected (issue 27).
#[test]
fn scripts_behind_shebangs_wrappers_stdin_and_paths_are_found() {
    let (_dir, root) = project();
    // A shebang script in the top folder loads any module there.
    std::fs::write(
        root.join("hook.py"),
        "#!/usr/bin/env python3\nimport json\n",
    )
    .unwrap();
    let found = shell(&root, "\"$CLAUDE_PROJECT_DIR\"/hook.py");
    assert_eq!(found.paths, vec![root.join("hook.py")]);
    assert_eq!(found.any_code.len(), 1, "{:?}", found.any_code);
    // A module path with the environment's part after it.
    let found = shell(&root, "PYTHONPATH=lib:$PYTHONPATH python3 tools/server.py");
    assert!(found.paths.contains(&root.join("lib")), "{:?}", found.paths);
    // A script only known at run time.
    let found = shell(&root, "for f in scripts/*.sh; do sh \"$f\"; done");
    assert!(!found.any_code.is_empty(), "{found:?}");
    // A script on the interpreter's standard input.
    let found = shell(&root, "python3 < tools/server.py");
    assert_eq!(
        found.paths,
        vec![root.join("tools/server.py"), root.join("tools")]
    );
    // A wrapper the analysis does not peel, and a command line in an argument.
    for line in [
        "setsid python3 tools/server.py",
        "flock /tmp/x.lock python3 tools/server.py",
        "script -qc 'python3 tools/server.py' /dev/null",
    ] {
        let found = shell(&root, line);
        assert!(
            found.paths.contains(&root.join("tools")),
            "{line}: {found:?}"
        );
    }
    // A folder of programs, a hooks path, a script sourced before it exists.
    let found = shell(&root, "run-parts scripts");
    assert_eq!(found.paths, vec![root.join("scripts")]);
    let found = shell(&root, "/usr/bin/git -c core.hooksPath=scripts commit");
    assert!(found.paths.contains(&root.join("scripts")), "{found:?}");
    let found = shell(&root, ". scripts/later.sh");
    assert_eq!(
        found.paths,
        vec![root.join("scripts/later.sh"), root.join("scripts")]
    );
}

#[test]
fn a_program_found_on_a_path_into_the_project_is_the_projects() {
    let (_dir, root) = project();
    std::fs::create_dir_all(root.join(".venv/bin")).unwrap();
    std::fs::write(root.join(".venv/bin/python3"), "").unwrap();
    let env = ShellEnv {
        home: None,
        vars: [(
            "PATH".to_owned(),
            format!("{}:/usr/bin:/bin", root.join(".venv/bin").display()),
        )]
        .into_iter()
        .collect(),
    };
    let found = reach(
        CommandLine::Shell("python3 tools/server.py"),
        &root,
        std::slice::from_ref(&root),
        &env,
    );
    assert!(
        found.paths.contains(&root.join(".venv/bin/python3")),
        "{found:?}"
    );
    assert!(found.paths.contains(&root.join(".venv/bin")), "{found:?}");
    assert!(!found.any_code.is_empty(), "{found:?}");
}

#[test]
fn the_project_itself_is_never_protected_whole() {
    let (_dir, root) = project();
    let shown = root.display().to_string();
    let found = argv(&root, "npx", &["server-filesystem", &shown, "."]);
    assert!(found.paths.is_empty(), "{:?}", found.paths);
}

#[test]
fn a_named_pipe_as_the_program_is_never_opened() {
    let (_dir, root) = project();
    let pipe = root.join("scripts/pipe");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status();
    if !made.is_ok_and(|s| s.success()) {
        return;
    }
    // Reading its `#!` line would wait for a writer forever, and keel with it.
    let found = shell(&root, "./scripts/pipe --check");
    assert!(found.paths.contains(&pipe), "{found:?}");
}
