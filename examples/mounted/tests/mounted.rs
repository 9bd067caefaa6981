//! The example application with the gateway mounted: its own route answers as before, and the
//! gateway's routes keep every check they have in the bundled server.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::test as actix_test;
use mcpgw_example_mounted::{application, build_gateway};
use mcpgw_server::config::GatewayConfig;
use mcpgw_server::gateway::CreateKeyRequest;
use serde_json::{Value, json};

const HOST: &str = "127.0.0.1:8080";

/// The gateway with authentication on, an admin key for it, and the application around it.
async fn start() -> (mcpgw_server::RunningGateway, String, tempfile::TempDir) {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = GatewayConfig::default();
    config.auth.enabled = true;
    let gateway = build_gateway(config, data_dir.path()).await.unwrap();
    let issued = gateway
        .auth()
        .create_key(CreateKeyRequest {
            principal: "user:ops".to_owned(),
            name: "example".to_owned(),
            role: Some("admin".to_owned()),
            expires_in_days: None,
        })
        .await
        .unwrap();
    (gateway, issued.raw_key.expose().to_owned(), data_dir)
}

async fn body_json(
    response: actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
) -> Value {
    let bytes = actix_test::read_body(response).await;
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&bytes)))
}

#[actix_web::test]
async fn the_applications_own_route_answers_without_the_gateways_credentials() {
    let (gateway, _key, _data) = start().await;
    let app = actix_test::init_service(application(
        gateway.http_state(HOST.parse().unwrap()).unwrap(),
    ))
    .await;
    let response = actix_test::call_service(
        &app,
        actix_test::TestRequest::get()
            .uri("/hello")
            .insert_header(("Host", HOST))
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        actix_test::read_body(response).await,
        "hello from the application"
    );
    gateway.shutdown().await;
}

#[actix_web::test]
async fn the_mounted_api_demands_a_key_and_serves_the_holder_of_one() {
    let (gateway, key, _data) = start().await;
    let app = actix_test::init_service(application(
        gateway.http_state(HOST.parse().unwrap()).unwrap(),
    ))
    .await;
    // No credential: the gateway's envelope, 401 with its challenge.
    let anonymous = actix_test::call_service(
        &app,
        actix_test::TestRequest::get()
            .uri("/api/mcp_servers")
            .insert_header(("Host", HOST))
            .to_request(),
    )
    .await;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert!(anonymous.headers().contains_key("www-authenticate"));
    assert_eq!(body_json(anonymous).await["error"], "AuthenticationError");

    let listed = actix_test::call_service(
        &app,
        actix_test::TestRequest::get()
            .uri("/api/mcp_servers")
            .insert_header(("Host", HOST))
            .insert_header(("X-API-Key", key.as_str()))
            .to_request(),
    )
    .await;
    assert_eq!(listed.status(), StatusCode::OK);
    assert_eq!(body_json(listed).await, json!({"mcp_servers": []}));

    // An unknown path inside the gateway's part answers its envelope 404.
    let unknown = actix_test::call_service(
        &app,
        actix_test::TestRequest::get()
            .uri("/api/nothing-here")
            .insert_header(("Host", HOST))
            .insert_header(("X-API-Key", key.as_str()))
            .to_request(),
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_json(unknown).await["status_code"], 404);
    gateway.shutdown().await;
}

#[actix_web::test]
async fn the_mounted_gateway_refuses_foreign_pages_and_foreign_host_names() {
    let (gateway, key, _data) = start().await;
    let app = actix_test::init_service(application(
        gateway.http_state(HOST.parse().unwrap()).unwrap(),
    ))
    .await;
    // Bad input: a create from a page on another site, with a valid key.
    let foreign_origin = actix_test::call_service(
        &app,
        actix_test::TestRequest::post()
            .uri("/api/mcp_servers")
            .insert_header(("Host", HOST))
            .insert_header(("Origin", "https://evil.example"))
            .insert_header(("X-API-Key", key.as_str()))
            .set_json(json!({"mcp_server_id": "x", "mode": "subprocess", "command": ["true"]}))
            .to_request(),
    )
    .await;
    assert_eq!(foreign_origin.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        body_json(foreign_origin).await["error"],
        "ForbiddenOriginError"
    );

    // Bad input: a name that is not the application's (DNS rebinding).
    let rebound = actix_test::call_service(
        &app,
        actix_test::TestRequest::get()
            .uri("/api/mcp_servers")
            .insert_header(("Host", "evil.example"))
            .insert_header(("X-API-Key", key.as_str()))
            .to_request(),
    )
    .await;
    assert!(
        matches!(rebound.status().as_u16(), 403 | 421),
        "{}",
        rebound.status()
    );

    // Bad input: a body that is not declared JSON.
    let form = actix_test::call_service(
        &app,
        actix_test::TestRequest::post()
            .uri("/api/mcp_servers")
            .insert_header(("Host", HOST))
            .insert_header(("X-API-Key", key.as_str()))
            .insert_header(("Content-Type", "text/plain"))
            .set_payload(r#"{"mcp_server_id":"x","mode":"subprocess","command":["true"]}"#)
            .to_request(),
    )
    .await;
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(gateway.gateway().servers().list(None).is_empty());
    gateway.shutdown().await;
}

#[actix_web::test]
async fn the_mounted_mcp_endpoint_opens_a_session_for_the_holder_of_a_key() {
    let (gateway, key, _data) = start().await;
    let app = actix_test::init_service(application(
        gateway.http_state(HOST.parse().unwrap()).unwrap(),
    ))
    .await;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mounted-example", "version": "0"},
        },
    });
    let anonymous = actix_test::call_service(
        &app,
        actix_test::TestRequest::post()
            .uri("/mcp")
            .insert_header(("Host", HOST))
            .insert_header(("Accept", "application/json, text/event-stream"))
            .set_json(&initialize)
            .to_request(),
    )
    .await;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);

    let opened = actix_test::call_service(
        &app,
        actix_test::TestRequest::post()
            .uri("/mcp")
            .insert_header(("Host", HOST))
            .insert_header(("Accept", "application/json, text/event-stream"))
            .insert_header(("X-API-Key", key.as_str()))
            .set_json(&initialize)
            .to_request(),
    )
    .await;
    assert_eq!(opened.status(), StatusCode::OK);
    assert!(opened.headers().contains_key("mcp-session-id"));
    let body = tokio::time::timeout(Duration::from_secs(10), actix_test::read_body(opened))
        .await
        .expect("the initialize answer ends");
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("\"protocolVersion\""), "{text}");
    gateway.shutdown().await;
}
