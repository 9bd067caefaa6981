//! The `in_process` mode registered from outside the gateway's crates, used the way an operator
//! would: declared in the configuration file and called through `/mcp`, created and refused
//! over the REST API with the mode's own messages, kept by the store across restarts.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::test as actix_test;
use mcpgw_server::{GatewayBuilder, RunningGateway};
use serde_json::{Value, json};

const HOST: &str = "127.0.0.1:8000";

const CONFIG: &str = "\
mcp_servers:
  greeter:
    mode: in_process
    settings:
      greeting: Hello
      repeat: 2
";

fn builder(data: &Path) -> GatewayBuilder {
    GatewayBuilder::new(Default::default())
        .data_dir(data.join("data"))
        .environment(Arc::new(|_| None))
}

async fn start_with_mode(data: &Path, config: Option<&str>) -> RunningGateway {
    let mut builder = mcpgw_example_in_process::register(builder(data));
    if let Some(config) = config {
        let file = data.join("gateway.yaml");
        std::fs::write(&file, config).unwrap();
        builder = builder.read_config_file(&file).unwrap();
    }
    builder.build().await.unwrap()
}

/// Sends `request` through the gateway's whole HTTP stack; the status and the JSON body.
async fn send(running: &RunningGateway, request: actix_test::TestRequest) -> (StatusCode, Value) {
    let app = actix_test::init_service(mcpgw_server::http::app(
        running.http_state(HOST.parse().unwrap()).unwrap(),
    ))
    .await;
    let response =
        actix_test::call_service(&app, request.insert_header(("Host", HOST)).to_request()).await;
    let status = response.status();
    let body = tokio::time::timeout(Duration::from_secs(10), actix_test::read_body(response))
        .await
        .expect("the answer ends");
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// A `tools/call` in the stateless protocol era: one request, no session.
fn tool_call(tool: &str, arguments: Value) -> actix_test::TestRequest {
    actix_test::TestRequest::post()
        .uri("/mcp")
        .insert_header(("Accept", "application/json, text/event-stream"))
        .insert_header(("Mcp-Protocol-Version", "2026-07-28"))
        .insert_header(("Mcp-Method", "tools/call"))
        .insert_header(("Mcp-Name", tool))
        .set_json(json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "example", "version": "0"},
            }},
        }))
}

fn create(body: Value) -> actix_test::TestRequest {
    actix_test::TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(body)
}

#[actix_web::test]
async fn a_server_in_the_registered_mode_is_called_through_mcp() {
    let data = tempfile::tempdir().unwrap();
    let running = start_with_mode(data.path(), Some(CONFIG)).await;
    let (status, answer) = send(
        &running,
        tool_call("greeter__greet", json!({"name": "Ada"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "Hello, Ada! Hello, Ada!",
        "{answer}"
    );
    // The call started the greeter lazily, like any server; its log has its start line.
    let (status, details) = send(
        &running,
        actix_test::TestRequest::get().uri("/api/mcp_servers/greeter"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(details["state"], "ready", "{details}");
    assert_eq!(details["mode"], "in_process");
    assert_eq!(
        details["settings"],
        json!({"greeting": "Hello", "repeat": 2})
    );
    let (_, logs) = send(
        &running,
        actix_test::TestRequest::get().uri("/api/mcp_servers/greeter/logs"),
    )
    .await;
    assert!(
        logs.to_string().contains("greeter greeter greets with"),
        "{logs}"
    );
    // Bad input: a call without the tool's argument is the tool's own error, not a failure.
    let (_, answer) = send(&running, tool_call("greeter__greet", json!({}))).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    running.shutdown().await;
}

#[actix_web::test]
async fn the_mode_checks_settings_in_the_file_and_over_rest() {
    let data = tempfile::tempdir().unwrap();
    // Bad input: a file whose greeter repeats too often; the error names the file, the line
    // and the key.
    let file = data.path().join("gateway.yaml");
    std::fs::write(&file, CONFIG.replace("repeat: 2", "repeat: 9")).unwrap();
    let refused = mcpgw_example_in_process::register(builder(data.path()))
        .read_config_file(&file)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("gateway.yaml:6"), "{refused}");
    assert!(
        refused.contains("mcp_servers.greeter.settings.repeat"),
        "{refused}"
    );
    assert!(refused.contains("from 1 to 5, got 9"), "{refused}");
    // The same file without the mode registered: the mode itself is unknown.
    let unregistered = builder(data.path())
        .read_config_file(&file)
        .unwrap_err()
        .to_string();
    assert!(
        unregistered.contains("unknown value `in_process`"),
        "{unregistered}"
    );

    let running = start_with_mode(data.path(), None).await;
    // Bad input over REST: a setting the mode does not know, and settings left out.
    let (status, error) = send(
        &running,
        create(json!({"mcp_server_id": "g", "mode": "in_process",
                      "settings": {"greeting": "Hi", "volume": 11}})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(error["error"], "ValidationError");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("settings.volume"), "{message}");
    assert!(message.contains("unknown setting"), "{message}");
    let (status, error) = send(
        &running,
        create(json!({"mcp_server_id": "g", "mode": "in_process"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("missing key `greeting`"),
        "{error}"
    );
    // A good body is created, and its settings are listed with the mode.
    let (status, created) = send(
        &running,
        create(json!({"mcp_server_id": "g", "mode": "in_process",
                      "settings": {"greeting": "Hi"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (_, listed) = send(
        &running,
        actix_test::TestRequest::get().uri("/api/mcp_servers"),
    )
    .await;
    assert_eq!(listed["mcp_servers"][0]["mode"], "in_process", "{listed}");
    let (_, answer) = send(&running, tool_call("g__greet", json!({"name": "Grace"}))).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "Hi, Grace!",
        "{answer}"
    );
    // The OpenAPI document describes bodies in the registered mode.
    let (_, document) = send(
        &running,
        actix_test::TestRequest::get().uri("/api/openapi.json"),
    )
    .await;
    let variants = document["components"]["schemas"]["CreateServerRequest"]["anyOf"]
        .as_array()
        .unwrap();
    assert!(
        variants
            .iter()
            .any(|variant| variant["title"] == "in_process")
    );
    running.shutdown().await;
}

#[actix_web::test]
async fn a_stored_definition_outlives_its_mode_and_is_refused_only_at_start() {
    let data = tempfile::tempdir().unwrap();
    let running = start_with_mode(data.path(), None).await;
    let (status, _) = send(
        &running,
        create(json!({"mcp_server_id": "kept", "mode": "in_process",
                      "settings": {"greeting": "Salut", "repeat": 3}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    running.shutdown().await;

    // Back with the mode: the definition came back from the store whole.
    let again = start_with_mode(data.path(), None).await;
    let (_, answer) = send(&again, tool_call("kept__greet", json!({"name": "Lin"}))).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "Salut, Lin! Salut, Lin! Salut, Lin!",
        "{answer}"
    );
    again.shutdown().await;

    // Back without the mode: the server is still listed (nothing is lost), and starting it
    // says which mode is missing.
    let bundled = builder(data.path()).build().await.unwrap();
    let (_, details) = send(
        &bundled,
        actix_test::TestRequest::get().uri("/api/mcp_servers/kept"),
    )
    .await;
    assert_eq!(details["mode"], "in_process", "{details}");
    let (status, refused) = send(
        &bundled,
        actix_test::TestRequest::post().uri("/api/mcp_servers/kept/start"),
    )
    .await;
    assert!(
        status.is_client_error() || status.is_server_error(),
        "{status}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("mode `in_process` is not supported"),
        "{refused}"
    );
    bundled.shutdown().await;
}

#[actix_web::test]
async fn a_discovered_definition_may_name_the_registered_mode() {
    let data = tempfile::tempdir().unwrap();
    let offered = data.path().join("offered");
    std::fs::create_dir(&offered).unwrap();
    std::fs::write(
        offered.join("welcome.yaml"),
        "mode: in_process\nsettings: {greeting: Welcome}\n",
    )
    .unwrap();
    // Bad input from a source: settings the mode refuses, quarantined with the mode's reason.
    std::fs::write(
        offered.join("broken.yaml"),
        "mode: in_process\nsettings: {greeting: 5}\n",
    )
    .unwrap();
    let config = format!(
        "discovery:\n  sources:\n    - {{id: shelf, type: filesystem, config: {{path: {}}}}}\n",
        offered.display()
    );
    let running = start_with_mode(data.path(), Some(&config)).await;
    let discovery = running
        .gateway()
        .discovery()
        .expect("discovery is on")
        .clone();
    let report = discovery.scan("shelf").await.unwrap();
    assert_eq!(
        (report.found, report.pending, report.quarantined),
        (2, 1, 1)
    );
    let quarantined = discovery.quarantined();
    assert!(
        quarantined[0].reason.contains("must be a string"),
        "{quarantined:?}"
    );
    discovery.approve("welcome").await.unwrap();
    let (_, answer) = send(
        &running,
        tool_call("welcome__greet", json!({"name": "Kay"})),
    )
    .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "Welcome, Kay!",
        "{answer}"
    );
    running.shutdown().await;
}
