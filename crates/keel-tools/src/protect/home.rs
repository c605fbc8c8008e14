//! The user's own files that run code later, outside keel: what a login shell, git, the
//! desktop session, systemd or an editor reads and runs. With the home folder as the
//! workspace (`--cwd ~`), a model could otherwise write `~/.bashrc` and own the user's next
//! shell. They count as control files wherever the workspace is, in every mode short of
//! `full`; the sandbox mounts the existing ones read-only when they lie inside a workspace
//! root (elsewhere nothing is writable for a command anyway).
//!
//! Trade-off: a list, not a model of every program's start-up; it covers shells, git,
//! the programs on the user's `PATH`, scheduled and session units, Python's user site
//! (whose `.pth` files run at every start) and the editors and multiplexers that run
//! commands from their configuration.

use std::path::Path;

/// Paths under the home folder (a folder covers all it holds) and what they are.
pub const HOME_CONTROL: &[(&str, &str)] = &[
    (".bashrc", "a shell start-up file"),
    (".bash_profile", "a shell start-up file"),
    (".bash_login", "a shell start-up file"),
    (".bash_logout", "a shell start-up file"),
    (".bash_aliases", "a shell start-up file"),
    (".bashrc.d", "shell start-up files"),
    (".profile", "a shell start-up file"),
    (".zshrc", "a shell start-up file"),
    (".zshenv", "a shell start-up file"),
    (".zprofile", "a shell start-up file"),
    (".zlogin", "a shell start-up file"),
    (".zlogout", "a shell start-up file"),
    (".kshrc", "a shell start-up file"),
    (".mkshrc", "a shell start-up file"),
    (".cshrc", "a shell start-up file"),
    (".tcshrc", "a shell start-up file"),
    (".login", "a shell start-up file"),
    (".logout", "a shell start-up file"),
    (".inputrc", "readline's start-up file"),
    (".config/fish", "fish's start-up files"),
    (".config/zsh", "zsh's start-up files"),
    (
        ".config/environment.d",
        "variables every session starts with",
    ),
    (".pam_environment", "variables every session starts with"),
    (".xprofile", "a desktop session's start-up file"),
    (".xsession", "a desktop session's start-up file"),
    (".xsessionrc", "a desktop session's start-up file"),
    (".xinitrc", "a desktop session's start-up file"),
    (".config/autostart", "programs the desktop starts at login"),
    (".config/systemd", "the user's systemd units"),
    (".local/share/systemd", "the user's systemd units"),
    (
        ".gitconfig",
        "git's configuration, which names programs git runs",
    ),
    (
        ".config/git",
        "git's configuration, which names programs git runs",
    ),
    (
        ".claude/CLAUDE.md",
        "instructions keel gives the model in every project",
    ),
    (
        ".claude/AGENTS.md",
        "instructions keel gives the model in every project",
    ),
    (
        ".claude/commands",
        "commands keel runs as the user's in every project",
    ),
    (
        ".claude/skills",
        "skills keel loads as the user's in every project",
    ),
    (
        ".claude/agents",
        "agents keel runs as the user's in every project",
    ),
    (".claude.json", "MCP servers `keel mcp import` brings over"),
    (
        ".codex/config.toml",
        "MCP servers `keel mcp import` brings over",
    ),
    (".local/bin", "programs on the user's PATH"),
    ("bin", "programs on the user's PATH"),
    (".cargo/bin", "programs on the user's PATH"),
    (
        ".cargo/config",
        "cargo's configuration, which names programs cargo runs",
    ),
    (
        ".cargo/config.toml",
        "cargo's configuration, which names programs cargo runs",
    ),
    (
        ".local/lib",
        "Python's user site, whose .pth files run at every start",
    ),
    (".npm-global", "programs on the user's PATH"),
    (".nvm", "a script the user's shell loads"),
    (".pyenv", "programs on the user's PATH"),
    (".rustup", "the toolchains the user's cargo runs"),
    (".config/direnv", "direnv's start-up files"),
    (".vimrc", "vim's start-up file, which runs commands"),
    (".vim", "vim's start-up files, which run commands"),
    (".exrc", "vi's start-up file, which runs commands"),
    (
        ".config/nvim",
        "neovim's start-up files, which run commands",
    ),
    (".emacs", "emacs's start-up file, which runs code"),
    (".emacs.d", "emacs's start-up files, which run code"),
    (".config/emacs", "emacs's start-up files, which run code"),
    (".tmux.conf", "tmux's start-up file, which runs commands"),
    (".config/tmux", "tmux's start-up files, which run commands"),
    (".screenrc", "screen's start-up file, which runs commands"),
    (".tmux", "tmux's plugins, which run commands"),
    (".bash_completion", "a shell start-up file"),
    (
        ".local/share/bash-completion",
        "completions the shell loads",
    ),
    (".zsh", "zsh's start-up files"),
    (".oh-my-zsh", "zsh's start-up files"),
    (".cargo/env", "a script the user's shell loads"),
    (
        ".config/starship.toml",
        "the prompt's configuration, which runs commands",
    ),
    (".config/nushell", "nushell's start-up files"),
    (".config/powershell", "PowerShell's start-up files"),
    (".config/xonsh", "xonsh's start-up files"),
    (".xonshrc", "xonsh's start-up file"),
    (".elvish", "elvish's start-up files"),
    (".config/elvish", "elvish's start-up files"),
    (".local/share/fish", "fish's functions"),
    (".gnomerc", "a desktop session's start-up file"),
    (".xbindkeysrc", "commands run on keys"),
    (".config/sxhkd", "commands run on keys"),
    (".config/plasma-workspace", "the desktop's start-up scripts"),
    (
        ".config/autostart-scripts",
        "the desktop's start-up scripts",
    ),
    (".local/share/plasma", "the desktop's scripts"),
    (
        ".local/share/gnome-shell",
        "the desktop's extensions, which are code",
    ),
    (".config/labwc", "the desktop's start-up files"),
    (".config/openbox", "the desktop's start-up files"),
    (".config/lxsession", "the desktop's start-up files"),
    (
        ".config/i3",
        "the window manager's configuration, which runs commands",
    ),
    (
        ".config/sway",
        "the window manager's configuration, which runs commands",
    ),
    (
        ".config/hypr",
        "the window manager's configuration, which runs commands",
    ),
    (".config/user-tmpfiles.d", "the user's systemd units"),
    (".config/containers", "the user's container units"),
    (".local/share/applications", "programs the desktop starts"),
    (".config/mimeapps.list", "programs the desktop starts"),
    (".local/share/nvim", "neovim's plugins, which run code"),
    (".spacemacs", "emacs's start-up file, which runs code"),
    (".doom.d", "emacs's start-up files, which run code"),
    (".config/doom", "emacs's start-up files, which run code"),
    (".ipython", "IPython's start-up files, which run code"),
    (".pythonrc", "Python's start-up file"),
    (".pythonrc.py", "Python's start-up file"),
    (".gdbinit", "gdb's start-up file, which runs commands"),
    (".config/gdb", "gdb's start-up files, which run commands"),
    (".pdbrc", "pdb's start-up file, which runs code"),
    (".Rprofile", "R's start-up file, which runs code"),
    (".irbrc", "irb's start-up file, which runs code"),
    (".pryrc", "pry's start-up file, which runs code"),
    (".psqlrc", "psql's start-up file, which runs commands"),
    (".sqliterc", "sqlite's start-up file, which runs commands"),
    (
        ".hgrc",
        "Mercurial's configuration, which names programs it runs",
    ),
    (
        ".config/hg",
        "Mercurial's configuration, which names programs it runs",
    ),
    (".docker/cli-plugins", "programs docker runs"),
    (
        ".yarnrc",
        "yarn's configuration, which names programs yarn runs",
    ),
    (
        ".yarnrc.yml",
        "yarn's configuration, which names programs yarn runs",
    ),
    (".config/mise", "mise's configuration, which runs commands"),
    (".tool-versions", "the tool versions the user's shell loads"),
    (
        ".config/jj",
        "jj's configuration, which names programs it runs",
    ),
    (
        ".config/lazygit",
        "lazygit's configuration, which runs commands",
    ),
    (".mailcap", "programs mail and browsers run"),
    (
        ".config/Code/User",
        "the editor's settings, which run commands",
    ),
    (
        ".config/pip",
        "pip's configuration, which names where packages come from",
    ),
    (
        ".condarc",
        "conda's configuration, which names where packages come from",
    ),
    (
        ".config/kitty",
        "the terminal's configuration, which runs commands",
    ),
    (
        ".wezterm.lua",
        "the terminal's configuration, which runs code",
    ),
    (
        ".config/wezterm",
        "the terminal's configuration, which runs code",
    ),
    ("go/bin", "programs on the user's PATH"),
    (".bun/bin", "programs on the user's PATH"),
    (".deno/bin", "programs on the user's PATH"),
    (".node_modules", "modules every Node program may load"),
    (".node_libraries", "modules every Node program may load"),
];

/// The entry `rest` (a path relative to the home folder) is or lies in, and what it is.
pub(super) fn control(rest: &Path) -> Option<(&'static str, &'static str)> {
    // Every path the gate judges under the home folder comes here: compare first names
    // before whole paths.
    let first = rest.iter().next()?;
    HOME_CONTROL
        .iter()
        .filter(|(entry, _)| {
            entry
                .split('/')
                .next()
                .is_some_and(|name| first == std::ffi::OsStr::new(name))
        })
        .find(|(entry, _)| rest.starts_with(entry))
        .copied()
}

/// An existing entry under `home` that `folder` holds (the folder is above it): deleting or
/// moving `folder` would take the entry with it.
pub(super) fn held_by(home: &Path, folder: &Path) -> Option<&'static str> {
    HOME_CONTROL.iter().map(|(entry, _)| *entry).find(|entry| {
        let path = home.join(entry);
        path.starts_with(folder) && path != folder && std::fs::symlink_metadata(&path).is_ok()
    })
}

/// Every entry under `home`, for the sandbox when the home folder lies in a workspace root.
pub(super) fn entries(home: &Path) -> impl Iterator<Item = std::path::PathBuf> + '_ {
    HOME_CONTROL.iter().map(move |(entry, _)| home.join(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_files_and_what_they_hold_count() {
        assert_eq!(control(Path::new(".bashrc")).map(|c| c.0), Some(".bashrc"));
        assert_eq!(
            control(Path::new(".config/systemd/user/x.service")).map(|c| c.0),
            Some(".config/systemd")
        );
        assert_eq!(
            control(Path::new(".local/bin/git")).map(|c| c.0),
            Some(".local/bin")
        );
        assert_eq!(control(Path::new(".bashrc.bak")), None);
        assert_eq!(control(Path::new("src/.bashrc")), None);
        assert_eq!(control(Path::new(".config/other")), None);
    }
}
