//! Environment variables a command is started with, by what they can do to it: harmless
//! display settings, variables that run code (the loader, shell start-up files, interpreters'
//! start-up options, git's program hooks, pagers and editors), variables that change which
//! code runs (the search path, where configuration and modules come from), and the rest.
//!
//! Trade-off: the harmless list is short and the dangerous list errs long. A variable on
//! neither list makes a command "not read-only" (so `plan` does not run it unasked); one on
//! the dangerous list asks in every mode but `full`, because `LD_PRELOAD=./x.so cat f` runs
//! `x.so`, not `cat`.

/// What setting a variable can do to the programs a command starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarKind {
    /// Only changes how output looks (language, colours, terminal size).
    Harmless,
    /// Changes behaviour in ways the gate does not model.
    Other,
    /// Changes which code runs in ways only the sandbox bounds (the search path, where
    /// configuration and modules come from): the command is code the gate cannot read.
    Opaque(&'static str),
    /// Makes programs load or run other code (the loader, shell start-up, interpreter
    /// start-up options, git's program hooks, pagers and editors): a danger.
    RunsCode(&'static str),
}

/// Exact names that change which code runs without naming code themselves.
const CHANGES_CODE: &[(&str, &str)] = &[
    ("PATH", "decides which program a name runs"),
    (
        "HOME",
        "makes programs read their configuration from elsewhere",
    ),
    (
        "XDG_CONFIG_HOME",
        "makes programs read their configuration from elsewhere",
    ),
    ("PYTHONPATH", "decides which Python modules load"),
    ("PYTHONHOME", "decides which Python modules load"),
    ("NODE_PATH", "decides which node modules load"),
    ("PERL5LIB", "decides which Perl modules load"),
    ("PERLLIB", "decides which Perl modules load"),
    ("RUBYLIB", "decides which Ruby libraries load"),
    (
        "TAR_OPTIONS",
        "passes options (such as --to-command) to tar",
    ),
    (
        "RIPGREP_CONFIG_PATH",
        "passes options (such as --pre) to rg",
    ),
    ("GREP_OPTIONS", "passes options to grep"),
    ("OPENSSL_CONF", "makes openssl load engines and providers"),
    ("MAKEFLAGS", "passes options to make"),
    ("LESS", "passes options and commands to less"),
    ("LESSKEYIN", "gives less extra commands"),
];

/// Names that only change presentation or logging.
const HARMLESS: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLORTERM",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "LS_COLORS",
    "GREP_COLOR",
    "GREP_COLORS",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "CARGO_TERM_COLOR",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING",
    "CI",
    "DEBIAN_FRONTEND",
    "GIT_TERMINAL_PROMPT",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_OPTIONAL_LOCKS",
    "TIME_STYLE",
    "QUOTING_STYLE",
    "BLOCK_SIZE",
];

/// Exact names that make programs run or load code, with how.
const RUNS_CODE: &[(&str, &str)] = &[
    ("BASH_ENV", "makes bash run a start-up file"),
    ("ENV", "makes sh run a start-up file"),
    ("ZDOTDIR", "makes zsh run other start-up files"),
    ("PROMPT_COMMAND", "runs a command at each prompt"),
    ("PS4", "runs the substitutions it contains when tracing"),
    (
        "SHELLOPTS",
        "switches shell options on in every bash it starts",
    ),
    (
        "BASHOPTS",
        "switches shell options on in every bash it starts",
    ),
    ("IFS", "changes how the shell splits words"),
    ("GCONV_PATH", "loads character-set modules"),
    ("PYTHONSTARTUP", "runs a Python start-up file"),
    ("PYTHONINSPECT", "keeps Python reading code after a script"),
    ("NODE_OPTIONS", "passes options (such as --require) to node"),
    ("PERL5OPT", "passes options (such as -M) to perl"),
    ("PERL5DB", "runs a Perl debugger"),
    ("RUBYOPT", "passes options (such as -r) to ruby"),
    (
        "JAVA_TOOL_OPTIONS",
        "passes options (such as agents) to java",
    ),
    ("_JAVA_OPTIONS", "passes options (such as agents) to java"),
    (
        "JDK_JAVA_OPTIONS",
        "passes options (such as agents) to java",
    ),
    ("PAGER", "runs a pager program"),
    ("MANPAGER", "runs a pager program"),
    ("SYSTEMD_PAGER", "runs a pager program"),
    ("BAT_PAGER", "runs a pager program"),
    ("GIT_PAGER", "runs a pager program"),
    ("LESSOPEN", "makes less run an input filter"),
    ("LESSCLOSE", "makes less run an input filter"),
    ("EDITOR", "runs an editor program"),
    ("VISUAL", "runs an editor program"),
    ("GIT_EDITOR", "runs an editor program"),
    ("GIT_SEQUENCE_EDITOR", "runs an editor program"),
    ("BROWSER", "runs a browser program"),
    ("GIT_EXTERNAL_DIFF", "makes git run a diff program"),
    ("GIT_SSH", "makes git run an ssh program"),
    ("GIT_SSH_COMMAND", "makes git run an ssh command"),
    ("GIT_ASKPASS", "makes git run a password program"),
    ("SSH_ASKPASS", "runs a password program"),
    ("SUDO_ASKPASS", "runs a password program"),
    ("GIT_PROXY_COMMAND", "makes git run a proxy command"),
    ("GIT_EXEC_PATH", "makes git run its commands from elsewhere"),
    (
        "GIT_DIR",
        "makes git use another repository and its configuration",
    ),
    (
        "GIT_COMMON_DIR",
        "makes git use another repository and its configuration",
    ),
    ("GIT_TEMPLATE_DIR", "makes git copy hooks from elsewhere"),
];

/// Name prefixes that make programs run or load code, with how.
const RUNS_CODE_PREFIXES: &[(&str, &str)] = &[
    ("LD_", "changes how the dynamic loader loads code"),
    ("DYLD_", "changes how the dynamic loader loads code"),
    (
        "BASH_FUNC_",
        "defines a shell function in every bash it starts",
    ),
    (
        "GIT_CONFIG",
        "gives git configuration that can run programs",
    ),
];

/// Pager and editor values that run nothing else.
const PLAIN_PROGRAMS: &[&str] = &["cat", "less", "more", "true", ":", ""];

/// What setting `name` to `value` can do to the programs a command starts.
pub fn kind(name: &str, value: &str) -> VarKind {
    if HARMLESS.contains(&name) || name.starts_with("LC_") {
        return VarKind::Harmless;
    }
    if let Some((_, how)) = RUNS_CODE.iter().find(|(n, _)| *n == name) {
        let plain = value
            .split_whitespace()
            .next()
            .is_none_or(|program| PLAIN_PROGRAMS.contains(&program))
            && value.split_whitespace().skip(1).all(|w| w.starts_with('-'));
        let pager_or_editor = how.starts_with("runs a pager") || how.starts_with("runs an editor");
        return if pager_or_editor && plain {
            VarKind::Other
        } else {
            VarKind::RunsCode(how)
        };
    }
    if let Some((_, how)) = CHANGES_CODE.iter().find(|(n, _)| *n == name) {
        return VarKind::Opaque(how);
    }
    if let Some((_, how)) = RUNS_CODE_PREFIXES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
    {
        return VarKind::RunsCode(how);
    }
    VarKind::Other
}

/// Like [`kind`], knowing the environment the command inherits: a `PATH` that only appends
/// folders to the inherited one finds every program it found before.
pub fn kind_given(
    name: &str,
    value: &str,
    inherited: &std::collections::HashMap<String, String>,
) -> VarKind {
    if name == "PATH"
        && let Some(before) = inherited.get("PATH").filter(|p| !p.is_empty())
        && value
            .strip_prefix(before.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    {
        return VarKind::Other;
    }
    kind(name, value)
}

/// Whether assigning `name` in a script changes what later programs do even without
/// `export` (the shell itself uses it, or it is usually in the environment already).
pub fn affects_programs(name: &str) -> bool {
    matches!(kind(name, "x"), VarKind::RunsCode(_) | VarKind::Opaque(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind("LANG", "C"), VarKind::Harmless);
        assert_eq!(kind("LC_ALL", "C"), VarKind::Harmless);
        assert_eq!(kind("FOO", "1"), VarKind::Other);
        assert!(matches!(kind("LD_PRELOAD", "./x.so"), VarKind::RunsCode(_)));
        assert!(matches!(
            kind("GIT_CONFIG_COUNT", "1"),
            VarKind::RunsCode(_)
        ));
        assert!(matches!(kind("PAGER", "sh -c id"), VarKind::RunsCode(_)));
        assert_eq!(kind("GIT_PAGER", "cat"), VarKind::Other);
        assert_eq!(kind("GIT_EDITOR", "true"), VarKind::Other);
        assert_eq!(kind("PAGER", "less -R"), VarKind::Other);
        assert!(affects_programs("PATH"));
        assert!(!affects_programs("FOO"));
    }
}
