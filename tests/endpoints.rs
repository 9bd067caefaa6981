//! Curated endpoints end to end: a named selection of tools with overrides served at
//! `/mcp/v/{name}` to the official Python SDK's client, its access rules in front (401 and 403
//! like any other resource), the tool search meta-tool of a large selection, the same
//! endpoint over stdio with `--endpoint`, and a configuration whose overrides collide refused
//! by `mcpgw config check`, naming both entries.

mod support;

use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::peers::run_python_client;
use support::{RunningGateway, cli_key, fixture_server_yaml, gateway, gateway_binary};

const ENDPOINTS: &str = "\
endpoints:
  support:
    description: The support agents' tools
    tools:
      - server: demo
        tool: echo
        name: say
        title: Say
        description: Repeats what it is given.
        annotations: {readOnlyHint: true}
      - server: calc
        tool: add
    allow: [\"user:alice\"]
  everything:
    tools:
      - server: demo
      - server: calc
    tool_search: true
";

fn config(auth: bool) -> String {
    let auth = if auth {
        "auth:\n  enabled: true\n  trusted_proxies: [\"127.0.0.1\"]\n"
    } else {
        ""
    };
    format!(
        "{auth}probe_tools: true\nmcp_servers:\n{}{}{ENDPOINTS}",
        fixture_server_yaml("demo", &[]),
        fixture_server_yaml("calc", &[])
    )
}

/// Waits until the catalogue lists both servers' tools (they are probed at start).
fn wait_for_tools(gw: &RunningGateway, key: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let answer = mcp_post(
            gw,
            "/mcp",
            Some(key),
            &json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
                    "_meta": meta()
                }
            }),
        );
        let names: Vec<String> = answer.1["result"]["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if names.contains(&"demo__echo".to_owned()) && names.contains(&"calc__add".to_owned()) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the servers' tools were never listed: {names:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
    })
}

/// One stateless (2026-07-28) JSON-RPC request to `path`, with `key` as the API key; answers
/// the status and the JSON body (the envelope of a refusal, or the JSON-RPC answer).
fn mcp_post(gw: &RunningGateway, path: &str, key: Option<&str>, body: &Value) -> (u16, Value) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let method = body["method"].as_str().unwrap_or_default();
    let mut request = agent
        .post(&gw.url(path))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = body["params"]["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let mut response = request.send_json(body).unwrap();
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    let json = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .find_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{path}: not JSON ({status}): {text}"));
    (status, json)
}

fn tool<'a>(objects: &'a Value, name: &str) -> &'a Value {
    objects
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` in {objects}"))
}

#[test]
fn a_curated_endpoint_serves_exactly_its_tools_with_their_overrides_to_those_it_admits() {
    let data = tempfile::tempdir().unwrap();
    let alice = cli_key(data.path(), "user:alice", Some("developer"));
    let bob = cli_key(data.path(), "user:bob", Some("developer"));
    let gw = gateway().config(&config(true)).data_dir(data).start();
    wait_for_tools(&gw, &alice);

    // Alice, through the official SDK: the endpoint's two tools, as it names them.
    let url = gw.url("/mcp/v/support");
    let run = run_python_client(
        "http_client.py",
        &[
            url.clone(),
            "--protocol".into(),
            "2025-11-25".into(),
            "--header".into(),
            format!("X-API-Key: {alice}"),
            "--call".into(),
            "say".into(),
            r#"{"text": "hello"}"#.into(),
            "--call".into(),
            "calc__add".into(),
            r#"{"a": 2, "b": 3}"#.into(),
            "--call".into(),
            "demo__echo".into(),
            r#"{"text": "not here"}"#.into(),
        ],
    );
    let mut names: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["calc__add", "say"], "{run}");
    let say = tool(&run["tool_objects"], "say");
    assert_eq!(say["title"], "Say", "{say}");
    assert_eq!(say["description"], "Repeats what it is given.", "{say}");
    assert_eq!(say["annotations"]["readOnlyHint"], true, "{say}");
    assert_eq!(say["inputSchema"]["required"], json!(["text"]), "{say}");
    let calls = run["calls"].as_array().unwrap();
    assert_eq!(calls[0]["content"][0]["text"], "hello", "{run}");
    assert!(
        calls[1]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains('5'),
        "{run}"
    );
    // A tool of the same servers that the endpoint does not select is unknown there.
    assert_eq!(calls[2]["error"]["code"], -32602, "{run}");

    // Bob may use /mcp, but the endpoint's rules leave him out: 403, like any resource.
    let list =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
    let (status, body) = mcp_post(&gw, "/mcp/v/support", Some(&bob), &list);
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "AccessDeniedError", "{body}");
    let (status, body) = mcp_post(&gw, "/mcp", Some(&bob), &list);
    assert_eq!(status, 200, "{body}");
    // No credential: 401 with the challenge; an unknown endpoint: 404; both in the envelope.
    let (status, body) = mcp_post(&gw, "/mcp/v/support", None, &list);
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "AuthenticationError", "{body}");
    let (status, body) = mcp_post(&gw, "/mcp/v/nowhere", Some(&alice), &list);
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], "NotFoundError", "{body}");
    // Bad input: a path segment that cannot be an endpoint name.
    let (status, body) = mcp_post(&gw, "/mcp/v/a.b", Some(&alice), &list);
    assert_eq!(status, 404, "{body}");
}

#[test]
fn a_large_selection_is_searched_with_find_tools_and_every_tool_stays_callable() {
    let gw = gateway().config(&config(false)).start();
    let run = run_python_client(
        "http_client.py",
        &[
            gw.url("/mcp/v/everything"),
            "--protocol".into(),
            "2026-07-28".into(),
            "--call".into(),
            "find_tools".into(),
            r#"{"query": "add two numbers", "limit": 2}"#.into(),
            "--call".into(),
            "demo__echo".into(),
            r#"{"text": "reached"}"#.into(),
            "--call".into(),
            "find_tools".into(),
            r#"{"query": ""}"#.into(),
        ],
    );
    assert_eq!(run["tools"], json!(["find_tools"]), "{run}");
    let calls = run["calls"].as_array().unwrap();
    let found = calls[0]["structured"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{run}"));
    assert_eq!(found.len(), 2, "{run}");
    for tool in found {
        assert!(tool["name"].as_str().unwrap().ends_with("__add"), "{run}");
        assert!(tool["inputSchema"].is_object(), "{run}");
    }
    assert_eq!(calls[1]["content"][0]["text"], "reached", "{run}");
    // Bad input: an empty query is refused as invalid arguments.
    assert_eq!(calls[2]["error"]["code"], -32602, "{run}");
}

#[test]
fn stdio_serves_one_endpoint_with_the_endpoint_option() {
    let scratch = tempfile::tempdir().unwrap();
    let config_path = scratch.path().join("gateway.yaml");
    std::fs::write(&config_path, config(false)).unwrap();
    let run = run_python_client(
        "stdio_client.py",
        &[
            "--call".into(),
            "say".into(),
            r#"{"text": "over stdio"}"#.into(),
            "--".into(),
            gateway_binary().display().to_string(),
            "--config".into(),
            config_path.display().to_string(),
            "--data-dir".into(),
            scratch.path().join("data").display().to_string(),
            "--endpoint".into(),
            "support".into(),
        ],
    );
    let mut names: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["calc__add", "say"], "{run}");
    assert_eq!(run["calls"][0]["content"][0]["text"], "over stdio", "{run}");

    // Bad input: an endpoint that does not exist stops the start with a message naming it.
    let output = Command::new(gateway_binary())
        .arg("--config")
        .arg(&config_path)
        .arg("--data-dir")
        .arg(scratch.path().join("data"))
        .args(["--endpoint", "ghost"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("ghost") && stderr.contains("support"),
        "{stderr}"
    );
}

#[test]
fn config_check_refuses_overrides_that_collide_naming_both() {
    let scratch = tempfile::tempdir().unwrap();
    let path = scratch.path().join("gateway.yaml");
    std::fs::write(
        &path,
        format!(
            "mcp_servers:\n{}{}endpoints:\n  team:\n    tools:\n      - {{server: demo, tool: echo, name: run}}\n      - {{server: calc, tool: add, name: run}}\n",
            fixture_server_yaml("demo", &[]),
            fixture_server_yaml("calc", &[])
        ),
    )
    .unwrap();
    let output = Command::new(gateway_binary())
        .args(["config", "check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("endpoints.team.tools[0]") && stderr.contains("endpoints.team.tools[1]"),
        "{stderr}"
    );
    assert!(stderr.contains("\"run\""), "{stderr}");
}
