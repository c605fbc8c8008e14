//! Plan mode's one writable path: the session's plan file in keel's home. The gate lets
//! `write` and `edit` of exactly that path through in plan mode and nothing else; the file
//! tools check it again, make the plan folder privately and never follow a link there.

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;

use keel_agent::{AgentTool, ToolCallContext, ToolUpdates};
use keel_protocol::MessageId;
use keel_tools::files::edit::Edit;
use keel_tools::files::write::Write;

use super::attacks::with_keel_home;
use super::*;
use pretty_assertions::assert_eq;

/// The running session's plan file, as the runtime names it.
const PLAN: &str = "%HOME%/.keel/plans/s-plan1.md";

/// In plan mode with the plan file set: that file and nothing else.
const PLAN_MODE: &[Case] = &[
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "content": "x"}"#,
        Allow,
    ),
    (
        P,
        "edit",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "edits": []}"#,
        Allow,
    ),
    (
        P,
        "read",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md"}"#,
        Allow,
    ),
    // `..` that lands on the plan file is the plan file.
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans/../plans/s-plan1.md", "content": "x"}"#,
        Allow,
    ),
    (
        P,
        "write",
        r#"{"path": "%WS%/../home/.keel/plans/s-plan1.md", "content": "x"}"#,
        Allow,
    ),
    // Another session's plan, a file beside it, the folder, keel's own files.
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans/s-other1.md", "content": "x"}"#,
        Deny,
    ),
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md.bak", "content": "x"}"#,
        Deny,
    ),
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.1.md", "content": "x"}"#,
        Deny,
    ),
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans", "content": "x"}"#,
        Deny,
    ),
    (
        P,
        "write",
        r#"{"path": "%HOME%/.keel/plans/../config.yaml", "content": "x"}"#,
        Deny,
    ),
    (
        P,
        "write",
        r#"{"path": "%WS%/../home/.keel/plans/s-other1.md", "content": "x"}"#,
        Deny,
    ),
    (
        P,
        "edit",
        r#"{"path": "%HOME%/.keel/permissions.yaml", "edits": []}"#,
        Deny,
    ),
    // Everything else stays read-only.
    (
        P,
        "write",
        r#"{"path": "src/main.rs", "content": "x"}"#,
        Deny,
    ),
    (P, "edit", r#"{"path": "src/main.rs", "edits": []}"#, Deny),
    (
        P,
        "write",
        r#"{"path": "s-plan1.md", "content": "x"}"#,
        Deny,
    ),
    (P, "bash", "echo x > f", Deny),
    (P, "bash", "echo x > %HOME%/.keel/plans/s-plan1.md", Deny),
    (
        P,
        "bash",
        "tee %HOME%/.keel/plans/s-plan1.md < in.txt",
        Deny,
    ),
    (P, "bash", "cp in.txt %HOME%/.keel/plans/s-plan1.md", Deny),
    (P, "bash", "rm src/main.rs", Deny),
    (P, "bash", "rm -f %HOME%/.keel/plans/s-plan1.md", Deny),
    (P, "bash", "touch x", Deny),
    (P, "bash", "mkdir -p %HOME%/.keel/plans", Deny),
    // Reading it back through a command is a read of keel's home like any other.
    (P, "bash", "cat %HOME%/.keel/plans/s-plan1.md", Safety),
    (
        P,
        "read",
        r#"{"path": "%HOME%/.keel/plans/s-other1.md"}"#,
        Safety,
    ),
];

/// The plan file outside plan mode is as protected as the rest of keel's home.
const OTHER_MODES: &[Case] = &[
    (
        U,
        "write",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "content": "x"}"#,
        Deny,
    ),
    (
        A,
        "write",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "content": "x"}"#,
        Deny,
    ),
    (
        U,
        "edit",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "edits": []}"#,
        Deny,
    ),
    (
        U,
        "read",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md"}"#,
        Safety,
    ),
    (U, "bash", "echo x > %HOME%/.keel/plans/s-plan1.md", Deny),
];

fn plan_env(world: &World) -> impl Fn(&mut ToolEnv) {
    let plan = PathBuf::from(world.fill(PLAN));
    move |env: &mut ToolEnv| env.plan_file = Some(plan.clone())
}

#[test]
fn plan_mode_writes_the_plan_file_and_nothing_else() {
    let world = with_keel_home();
    run_table_in(&world, "", PLAN_MODE, plan_env(&world));
    run_table_in(&world, "", OTHER_MODES, plan_env(&world));
    // Without a plan file (no keel home), plan mode writes nothing at all.
    run_table(
        &world,
        "",
        &[(
            P,
            "write",
            r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "content": "x"}"#,
            Deny,
        )],
    );
    // An allow rule cannot open another path in plan mode.
    run_table_in(
        &world,
        "allow:\n  - tool: write\n",
        &[(
            P,
            "write",
            r#"{"path": "%HOME%/.keel/plans/s-other1.md", "content": "x"}"#,
            Deny,
        )],
        plan_env(&world),
    );
}

#[test]
fn a_link_at_the_plan_path_or_its_folder_is_not_the_plan_file() {
    let world = with_keel_home();
    let plans = world.home.join(".keel/plans");
    std::fs::create_dir_all(&plans).unwrap();
    std::os::unix::fs::symlink(world.ws.join("in.txt"), plans.join("s-plan1.md")).unwrap();
    let write = r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "content": "x"}"#;
    run_table_in(&world, "", &[(P, "write", write, Deny)], plan_env(&world));
    std::fs::remove_file(plans.join("s-plan1.md")).unwrap();
    std::fs::remove_dir(&plans).unwrap();
    std::os::unix::fs::symlink(&world.out, &plans).unwrap();
    run_table_in(&world, "", &[(P, "write", write, Deny)], plan_env(&world));
    // A workspace link to the plan file is judged where it leads.
    std::fs::remove_file(&plans).unwrap();
    std::fs::create_dir_all(&plans).unwrap();
    std::os::unix::fs::symlink(plans.join("s-plan1.md"), world.ws.join("plan-link")).unwrap();
    run_table_in(
        &world,
        "",
        &[(
            P,
            "write",
            r#"{"path": "plan-link", "content": "x"}"#,
            Allow,
        )],
        plan_env(&world),
    );
}

fn context() -> ToolCallContext {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    std::mem::forget(rx);
    ToolCallContext {
        tool_call_id: "c1".into(),
        assistant_message_id: MessageId::new("m1"),
        turn: None,
        cancel: tokio_util::sync::CancellationToken::new(),
        updates: ToolUpdates::new(0, tx),
    }
}

fn tool_env(world: &World) -> Arc<ToolEnv> {
    let mut env = world.env();
    plan_env(world)(&mut env);
    Arc::new(env)
}

async fn write(env: &Arc<ToolEnv>, path: &str, content: &str) -> Result<String, String> {
    Write::new(env.clone())
        .execute(json!({"path": path, "content": content}), context())
        .await
        .map(|out| format!("{:?}", out.content))
        .map_err(|e| e.message)
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn the_file_tools_write_the_plan_file_privately_and_refuse_the_rest() {
    let world = with_keel_home();
    let env = tool_env(&world);
    let plan = world.home.join(".keel/plans/s-plan1.md");
    write(&env, &plan.to_string_lossy(), "## Summary\nfirst\n")
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&plan).unwrap(),
        "## Summary\nfirst\n"
    );
    assert_eq!(mode_of(plan.parent().unwrap()), 0o700);
    assert_eq!(mode_of(&plan), 0o600);
    let edited = Edit::new(env.clone())
        .execute(
            json!({"path": plan, "edits": [{"old_string": "first", "new_string": "second"}]}),
            context(),
        )
        .await;
    assert!(edited.is_ok(), "{:?}", edited.err().map(|e| e.message));
    assert_eq!(
        std::fs::read_to_string(&plan).unwrap(),
        "## Summary\nsecond\n"
    );
    assert_eq!(mode_of(&plan), 0o600);
    // The tools refuse every other write themselves, whatever the gate said.
    for other in [
        world.ws.join("src/main.rs"),
        world.home.join(".keel/plans/s-other1.md"),
        world.home.join(".keel/config.yaml"),
    ] {
        let refused = write(&env, &other.to_string_lossy(), "x")
            .await
            .unwrap_err();
        assert!(refused.contains("plan mode is read-only"), "{refused}");
    }
    assert_eq!(
        std::fs::read_to_string(world.ws.join("src/main.rs")).unwrap(),
        "x"
    );
    assert!(!world.home.join(".keel/plans/s-other1.md").exists());
    // A workspace link to the plan file leads into keel's home: the tools refuse it.
    std::os::unix::fs::symlink(&plan, world.ws.join("plan-link")).unwrap();
    let linked = write(&env, "plan-link", "x").await.unwrap_err();
    assert!(linked.contains("credential location"), "{linked}");
    assert_eq!(
        std::fs::read_to_string(&plan).unwrap(),
        "## Summary\nsecond\n"
    );
}

#[tokio::test]
async fn a_planted_link_or_an_open_folder_never_takes_the_plan_write() {
    let world = with_keel_home();
    let env = tool_env(&world);
    let plans = world.home.join(".keel/plans");
    let plan = plans.join("s-plan1.md");
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::set_permissions(&plans, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(world.out.join("notes.txt"), &plan).unwrap();
    let refused = write(&env, &plan.to_string_lossy(), "planted")
        .await
        .unwrap_err();
    assert!(refused.contains("plan mode is read-only"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(world.out.join("notes.txt")).unwrap(),
        "x"
    );
    assert!(std::fs::symlink_metadata(&plan).unwrap().is_symlink());
    // The folder a link elsewhere.
    std::fs::remove_file(&plan).unwrap();
    std::fs::remove_dir(&plans).unwrap();
    std::os::unix::fs::symlink(&world.out, &plans).unwrap();
    assert!(
        write(&env, &plan.to_string_lossy(), "planted")
            .await
            .is_err()
    );
    assert!(!world.out.join("s-plan1.md").exists());
    // A folder others may open is not keel's private folder.
    std::fs::remove_file(&plans).unwrap();
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::set_permissions(&plans, std::fs::Permissions::from_mode(0o755)).unwrap();
    let open = write(&env, &plan.to_string_lossy(), "x").await.unwrap_err();
    assert!(open.contains("private folder"), "{open}");
    assert!(!plan.exists());
}
