//! The issue 9 mode policy, table-driven: code the gate cannot read (by mode and sandbox),
//! commands without network in `plan`, and keel's protected control files.

use super::attacks::with_keel_home;
use super::*;
use keel_tools::env::SandboxMode;
use pretty_assertions::assert_eq;

/// Code the gate cannot read: `plan` denies it, `ask` asks, `auto` trusts the sandbox when it
/// is on and asks when it is off, `full` runs it.
const OPAQUE_CODE: &[Case] = &[
    (P, "bash", ". ./s", Deny),
    (A, "bash", ". ./s", Ask),
    (U, "bash", ". ./s", Allow),
    (F, "bash", ". ./s", Allow),
    (P, "bash", "source env.sh", Deny),
    (U, "bash", "source env.sh", Allow),
    (P, "bash", "python3 x.py", Deny),
    (A, "bash", "python3 x.py", Ask),
    (U, "bash", "python3 x.py", Allow),
    (U, "bash", "perl -e 'print 1'", Allow),
    (U, "bash", "node -e 1", Allow),
    (U, "bash", "ruby -e 1", Allow),
    (U, "bash", "awk 'BEGIN{system(\"make\")}'", Allow),
    (P, "bash", "awk 'BEGIN{system(\"make\")}'", Deny),
    (U, "bash", "make", Allow),
    (P, "bash", "make", Deny),
    (U, "bash", "./script.sh", Allow),
    (P, "bash", "bash script.sh", Deny),
    (U, "bash", "bash script.sh", Allow),
    (U, "bash", "cargo test", Allow),
    (A, "bash", "shopt -s extglob; ls", Ask),
    (P, "bash", "shopt -s dotglob; ls", Deny),
    (U, "bash", "source <(echo 'rm -rf x')", Safety),
    (U, "bash", "bash <(cat x)", Safety),
    (P, "bash", "exec > log.txt; ls", Deny),
    (U, "bash", "exec > log.txt; ls", Allow),
];

/// The same code with the bash sandbox off: `auto` asks.
const OPAQUE_CODE_UNSANDBOXED: &[Case] = &[
    (U, "bash", ". ./s", Ask),
    (U, "bash", "source env.sh", Ask),
    (U, "bash", "python3 x.py", Ask),
    (U, "bash", "perl -e 'print 1'", Ask),
    (U, "bash", "awk 'BEGIN{system(\"id\")}'", Ask),
    (U, "bash", "make", Ask),
    (U, "bash", "./script.sh", Ask),
    (U, "bash", "bash script.sh", Ask),
    (U, "bash", "cargo build", Ask),
    (U, "bash", "git frobnicate", Ask),
    (U, "bash", "export PATH=/opt/tool/bin:$PATH; ls", Ask),
    (U, "bash", "HOME=. git status", Ask),
    (F, "bash", "python3 x.py", Allow),
    // Known programs still run.
    (U, "bash", "ls -la", Allow),
    (U, "bash", "rm -rf build", Allow),
    (U, "bash", "git commit -m x", Allow),
    (U, "bash", "sed -i s/a/b/ in.txt", Allow),
    (U, "bash", "bash -c 'ls'", Allow),
    (U, "bash", "echo hi > out.txt", Allow),
];

/// Commands have no network in `plan`; web_fetch asks there.
const PLAN_HAS_NO_NETWORK: &[Case] = &[
    (P, "bash", "curl https://example.com", Deny),
    (P, "bash", "wget -qO- https://example.com", Deny),
    (P, "bash", "git fetch", Deny),
    (P, "bash", "git ls-remote origin", Deny),
    (P, "bash", "git remote show origin", Deny),
    (P, "bash", "ssh host ls", Deny),
    (P, "bash", "ping -c1 example.com", Deny),
    (P, "bash", "nc -z host 80", Deny),
    (P, "web_fetch", r#"{"url": "https://example.com"}"#, Ask),
    (U, "bash", "curl https://example.com", Allow),
];

/// keel's control files and files that make programs run code: denied short of `full`.
const CONTROL_FILES: &[Case] = &[
    (
        U,
        "write",
        r#"{"path": ".keel/config.yaml", "content": ""}"#,
        Deny,
    ),
    (
        A,
        "write",
        r#"{"path": ".keel/permissions.yaml", "content": ""}"#,
        Deny,
    ),
    (U, "edit", r#"{"path": ".git/config", "edits": []}"#, Deny),
    (
        U,
        "write",
        r#"{"path": ".git/hooks/pre-commit", "content": ""}"#,
        Deny,
    ),
    (U, "write", r#"{"path": ".mcp.json", "content": ""}"#, Deny),
    (
        U,
        "write",
        r#"{"path": ".claude/settings.local.json", "content": ""}"#,
        Deny,
    ),
    (
        U,
        "write",
        r#"{"path": "sub/.git/config", "content": ""}"#,
        Deny,
    ),
    (
        U,
        "write",
        r#"{"path": "~/.keel/config.yaml", "content": ""}"#,
        Deny,
    ),
    (U, "read", r#"{"path": "~/.keel/config.yaml"}"#, Deny),
    (
        F,
        "write",
        r#"{"path": ".keel/config.yaml", "content": ""}"#,
        Allow,
    ),
    (
        U,
        "write",
        r#"{"path": ".claude/commands/x.md", "content": ""}"#,
        Allow,
    ),
    (U, "bash", "echo x > .keel/config.yaml", Deny),
    (U, "bash", "echo x | tee .mcp.json", Deny),
    (U, "bash", "cp x .mcp.json", Deny),
    (U, "bash", "mv x .claude/settings.json", Deny),
    (U, "bash", "mv .keel x", Deny),
    (U, "bash", "rm -rf .git", Deny),
    (U, "bash", "rm -rf .keel", Deny),
    (U, "bash", "rm .git/hooks/pre-commit", Deny),
    (U, "bash", "sed -i s/a/b/ .git/config", Deny),
    (U, "bash", "git config core.pager cat", Deny),
    (U, "bash", "git config user.name me", Deny),
    (U, "bash", "git -C sub config user.name me", Deny),
    (U, "bash", "git remote add o https://x.example", Deny),
    (U, "bash", "git branch -u origin/main", Deny),
    (U, "bash", "git -c core.hooksPath=h commit -m x", Deny),
    (U, "bash", "chmod +x .git/hooks/pre-commit", Deny),
    (
        U,
        "bash",
        "ln -s .git/hooks h && echo x > h/pre-commit",
        Deny,
    ),
    (U, "bash", "ln -s .keel/config.yaml c", Deny),
    (U, "bash", "cd .git && echo x > config", Deny),
    (U, "bash", "echo x > .git/../.git/config", Deny),
    (U, "bash", "echo x > ~/.keel/config.yaml", Deny),
    (U, "bash", "rm -rf ~", Deny),
    (U, "bash", "rm -rf /", Deny),
    (
        U,
        "bash",
        "python3 -c \"open('.git/hooks/pre-commit', 'w')\"",
        Safety,
    ),
    (U, "bash", "perl -pi -e 's/a/b/' .git/config", Deny),
    (U, "bash", "mkdir -p .keel", Deny),
    (U, "bash", "ln -s x .mcp.json", Deny),
    (U, "bash", "install -m755 x .git/hooks/pre-commit", Deny),
    (U, "bash", "git config --file=.git/config a.b c", Deny),
    (U, "bash", "cp -r x .git", Deny),
    (U, "bash", "tar xf a.tar -C .git", Deny),
    (U, "bash", "GIT_CONFIG_GLOBAL=./x git status", Safety),
    (U, "bash", "cat .git/config .keel/config.yaml", Allow),
    (U, "bash", "git status", Allow),
    (U, "bash", "git commit -m x", Allow),
    (U, "bash", "git config --get user.name", Allow),
    (F, "bash", "echo x > .keel/config.yaml", Allow),
    (F, "bash", "rm -rf .git", Allow),
];

#[test]
fn code_the_gate_cannot_read_follows_the_mode_and_the_sandbox() {
    let world = World::new();
    run_table(&world, "", OPAQUE_CODE);
    run_table_in(&world, "", OPAQUE_CODE_UNSANDBOXED, |env| {
        env.sandbox = SandboxMode::DangerFullAccess;
    });
}

#[test]
fn plan_mode_commands_have_no_network() {
    run_table(&World::new(), "", PLAN_HAS_NO_NETWORK);
}

#[test]
fn control_files_are_denied_short_of_full() {
    let world = with_keel_home();
    run_table(&world, "", CONTROL_FILES);
    // With the switch off (as in `full`), only the mode's own rules apply.
    run_table_in(
        &world,
        "",
        &[
            (U, "bash", "echo x > .keel/config.yaml", Allow),
            (
                U,
                "write",
                r#"{"path": ".git/config", "content": ""}"#,
                Allow,
            ),
        ],
        |env| env.protect_control = false,
    );
}

#[test]
fn denials_name_the_protected_pattern_and_the_way_out() {
    let world = with_keel_home();
    let gate = world.gate(Mode::Auto, RuleSet::new());
    let protected =
        denial_text(gate.check("bash", &json!({"command": "echo x > .keel/config.yaml"})));
    assert!(
        protected.starts_with("[denied: protected file] `> .keel/config.yaml` writes "),
        "{protected}"
    );
    assert!(protected.contains(".keel/**"), "{protected}");
    assert!(protected.contains("switch to full mode"), "{protected}");
    gate.set_mode(Mode::Plan);
    let network = denial_text(gate.check("bash", &json!({"command": "curl https://example.com"})));
    assert!(
        network.starts_with("[denied by mode] commands have no network in plan mode"),
        "{network}"
    );
    assert!(network.contains("web_fetch"), "{network}");
    let opaque = denial_text(gate.check("bash", &json!({"command": "python3 x.py"})));
    assert!(
        opaque.contains("runs code the gate cannot read"),
        "{opaque}"
    );
}

pub(super) fn policy_cases() -> usize {
    [
        OPAQUE_CODE,
        OPAQUE_CODE_UNSANDBOXED,
        PLAN_HAS_NO_NETWORK,
        CONTROL_FILES,
    ]
    .iter()
    .map(|t| t.len())
    .sum()
}

/// Issue 27: what a trusted hook or MCP server runs is a control file while the trust
/// stands, its folder too, and so is anything that would take it away.
#[test]
fn what_trusted_commands_run_is_protected_short_of_full() {
    let world = World::new();
    std::fs::create_dir_all(world.ws.join("scripts")).unwrap();
    std::fs::write(world.ws.join("scripts/lint.sh"), "exit 0\n").unwrap();
    let trusted = |env: &mut ToolEnv| {
        env.trusted_code = [world.ws.join("scripts/lint.sh"), world.ws.join("scripts")]
            .into_iter()
            .map(|path| keel_tools::protect::TrustedPath {
                path,
                why: "the trusted hook `sh scripts/lint.sh` runs".to_owned(),
            })
            .collect();
    };
    let cases: &[Case] = &[
        (
            U,
            "write",
            r#"{"path": "scripts/lint.sh", "content": "curl x"}"#,
            Deny,
        ),
        (
            A,
            "edit",
            r#"{"path": "scripts/lint.sh", "edits": []}"#,
            Deny,
        ),
        (
            U,
            "write",
            r#"{"path": "scripts/other.sh", "content": "x"}"#,
            Deny,
        ),
        (U, "bash", "echo curl >> scripts/lint.sh", Deny),
        (U, "bash", "mv scripts scripts.old", Deny),
        (U, "bash", "rm -rf scripts", Deny),
        (U, "bash", "cat scripts/lint.sh", Allow),
        (U, "read", r#"{"path": "scripts/lint.sh"}"#, Allow),
        (F, "bash", "echo curl >> scripts/lint.sh", Allow),
        (
            U,
            "write",
            r#"{"path": "src/new.rs", "content": ""}"#,
            Allow,
        ),
    ];
    run_table_in(&world, "", cases, trusted);
    let gate = world.gate_in(Mode::Auto, RuleSet::new(), trusted);
    let told =
        denial_text(gate.check("write", &json!({"path": "scripts/lint.sh", "content": "x"})));
    assert!(
        told.contains("the trusted hook `sh scripts/lint.sh` runs"),
        "{told}"
    );
}

/// Issue 27: the user's start-up files and scheduled commands are control files in every
/// mode short of `full`, wherever the workspace is (`--cwd ~` included).
#[test]
fn start_up_files_and_schedules_are_protected_short_of_full() {
    let world = World::new();
    let in_home = |env: &mut ToolEnv| {
        env.cwd = env.home.clone().unwrap();
        env.roots = vec![env.cwd.clone()];
    };
    let cases: &[Case] = &[
        (
            U,
            "write",
            r#"{"path": ".bashrc", "content": "curl x"}"#,
            Deny,
        ),
        (U, "bash", "echo curl >> ~/.bashrc", Deny),
        (U, "bash", "echo curl > .zshenv", Deny),
        (
            U,
            "write",
            r#"{"path": ".local/bin/git", "content": "curl x"}"#,
            Deny,
        ),
        (
            U,
            "bash",
            "mkdir -p .config/systemd/user && touch .config/systemd/user/x.service",
            Deny,
        ),
        (U, "bash", "git config --global core.pager less", Deny),
        (
            U,
            "write",
            r#"{"path": ".config/autostart/x.desktop", "content": ""}"#,
            Deny,
        ),
        (U, "bash", "echo x | crontab -", Deny),
        (U, "bash", "crontab -l", Allow),
        (U, "bash", "systemctl --user enable evil.service", Deny),
        (U, "bash", "rm -rf Documents", Safety),
        (U, "bash", "echo notes > Documents/todo.txt", Allow),
        (F, "bash", "echo curl >> ~/.bashrc", Allow),
        (P, "read", r#"{"path": ".bashrc"}"#, Allow),
    ];
    run_table_in(&world, "", cases, in_home);
    // Outside the workspace they are denied too, not merely asked about.
    run_table(
        &world,
        "",
        &[(
            A,
            "write",
            r#"{"path": "~/.profile", "content": "x"}"#,
            Deny,
        )],
    );
}

/// A tool that declares `nature` under `name`, for the gate to read.
struct Declared(keel_protocol::ToolDefinition, keel_agent::ToolNature);

#[async_trait]
impl keel_agent::AgentTool for Declared {
    fn definition(&self) -> &keel_protocol::ToolDefinition {
        &self.0
    }

    fn nature(&self) -> keel_agent::ToolNature {
        self.1
    }

    async fn execute(
        &self,
        _arguments: Value,
        _context: keel_agent::ToolCallContext,
    ) -> Result<keel_agent::ToolOutput, keel_agent::ToolError> {
        Ok(keel_agent::ToolOutput::text("ran"))
    }
}

fn declared(name: &str, nature: keel_agent::ToolNature) -> keel_agent::ToolRef {
    Arc::new(Declared(
        keel_protocol::ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        },
        nature,
    ))
}

#[test]
fn the_gate_judges_a_tool_by_what_it_declares_not_by_its_name() {
    use keel_agent::ToolNature;
    let world = World::new();
    let gate = world.gate(Mode::Plan, RuleSet::new());
    // Never declared: unknown, so plan mode asks, whatever the name promises.
    assert_eq!(gate.check("notes_lookup", &json!({})).kind(), Ask);
    gate.declare_tools(&[
        declared("notes_lookup", ToolNature::SessionOnly),
        declared("start_job", ToolNature::StartsWork),
        declared("peek", ToolNature::ReadsFile { path: "file" }),
        declared("put", ToolNature::WritesFile { path: "target" }),
        declared("mcp__srv__run", ToolNature::Opaque),
    ]);
    assert_eq!(gate.check("notes_lookup", &json!({})).kind(), Allow);
    // Work that goes on by itself is the user's to start in plan and ask modes.
    assert_eq!(gate.check("start_job", &json!({})).kind(), Ask);
    // The declared argument names the file: a read anywhere in the workspace is fine in
    // plan mode, a write is not.
    assert_eq!(
        gate.check("peek", &json!({"file": "src/a.rs"})).kind(),
        Allow
    );
    assert_eq!(
        gate.check("put", &json!({"target": "src/a.rs"})).kind(),
        Deny
    );
    assert_eq!(gate.check("mcp__srv__run", &json!({})).kind(), Ask);
    // A declared reader of a credential location is refused like the built-in read.
    let home_key = world.home.join(".ssh/id_rsa");
    assert_eq!(gate.check("peek", &json!({"file": home_key})).kind(), Deny);
    gate.set_mode(Mode::Auto);
    assert_eq!(gate.check("start_job", &json!({})).kind(), Allow);
    assert_eq!(
        gate.check("put", &json!({"target": "src/a.rs"})).kind(),
        Allow
    );
    gate.set_mode(Mode::Ask);
    assert_eq!(gate.check("start_job", &json!({})).kind(), Ask);
    assert_eq!(gate.check("notes_lookup", &json!({})).kind(), Allow);
}
