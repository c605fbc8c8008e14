//! Attack family "redaction shapes": every secret shape of the corpus, in the user's text,
//! in a file the model reads and in a command's output, is masked in what leaves the
//! session (`keel sessions export` as Markdown and JSON, `replay-request`), its look-alikes
//! come through whole, and the stored history keeps every byte.

use keel_tools::redact::corpus::{LOOKALIKES, SECRETS};
use serde_json::json;

use crate::sessions::{Home, stderr};

#[test]
fn exports_mask_every_corpus_secret_and_keep_the_lookalikes_and_the_history() {
    let home = Home::new();
    let corpus: Vec<&str> = SECRETS
        .iter()
        .map(|(line, _)| *line)
        .chain(LOOKALIKES.iter().copied())
        .collect();
    let document = corpus.join("\n");
    std::fs::write(home.work.path().join("notes.txt"), &document).unwrap();
    let responses = json!([
        {"tool_calls": [{"id": "r", "name": "read", "arguments": {"path": "notes.txt"}}]},
        {"shell": "cat notes.txt"},
        {"text": format!("Here is what I found:\n{document}")}
    ])
    .to_string();
    let mock = crate::Mock::new();
    let server = mock.serve(&responses);
    // The user's own text holds the corpus too.
    let output = home
        .keel()
        .args(["exec", "--model", "deepseek/deepseek-chat", "--base-url"])
        .arg(format!("{}/v1", server.url()))
        .arg(format!("Check these:\n{document}"))
        .env("DEEPSEEK_API_KEY", "sk-redaction-test-key-0001")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let id = home.only_session();
    let run = |args: &[&str]| {
        let out = home.keel().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let markdown = run(&["sessions", "export", &id]);
    let exported_json = run(&["sessions", "export", &id, "--format", "json"]);
    let replayed = run(&["sessions", "replay-request", &id]);
    for (name, text) in [
        ("markdown", &markdown),
        ("json", &exported_json),
        ("replay-request", &replayed),
    ] {
        for (_, secret) in SECRETS {
            assert!(!text.contains(secret), "{name} kept {secret}");
        }
        for line in LOOKALIKES {
            // JSON escapes quotes; compare the look-alike's words.
            let plain = line.replace('"', "");
            let text = text.replace("\\\"", "").replace('"', "");
            assert!(text.contains(&plain), "{name} lost {line}");
        }
    }
    // Stored history and the model's context stay exact.
    let shown = run(&["sessions", "show", &id, "--json"]);
    for (_, secret) in SECRETS {
        assert!(shown.contains(secret), "the stored history lost {secret}");
    }
    let exact = run(&["sessions", "replay-request", &id, "--exact"]);
    assert!(exact.contains(SECRETS[0].1));
}

/// Keys and tokens keel keeps in its credential store (an MCP server's OAuth tokens, a
/// provider's key) are masked in what leaves a session even where nothing else would know
/// them for secrets: they have no token shape and no variable holds them.
#[test]
fn exports_mask_the_keys_and_tokens_of_the_credential_store() {
    let home = Home::new();
    let access = "opaque7access7value7for7tracker";
    let refresh = "opaque7refresh7value7for7tracker";
    let key = "plainproviderkeyvalue77";
    std::fs::write(
        home.home.path().join("credentials.json"),
        json!({
            "providers": {"deepseek": {"api_key": key}},
            "mcp": {"tracker https://tracker.example": {
                "resource": "https://tracker.example/mcp", "issuer": "https://tracker.example",
                "token_endpoint": "https://tracker.example/token", "client_id": "keel",
                "auth_method": "none", "access_token": access, "refresh_token": refresh
            }}
        })
        .to_string(),
    )
    .unwrap();
    let said = format!("the server sent {access} and {refresh}; the key is {key}");
    let responses = json!([{"text": said}]).to_string();
    let mock = crate::Mock::new();
    let server = mock.serve(&responses);
    let output = home
        .keel()
        .args(["exec", "--model", "deepseek/deepseek-chat", "--base-url"])
        .arg(format!("{}/v1", server.url()))
        .arg(format!("did it send {access} or {refresh}, with {key}?"))
        .env("DEEPSEEK_API_KEY", "sk-redaction-test-key-0001")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let id = home.only_session();
    for args in [
        vec!["sessions", "export", id.as_str()],
        vec!["sessions", "export", id.as_str(), "--format", "json"],
        vec!["sessions", "replay-request", id.as_str()],
    ] {
        let out = home.keel().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        for secret in [access, refresh, key] {
            assert!(!text.contains(secret), "{args:?} kept {secret}: {text}");
        }
    }
}
