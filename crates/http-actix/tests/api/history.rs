//! `GET /api/mcp_servers/{id}/tools/history`: pages of tool invocations, newest first, over the
//! gateway's invocation history.

use std::sync::Arc;

use actix_web::test::{self, TestRequest};
use mcpgw_core::{
    InMemoryInvocationHistory, InvocationHistory, InvocationRecord, ServerId, Timestamp,
};
use mcpgw_http_actix::HttpSettings;
use serde_json::{Value, json};

use crate::support::{Harness, assert_envelope, harness_with_history, send};

/// A harness whose history is `history`, with the servers `ids` registered over the API.
async fn harness_with_servers(history: &Arc<InMemoryInvocationHistory>, ids: &[&str]) -> Harness {
    let harness = harness_with_history(
        HttpSettings::default(),
        Some(Arc::clone(history) as Arc<dyn InvocationHistory>),
    );
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for id in ids {
        let create = TestRequest::post()
            .uri("/api/mcp_servers")
            .set_json(json!({"mcp_server_id": id, "mode": "subprocess", "command": ["x"]}))
            .to_request();
        assert_eq!(test::call_service(&app, create).await.status(), 201, "{id}");
    }
    harness
}

fn record(server: &str, event_id: u64, tool: &str) -> InvocationRecord {
    InvocationRecord {
        event_id,
        mcp_server_id: ServerId::parse(server).unwrap(),
        tool: tool.to_owned(),
        // 2026-11-21T14:03:07.000000 plus the event id in milliseconds.
        occurred_at: Timestamp::from_unix_micros(1_795_269_787_000_000 + event_id as i64 * 1000),
        duration_ms: 1.5,
        success: true,
        is_error: false,
        error_kind: None,
        principal: None,
    }
}

fn event_ids(body: &Value) -> Vec<&str> {
    body["history"]
        .as_array()
        .unwrap_or_else(|| panic!("history is not a list: {body}"))
        .iter()
        .map(|entry| entry["event_id"].as_str().expect("event_id is a string"))
        .collect()
}

#[actix_web::test]
async fn pages_run_newest_first_and_cursors_lead_to_the_end() {
    let history = Arc::new(InMemoryInvocationHistory::new(100));
    let harness = harness_with_servers(&history, &["math", "other"]).await;
    // Ids with gaps, and another server's calls in between, so that a cursor that counted
    // positions or ignored the server would land on the wrong entries.
    for (server, event_id) in [
        ("math", 3),
        ("other", 4),
        ("math", 7),
        ("math", 8),
        ("other", 9),
        ("math", 20),
        ("math", 21),
    ] {
        history.record(record(server, event_id, "add"));
    }
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;

    let page = |uri: &str| TestRequest::get().uri(uri).to_request();
    let (status, first) = send(&app, page("/api/mcp_servers/math/tools/history?limit=2")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["mcp_server_id"], "math");
    assert_eq!(event_ids(&first), ["21", "20"]);
    assert_eq!(first["next_cursor"], "20");

    let (status, second) = send(
        &app,
        page("/api/mcp_servers/math/tools/history?limit=2&cursor=20"),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(event_ids(&second), ["8", "7"]);
    assert_eq!(second["next_cursor"], "7");

    let (status, third) = send(
        &app,
        page("/api/mcp_servers/math/tools/history?limit=2&cursor=7"),
    )
    .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(event_ids(&third), ["3"]);
    assert_eq!(third["next_cursor"], Value::Null);

    // Without a limit, one page holds everything here.
    let (status, all) = send(&app, page("/api/mcp_servers/other/tools/history")).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(event_ids(&all), ["9", "4"]);
    assert_eq!(all["next_cursor"], Value::Null);
}

#[actix_web::test]
async fn an_entry_has_exactly_the_documented_fields() {
    let history = Arc::new(InMemoryInvocationHistory::new(100));
    let harness = harness_with_servers(&history, &["math"]).await;
    history.record(InvocationRecord {
        duration_ms: 12.25,
        is_error: true,
        principal: Some("user:alice".to_owned()),
        ..record("math", 5, "divide")
    });
    history.record(InvocationRecord {
        duration_ms: 30000.0,
        success: false,
        error_kind: Some("timeout".to_owned()),
        ..record("math", 6, "slow")
    });
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let (status, body) = send(
        &app,
        TestRequest::get()
            .uri("/api/mcp_servers/math/tools/history")
            .to_request(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "mcp_server_id": "math",
            "history": [
                {
                    "event_id": "6",
                    "tool": "slow",
                    "occurred_at": "2026-11-21T14:03:07.006000",
                    "duration_ms": 30000.0,
                    "success": false,
                    "is_error": false,
                    "error_kind": "timeout",
                    "principal": null,
                },
                {
                    "event_id": "5",
                    "tool": "divide",
                    "occurred_at": "2026-11-21T14:03:07.005000",
                    "duration_ms": 12.25,
                    "success": true,
                    "is_error": true,
                    "error_kind": null,
                    "principal": "user:alice",
                },
            ],
            "next_cursor": null,
        })
    );
}

#[actix_web::test]
async fn limit_defaults_to_50_and_is_served_as_500_above_500() {
    let history = Arc::new(InMemoryInvocationHistory::new(1000));
    let harness = harness_with_servers(&history, &["busy"]).await;
    for event_id in 1..=600 {
        history.record(record("busy", event_id, "ping"));
    }
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let cases = [
        ("/api/mcp_servers/busy/tools/history", 50, "551"),
        ("/api/mcp_servers/busy/tools/history?limit=501", 500, "101"),
        (
            "/api/mcp_servers/busy/tools/history?limit=1000000",
            500,
            "101",
        ),
        ("/api/mcp_servers/busy/tools/history?limit=500", 500, "101"),
    ];
    for (uri, expected_length, expected_cursor) in cases {
        let (status, body) = send(&app, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(status, 200, "{uri}");
        let ids = event_ids(&body);
        assert_eq!(ids.len(), expected_length, "{uri}");
        assert_eq!(ids[0], "600", "{uri}");
        assert_eq!(body["next_cursor"], expected_cursor, "{uri}");
    }
}

#[actix_web::test]
async fn a_limit_below_one_or_not_an_integer_answers_422_naming_limit() {
    let history = Arc::new(InMemoryInvocationHistory::new(10));
    let harness = harness_with_servers(&history, &["math"]).await;
    history.record(record("math", 1, "add"));
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for bad in ["0", "-1", "abc", "2.5", "", "1e2"] {
        let uri = format!("/api/mcp_servers/math/tools/history?limit={bad}");
        let response = test::call_service(&app, TestRequest::get().uri(&uri).to_request()).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(message.starts_with("limit: "), "{uri}: {message}");
        assert!(message.contains("from 1 to 500"), "{uri}: {message}");
    }
}

#[actix_web::test]
async fn a_cursor_that_is_not_a_non_negative_integer_answers_422_naming_cursor() {
    let history = Arc::new(InMemoryInvocationHistory::new(10));
    let harness = harness_with_servers(&history, &["math"]).await;
    history.record(record("math", 1, "add"));
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for bad in ["abc", "-1", "1.5", "", "18446744073709551616", "0x10"] {
        let uri = format!("/api/mcp_servers/math/tools/history?cursor={bad}");
        let response = test::call_service(&app, TestRequest::get().uri(&uri).to_request()).await;
        let message = assert_envelope(response, 422, "ValidationError").await;
        assert!(message.starts_with("cursor: "), "{uri}: {message}");
    }
}

#[actix_web::test]
async fn an_unknown_server_answers_404_whatever_the_query_says() {
    let history = Arc::new(InMemoryInvocationHistory::new(10));
    let harness = harness_with_servers(&history, &[]).await;
    // A server that is not registered but has records still does not exist for the API.
    history.record(record("ghost", 1, "add"));
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for uri in [
        "/api/mcp_servers/ghost/tools/history",
        "/api/mcp_servers/ghost/tools/history?limit=abc&cursor=x",
        "/api/mcp_servers/a__b/tools/history",
    ] {
        let response = test::call_service(&app, TestRequest::get().uri(uri).to_request()).await;
        let message = assert_envelope(response, 404, "McpServerNotFoundError").await;
        assert!(message.contains("is not registered"), "{uri}: {message}");
    }
}

#[actix_web::test]
async fn a_server_without_calls_has_an_empty_history_and_no_cursor() {
    let history = Arc::new(InMemoryInvocationHistory::new(10));
    let harness = harness_with_servers(&history, &["quiet", "chatty"]).await;
    history.record(record("chatty", 1, "add"));
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    for uri in [
        "/api/mcp_servers/quiet/tools/history",
        "/api/mcp_servers/quiet/tools/history?limit=5&cursor=100",
        // Past the oldest entry: the end of the history.
        "/api/mcp_servers/chatty/tools/history?cursor=1",
    ] {
        let (status, body) = send(&app, TestRequest::get().uri(uri).to_request()).await;
        assert_eq!(status, 200, "{uri}");
        let id = if uri.contains("quiet") {
            "quiet"
        } else {
            "chatty"
        };
        assert_eq!(
            body,
            json!({"mcp_server_id": id, "history": [], "next_cursor": null}),
            "{uri}"
        );
    }
}

#[actix_web::test]
async fn the_route_only_answers_get() {
    let history = Arc::new(InMemoryInvocationHistory::new(10));
    let harness = harness_with_servers(&history, &["math"]).await;
    let app = test::init_service(mcpgw_http_actix::app(harness.state.clone())).await;
    let response = test::call_service(
        &app,
        TestRequest::post()
            .uri("/api/mcp_servers/math/tools/history")
            .to_request(),
    )
    .await;
    assert_eq!(response.headers().get("allow").unwrap(), "GET");
    assert_envelope(response, 405, "MethodNotAllowedError").await;
}
