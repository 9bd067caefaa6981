//! Every error answers the envelope: bad bodies, unknown ids, unknown routes, wrong methods and
//! oversized bodies, including the errors actix itself would otherwise answer in its own way.

use actix_web::test::{self, TestRequest};
use mcpgw_http_actix::HttpSettings;
use serde_json::json;

use crate::support::{assert_envelope, harness, harness_with};

/// Posts `body` (raw text) to the collection and returns the 422 envelope's message.
async fn create_message(body: &str) -> String {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .insert_header(("content-type", "application/json"))
        .set_payload(body.to_owned())
        .to_request();
    let response = test::call_service(&app, request).await;
    let message = assert_envelope(response, 422, "ValidationError").await;
    assert!(
        harness.gateway.servers().is_empty(),
        "a refused body registered something: {body}"
    );
    message
}

#[actix_web::test]
async fn malformed_json_answers_422_naming_the_position() {
    // An unterminated object.
    let message = create_message("{").await;
    assert!(
        message.contains("not valid JSON") && message.contains("line 1 column 1"),
        "{message}"
    );
    // Trailing garbage after a valid object.
    let message = create_message(r#"{"mcp_server_id": "a"} x"#).await;
    assert!(
        message.contains("not valid JSON") && message.contains("column"),
        "{message}"
    );
}

#[actix_web::test]
async fn an_empty_body_answers_422() {
    let message = create_message("").await;
    assert!(message.contains("empty"), "{message}");
    let message = create_message("  \n").await;
    assert!(message.contains("empty"), "{message}");
}

#[actix_web::test]
async fn bodies_that_are_not_objects_answer_422_naming_what_they_are() {
    for (body, what) in [
        ("[]", "an array"),
        ("\"math\"", "a string"),
        ("42", "a number"),
        ("null", "null"),
    ] {
        let message = create_message(body).await;
        assert!(
            message.contains("must be a JSON object") && message.contains(what),
            "{message}"
        );
    }
}

#[actix_web::test]
async fn a_missing_or_mistyped_id_answers_422_naming_the_field() {
    // No `mcp_server_id` at all.
    let message = create_message(r#"{"mode": "subprocess", "command": ["a"]}"#).await;
    assert!(
        message.starts_with("mcp_server_id: is required"),
        "{message}"
    );
    // A number where the id belongs.
    let message = create_message(r#"{"mcp_server_id": 5, "mode": "subprocess"}"#).await;
    assert!(
        message.starts_with("mcp_server_id: must be a string"),
        "{message}"
    );
}

#[actix_web::test]
async fn an_invalid_id_answers_422_on_create() {
    // A space, a double underscore, 65 characters, empty.
    let long = "x".repeat(65);
    for bad in ["a b", "a__b", long.as_str(), ""] {
        let body = json!({"mcp_server_id": bad, "mode": "subprocess", "command": ["a"]});
        let message = create_message(&body.to_string()).await;
        assert!(message.starts_with("mcp_server_id: "), "{bad:?}: {message}");
    }
}

#[actix_web::test]
async fn wrong_field_types_answer_422_naming_the_field() {
    // A string where seconds belong.
    let message = create_message(
        r#"{"mcp_server_id": "m", "mode": "subprocess", "command": ["a"], "idle_ttl_s": "x"}"#,
    )
    .await;
    assert!(message.contains("idle_ttl_s"), "{message}");
    // A string where the command list belongs.
    let message =
        create_message(r#"{"mcp_server_id": "m", "mode": "subprocess", "command": 7}"#).await;
    assert!(message.contains("command"), "{message}");
}

#[actix_web::test]
async fn out_of_range_values_answer_422_naming_the_field() {
    // idle_ttl_s must be 1..86400.
    let message = create_message(
        r#"{"mcp_server_id": "m", "mode": "subprocess", "command": ["a"], "idle_ttl_s": 0}"#,
    )
    .await;
    assert!(message.contains("idle_ttl_s"), "{message}");
    // max_consecutive_failures must be 1..100.
    let message = create_message(
        r#"{"mcp_server_id": "m", "mode": "subprocess", "command": ["a"], "max_consecutive_failures": 1000}"#,
    )
    .await;
    assert!(message.contains("max_consecutive_failures"), "{message}");
}

#[actix_web::test]
async fn unknown_keys_and_missing_mode_fields_answer_422() {
    // A misspelt key.
    let message =
        create_message(r#"{"mcp_server_id": "m", "mode": "subprocess", "comand": ["a"]}"#).await;
    assert!(message.contains("comand"), "{message}");
    // subprocess without a command.
    let message = create_message(r#"{"mcp_server_id": "m", "mode": "subprocess"}"#).await;
    assert!(message.contains("command"), "{message}");
    // No mode at all.
    let message = create_message(r#"{"mcp_server_id": "m", "command": ["a"]}"#).await;
    assert!(message.contains("mode"), "{message}");
}

#[actix_web::test]
async fn mode_group_answers_422_pointing_at_the_groups_api() {
    let message = create_message(
        r#"{"mcp_server_id": "pool", "mode": "group", "members": [{"id": "a", "weight": 1}]}"#,
    )
    .await;
    assert!(message.contains("/api/groups"), "{message}");
}

#[actix_web::test]
async fn put_bodies_are_validated_like_create_bodies() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let create = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(json!({"mcp_server_id": "p", "mode": "subprocess", "command": ["a"]}))
        .to_request();
    assert_eq!(test::call_service(&app, create).await.status(), 201);
    // Malformed JSON, an array, a mistyped field, mode group.
    for body in [
        "{",
        "[]",
        r#"{"mode": "subprocess", "command": ["a"], "idle_ttl_s": "x"}"#,
        r#"{"mode": "group", "members": []}"#,
    ] {
        let put = TestRequest::put()
            .uri("/api/mcp_servers/p")
            .insert_header(("content-type", "application/json"))
            .set_payload(body.to_owned())
            .to_request();
        assert_envelope(test::call_service(&app, put).await, 422, "ValidationError").await;
    }
}

#[actix_web::test]
async fn every_id_route_answers_404_for_an_unknown_or_impossible_id() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let valid_body = json!({"mode": "subprocess", "command": ["a"]});
    // Unknown but valid, a double underscore, 65 characters, an encoded space.
    let long = "y".repeat(65);
    for id in ["nobody", "a__b", long.as_str(), "a%20b"] {
        let routes = [
            ("GET", format!("/api/mcp_servers/{id}")),
            ("PUT", format!("/api/mcp_servers/{id}")),
            ("DELETE", format!("/api/mcp_servers/{id}")),
            ("POST", format!("/api/mcp_servers/{id}/start")),
            ("POST", format!("/api/mcp_servers/{id}/stop")),
            ("GET", format!("/api/mcp_servers/{id}/tools")),
            ("GET", format!("/api/mcp_servers/{id}/tools/history")),
            // Bad paging on an unknown server is still first of all an unknown server.
            (
                "GET",
                format!("/api/mcp_servers/{id}/tools/history?limit=0"),
            ),
            ("GET", format!("/api/mcp_servers/{id}/health")),
            ("GET", format!("/api/mcp_servers/{id}/logs")),
            // Bad `lines` on an unknown server is still first of all an unknown server.
            ("GET", format!("/api/mcp_servers/{id}/logs?lines=abc")),
        ];
        for (method, uri) in routes {
            let request = match method {
                "GET" => TestRequest::get(),
                "PUT" => TestRequest::put().set_json(&valid_body),
                "DELETE" => TestRequest::delete(),
                _ => TestRequest::post(),
            }
            .uri(&uri)
            .to_request();
            let response = test::call_service(&app, request).await;
            let message = assert_envelope(response, 404, "McpServerNotFoundError").await;
            assert!(
                message.contains("is not registered"),
                "{method} {uri}: {message}"
            );
        }
    }
}

#[actix_web::test]
async fn unknown_routes_answer_the_404_envelope() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for uri in [
        "/api/nothing",
        "/nowhere",
        "/api/mcp_servers/x/unknown",
        "/api/mcp_servers/x/",
    ] {
        let response = test::call_service(&app, TestRequest::get().uri(uri).to_request()).await;
        let message = assert_envelope(response, 404, "NotFoundError").await;
        assert!(message.contains("no route"), "{uri}: {message}");
    }
}

#[actix_web::test]
async fn wrong_methods_answer_the_405_envelope_with_allow() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let cases = [
        (TestRequest::delete(), "/api/mcp_servers", "GET, POST"),
        (
            TestRequest::patch(),
            "/api/mcp_servers/x",
            "GET, PUT, DELETE",
        ),
        (TestRequest::get(), "/api/mcp_servers/x/start", "POST"),
        (TestRequest::post(), "/api/mcp_servers/x/logs", "GET"),
        (TestRequest::post(), "/health/live", "GET"),
        (TestRequest::put(), "/metrics", "GET"),
    ];
    for (request, uri, allow) in cases {
        let response = test::call_service(&app, request.uri(uri).to_request()).await;
        let allow_header = response
            .headers()
            .get("allow")
            .map(|value| value.to_str().unwrap().to_owned());
        assert_eq!(allow_header.as_deref(), Some(allow), "{uri}");
        let message = assert_envelope(response, 405, "MethodNotAllowedError").await;
        assert!(message.contains(allow), "{uri}: {message}");
    }
}

#[actix_web::test]
async fn a_body_over_the_limit_answers_413_and_one_under_it_is_accepted() {
    let harness = harness_with(HttpSettings {
        max_body_bytes: 1024,
        ..HttpSettings::default()
    });
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let padding = "d".repeat(2048);
    let oversized = json!({"mcp_server_id": "big", "mode": "subprocess", "command": ["a"],
                           "description": padding});
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(oversized)
        .to_request();
    let message = assert_envelope(
        test::call_service(&app, request).await,
        413,
        "PayloadTooLargeError",
    )
    .await;
    assert!(message.contains("1024 bytes"), "{message}");

    let put = TestRequest::put()
        .uri("/api/mcp_servers/big")
        .insert_header(("content-type", "application/json"))
        .set_payload("x".repeat(4096))
        .to_request();
    // The server does not exist, so the 404 comes before the body is read.
    assert_envelope(
        test::call_service(&app, put).await,
        404,
        "McpServerNotFoundError",
    )
    .await;

    let fits = json!({"mcp_server_id": "small", "mode": "subprocess", "command": ["a"],
                      "description": "d".repeat(800)});
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(fits)
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
}

#[actix_web::test]
async fn the_default_body_limit_is_one_mebibyte() {
    let harness = harness();
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    // Above actix's own 256 KiB default, below 1 MiB: accepted.
    let fits = json!({"mcp_server_id": "m", "mode": "subprocess", "command": ["a"],
                      "description": "d".repeat(512 * 1024)});
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(fits)
        .to_request();
    assert_eq!(test::call_service(&app, request).await.status(), 201);
    // Above 1 MiB: refused.
    let oversized = json!({"mcp_server_id": "n", "mode": "subprocess", "command": ["a"],
                           "description": "d".repeat(1024 * 1024 + 1)});
    let request = TestRequest::post()
        .uri("/api/mcp_servers")
        .set_json(oversized)
        .to_request();
    assert_envelope(
        test::call_service(&app, request).await,
        413,
        "PayloadTooLargeError",
    )
    .await;
}
