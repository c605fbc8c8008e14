//! Deferred disclosure: 120 tools at 15% of a 64k window go behind `tool_search`; a search
//! finds one, and it is callable at the next step.

use super::*;

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_large_catalog_moves_behind_tool_search() {
    let mock = keel_mockllm::Background::new().unwrap();
    let server = mock
        .serve(
            r#"[{"tool_calls": [{"id": "s1", "name": "tool_search", "arguments": {"query": "heron042 station"}}]},
                {"tool_calls": [{"id": "c1", "name": "mcp__test__tool_042", "arguments": {"value": "x"}}]},
                {"text": "found it"}]"#,
        )
        .unwrap();
    let config = stdio_config(&["--tools", "120"], &mock_model(&server.url(), ""));
    let world = World::new(&config);
    let output = world.run(
        &[("OPENAI_API_KEY", "k")],
        &["--permission", "auto"],
        "find the heron tool",
    );
    assert_ok(&output);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let first = tool_names(&requests[0].body);
    assert!(first.contains(&"tool_search".to_owned()), "{first:?}");
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__test__tool_")),
        "the generated tools are held back: {first:?}"
    );
    let second = tool_names(&requests[1].body);
    assert!(
        second.contains(&"mcp__test__tool_042".to_owned()),
        "{second:?}"
    );
    assert!(!second.contains(&"mcp__test__tool_041".to_owned()));
    let results = results(&output);
    assert!(
        results["s1"].0.contains("mcp__test__tool_042"),
        "{:?}",
        results["s1"]
    );
    assert_eq!(results["c1"].0, "tool_042 got x");
    let decision = extension_events(&output, "mcp")
        .into_iter()
        .find(|e| e["kind"] == "disclosure")
        .expect("the decision is reported");
    assert_eq!(decision["details"]["deferred"], true, "{decision}");
    assert_eq!(decision["details"]["threshold_tokens"], 9600);
}

#[test]
fn a_small_catalog_stays_exposed() {
    let world = World::new(&stdio_config(&[], ""));
    let output = world.exec(r#"[{"text": "ok"}]"#, &[], "hi");
    assert_ok(&output);
    let decision = extension_events(&output, "mcp")
        .into_iter()
        .find(|e| e["kind"] == "disclosure")
        .expect("the decision is reported");
    assert_eq!(decision["details"]["deferred"], false, "{decision}");
}

/// Issue 34: in an 8k window MCP's held tools and keel's own share one `tool_search`; a
/// found MCP tool is callable, and what waits is named in the system prompt.
#[test]
fn a_small_window_holds_mcp_and_built_in_tools_behind_one_search() {
    let mock = keel_mockllm::Background::new().unwrap();
    let server = mock
        .serve(
            r#"[{"tool_calls": [{"id": "s1", "name": "tool_search", "arguments": {"query": "select:mcp__test__echo,grep"}}]},
                {"tool_calls": [{"id": "c1", "name": "mcp__test__echo", "arguments": {"message": "heron"}}]},
                {"text": "found it"}]"#,
        )
        .unwrap();
    let model = mock_model(&server.url(), "").replace("64000", "8192");
    let world = World::new(&stdio_config(&[], &model));
    let output = world.run(
        &[("OPENAI_API_KEY", "k")],
        &["--permission", "auto"],
        "echo x",
    );
    assert_ok(&output);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let first = tool_names(&requests[0].body);
    assert_eq!(
        first.iter().filter(|n| *n == "tool_search").count(),
        1,
        "{first:?}"
    );
    assert!(!first.contains(&"grep".to_owned()), "{first:?}");
    let system = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("tool_search") && system.contains("grep"),
        "{system}"
    );
    let second = tool_names(&requests[1].body);
    assert!(second.contains(&"mcp__test__echo".to_owned()), "{second:?}");
    assert!(second.contains(&"grep".to_owned()), "{second:?}");
    let results = results(&output);
    assert_eq!(results["c1"].0, "heron", "{:?}", results["c1"]);
}
