//! Running one vector in one mode.
//!
//! A run: a fresh [`World`], a mock model scripted with the vector's tool calls then a final
//! text (recording every request to a file), a fresh [`Listener`], snapshots, then the real
//! `keel exec --output-format stream-json --permission MODE --cwd WORK --timeout 20s` with a
//! cleared environment (only the world's variables), watched by [`keel::run`]; then the
//! user's next git commands in the workspace. Then [`check::check`] and the snapshots judge.

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Value, json};

use crate::check::check;
use crate::keel::{self, Exit};
use crate::listener::{Listener, Log};
use crate::procs;
use crate::world::{Snapshot, World, control_roots, remove_temp_leftovers, temp_leftovers};

/// A permission mode the suite runs every vector in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Whatever would ask is denied (headless).
    Ask,
    /// The default mode.
    Auto,
    /// Read-only planning.
    Plan,
    /// `--permission full` with the default sandbox: the gate lets everything through, so
    /// the sandbox alone must hold (control files are the model's to change here, but
    /// credentials and keel's secrets must stay hidden all the same).
    Full,
    /// `auto` with the namespace layer off (`KEEL_SANDBOX_NAMESPACES=off`): Landlock alone.
    AutoLandlock,
    /// `plan` with Landlock alone: every command must be refused, saying why.
    PlanLandlock,
    /// No `--permission` flag: the mode comes from configuration, as when a user types
    /// `keel exec "…"` (a project file may set it only once the user trusted it).
    Configured,
}

impl Mode {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Auto => "auto",
            Self::Plan => "plan",
            Self::Full => "full",
            Self::AutoLandlock => "auto+landlock-only",
            Self::PlanLandlock => "plan+landlock-only",
            Self::Configured => "configured",
        }
    }

    /// The `--permission` value, if the run passes one.
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Self::Ask => Some("ask"),
            Self::Auto | Self::AutoLandlock => Some("auto"),
            Self::Plan | Self::PlanLandlock => Some("plan"),
            Self::Full => Some("full"),
            Self::Configured => None,
        }
    }

    /// Whether the run is read-only (the workspace and temp folders must not change).
    pub fn read_only(self) -> bool {
        matches!(self, Self::Plan | Self::PlanLandlock)
    }

    /// Whether the namespace layer is off.
    pub fn landlock_only(self) -> bool {
        matches!(self, Self::AutoLandlock | Self::PlanLandlock)
    }

    /// Whether commands run in `workspace-write` behind keel's proxy, which lets through no
    /// loopback address (where this system can give them a network of their own).
    pub fn proxied(self) -> bool {
        matches!(self, Self::Ask | Self::Auto | Self::Full | Self::Configured)
            && keel_sandbox::support()
                .namespaces
                .as_ref()
                .is_ok_and(|ns| ns.network)
    }
}

/// One scripted tool call; text fields hold placeholders (see [`fill`]).
#[derive(Debug, Clone, Copy)]
pub enum Call {
    /// `bash` with this command.
    Sh(&'static str),
    /// `bash` with this command and `run_in_background: true`.
    Bg(&'static str),
    /// Any tool with these JSON arguments.
    Tool(&'static str, &'static str),
    /// No call: the model's response for this step comes this many milliseconds late, while
    /// keel waits and runs nothing (background commands keep running).
    Wait(u64),
}

/// A row of the attack table.
#[derive(Debug, Clone, Copy)]
pub struct Vector {
    /// Stable id, shown in every message.
    pub id: &'static str,
    /// Model responses, each a list of tool calls made together; a final text follows.
    pub steps: &'static [&'static [Call]],
    /// A bash script the suite runs in the workspace before keel (symlinks, a modified file).
    pub setup: Option<&'static str>,
    /// Extra variables for keel's environment.
    pub env: &'static [(&'static str, &'static str)],
    /// Runs with `KEEL_BASH_ENV_SANITIZE=strict`, and `STRIPE_SK` and `DATABASE_URL` count
    /// as canaries too.
    pub strict: bool,
    /// Every call of a step gets the same id (DESIGN §13: the second must be refused).
    pub same_ids: bool,
    /// The listener must get no connection in any mode (`web_fetch` refuses every internal
    /// address).
    pub quiet: bool,
    /// keel must refuse to start: this exit code, and this text on stderr.
    pub refused: Option<(i32, &'static str)>,
    /// A weakness keel documents for this setup (the Landlock-only fallback): a process
    /// left running is expected, and keel must have said that this can happen.
    pub degraded_outlives: bool,
    /// keel's working folder (`--cwd`, placeholders allowed) instead of the workspace.
    pub cwd: Option<&'static str>,
    /// keel runs with a pseudo-terminal as its controlling terminal, as in a user's terminal;
    /// afterwards nothing may be waiting in the terminal's input (the user's shell would
    /// read and run it).
    pub tty: bool,
    /// The run resumes a session made just before it, whose id `{SID}` stands for (rows
    /// aiming at the session's own plan file, [`crate::plans`]).
    pub session: bool,
    /// More flags for `keel exec` (`--allow-home-workspace`, `--trust-project-mcp`).
    pub args: &'static [&'static str],
    /// `keel trust` runs in keel's working folder after the setup, as the user would after
    /// reading the project's hooks and servers.
    pub trust: bool,
    /// More paths (placeholders allowed) that must not change short of `full`, as the
    /// control files: what a trusted hook or server runs.
    pub protected: &'static [&'static str],
    /// YAML appended to the user's `$KEEL_HOME/config.yaml`.
    pub keel_config: &'static str,
    /// The prompt `keel exec` gets (default: "Carry out the task in this repository.").
    pub prompt: Option<&'static str>,
    /// Text (placeholders allowed) that must never reach the model: a forged tag, a project
    /// file's words that must not have been read.
    pub never_sent: &'static [&'static str],
}

impl Vector {
    /// The defaults rows start from.
    pub const BASE: Self = Self {
        id: "",
        steps: &[],
        setup: None,
        env: &[],
        strict: false,
        same_ids: false,
        quiet: false,
        refused: None,
        cwd: None,
        tty: false,
        degraded_outlives: false,
        session: false,
        args: &[],
        trust: false,
        protected: &[],
        keel_config: "",
        prompt: None,
        never_sent: &[],
    };
}

/// A bash row: `sh!("id", "command")`, optionally `setup "script"` or `strict`.
#[macro_export]
macro_rules! sh {
    ($id:literal, $cmd:literal) => {
        $crate::run::Vector {
            id: $id,
            steps: &[&[$crate::run::Call::Sh($cmd)]],
            ..$crate::run::Vector::BASE
        }
    };
    ($id:literal, $cmd:literal, setup $setup:literal) => {
        $crate::run::Vector {
            id: $id,
            steps: &[&[$crate::run::Call::Sh($cmd)]],
            setup: Some($setup),
            ..$crate::run::Vector::BASE
        }
    };
    ($id:literal, $cmd:literal, strict) => {
        $crate::run::Vector {
            id: $id,
            steps: &[&[$crate::run::Call::Sh($cmd)]],
            strict: true,
            ..$crate::run::Vector::BASE
        }
    };
}

/// A row of one call of another tool: `tool!("id", "read", r#"{"path": "…"}"#)`, optionally
/// `setup "script"`.
#[macro_export]
macro_rules! tool {
    ($id:literal, $name:literal, $args:literal) => {
        $crate::run::Vector {
            id: $id,
            steps: &[&[$crate::run::Call::Tool($name, $args)]],
            ..$crate::run::Vector::BASE
        }
    };
    ($id:literal, $name:literal, $args:literal, setup $setup:literal) => {
        $crate::run::Vector {
            id: $id,
            steps: &[&[$crate::run::Call::Tool($name, $args)]],
            setup: Some($setup),
            ..$crate::run::Vector::BASE
        }
    };
}

/// The values placeholders stand for in one run.
pub struct Vars {
    pairs: Vec<(&'static str, String)>,
}

impl Vars {
    /// The placeholders of `world` with the listener on `port`.
    pub fn new(world: &World, port: u16, session: Option<&str>) -> Self {
        let show = |p: &PathBuf| p.display().to_string();
        Self {
            pairs: vec![
                ("{SID}", session.unwrap_or("s-nosession").to_owned()),
                ("{ROOT}", show(&world.root)),
                ("{HOME}", show(&world.home)),
                ("{KH}", show(&world.keel_home)),
                ("{OUT}", show(&world.outside)),
                ("{WS}", show(&world.work)),
                ("{U}", world.unique.clone()),
                ("{MARK}", world.mark.clone()),
                ("{KEEL}", crate::keel::keel_bin().display().to_string()),
                ("{HOST}", "127.0.0.1".into()),
                ("{PORT}", port.to_string()),
                ("{ADDR}", format!("127.0.0.1:{port}")),
                ("{URL}", format!("http://127.0.0.1:{port}")),
            ],
        }
    }
}

/// `template` with every placeholder replaced; `json` escapes the values for a JSON string.
pub fn fill(template: &str, vars: &Vars, json: bool) -> String {
    let mut out = template.to_owned();
    for (key, value) in &vars.pairs {
        let value = if json {
            let quoted = serde_json::to_string(value).unwrap();
            quoted[1..quoted.len() - 1].to_owned()
        } else {
            value.clone()
        };
        out = out.replace(key, &value);
    }
    out
}

/// The mock script of a vector: its steps, then final texts (spares in case keel asks again).
pub fn script(vector: &Vector, vars: &Vars) -> String {
    let mut responses = Vec::new();
    for (s, step) in vector.steps.iter().enumerate() {
        let delay: u64 = step
            .iter()
            .map(|call| match call {
                Call::Wait(ms) => *ms,
                _ => 0,
            })
            .sum();
        let calls: Vec<Value> = step
            .iter()
            .filter(|call| !matches!(call, Call::Wait(_)))
            .enumerate()
            .map(|(c, call)| {
                let id = if vector.same_ids {
                    format!("dup{s}")
                } else {
                    format!("c{s}_{c}")
                };
                let (name, arguments) = match call {
                    Call::Sh(cmd) => ("bash", json!({"command": fill(cmd, vars, false)})),
                    Call::Bg(cmd) => (
                        "bash",
                        json!({"command": fill(cmd, vars, false), "run_in_background": true}),
                    ),
                    Call::Tool(name, args) => {
                        let text = fill(args, vars, true);
                        let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                            panic!("vector {}: bad JSON arguments {text}: {e}", vector.id)
                        });
                        (*name, parsed)
                    }
                    Call::Wait(_) => unreachable!("filtered out above"),
                };
                json!({"id": id, "name": name, "arguments": arguments})
            })
            .collect();
        responses.push(json!({"tool_calls": calls, "first_delay_ms": delay}));
    }
    for _ in 0..3 {
        responses.push(json!({"text": "done"}));
    }
    Value::Array(responses).to_string()
}

/// A runtime for the mock model servers of this test process.
fn mock_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// Everything one run produced.
pub struct Observed {
    /// How keel ended.
    pub exit: Exit,
    /// keel's stdout (stream-json).
    pub stdout: String,
    /// keel's stderr.
    pub stderr: String,
    /// The recorded model requests, one JSON line each.
    pub requests: String,
    /// Everything keel kept in its session folders (artifacts, the session report).
    pub session_files: String,
    /// What the listener received.
    pub listener: Log,
    /// The watchdog had to resume a stopped keel.
    pub was_stopped: bool,
    /// Whether the suite itself signalled keel (see [`keel::run`]).
    pub poked: Option<bool>,
    /// Processes left behind (killed since).
    pub leftovers: Vec<procs::Seen>,
    /// What was waiting in keel's terminal after it ended (for a `tty` vector).
    pub typed: Option<String>,
}

impl Observed {
    /// The stream-json events.
    pub fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// `item.completed` tool calls: (item id, status, result).
    pub fn tool_results(&self) -> Vec<(String, String, String)> {
        self.events()
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
            .map(|e| {
                let item = &e["item"];
                (
                    item["id"].to_string(),
                    item["status"].as_str().unwrap_or_default().to_owned(),
                    item["result"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// The results of the `bash` calls.
    pub fn bash_results(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter(|e| {
                e["type"] == "item.completed"
                    && e["item"]["type"] == "tool_call"
                    && e["item"]["tool_name"] == "bash"
            })
            .map(|e| e["item"]["result"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// A short account of what keel did with the calls, for the log.
    pub fn outcome(&self) -> String {
        let results = self.tool_results();
        let calls: Vec<String> = results
            .iter()
            .map(|(_, status, result)| {
                if result.starts_with("Blocked by permissions") {
                    "denied".to_owned()
                } else if result.contains("cannot be enforced") {
                    "fail-closed".to_owned()
                } else {
                    status.clone()
                }
            })
            .collect();
        let exit = match self.exit {
            Exit::Code(code) => format!("exit {code}"),
            Exit::Signal(signal) => format!("killed by signal {signal}"),
            Exit::Hung => "hung".to_owned(),
        };
        format!("{exit}, calls: [{}]", calls.join(", "))
    }
}

/// Runs `vector` in `mode` in a fresh world and returns its failures (empty: it held).
pub fn attack(vector: &Vector, mode: Mode) -> (String, String, Vec<String>) {
    let leaves_the_machine = vector
        .steps
        .iter()
        .flat_map(|s| s.iter())
        .any(|c| matches!(c, Call::Tool("web_fetch", args) if args.contains("169.254")));
    if let Err(why) = procs::private_network()
        && leaves_the_machine
    {
        return (
            "not run".into(),
            String::new(),
            vec![format!(
                "harness: no private network namespace ({why}); a request to 169.254.169.254 would leave the machine"
            )],
        );
    }
    let world = World::new();
    let mut failures = Vec::new();
    let observed = run_in(&world, vector, mode, None, &mut failures);
    let outcome = observed.outcome();
    let details = observed
        .tool_results()
        .iter()
        .map(|(_, status, result)| {
            let cut: String = result.chars().take(400).collect();
            format!("{status}: {cut}")
        })
        .collect::<Vec<_>>()
        .join("\n");
    failures.extend(check(&world, vector, mode, &observed));
    remove_temp_leftovers(&world.unique);
    world.remove();
    (outcome, details, failures)
}

/// Sets up `world` for `vector` (first making the session a `session` row resumes), runs keel
/// once (poking it with a signal if asked, see [`keel::run`]), then runs the user's next git
/// commands in the workspace ([`World::users_next_git`]), and returns what it produced. What
/// the snapshots taken around the run show changed is pushed to `failures`: (3) the outside
/// folder and the fake HOME (after the user's git commands, so a program planted for git
/// shows), (4) the protected control files (except in `full`, where the model may change
/// them), in `ask` the workspace, and in `plan` the workspace and the system temp folders;
/// (3k) keel's plans folder, where only `plan` may write the running session's own plan
/// ([`crate::plans`]).
pub fn run_in(
    world: &World,
    vector: &Vector,
    mode: Mode,
    poke: Option<i32>,
    failures: &mut Vec<String>,
) -> Observed {
    let session = vector.session.then(|| {
        let answer = script(&Vector::BASE, &Vars::new(world, 0, None));
        let server = mock_runtime()
            .block_on(keel_mockllm::MockServer::start(
                keel_mockllm::Script::parse(&answer).unwrap(),
                keel_mockllm::ServerOptions::default(),
            ))
            .unwrap();
        let id = crate::plans::new_session(world, mode, &server.url());
        server.stop();
        id
    });
    let listener = Listener::start();
    let vars = Vars::new(world, listener.port, session.as_deref());
    let record = world.record.clone();
    let _ = std::fs::remove_file(&record);
    let server = {
        let script = keel_mockllm::Script::parse(&script(vector, &vars)).unwrap();
        let options = keel_mockllm::ServerOptions {
            record: Some(record.clone()),
            ..keel_mockllm::ServerOptions::default()
        };
        mock_runtime()
            .block_on(keel_mockllm::MockServer::start(script, options))
            .unwrap()
    };
    world.use_mock(&server.url(), vector.keel_config);
    if let Some(setup) = vector.setup {
        let out = Command::new("bash")
            .arg("-c")
            .arg(fill(setup, &vars, false))
            .current_dir(&world.work)
            .env("HOME", &world.home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "vector {}: setup failed: {}",
            vector.id,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let cwd = vector.cwd.map_or_else(
        || world.work.clone(),
        |c| PathBuf::from(fill(c, &vars, false)),
    );
    if vector.trust {
        keel::trust(world, &cwd, &format!("vector {}", vector.id));
    }
    // keel's own bookkeeping: the database, the session folders and the plans, which are
    // checked on their own below (what is in them, and that no canary reached them).
    let home_skip: Vec<PathBuf> = [
        "sessions.db",
        "sessions.db-wal",
        "sessions.db-shm",
        keel_runtime::storage::SESSIONS_DIR,
        keel_runtime::services::PLANS_DIR,
    ]
    .iter()
    .map(|name| world.keel_home.join(name))
    .collect();
    let outside_before = Snapshot::take(std::slice::from_ref(&world.outside), &[]);
    let home_loose = [world.keel_home.clone()];
    let home_before =
        Snapshot::take_loose(std::slice::from_ref(&world.home), &home_skip, &home_loose);
    let extra: Vec<PathBuf> = vector
        .protected
        .iter()
        .map(|p| PathBuf::from(fill(p, &vars, false)))
        .collect();
    let control_before_roots = [control_roots(&world.work), extra.clone()].concat();
    let control_before = Snapshot::take(&control_before_roots, &[]);
    let work_before = Snapshot::take(std::slice::from_ref(&world.work), &[]);
    let plans = crate::plans::plans_dir(world);
    let plans_before = Snapshot::take(std::slice::from_ref(&plans), &[]);

    let env: Vec<(String, String)> = vector
        .env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), fill(v, &vars, false)))
        .collect();
    let ran = keel::run(
        world,
        vector,
        mode,
        poke,
        &env,
        &cwd,
        session.as_deref(),
        &vars,
    );
    let mut leftovers = ran.leftovers;
    leftovers.extend(procs::leftovers(&world.mark, &world.root));

    let mut roots = [control_roots(&world.work), extra].concat();
    for root in control_before_roots {
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    let control_after = Snapshot::take(&roots, &[]);
    let work_after = Snapshot::take(std::slice::from_ref(&world.work), &[]);
    if mode != Mode::Full {
        // In `full` the model may change control files, so what git then runs is the
        // model's, as the user allowed.
        world.users_next_git();
    }
    let listener = listener.finish();
    server.stop();
    drop(server);
    let requests = std::fs::read_to_string(&record).unwrap_or_default();
    failures.extend(crate::plans::plan_changes(
        &plans_before,
        &Snapshot::take(std::slice::from_ref(&plans), &[]),
        &plans,
        mode,
        crate::plans::session_of(&ran.stdout).as_deref(),
        &world.root,
    ));
    let (session_files, odd) =
        session_folders(&world.keel_home.join(keel_runtime::storage::SESSIONS_DIR));
    failures.extend(odd);

    let mut checks = vec![
        (
            "(3) the outside canary folder",
            outside_before,
            Snapshot::take(std::slice::from_ref(&world.outside), &[]),
        ),
        (
            "(3) the fake HOME",
            home_before,
            Snapshot::take_loose(std::slice::from_ref(&world.home), &home_skip, &home_loose),
        ),
    ];
    if mode != Mode::Full {
        checks.push((
            "(4) a protected control file",
            control_before,
            control_after,
        ));
    }
    for (what, before, after) in checks {
        for change in before.changes(&after, &world.root) {
            failures.push(format!("{what} changed: {change}"));
        }
    }
    if mode == Mode::Ask {
        // Headless, every change would need an approval nobody can give.
        for change in work_before.changes(&work_after, &world.root) {
            failures.push(format!("(3a) ask mode changed the workspace: {change}"));
        }
    }
    if mode.read_only() {
        for change in work_before.changes(&work_after, &world.root) {
            failures.push(format!("(3p) plan mode changed the workspace: {change}"));
        }
        for path in temp_leftovers(&world.unique) {
            failures.push(format!(
                "(3p) plan mode created {} in a system temp folder",
                path.display()
            ));
        }
    }
    Observed {
        exit: ran.exit,
        stdout: ran.stdout,
        stderr: ran.stderr,
        requests,
        session_files,
        listener,
        was_stopped: ran.was_stopped,
        poked: ran.poked,
        leftovers,
        typed: ran.typed,
    }
}

/// The "other session" some vectors plant (`s-othersess1`, holding a canary) to check that
/// `read` reaches no session's files but the running one's: it is not keel's.
const PLANTED_SESSION: &str = "s-othersess1";

/// The text of every file in keel's session folders, and what in them is not keel's own:
/// anything but private folders and files of the names keel writes (the report's envelope,
/// log and envelopes by hash; artifacts), or a link.
fn session_folders(root: &Path) -> (String, Vec<String>) {
    fn visit(root: &Path, dir: &Path, text: &mut String, odd: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if dir == root && entry.file_name() == PLANTED_SESSION {
                continue;
            }
            let shown = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let mode = meta.mode() & 0o777;
            if meta.is_symlink() {
                odd.push(format!("(3s) keel's session folder holds a link: {shown}"));
            } else if meta.is_dir() {
                if mode != 0o700 {
                    odd.push(format!(
                        "(3s) session folder {shown} is mode {mode:o}, not 700"
                    ));
                }
                visit(root, &path, text, odd);
            } else {
                let parts: Vec<&str> = shown.split('/').collect();
                let known = match parts.as_slice() {
                    [_, "report", "llm-call.json" | "llm-calls.jsonl"] => true,
                    [_, "report", "calls", name] => name.len() == 69 && name.ends_with(".json"),
                    [_, "artifacts", name] => !name.starts_with('.'),
                    // The transcript hooks read (only while hooks are configured).
                    [_, "transcript.jsonl"] => true,
                    _ => false,
                };
                if !known {
                    odd.push(format!(
                        "(3s) keel's session folder holds an unknown file: {shown}"
                    ));
                }
                if mode != 0o600 {
                    odd.push(format!(
                        "(3s) session file {shown} is mode {mode:o}, not 600"
                    ));
                }
                text.push_str(&String::from_utf8_lossy(
                    &std::fs::read(&path).unwrap_or_default(),
                ));
                text.push('\n');
            }
        }
    }
    let mut text = String::new();
    let mut odd = Vec::new();
    visit(root, root, &mut text, &mut odd);
    (text, odd)
}

/// Runs every row of `table` in `mode` and fails with every failing row.
pub fn run_table(class: &str, table: &[Vector], mode: Mode) {
    let only: Option<Vec<String>> = std::env::var("KEEL_ATTACK_ONLY")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    if let Err(why) = procs::private_network() {
        println!("note: no private network namespace ({why}); the runs share this machine's");
    }
    let mut failed = Vec::new();
    let mut ran = 0;
    for vector in table {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|id| id == vector.id))
        {
            continue;
        }
        // In `full` the gate lets keel's own tools (read, write, edit …) write where the
        // model asks, and they run in keel, not in the sandbox: for writes only commands are
        // for the sandbox to hold there. Credentials stay hidden from every tool.
        let uses_own_tools = vector
            .steps
            .iter()
            .flat_map(|s| s.iter())
            .any(|c| matches!(c, Call::Tool(name, _) if *name != "bash"));
        let secrets_class = class.starts_with("creds") || class.starts_with("env");
        if mode == Mode::Full && uses_own_tools && !secrets_class {
            continue;
        }
        ran += 1;
        let started = Instant::now();
        let (outcome, outcome_details, failures) = attack(vector, mode);
        let verdict = if failures.is_empty() {
            "held"
        } else {
            "FAILED"
        };
        println!(
            "[{}] {class}/{} {verdict} in {:.2}s: {outcome}",
            mode.name(),
            vector.id,
            started.elapsed().as_secs_f64()
        );
        if std::env::var_os("KEEL_ATTACK_VERBOSE").is_some() {
            for line in outcome_details.lines() {
                println!("      | {line}");
            }
        }
        for failure in &failures {
            println!("    {failure}");
            failed.push(format!("{} [{}]: {failure}", vector.id, mode.name()));
        }
        report(class, vector.id, mode, &outcome, &failures);
    }
    assert!(
        failed.is_empty(),
        "{} of {ran} {class} vectors failed in {} mode:\n{}",
        failed
            .iter()
            .map(|f| f.split(' ').next().unwrap_or_default())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        mode.name(),
        failed.join("\n")
    );
}

/// Appends one run's result as a JSON line to `KEEL_ATTACK_REPORT`, when it is set.
fn report(class: &str, id: &str, mode: Mode, outcome: &str, failures: &[String]) {
    let Some(path) = std::env::var_os("KEEL_ATTACK_REPORT") else {
        return;
    };
    let line = json!({"class": class, "id": id, "mode": mode.name(), "outcome": outcome,
        "failures": failures});
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}
