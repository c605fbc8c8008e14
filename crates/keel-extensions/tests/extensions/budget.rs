//! The tool-output budget: a 200 KiB output becomes head, receipt and tail, the artifact
//! holds all of it and `read` pages it, and the carve-out reaches no further.

use keel_llm::scripted::ScriptedResponse;
use keel_protocol::Message;
use serde_json::json;

use crate::harness::{Harness, Setup, bash, extension_events, text_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_kib_bash_output_is_archived_and_the_model_gets_head_tail_and_a_receipt() {
    let command = "head -c 204800 /dev/zero | tr '\\0' x; echo; echo END-OF-OUTPUT";
    let responses = vec![bash("c1", command), ScriptedResponse::text("ok")];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (_, events) = h.turn(&session, "print a lot").await;
    let requests = h.requests();
    let result = requests[1]
        .messages
        .iter()
        .find_map(|m| m.as_tool_result())
        .unwrap()
        .clone();
    let text = result.text();
    assert!(text.starts_with(&"x".repeat(16 * 1024)), "{:.100}", text);
    assert!(
        text.trim_end().ends_with("END-OF-OUTPUT"),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(
        text.len() < 34 * 1024,
        "{} bytes reached the model",
        text.len()
    );
    let artifacts = h.session_dir(&session).join("artifacts");
    assert!(
        text.contains(&artifacts.display().to_string()),
        "{}",
        &text[16 * 1024..16 * 1024 + 400]
    );
    assert!(
        text.contains("200.0 KiB in all") && text.contains("read tool"),
        "receipt"
    );
    let archived: Vec<_> = extension_events(&events)
        .into_iter()
        .filter(|(e, k, _)| e == "host.output-budget" && k == "archived")
        .collect();
    assert_eq!(archived.len(), 1);
    let path = archived[0].2["path"].as_str().unwrap().to_owned();
    assert!(path.starts_with(&artifacts.display().to_string()));
    let saved = std::fs::read(&path).unwrap();
    assert_eq!(saved.len(), 204_800 + 1 + "END-OF-OUTPUT\n".len());
    assert_eq!(archived[0].2["bytes"], json!(saved.len()));

    // The model pages the artifact with read; keel's home beyond it stays closed.
    std::fs::write(h.home.join("config.yaml"), "model: secret/thing\n").unwrap();
    let other = h.session_dir(&"s-other".into()).join("artifacts");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("x.log"), "another session's output\n").unwrap();
    h.provider.push(ScriptedResponse::tool_call(
        "r1",
        "read",
        json!({"path": path, "offset": 1, "limit": 1}),
    ));
    h.provider.push(ScriptedResponse::tool_call(
        "r2",
        "read",
        json!({"path": h.home.join("config.yaml")}),
    ));
    h.provider.push(ScriptedResponse::tool_call(
        "r3",
        "read",
        json!({"path": other.join("x.log")}),
    ));
    h.provider.push(ScriptedResponse::text("read it"));
    h.turn(&session, "read the saved output").await;
    let results: Vec<(bool, String)> = h
        .store
        .history(&session)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.message {
            Message::ToolResult(r) if r.tool_name == "read" => {
                Some((r.is_error, text_of(&Message::ToolResult(r))))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3);
    assert!(
        !results[0].0 && results[0].1.contains("xxxx"),
        "{:?}",
        results[0]
    );
    assert!(
        results[1].0 && !results[1].1.contains("secret/thing"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].0 && !results[2].1.contains("another session"),
        "{:?}",
        results[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_within_the_budget_is_left_whole() {
    let responses = vec![bash("c1", "seq 1 1000"), ScriptedResponse::text("ok")];
    let h = Harness::start(Setup::new(responses)).await;
    let session = h.session().await;
    let (_, events) = h.turn(&session, "count").await;
    let text = h.requests()[1]
        .messages
        .iter()
        .find_map(|m| m.as_tool_result())
        .unwrap()
        .text();
    assert_eq!(text.lines().count(), 1000);
    assert!(
        extension_events(&events)
            .iter()
            .all(|(e, _, _)| e != "host.output-budget")
    );
}
