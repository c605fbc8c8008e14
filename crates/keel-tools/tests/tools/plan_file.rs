//! `write` and `edit` in plan mode: the session's plan file is the only file they change
//! (whatever the gate said), its folder is made private, and no link redirects them.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::*;

/// A workspace, an outside folder and keel's home under one temporary folder, with the
/// tools' environment in plan mode.
struct Plan {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
    home: PathBuf,
    plan: PathBuf,
    env: Arc<ToolEnv>,
}

impl Plan {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, out, home) = (base.join("ws"), base.join("out"), base.join("home"));
        for folder in [&ws, &out, &home.join(".keel")] {
            std::fs::create_dir_all(folder).unwrap();
        }
        std::fs::write(ws.join("main.rs"), "x").unwrap();
        std::fs::write(out.join("notes.txt"), "x").unwrap();
        let plan = home.join(".keel/plans/s-plan1.md");
        let mut env = ToolEnv::new(&ws);
        env.home = Some(home.clone());
        env.keel_home = Some(home.join(".keel"));
        env.plan_file = Some(plan.clone());
        Self {
            _dir: dir,
            ws,
            out,
            home,
            plan,
            env: Arc::new(env),
        }
    }

    async fn write(&self, path: &Path, content: &str) -> Result<ToolOutput, String> {
        run(
            &Write::new(self.env.clone()),
            json!({"path": path, "content": content}),
        )
        .await
    }
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
    let p = Plan::new();
    p.write(&p.plan, "## Summary\nfirst\n").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&p.plan).unwrap(),
        "## Summary\nfirst\n"
    );
    assert_eq!(mode_of(p.plan.parent().unwrap()), 0o700);
    assert_eq!(mode_of(&p.plan), 0o600);
    let edit = Edit::new(p.env.clone());
    run(
        &edit,
        json!({"path": p.plan, "edits": [{"old_string": "first", "new_string": "second"}]}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&p.plan).unwrap(),
        "## Summary\nsecond\n"
    );
    assert_eq!(mode_of(&p.plan), 0o600);
    // The tools refuse every other write themselves, whatever the gate said.
    for other in [
        p.ws.join("main.rs"),
        p.home.join(".keel/plans/s-other1.md"),
        p.home.join(".keel/config.yaml"),
    ] {
        let refused = p.write(&other, "y").await.unwrap_err();
        assert!(refused.contains("plan mode is read-only"), "{refused}");
    }
    assert_eq!(std::fs::read_to_string(p.ws.join("main.rs")).unwrap(), "x");
    assert!(!p.home.join(".keel/plans/s-other1.md").exists());
    // A workspace link to the plan file leads into keel's home: the tools refuse it.
    std::os::unix::fs::symlink(&p.plan, p.ws.join("plan-link")).unwrap();
    let linked = p.write(&p.ws.join("plan-link"), "z").await.unwrap_err();
    assert!(linked.contains("credential location"), "{linked}");
    assert_eq!(
        std::fs::read_to_string(&p.plan).unwrap(),
        "## Summary\nsecond\n"
    );
}

#[tokio::test]
async fn a_planted_link_or_an_open_folder_never_takes_the_plan_write() {
    let p = Plan::new();
    let plans = p.plan.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::set_permissions(&plans, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(p.out.join("notes.txt"), &p.plan).unwrap();
    let refused = p.write(&p.plan, "planted").await.unwrap_err();
    assert!(refused.contains("plan mode is read-only"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(p.out.join("notes.txt")).unwrap(),
        "x"
    );
    assert!(std::fs::symlink_metadata(&p.plan).unwrap().is_symlink());
    // The folder a link elsewhere.
    std::fs::remove_file(&p.plan).unwrap();
    std::fs::remove_dir(&plans).unwrap();
    std::os::unix::fs::symlink(&p.out, &plans).unwrap();
    assert!(p.write(&p.plan, "planted").await.is_err());
    assert!(!p.out.join("s-plan1.md").exists());
    // A folder others may open is not keel's private folder.
    std::fs::remove_file(&plans).unwrap();
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::set_permissions(&plans, std::fs::Permissions::from_mode(0o755)).unwrap();
    let open = p.write(&p.plan, "x").await.unwrap_err();
    assert!(open.contains("private folder"), "{open}");
    assert!(!p.plan.exists());
}
