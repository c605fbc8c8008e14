//! What the reading of a trusted command line knows about programs: which run whatever
//! the project holds (build tools, package scripts, linters that load the project's
//! configuration), which interpreters take a script and load modules beside it, and how a
//! script names its interpreter.

use std::path::Path;

use crate::permission::shell::{self, program_name};

/// Programs that run code the project defines (build files, package scripts, tests,
/// modules found in it), with what they run.
pub(super) const RUNNERS: &[(&str, &str)] = &[
    ("make", "runs the project's Makefile"),
    ("gmake", "runs the project's Makefile"),
    ("just", "runs the project's justfile"),
    (
        "cargo",
        "builds and runs the project's code (build scripts included)",
    ),
    ("npm", "runs the project's package scripts and packages"),
    ("pnpm", "runs the project's package scripts and packages"),
    ("yarn", "runs the project's package scripts and packages"),
    ("uv", "runs code in the project's Python environment"),
    ("poetry", "runs code in the project's Python environment"),
    ("pipenv", "runs code in the project's Python environment"),
    ("pdm", "runs code in the project's Python environment"),
    ("hatch", "runs code in the project's Python environment"),
    ("rye", "runs code in the project's Python environment"),
    ("tox", "runs the project's test environments"),
    ("nox", "runs the project's noxfile"),
    ("pytest", "runs the project's tests and conftest files"),
    ("go", "builds and runs the project's code"),
    ("gradle", "runs the project's build scripts"),
    ("gradlew", "runs the project's build scripts"),
    ("mvn", "runs the project's build"),
    ("mvnw", "runs the project's build"),
    ("ant", "runs the project's build file"),
    ("rake", "runs the project's Rakefile"),
    ("bundle", "runs code from the project's Gemfile"),
    ("composer", "runs the project's package scripts"),
    ("dotnet", "builds and runs the project's code"),
    ("cmake", "runs the project's build files"),
    ("ninja", "runs the project's build files"),
    ("meson", "runs the project's build files"),
    ("bazel", "runs the project's build files"),
    ("bazelisk", "runs the project's build files"),
    ("sbt", "runs the project's build"),
    ("mix", "runs the project's build"),
    ("lein", "runs the project's build"),
    ("swift", "builds and runs the project's code"),
    ("zig", "runs the project's build file"),
    ("tsc", "loads the project's configuration and plugins"),
    (
        "pre-commit",
        "runs the hooks the project's .pre-commit-config.yaml names",
    ),
    (
        "lefthook",
        "runs the hooks the project's lefthook.yml names",
    ),
    ("husky", "runs the project's hooks"),
    (
        "lint-staged",
        "runs the commands the project's configuration names",
    ),
    (
        "eslint",
        "loads the project's configuration and plugins, which are code",
    ),
    (
        "prettier",
        "loads the project's configuration and plugins, which are code",
    ),
    (
        "stylelint",
        "loads the project's configuration and plugins, which are code",
    ),
    ("jest", "runs the project's tests and configuration"),
    ("vitest", "runs the project's tests and configuration"),
    ("mocha", "runs the project's tests and configuration"),
    (
        "pylint",
        "loads the project's configuration, which can run code",
    ),
    ("mypy", "loads the project's configuration and plugins"),
    ("flake8", "loads the project's configuration and plugins"),
    (
        "rubocop",
        "loads the project's configuration, which can require code",
    ),
    ("direnv", "runs the project's .envrc"),
    (
        "docker",
        "builds and runs what the project's files describe",
    ),
    (
        "podman",
        "builds and runs what the project's files describe",
    ),
    ("nx", "runs the project's tasks"),
    ("turbo", "runs the project's tasks"),
    ("lerna", "runs the project's package scripts"),
    ("phpunit", "runs the project's tests and configuration"),
    ("ctest", "runs the project's tests"),
];

/// Programs that run a package, from the project's own `node_modules` when it has one.
pub(super) const PACKAGE_RUNNERS: &[&str] = &["npx", "pnpx", "bunx"];

/// Interpreters that take a script file, and how their options read: short options that
/// take a value, long ones that do, and options whose value is code or a module to load.
pub(super) struct Interpreter {
    pub(super) names: &'static [&'static str],
    pub(super) short_values: &'static str,
    pub(super) long_values: &'static [&'static str],
    /// Loads modules next to its script (Python, Node): the script's folder is code too.
    pub(super) loads_beside: bool,
}

const INTERPRETER_TABLE: &[Interpreter] = &[
    Interpreter {
        names: &["python", "pypy"],
        short_values: "cmWXQ",
        long_values: &["check-hash-based-pycs"],
        loads_beside: true,
    },
    Interpreter {
        names: &["node", "nodejs", "tsx", "ts-node"],
        short_values: "epr",
        long_values: &[
            "eval",
            "print",
            "require",
            "import",
            "loader",
            "experimental-loader",
            "env-file",
            "conditions",
            "title",
        ],
        loads_beside: true,
    },
    Interpreter {
        names: &["ruby"],
        short_values: "eIrCE",
        long_values: &[],
        loads_beside: false,
    },
    Interpreter {
        names: &["perl"],
        short_values: "eEIMmx",
        long_values: &[],
        loads_beside: false,
    },
    Interpreter {
        names: &["php"],
        short_values: "cdrzf",
        long_values: &[],
        loads_beside: true,
    },
    Interpreter {
        names: &["lua", "luajit"],
        short_values: "el",
        long_values: &[],
        loads_beside: false,
    },
    Interpreter {
        names: &["Rscript"],
        short_values: "e",
        long_values: &[],
        loads_beside: false,
    },
];

/// The interpreter `name` is (`python3.11` is `python`).
pub(super) fn interpreter(name: &str) -> Option<&'static Interpreter> {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETER_TABLE.iter().find(|i| i.names.contains(&base))
}

/// The interpreter a script's `#!` line names (`#!/usr/bin/env python3` is `python3`).
/// Only a regular file is read ([`crate::files::open_regular`]).
pub(super) fn shebang(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = crate::files::open_regular(path)
        .ok()?
        .read(&mut head)
        .ok()?;
    let text = std::str::from_utf8(head.get(..n)?).ok()?;
    let line = text.strip_prefix("#!")?.lines().next()?;
    let mut words = line.split_whitespace();
    let program = program_name(words.next()?);
    if program != "env" {
        return Some(program.to_owned());
    }
    words
        .find(|w| !w.starts_with('-') && !w.contains('='))
        .map(|w| program_name(w).to_owned())
}

/// Whether `word` names a program that runs code: a shell, an interpreter, a build tool or
/// a package runner (what follows it in a wrapper's arguments is a command).
pub(super) fn starts_code(word: &str) -> bool {
    let name = program_name(word);
    shell::SHELLS.contains(&name)
        || interpreter(name).is_some()
        || RUNNERS.iter().any(|(n, _)| *n == name)
        || PACKAGE_RUNNERS.contains(&name)
        || matches!(name, "deno" | "bun" | "run-parts")
}

/// Whether a `key=value` argument's key names a folder of code (`core.hooksPath`,
/// `plugin_dir`).
pub(super) fn names_folder(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["path", "dir", "dirs", "paths"]
        .iter()
        .any(|end| key.ends_with(end))
}
