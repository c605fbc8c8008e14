//! Attack family "storage quotas and squatting": a model that prints without end fills no
//! disk past the session's quota, and another user who takes keel's usual output folder
//! in the shared temp folder (or plants a link there) gets none of keel's output.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use serde_json::{Value, json};

use crate::sessions::{Home, stderr};

/// The completed tool results of a stream-json run, by call id.
fn results(output: &std::process::Output) -> std::collections::BTreeMap<String, String> {
    crate::lines(&output.stdout)
        .into_iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "tool_call")
        .map(|e| {
            (
                e["item"]["call_id"].as_str().unwrap_or_default().to_owned(),
                e["item"]["result"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn bash(id: &str, command: &str, background: bool) -> Value {
    json!({"tool_calls": [{"id": id, "name": "bash",
        "arguments": {"command": command, "run_in_background": background}}]})
}

#[test]
fn a_sessions_saved_outputs_stop_at_the_quota_with_a_clear_message() {
    let home = Home::new();
    let print = "head -c 700000 /dev/zero | tr '\\\\0' x";
    let responses = json!([
        bash("a", print, false),
        bash("b", print, false),
        bash("c", print, false),
        {"text": "done"}
    ])
    .to_string();
    let output = home.exec(
        &responses,
        &[
            "--output-format",
            "stream-json",
            "--permission",
            "full",
            "-c",
            "output_budget.artifacts_quota_mib=1",
            "print a lot",
        ],
    );
    let results = results(&output);
    assert!(
        results["a"].contains("saved whole") || results["a"].contains("artifacts"),
        "{:.300}",
        results["a"]
    );
    assert!(
        results["b"].contains("what the session's quota had left"),
        "{:.600}",
        results["b"]
    );
    assert!(
        results["c"].contains("reached their quota of 1.0 MiB (output_budget.artifacts_quota_mib)"),
        "{:.600}",
        results["c"]
    );
    let artifacts = home
        .home
        .path()
        .join("sessions")
        .join(home.only_session())
        .join("artifacts");
    let used: u64 = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(used <= 1024 * 1024 + 200, "{used} bytes saved");
}

#[test]
fn a_squatted_or_linked_output_folder_gets_nothing_of_keels() {
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    for squat in ["link", "foreign"] {
        let home = Home::new();
        let temp = tempfile::tempdir().unwrap();
        let usual = temp.path().join(format!("keel-outputs-{uid}"));
        let elsewhere = temp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o777)).unwrap();
        match squat {
            "link" => std::os::unix::fs::symlink(&elsewhere, &usual).unwrap(),
            _ => {
                // Another user's folder: only root can make one for the test.
                if uid != 0 {
                    continue;
                }
                std::fs::create_dir(&usual).unwrap();
                std::fs::set_permissions(&usual, std::fs::Permissions::from_mode(0o777)).unwrap();
                std::os::unix::fs::chown(&usual, Some(65534), Some(65534)).unwrap();
            }
        }
        let responses =
            json!([bash("bg", "echo started in the background", true), {"text": "ok"}]).to_string();
        let output = home
            .keel()
            .env("TMPDIR", temp.path())
            .args(["exec", "--output-format", "stream-json", "--mock-script"])
            .arg(crate::script(home.home.path(), &responses))
            .arg("go")
            .output()
            .unwrap();
        assert!(output.status.success(), "{squat}: {}", stderr(&output));
        let said = &results(&output)["bg"];
        let prefix = format!("{}-", usual.display());
        assert!(said.contains(&prefix), "{squat}: {said}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            0,
            "{squat}: keel wrote through the link"
        );
        if squat == "foreign" {
            assert_eq!(std::fs::read_dir(&usual).unwrap().count(), 0);
        }
        let own = said
            .split_whitespace()
            .find(|w| w.contains(&prefix))
            .map(|w| w.trim_matches(|c: char| !c.is_ascii_graphic() || c == '`' || c == '.'))
            .unwrap();
        let folder = std::path::Path::new(own).parent().unwrap();
        let meta = std::fs::metadata(folder).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (uid, 0o700), "{squat}");
    }
}
