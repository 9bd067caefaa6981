//! End-to-end tests of the data plane: the official MCP Python SDK as the client, the testkit's
//! fixture and `@modelcontextprotocol/server-everything` as upstreams, through the real binary.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{
    run_python_client, server_everything_command, spawn_python_client,
    start_server_everything_http, wait_for_file,
};
use support::{fixture_binary, fixture_server_yaml, gateway};

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

fn call<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|call| call["name"] == name)
        .unwrap_or_else(|| panic!("no call of {name} in {run}"))
}

fn text_of(call: &Value) -> String {
    call["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until the fixture server `id` wrote on stderr that a `sleep` was cancelled, which
/// proves the cancellation reached the upstream.
fn wait_until_the_fixture_saw_a_cancel(gw: &support::RunningGateway, id: &str) {
    gw.wait_for(
        &format!("/api/mcp_servers/{id}/logs"),
        Duration::from_secs(10),
        |logs| {
            logs["logs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["line"] == "fixture sleep cancelled")
        },
    );
}

fn two_fixtures() -> String {
    format!(
        "mcp_servers:\n{}{}",
        fixture_server_yaml("fx", &[]),
        fixture_server_yaml("other", &[])
    )
}

/// Everything a client does in one era: list, call, tool errors, progress, unknown tools.
fn exercise(protocol: &str) {
    let gw = gateway().config(&two_fixtures()).start();
    let url = gw.url("/mcp");
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &url,
            "--protocol",
            protocol,
            "--call",
            "fx__echo",
            r#"{"text": "through the gateway"}"#,
            "--call",
            "fx__add",
            r#"{"a": 2, "b": 3}"#,
            "--call",
            "other__fail",
            r#"{"message": "as asked"}"#,
            "--call-spec",
            r#"{"name": "fx__sleep", "arguments": {"ms": 300}, "progress": true}"#,
            "--call",
            "fx__no_such_tool",
            "{}",
            "--call",
            "echo",
            r#"{"text": "unprefixed"}"#,
        ]),
    );
    assert_eq!(run["protocol"], protocol, "{run}");
    if protocol == "2025-11-25" {
        assert!(
            run["session_id"].is_string(),
            "a session in the 2025 era: {run}"
        );
        // Closing the client ends its session, and the SDK takes the answer as a success.
        assert_eq!(run["session_end"], 204, "{run}");
    } else {
        assert!(run["session_end"].is_null(), "no session to end: {run}");
    }
    let warnings = run["client_warnings"].as_array().expect("client_warnings");
    assert!(
        !warnings.iter().any(|warning| warning
            .as_str()
            .unwrap_or_default()
            .contains("Session termination failed")),
        "the SDK saw its session end cleanly: {warnings:?}"
    );
    let tools: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for expected in ["fx__echo", "fx__add", "other__echo", "other__sleep"] {
        assert!(tools.contains(&expected), "{expected} missing: {tools:?}");
    }
    assert!(
        tools.iter().all(|name| name.contains("__")),
        "every name is prefixed: {tools:?}"
    );

    let echo = call(&run, "fx__echo");
    assert_eq!(echo["is_error"], false);
    assert_eq!(text_of(echo), "through the gateway");
    let add = call(&run, "fx__add");
    assert_eq!(add["structured"]["sum"], 5.0, "{add}");
    let fail = call(&run, "other__fail");
    assert_eq!(
        fail["is_error"], true,
        "a tool error stays a result: {fail}"
    );
    assert!(fail["error"].is_null());
    let sleep = call(&run, "fx__sleep");
    assert!(
        !sleep["progress"].as_array().unwrap().is_empty(),
        "progress passes through: {sleep}"
    );
    for unknown in ["fx__no_such_tool", "echo"] {
        let answer = call(&run, unknown);
        assert_eq!(answer["error"]["code"], -32602, "{unknown}: {answer}");
    }

    // Every call is in the history, newest first, with its outcome.
    let history = gw.get("/api/mcp_servers/fx/tools/history").json();
    let entries = history["history"].as_array().unwrap();
    let tools: Vec<&str> = entries
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["sleep", "add", "echo"], "{history}");
    assert!(entries.iter().all(|e| e["success"] == true));
    let other = gw.get("/api/mcp_servers/other/tools/history").json();
    assert_eq!(other["history"][0]["tool"], "fail");
    assert_eq!(other["history"][0]["is_error"], true);
}

#[test]
fn the_python_sdk_lists_and_calls_tools_in_the_2025_era() {
    exercise("2025-11-25");
}

#[test]
fn the_python_sdk_lists_and_calls_tools_in_the_2026_era() {
    exercise("2026-07-28");
}

/// A raw `DELETE /mcp`: its status and body.
fn delete_session(url: &str, session: &str) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let mut response = agent
        .delete(url)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .call()
        .expect("the gateway answers DELETE");
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    (status, body)
}

/// `initialize` over raw HTTP in the 2025 era; answers the session id the gateway gave.
fn open_session(url: &str) -> String {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let response = agent
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .send_json(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "mcpgw-e2e-raw", "version": "0"},
            },
        }))
        .expect("the gateway answers initialize");
    assert_eq!(response.status().as_u16(), 200);
    response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .expect("initialize answers a session id")
        .to_owned()
}

#[test]
fn delete_ends_a_live_session_with_204_and_answers_404_for_one_that_does_not_exist() {
    let gw = gateway().config(&two_fixtures()).start();
    let url = gw.url("/mcp");
    let session = open_session(&url);

    let (status, body) = delete_session(&url, &session);
    assert_eq!(status, 204, "a live session ends: {body}");
    assert!(body.is_empty(), "204 has no body: {body:?}");
    // Ended: the id is unknown from now on, for DELETE as for everything else.
    let (status, _) = delete_session(&url, &session);
    assert_eq!(status, 404, "a second DELETE of the same session");
    let (status, _) = delete_session(&url, "no-such-session");
    assert_eq!(status, 404, "a session that never existed");
    let after = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send_json(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .expect("the gateway answers");
    assert_eq!(
        after.status().as_u16(),
        404,
        "the ended session serves nothing"
    );
}

#[test]
fn cold_servers_are_listed_from_their_predefined_tools_and_started_by_the_first_call() {
    let fixture = fixture_binary().display().to_string();
    let config = format!(
        "mcp_servers:\n  lazy:\n    mode: subprocess\n    command: [\"{fixture}\"]\n    tools:\n      - {{name: echo, description: declared, inputSchema: {{type: object}}}}\n"
    );
    let gw = gateway().config(&config).start();
    let listed = run_python_client(
        "http_client.py",
        &args(&[&gw.url("/mcp"), "--protocol", "2025-11-25"]),
    );
    assert_eq!(listed["tools"], json!(["lazy__echo"]));
    assert_eq!(
        gw.get("/api/mcp_servers/lazy").json()["state"],
        "cold",
        "listing starts nothing"
    );

    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            "--no-list",
            "--call",
            "lazy__echo",
            r#"{"text": "wake up"}"#,
        ]),
    );
    assert_eq!(text_of(call(&run, "lazy__echo")), "wake up");
    assert_eq!(gw.get("/api/mcp_servers/lazy").json()["state"], "ready");
}

#[test]
fn a_cancelled_call_is_cancelled_upstream() {
    let gw = gateway().config(&two_fixtures()).start();
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            "--call-spec",
            r#"{"name": "fx__sleep", "arguments": {"ms": 20000}, "cancel_after_ms": 300}"#,
            "--call",
            "fx__echo",
            r#"{"text": "still here"}"#,
        ]),
    );
    let cancelled = call(&run, "fx__sleep");
    assert_eq!(cancelled["ended_promptly"], true, "{cancelled}");
    assert_eq!(text_of(call(&run, "fx__echo")), "still here");
    wait_until_the_fixture_saw_a_cancel(&gw, "fx");
}

#[test]
fn a_crash_mid_call_fails_that_call_and_the_gateway_keeps_serving() {
    let gw = gateway().config(&two_fixtures()).start();
    let started = Instant::now();
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            "--call",
            "fx__crash",
            r#"{"code": 3}"#,
            "--call",
            "other__echo",
            r#"{"text": "unaffected"}"#,
        ]),
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let crashed = call(&run, "fx__crash");
    assert!(
        crashed["error"].is_object() || crashed["is_error"] == true,
        "{crashed}"
    );
    assert_eq!(text_of(call(&run, "other__echo")), "unaffected");
    gw.wait_for("/api/mcp_servers/fx/health", Duration::from_secs(10), |h| {
        h["state"] == "dead"
    });
}

#[test]
fn a_hung_upstream_is_cut_off_by_the_timeout() {
    let config = format!("tool_timeout_s: 2\n{}", two_fixtures());
    let gw = gateway().config(&config).start();
    let started = Instant::now();
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            "--call",
            "fx__sleep",
            r#"{"ms": 60000}"#,
            "--call",
            "fx__echo",
            r#"{"text": "after the timeout"}"#,
        ]),
    );
    let elapsed = started.elapsed();
    let timed_out = call(&run, "fx__sleep");
    assert_eq!(timed_out["error"]["code"], -32001, "{timed_out}");
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    assert_eq!(text_of(call(&run, "fx__echo")), "after the timeout");
    // The upstream request was cancelled, not left running.
    wait_until_the_fixture_saw_a_cancel(&gw, "fx");
    let history = gw.get("/api/mcp_servers/fx/tools/history").json();
    let failed = history["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["tool"] == "sleep")
        .unwrap()
        .clone();
    assert_eq!(failed["success"], false);
    assert_eq!(failed["error_kind"], "timeout");
}

#[test]
fn clients_are_told_when_the_tool_list_changes() {
    let gw = gateway().config(&two_fixtures()).start();
    let ready = gw.data_dir.path().join("listening");
    let client = spawn_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            "--list-changed-wait",
            "20",
            "--list-changed-count",
            "1",
            "--ready-file",
            ready.to_str().unwrap(),
        ]),
    );
    wait_for_file(&ready, Duration::from_secs(20));
    let fixture = fixture_binary().display().to_string();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "late", "mode": "subprocess", "command": [fixture],
                "tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let run = client.wait();
    assert_eq!(run["list_changed"], 1, "{run}");
    let after: Vec<&str> = run["tools_after_list_changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(after.contains(&"late__hello"), "{after:?}");
}

#[test]
fn stdio_mode_serves_the_same_tools_to_a_stdio_client() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.yaml");
    std::fs::write(&config, two_fixtures()).unwrap();
    let gateway_binary = support::gateway_binary().display().to_string();
    let data_dir = dir.path().join("data");
    let run = run_python_client(
        "stdio_client.py",
        &args(&[
            "--call",
            "fx__echo",
            r#"{"text": "over stdio"}"#,
            "--call-spec",
            r#"{"name": "other__sleep", "arguments": {"ms": 200}, "progress": true}"#,
            "--",
            &gateway_binary,
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data_dir.to_str().unwrap(),
        ]),
    );
    let tools: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"fx__echo") && tools.contains(&"other__add"),
        "{tools:?}"
    );
    assert_eq!(text_of(call(&run, "fx__echo")), "over stdio");
    assert!(
        !call(&run, "other__sleep")["progress"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn server_everything_works_as_a_stdio_upstream() {
    let command: Vec<String> = server_everything_command();
    let config = format!(
        "mcp_servers:\n  everything:\n    mode: subprocess\n    command: {}\n",
        serde_json::to_string(&command).unwrap()
    );
    let gw = gateway().config(&config).start();
    assert_eq!(
        gw.post_empty("/api/mcp_servers/everything/start").status,
        200
    );
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            "--call",
            "everything__echo",
            r#"{"message": "hi everything"}"#,
            "--call-spec",
            r#"{"name": "everything__trigger-long-running-operation", "arguments": {"duration": 2, "steps": 4}, "progress": true}"#,
            "--call-spec",
            r#"{"name": "everything__trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30}, "cancel_after_ms": 500}"#,
        ]),
    );
    let tools: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"everything__echo"), "{tools:?}");
    assert!(
        text_of(call(&run, "everything__echo")).contains("hi everything"),
        "{run}"
    );
    let calls = run["calls"].as_array().unwrap();
    let progressed = &calls[1];
    assert!(
        progressed["progress"].as_array().unwrap().len() >= 3,
        "{progressed}"
    );
    let cancelled = &calls[2];
    assert_eq!(cancelled["ended_promptly"], true, "{cancelled}");
}

#[test]
fn server_everything_works_as_a_remote_upstream() {
    let upstream = start_server_everything_http();
    let config = format!(
        "mcp_servers:\n  remote:\n    mode: remote\n    endpoint: \"{}\"\n",
        upstream.url
    );
    let gw = gateway().config(&config).start();
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2026-07-28",
            "--no-list",
            "--call",
            "remote__echo",
            r#"{"message": "over http twice"}"#,
            "--call-spec",
            r#"{"name": "remote__trigger-long-running-operation", "arguments": {"duration": 2, "steps": 4}, "progress": true}"#,
            "--call-spec",
            r#"{"name": "remote__trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30}, "cancel_after_ms": 500}"#,
        ]),
    );
    assert!(
        text_of(call(&run, "remote__echo")).contains("over http twice"),
        "{run}"
    );
    let calls = run["calls"].as_array().unwrap();
    assert!(
        calls[1]["progress"].as_array().unwrap().len() >= 3,
        "{}",
        calls[1]
    );
    assert_eq!(calls[2]["ended_promptly"], true, "{}", calls[2]);
    let details = gw.get("/api/mcp_servers/remote").json();
    assert_eq!(details["state"], "ready");
    assert_eq!(details["mode"], "remote");
    let logs = gw.get("/api/mcp_servers/remote/logs").json();
    assert_eq!(logs["logs"], json!([]), "remote servers have no log buffer");
}

/// `completion/complete` reaches the server that owns the prompt or the resource template, by
/// the names the gateway lists them under, with the prompt's name turned back into the
/// server's own.
#[test]
fn completions_are_answered_by_the_owner_of_the_prompt_or_template() {
    let gw = gateway().config(&two_fixtures()).start();
    let complete = |reference: Value, argument: &str, value: &str| {
        gw.mcp_request(
            "completion/complete",
            json!({"ref": reference, "argument": {"name": argument, "value": value}}),
        )
    };
    // The prompt's owner is not running yet: the namespaced name starts it.
    let answer = complete(
        json!({"type": "ref/prompt", "name": "fx__greeting"}),
        "name",
        "Gr",
    );
    assert_eq!(
        answer["result"]["completion"]["values"],
        json!(["Grace"]),
        "{answer}"
    );
    let answer = complete(
        json!({"type": "ref/resource", "uri": "fixture://echo/{text}"}),
        "text",
        "he",
    );
    assert_eq!(
        answer["result"]["completion"]["values"],
        json!(["hello", "help"]),
        "{answer}"
    );
    // Bad input: a prompt nobody lists and a template nobody lists; each is a JSON-RPC error
    // that names it, never an empty answer that hides the mistake.
    for (reference, named) in [
        (
            json!({"type": "ref/prompt", "name": "fx__no_such_prompt"}),
            "no_such_prompt",
        ),
        (
            json!({"type": "ref/resource", "uri": "nowhere://{x}"}),
            "nowhere://{x}",
        ),
    ] {
        let answer = complete(reference.clone(), "name", "");
        let error = &answer["error"];
        assert!(error["code"].as_i64().is_some(), "{reference}: {answer}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(named),
            "{reference}: {answer}"
        );
    }
}

/// A 2025-era client subscribes to a resource through the gateway and gets the owner's
/// `notifications/resources/updated` on its session, with the official Python SDK.
#[test]
fn a_subscribed_client_hears_of_the_owners_resource_updates() {
    let gw = gateway().config(&two_fixtures()).start();
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2025-11-25",
            // The call starts the owner, whose resources are then known.
            "--call",
            "fx__echo",
            r#"{"text": "start"}"#,
            "--subscribe",
            "fixture://readme",
        ]),
    );
    let subscription = &run["subscription"];
    assert_eq!(subscription["error"], Value::Null, "{run}");
    assert_eq!(
        subscription["updates"],
        json!(["fixture://readme"]),
        "{run}"
    );
    assert_eq!(
        run["server_capabilities"]["resources"]["subscribe"], true,
        "{run}"
    );
}

/// A 2026-07-28 client names the resource on its `subscriptions/listen` stream and gets the
/// owner's updates there, with the official Python SDK.
#[test]
fn a_listening_client_hears_of_the_owners_resource_updates() {
    let gw = gateway().config(&two_fixtures()).start();
    let run = run_python_client(
        "http_client.py",
        &args(&[
            &gw.url("/mcp"),
            "--protocol",
            "2026-07-28",
            "--no-list",
            // The call starts the owner, whose resources are then known.
            "--call",
            "fx__echo",
            r#"{"text": "start"}"#,
            "--listen-resource",
            "fixture://readme",
            "--list-changed-wait",
            "10",
            "--list-changed-count",
            "1",
        ]),
    );
    let listener = &run["list_changed_listener"];
    assert_eq!(listener["events"], json!(["ResourceUpdated"]), "{run}");
    assert_eq!(
        listener["honored"]["resourceSubscriptions"],
        json!(["fixture://readme"]),
        "{run}"
    );
    assert_eq!(
        run["discover"]["capabilities"]["resources"]["subscribe"], true,
        "{run}"
    );
}
