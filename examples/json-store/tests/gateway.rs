//! The bundled gateway with its servers kept by the JSON file repository: a server created over
//! the REST API lands in the file, comes back after a restart, and leaves the file when deleted.

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::test as actix_test;
use mcpgw_example_json_store::JsonFileRepository;
use mcpgw_server::{GatewayBuilder, RunningGateway};
use serde_json::{Value, json};

const HOST: &str = "127.0.0.1:8000";

async fn start(data: &std::path::Path) -> RunningGateway {
    GatewayBuilder::new(Default::default())
        .data_dir(data.join("data"))
        .environment(Arc::new(|_| None))
        .with_server_repository(Arc::new(JsonFileRepository::new(data.join("servers.json"))))
        .build()
        .await
        .unwrap()
}

/// Sends `request` through the gateway's whole HTTP stack.
async fn send(running: &RunningGateway, request: actix_test::TestRequest) -> StatusCode {
    let app = actix_test::init_service(mcpgw_server::http::app(
        running.http_state(HOST.parse().unwrap()).unwrap(),
    ))
    .await;
    let request = request.insert_header(("Host", HOST)).to_request();
    actix_test::call_service(&app, request).await.status()
}

fn file(data: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(data.join("servers.json")).unwrap()).unwrap()
}

#[actix_web::test]
async fn servers_created_over_the_api_live_in_the_json_file_across_restarts() {
    let data = tempfile::tempdir().unwrap();
    let running = start(data.path()).await;
    let created = send(
        &running,
        actix_test::TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(json!({
                "mcp_server_id": "notes",
                "mode": "subprocess",
                "command": ["notes-server", "--quiet"],
                "env": {"NOTES_DIR": "/srv/notes"},
                "idle_ttl_s": 120,
            })),
    )
    .await;
    assert_eq!(created, StatusCode::CREATED);
    running.shutdown().await;

    let kept = file(data.path());
    assert_eq!(kept[0]["id"], "notes");
    assert_eq!(
        kept[0]["launch"]["command"],
        json!(["notes-server", "--quiet"])
    );
    assert_eq!(kept[0]["launch"]["env"], json!({"NOTES_DIR": "/srv/notes"}));
    assert_eq!(kept[0]["idle_ttl"], json!({"secs": 120, "nanos": 0}));
    // The SQLite store still keeps what this example did not replace, but not the servers.
    assert!(data.path().join("data/mcpgw.db").is_file());

    let again = start(data.path()).await;
    let listed: Vec<String> = again
        .gateway()
        .servers()
        .list(None)
        .iter()
        .map(|server| server.spec.id.to_string())
        .collect();
    assert_eq!(listed, ["notes"]);
    let deleted = send(
        &again,
        actix_test::TestRequest::delete().uri("/api/mcp_servers/notes"),
    )
    .await;
    assert!(deleted.is_success(), "{deleted}");
    again.shutdown().await;
    assert_eq!(file(data.path()), json!([]));
}

#[tokio::test]
async fn a_file_that_is_not_the_serde_form_stops_the_start_with_its_path() {
    let data = tempfile::tempdir().unwrap();
    // Bad input: a file of another shape.
    std::fs::write(data.path().join("servers.json"), r#"{"servers": "none"}"#).unwrap();
    let error = GatewayBuilder::new(Default::default())
        .data_dir(data.path().join("data"))
        .environment(Arc::new(|_| None))
        .with_server_repository(Arc::new(JsonFileRepository::new(
            data.path().join("servers.json"),
        )))
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("servers.json"), "{error}");
}
