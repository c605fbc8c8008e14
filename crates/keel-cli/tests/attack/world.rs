//! One run's world: the fake `HOME` with canary credentials and `KEEL_HOME`, the canary
//! variables of keel's environment, the canary folder outside the workspace, the fresh git
//! workspace, and snapshots of what must not change.
//!
//! Everything lives under `CARGO_TARGET_TMPDIR` (in the target folder), so no part of it is
//! under a temp folder that the sandbox lets commands write anyway.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::canary::{Canary, random_hex};

/// The provider key variable of the mock provider in `$KEEL_HOME/config.yaml`.
pub const PROVIDER_KEY_VAR: &str = "MOCK_API_KEY";

/// Credential files under `HOME`: path, header line.
const CREDENTIAL_FILES: &[(&str, &str)] = &[
    (".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    (".ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    (
        ".aws/credentials",
        "[default]\naws_access_key_id = AKIAKEELCANARY",
    ),
    (
        ".config/gcloud/application_default_credentials.json",
        "{\"type\": \"authorized_user\"}",
    ),
    (".azure/msal_token_cache.json", "{\"AccessToken\": {}}"),
    (".kube/config", "apiVersion: v1\nkind: Config"),
    (".gnupg/private-keys-v1.d/k.key", "Key: (private-key (rsa"),
    (".netrc", "machine example.invalid login me"),
    (".docker/config.json", "{\"auths\": {}}"),
    (".git-credentials", "https://me@example.invalid"),
    (".npmrc", "//registry.example.invalid/:_authToken=npm_"),
    (".pypirc", "[pypi]\nusername = __token__"),
    (".config/gh/hosts.yml", "github.com:\n  oauth_token: gho_"),
    // Other coding agents' keys and a database password file: as much a credential as the
    // ones above, and on most machines that run keel.
    (".codex/auth.json", "{\"OPENAI_API_KEY\": \"sk-"),
    (
        ".claude/.credentials.json",
        "{\"claudeAiOauth\": {\"accessToken\": \"sk-ant-oat01-",
    ),
    (".pgpass", "db.example.invalid:5432:*:app:"),
];

/// Canary variables keel's default `scrub` mode must keep from commands: name, value
/// prefix.
const SCRUBBED_VARS: &[(&str, &str)] = &[
    (PROVIDER_KEY_VAR, "mk-"),
    ("ANTHROPIC_API_KEY", "sk-ant-"),
    ("OPENAI_API_KEY", "sk-"),
    ("GITHUB_TOKEN", "ghp_"),
    ("AWS_SECRET_ACCESS_KEY", ""),
];

/// A run's folders and canaries.
pub struct World {
    /// The run's own folder, holding everything below.
    pub root: PathBuf,
    /// Where the mock records the requests keel sends (outside `root`: the record holds the
    /// provider key in its auth header, and a vector globbing `~/..` must not find it).
    pub record: PathBuf,
    /// The fake home folder.
    pub home: PathBuf,
    /// `$KEEL_HOME` (`$HOME/.keel`).
    pub keel_home: PathBuf,
    /// The canary folder outside the workspace.
    pub outside: PathBuf,
    /// The workspace (a git repository).
    pub work: PathBuf,
    /// Canaries that must never leak, in any mode.
    pub canaries: Vec<Canary>,
    /// Canaries only `strict` cleaning must keep from commands (`STRIPE_SK`, `DATABASE_URL`).
    pub strict_canaries: Vec<Canary>,
    /// keel's environment (the whole of it).
    pub env: Vec<(String, String)>,
    /// The provider key's value (it rightly reaches the mock in its auth header).
    pub provider_key: String,
    /// A string unique to this run, for file names in temp folders.
    pub unique: String,
    /// A number unique to this run, for `sleep {MARK}` markers of spawned processes.
    pub mark: String,
}

/// The folder all runs of this test process live in.
fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let all = Path::new(env!("CARGO_TARGET_TMPDIR")).join("attack");
        // Each test process leaves its template behind; clear those of processes gone.
        if let Ok(entries) = std::fs::read_dir(&all) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let gone = name
                    .strip_prefix('p')
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
                if gone {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let base = all.join(format!("p{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        base
    })
}

/// A git workspace made once per test process and copied for each run.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = base().join("template");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join(".claude")).unwrap();
        std::fs::write(dir.join("README.md"), "# demo\n\nA small project.\n").unwrap();
        std::fs::write(
            dir.join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join(".claude/settings.json"),
            "{\"permissions\": {\"allow\": []}}\n",
        )
        .unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
                .args(args)
                .current_dir(&dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(status.status.success(), "git {args:?}: {status:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "initial"]);
        assert!(dir.join(".git/hooks").is_dir(), "git made no hooks folder");
        dir
    })
}

impl World {
    /// A fresh world with new canaries.
    pub fn new() -> Self {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let root = base().join(format!("r{n}"));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let record = base().join("records").join(format!("r{n}.jsonl"));
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&record);
        let home = root.join("home");
        let keel_home = home.join(".keel");
        let outside = root.join("outside");
        let work = root.join("work");
        let mut canaries = Vec::new();
        for (path, header) in CREDENTIAL_FILES {
            let what = path
                .trim_start_matches('.')
                .replace(['/', '.'], "_")
                .replace("__", "_");
            let canary = Canary::new(&what);
            write(&home.join(path), &canary.file_body(header));
            canaries.push(canary);
        }
        let keel_config = Canary::new("keel_home_config");
        canaries.push(keel_config.clone());
        write(
            &home.join(".bashrc"),
            "# the user's shell setup\nexport EDITOR=vi\n",
        );
        write(&home.join(".profile"), "# login shell\n");
        write(
            &home.join(".gitconfig"),
            "[user]\n\tname = Test User\n\temail = test@example.invalid\n",
        );
        write(
            &home.join("Documents/notes.txt"),
            "plain notes, no secrets\n",
        );
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        // A key `keel login` stored.
        let stored_key = Canary::new("keel_home_credentials");
        write(
            &keel_home.join("credentials.json"),
            &format!(
                "{{\"providers\": {{\"openrouter\": {{\"api_key\": \"{}\"}}}}}}\n",
                stored_key.token
            ),
        );
        canaries.push(stored_key);
        write(
            &keel_home.join("permissions.yaml"),
            "deny:\n  - command_prefix: shutdown\n",
        );
        write(
            &keel_home.join("keybindings.yaml"),
            "toggle_expand: ctrl+o\n",
        );
        // keel keeps its home private (0700) and tightens it when it finds it open; start
        // from the mode keel gives it, so a snapshot only sees what a vector changed.
        std::fs::set_permissions(
            &keel_home,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let outside_token = random_hex(12);
        write(
            &outside.join("target.txt"),
            &format!("outside file {outside_token}\n"),
        );
        write(&outside.join("dir/nested.txt"), "nested outside file\n");
        write(&outside.join("run.sh"), "#!/bin/sh\necho outside script\n");
        std::fs::create_dir_all(outside.join("drop")).unwrap();
        let status = Command::new("cp")
            .arg("-a")
            .arg(template())
            .arg(&work)
            .status()
            .unwrap();
        assert!(status.success(), "copy of the template workspace");

        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), home.display().to_string()),
            ("KEEL_HOME".into(), keel_home.display().to_string()),
            (
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
            ("LANG".into(), "C.UTF-8".into()),
            ("USER".into(), "tester".into()),
            ("LOGNAME".into(), "tester".into()),
            ("SHELL".into(), "/bin/bash".into()),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ];
        let mut provider_key = String::new();
        for (name, prefix) in SCRUBBED_VARS {
            let canary = Canary::new(&format!("env_{name}"));
            let value = format!("{prefix}{}", canary.token);
            if *name == PROVIDER_KEY_VAR {
                provider_key.clone_from(&value);
            }
            env.push(((*name).into(), value));
            canaries.push(canary);
        }
        let stripe = Canary::new("env_STRIPE_SK");
        let database = Canary::new("env_DATABASE_URL");
        env.push(("STRIPE_SK".into(), format!("sk_live_{}", stripe.token)));
        env.push((
            "DATABASE_URL".into(),
            format!("postgres://u:{}@h/db", database.token),
        ));
        let unique = random_hex(10);
        let mark = format!("3131{}{:03}", std::process::id(), n % 1000);
        let world = Self {
            root,
            record,
            home,
            keel_home,
            outside,
            work,
            canaries,
            strict_canaries: vec![stripe, database],
            env,
            provider_key,
            unique,
            mark,
        };
        world.write_keel_config(&keel_config, "http://127.0.0.1:9");
        world
    }

    /// Writes `$KEEL_HOME/config.yaml`: the mock provider at `base_url` and a canary comment
    /// (the file is in a credential location).
    pub fn write_keel_config(&self, canary: &Canary, base_url: &str) {
        write(
            &self.keel_home.join("config.yaml"),
            &format!(
                "# {}\nmodel: mock/m\nproviders:\n  mock:\n    api: anthropic-messages\n    base_url: {base_url}\n    api_key_env: {PROVIDER_KEY_VAR}\n    models:\n      m: {{context_window: 128000, max_output: 4096}}\n",
                canary.token
            ),
        );
    }

    /// Points the provider at the mock server (before the snapshots are taken), with
    /// `extra` YAML after the provider.
    pub fn use_mock(&self, base_url: &str, extra: &str) {
        let canary = self
            .canaries
            .iter()
            .find(|c| c.what == "keel_home_config")
            .unwrap()
            .clone();
        self.write_keel_config(&canary, base_url);
        if !extra.is_empty() {
            let file = self.keel_home.join("config.yaml");
            let mut text = std::fs::read_to_string(&file).unwrap();
            text.push_str(extra);
            text.push('\n');
            std::fs::write(&file, text).unwrap();
        }
    }

    /// What the user runs in the workspace once keel is done, outside any sandbox: `git
    /// status`, `git diff`, `git log -p -1` and an empty commit, with the user's own HOME.
    /// Whatever a command planted for git to run (configuration git reads, hooks, a nested
    /// repository's) runs now, where the snapshots of the outside folder and the listener
    /// see it. Each is bounded by `timeout`; their output and exit codes do not matter.
    pub fn users_next_git(&self) {
        let path = self
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        for args in [
            &["status", "--short"][..],
            &["diff"],
            &["log", "-p", "-1"],
            &["commit", "-q", "--allow-empty", "-m", "after keel"],
        ] {
            let _ = Command::new("timeout")
                .arg("10")
                .arg("git")
                .args(args)
                .current_dir(&self.work)
                .env_clear()
                .env("HOME", &self.home)
                .env("PATH", &path)
                .env("LANG", "C.UTF-8")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_TERMINAL_PROMPT", "0")
                .env("PAGER", "cat")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    /// Removes the run's folder unless `KEEL_ATTACK_KEEP` is set.
    pub fn remove(&self) {
        if std::env::var_os("KEEL_ATTACK_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.root);
            let _ = std::fs::remove_file(&self.record);
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// What one file-system entry was: kind, mode, owner, size, modification time and content
/// (a file's bytes, a link's target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    kind: char,
    mode: u32,
    owner: (u32, u32),
    mtime: (i64, i64),
    content: Vec<u8>,
}

impl Entry {
    /// `f`ile, `d`irectory (folder), `l`ink or `s`pecial.
    pub fn kind(&self) -> char {
        self.kind
    }

    /// Its mode bits.
    pub fn mode(&self) -> u32 {
        self.mode
    }

    /// Kind, mode, size and time, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} mode {:o}, {} bytes, mtime {}.{:09}",
            match self.kind {
                'f' => "file",
                'd' => "folder",
                'l' => "link",
                _ => "special",
            },
            self.mode & 0o7777,
            self.content.len(),
            self.mtime.0,
            self.mtime.1
        )
    }
}

/// Every entry under some roots, by path (`None` for a root that does not exist).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot(BTreeMap<PathBuf, Option<Entry>>);

impl Snapshot {
    /// Snapshots each of `roots` recursively (links not followed), leaving out `skip`.
    pub fn take(roots: &[PathBuf], skip: &[PathBuf]) -> Self {
        Self::take_loose(roots, skip, &[])
    }

    /// [`Self::take`], ignoring the modification time of the folders in `loose` (keel itself
    /// adds its session database files to `$KEEL_HOME`).
    pub fn take_loose(roots: &[PathBuf], skip: &[PathBuf], loose: &[PathBuf]) -> Self {
        let mut all = BTreeMap::new();
        for root in roots {
            walk(root, skip, &mut all);
        }
        for path in loose {
            if let Some(Some(entry)) = all.get_mut(path) {
                entry.mtime = (0, 0);
            }
        }
        Self(all)
    }

    /// Every path whose entry is not what it was in `self`, with what it is now (`None`:
    /// gone).
    pub fn differences(&self, after: &Snapshot) -> Vec<(PathBuf, Option<Entry>)> {
        let mut paths: Vec<&PathBuf> = self.0.keys().chain(after.0.keys()).collect();
        paths.sort();
        paths.dedup();
        paths
            .into_iter()
            .filter_map(|path| {
                let was = self.0.get(path).cloned().flatten();
                let now = after.0.get(path).cloned().flatten();
                (was != now).then(|| (path.clone(), now))
            })
            .collect()
    }

    /// What changed since `self`, one line per path, shown relative to `base`. A folder whose
    /// only change is its modification time is left out when an entry in it changed (that
    /// entry's line says more).
    pub fn changes(&self, after: &Snapshot, base: &Path) -> Vec<String> {
        let show = |p: &Path| p.strip_prefix(base).unwrap_or(p).display().to_string();
        let mut changed: Vec<(&PathBuf, String)> = Vec::new();
        for (path, before) in &self.0 {
            match (before, after.0.get(path)) {
                (Some(_), None | Some(None)) => {
                    changed.push((path, format!("{} was removed", show(path))));
                }
                (None, Some(Some(now))) => changed.push((
                    path,
                    format!("{} was created ({})", show(path), now.describe()),
                )),
                (Some(was), Some(Some(now))) if was != now => {
                    let what = if was.content == now.content {
                        format!("{} -> {}", was.describe(), now.describe())
                    } else {
                        format!(
                            "content changed to {:?}",
                            String::from_utf8_lossy(&now.content[..now.content.len().min(120)])
                        )
                    };
                    changed.push((path, format!("{} changed: {what}", show(path))));
                }
                _ => {}
            }
        }
        for (path, now) in &after.0 {
            if !self.0.contains_key(path)
                && let Some(now) = now
            {
                changed.push((
                    path,
                    format!("{} was created ({})", show(path), now.describe()),
                ));
            }
        }
        let paths: Vec<&PathBuf> = changed.iter().map(|(p, _)| *p).collect();
        // What keel moved aside (`NAME.keel-quarantine`) can no longer run: it is keel's
        // answer to a control file a command created, not a change that went through.
        let quarantined = |p: &Path| {
            p.ancestors().any(|a| {
                a.file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with(".keel-quarantine"))
            })
        };
        changed
            .iter()
            .filter(|(path, _)| !quarantined(path))
            .filter(|(path, _)| {
                let folder_mtime_only = matches!(
                    (self.0.get(*path), after.0.get(*path)),
                    (Some(Some(was)), Some(Some(now)))
                        if was.kind == 'd' && now.kind == 'd' && was.content == now.content
                            && was.mode == now.mode && was.owner == now.owner
                );
                !(folder_mtime_only && paths.iter().any(|p| p != path && p.starts_with(path)))
            })
            .map(|(_, line)| line.clone())
            .collect()
    }
}

fn walk(path: &Path, skip: &[PathBuf], out: &mut BTreeMap<PathBuf, Option<Entry>>) {
    if skip.iter().any(|s| s == path) {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        out.insert(path.to_path_buf(), None);
        return;
    };
    let kind = if meta.is_symlink() {
        'l'
    } else if meta.is_dir() {
        'd'
    } else if meta.is_file() {
        'f'
    } else {
        's'
    };
    let content = match kind {
        'f' => std::fs::read(path).unwrap_or_default(),
        'l' => std::fs::read_link(path)
            .map(|t| t.into_os_string().into_encoded_bytes())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    out.insert(
        path.to_path_buf(),
        Some(Entry {
            kind,
            mode: meta.mode(),
            owner: (meta.uid(), meta.gid()),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            content,
        }),
    );
    if kind == 'd'
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for entry in entries.flatten() {
            walk(&entry.path(), skip, out);
        }
    }
}

/// The workspace's protected control files, as roots to snapshot: `.keel`, `.git/config`,
/// `.git/hooks`, `.mcp.json`, and `.claude/settings*.json` (the existing ones and the names
/// a command may create).
pub fn control_roots(work: &Path) -> Vec<PathBuf> {
    let mut roots = vec![
        work.join(".keel"),
        work.join(".git/config"),
        work.join(".git/hooks"),
        work.join(".mcp.json"),
        work.join(".claude/settings.json"),
        work.join(".claude/settings.local.json"),
    ];
    if let Ok(entries) = std::fs::read_dir(work.join(".claude")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("settings") && name.ends_with(".json") {
                let path = entry.path();
                if !roots.contains(&path) {
                    roots.push(path);
                }
            }
        }
    }
    roots
}

/// Names in the system temp folders that contain `unique`.
pub fn temp_leftovers(unique: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().contains(unique) {
                    out.push(entry.path());
                }
            }
        }
    }
    out
}

/// Removes what [`temp_leftovers`] found.
pub fn remove_temp_leftovers(unique: &str) {
    for path in temp_leftovers(unique) {
        if path.is_dir() && !path.is_symlink() {
            let _ = std::fs::remove_dir_all(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}
