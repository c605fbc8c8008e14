//! Plan mode's one writable path: the session's plan file in keel's home. The gate lets
//! `write` and `edit` of exactly that path through in plan mode and nothing else (the file
//! tools' own checks are in `tools/plan_file.rs`).

use super::attacks::with_keel_home;
use super::*;

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
        Deny,
    ),
];

/// The plan file's calls (tool, arguments): outside plan mode they are judged as any other
/// use of keel's home.
const ON_THE_PLAN: &[(&str, &str, DecisionKind)] = &[
    ("write", WRITE_PLAN, Deny),
    (
        "edit",
        r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "edits": []}"#,
        Deny,
    ),
    ("read", r#"{"path": "%HOME%/.keel/plans/s-plan1.md"}"#, Deny),
    ("bash", "echo x > %HOME%/.keel/plans/s-plan1.md", Deny),
];

/// `write` of the plan file.
const WRITE_PLAN: &str = r#"{"path": "%HOME%/.keel/plans/s-plan1.md", "content": "x"}"#;

fn plan_env(world: &World) -> impl Fn(&mut ToolEnv) {
    let plan = PathBuf::from(world.fill(PLAN));
    move |env: &mut ToolEnv| env.plan_file = Some(plan.clone())
}

#[test]
fn plan_mode_writes_the_plan_file_and_nothing_else() {
    let world = with_keel_home();
    run_table_in(&world, "", PLAN_MODE, plan_env(&world));
    let other_modes: Vec<Case> = [U, A, F]
        .into_iter()
        .flat_map(|mode| {
            ON_THE_PLAN.iter().map(move |(tool, args, want)| {
                // keel's own tools stay out of keel's home in every mode while the sandbox is
                // on, and in `full` the sandbox alone hides it from commands.
                let want = match (mode, *tool) {
                    (F, "bash") => Allow,
                    (F, _) => Deny,
                    _ => *want,
                };
                (mode, *tool, *args, want)
            })
        })
        .collect();
    run_table_in(&world, "", &other_modes, plan_env(&world));
    // Without a plan file (no keel home), plan mode writes nothing at all.
    run_table(&world, "", &[(P, "write", WRITE_PLAN, Deny)]);
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
